//! What refreshing costs: API calls per minute and, for SQS (billed per request, CloudWatch
//! per metric), an estimated cost per hour at list prices. Shown on the status line and in
//! the fleet rows, from two readings of a backend's call counters.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::BrokerKind;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub calls_per_min: f64,
    /// Dollars per hour; `None` where the broker does not bill per call.
    pub usd_per_hour: Option<f64>,
}

/// The budget between two snapshots of `ApiCalls`, `elapsed` apart; `None` for no time.
pub fn between(
    kind: BrokerKind,
    before: &BTreeMap<String, u64>,
    now: &BTreeMap<String, u64>,
    elapsed: Duration,
) -> Option<Budget> {
    let mins = elapsed.as_secs_f64() / 60.0;
    if mins <= 0.0 {
        return None;
    }
    let since: BTreeMap<String, u64> = now
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .collect();
    // Billing counters (metrics requested) are not calls.
    let calls: u64 = since
        .iter()
        .filter(|(k, _)| !k.starts_with("billing:"))
        .map(|(_, v)| v)
        .sum();
    Some(Budget {
        calls_per_min: calls as f64 / mins,
        usd_per_hour: usd_per_hour(kind, &since, elapsed),
    })
}

#[cfg(feature = "sqs")]
fn usd_per_hour(kind: BrokerKind, since: &BTreeMap<String, u64>, elapsed: Duration) -> Option<f64> {
    (kind == BrokerKind::Sqs)
        .then(|| crate::backend::sqs::cost::estimated_cost_per_hour(since, elapsed))
}

#[cfg(not(feature = "sqs"))]
fn usd_per_hour(_: BrokerKind, _: &BTreeMap<String, u64>, _: Duration) -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn calls_leave_out_billing_units_and_only_sqs_is_priced() {
        let before = counts(&[("sqs:ReceiveMessage", 10)]);
        let now = counts(&[
            ("sqs:ReceiveMessage", 70),
            ("billing:cloudwatch metrics", 500),
        ]);
        let b = between(BrokerKind::Sqs, &before, &now, Duration::from_secs(60)).unwrap();
        assert_eq!(b.calls_per_min, 60.0);
        #[cfg(feature = "sqs")]
        assert!(b.usd_per_hour.is_some_and(|d| d > 0.0));
        let r = between(BrokerKind::Rabbitmq, &before, &now, Duration::from_secs(30)).unwrap();
        assert_eq!(r.calls_per_min, 120.0);
        assert_eq!(r.usd_per_hour, None);
        assert_eq!(
            between(BrokerKind::Sqs, &before, &now, Duration::ZERO),
            None
        );
    }
}
