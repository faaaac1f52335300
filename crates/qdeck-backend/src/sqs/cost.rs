//! Estimated cost of the calls qdeck made, at list prices, ignoring the free tier:
//! SQS $0.40 per million requests (standard; FIFO is $0.50, batches count as one request per
//! 64 KiB chunk — we count one), CloudWatch GetMetricData $0.01 per 1,000 metrics requested
//! (counted under `billing:cloudwatch-metrics`). These figures come from third-party pages
//! (brokers.md "Not confirmed" #1): treat the result as an estimate.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ops;

pub const SQS_USD_PER_MILLION_REQUESTS: f64 = 0.40;
pub const CLOUDWATCH_USD_PER_THOUSAND_METRICS: f64 = 0.01;

/// Dollars for the calls in `counts` (an `ApiCalls::snapshot()` or a difference of two).
pub fn estimated_cost_usd(counts: &BTreeMap<String, u64>) -> f64 {
    let sqs: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("sqs:"))
        .map(|(_, v)| *v)
        .sum();
    let metrics = counts.get(ops::CW_METRICS_BILLED).copied().unwrap_or(0);
    sqs as f64 * SQS_USD_PER_MILLION_REQUESTS / 1e6
        + metrics as f64 * CLOUDWATCH_USD_PER_THOUSAND_METRICS / 1e3
}

/// Dollars per hour if calls keep coming at the rate of `counts` over `elapsed`.
/// Example: `estimated_cost_per_hour(&backend.api_calls().snapshot(), since_start)`.
pub fn estimated_cost_per_hour(counts: &BTreeMap<String, u64>, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    estimated_cost_usd(counts) * 3600.0 / secs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_of_200_queues_every_30s() {
        // One refresh: 200 GetQueueAttributes + 1 ListQueues; one age sweep: 200 metrics.
        let mut c = BTreeMap::new();
        c.insert("sqs:GetQueueAttributes".to_string(), 200 * 120);
        c.insert("sqs:ListQueues".to_string(), 120);
        c.insert("cloudwatch:GetMetricData".to_string(), 120);
        c.insert(ops::CW_METRICS_BILLED.to_string(), 200 * 120);
        let h = estimated_cost_per_hour(&c, Duration::from_secs(3600));
        // 24,120 requests ≈ $0.0096 + 24,000 metrics = $0.24
        assert!((h - (24_120.0 * 0.4e-6 + 0.24)).abs() < 1e-9, "{h}");
        assert_eq!(estimated_cost_per_hour(&c, Duration::ZERO), 0.0);
    }
}
