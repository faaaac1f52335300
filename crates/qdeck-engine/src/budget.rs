//! What refreshing costs: API calls per minute and, for SQS (billed per request, CloudWatch
//! per metric), an estimated cost per hour at list prices. Shown on the status line and in
//! the fleet rows, from two readings of a backend's call counters.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use qdeck_model::domain::BrokerKind;

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

/// Paces a poller to `per_min` calls a minute: a token bucket filled at `per_min / 60` a
/// second and holding at most `burst` calls (one sweep's worth), so polls spread over the
/// minute; and the calls of the last 60 s never exceed `per_min`, so the figure the status
/// line shows stays within the budget. Calls are paid after the fact from the backend's
/// counters; an estimate that fell short leaves a debt the next polls wait out.
#[derive(Debug, Clone)]
pub struct Pacer {
    per_min: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    spent: VecDeque<(Instant, u64)>,
}

const MINUTE: Duration = Duration::from_secs(60);

impl Pacer {
    /// `burst` is in calls; it starts full so the first poll can show the screen.
    pub fn new(per_min: u32, burst: f64, now: Instant) -> Pacer {
        let per_min = per_min.max(1) as f64;
        let burst = burst.clamp(1.0, per_min);
        Pacer {
            per_min,
            burst,
            tokens: burst,
            last: now,
            spent: VecDeque::new(),
        }
    }

    pub fn burst(&self) -> f64 {
        self.burst
    }

    pub fn per_min(&self) -> f64 {
        self.per_min
    }

    fn in_last_minute(&mut self, now: Instant) -> u64 {
        while self
            .spent
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) >= MINUTE)
        {
            self.spent.pop_front();
        }
        self.spent.iter().map(|(_, n)| n).sum()
    }

    /// Calls that may be made now (negative while a debt is paid off).
    pub fn available(&mut self, now: Instant) -> f64 {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + dt * self.per_min / 60.0).min(self.burst);
        let window = self.per_min - self.in_last_minute(now) as f64;
        self.tokens.min(window)
    }

    pub fn spend(&mut self, calls: u64, now: Instant) {
        self.tokens -= calls as f64;
        if calls > 0 {
            self.spent.push_back((now, calls));
        }
    }

    /// How long until `calls` (at most one burst) may be made.
    pub fn wait_for(&mut self, calls: f64, now: Instant) -> Duration {
        let calls = calls.min(self.burst);
        if self.available(now) >= calls {
            return Duration::ZERO;
        }
        let refill = (calls - self.tokens).max(0.0) * 60.0 / self.per_min;
        // The window frees calls as the oldest of the last minute age out.
        let mut over = self.in_last_minute(now) as f64 + calls - self.per_min;
        let mut window = Duration::ZERO;
        for (t, n) in &self.spent {
            if over <= 0.0 {
                break;
            }
            over -= *n as f64;
            window = (*t + MINUTE).saturating_duration_since(now);
        }
        Duration::from_secs_f64(refill).max(window)
    }
}

/// What one queue's figures cost in calls, learned from the counters: SQS pays a call per
/// queue, batched brokers one call per chunk. Starts from the broker kind's shape.
#[derive(Debug, Clone)]
pub struct CallCost {
    per_queue: f64,
}

impl CallCost {
    pub fn new(kind: BrokerKind, chunk: usize) -> CallCost {
        // BrokerKind here: the call budget prices what each broker's API charges per call (SQS
        // bills one GetQueueAttributes per queue; the others answer a chunk in one call).
        let per_queue = match kind {
            BrokerKind::Sqs => 1.0,
            _ => 1.0 / chunk.max(1) as f64,
        };
        CallCost { per_queue }
    }

    pub fn per_queue(&self) -> f64 {
        self.per_queue.max(1e-6)
    }

    /// Calls `queues` queues would take in calls of at most `chunk` (at least one per call).
    pub fn estimate(&self, queues: usize, chunk: usize) -> f64 {
        if queues == 0 {
            return 0.0;
        }
        let calls = queues.div_ceil(chunk.max(1)) as f64;
        (queues as f64 * self.per_queue()).max(calls)
    }

    /// A stats call for `queues` queues cost `calls`.
    pub fn observe(&mut self, calls: u64, queues: usize) {
        if queues == 0 {
            return;
        }
        let sample = calls as f64 / queues as f64;
        self.per_queue = 0.7 * self.per_queue + 0.3 * sample;
    }
}

#[cfg(feature = "sqs")]
fn usd_per_hour(kind: BrokerKind, since: &BTreeMap<String, u64>, elapsed: Duration) -> Option<f64> {
    // Only SQS bills per request; its price table lives in its backend module.
    (kind == BrokerKind::Sqs)
        .then(|| qdeck_backend::sqs::cost::estimated_cost_per_hour(since, elapsed))
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
    fn pacer_refills_at_the_budget_and_caps_the_burst() {
        let t0 = Instant::now();
        let mut p = Pacer::new(60, 5.0, t0);
        assert_eq!(p.available(t0), 5.0, "starts with one sweep's worth");
        p.spend(8, t0);
        assert_eq!(p.available(t0), -3.0, "an overrun is a debt");
        assert_eq!(p.wait_for(1.0, t0), Duration::from_secs(4));
        assert_eq!(p.available(t0 + Duration::from_secs(4)), 1.0);
        assert_eq!(
            p.available(t0 + Duration::from_secs(600)),
            5.0,
            "idle time buys no more than the burst"
        );
    }

    #[test]
    fn pacer_keeps_any_minute_within_the_budget() {
        let t0 = Instant::now();
        let mut p = Pacer::new(10, 10.0, t0);
        let mut t = t0;
        let mut made: Vec<Instant> = Vec::new();
        // Spend whenever allowed, one call at a time, for five minutes in 100 ms steps.
        while t < t0 + Duration::from_secs(300) {
            while p.available(t) >= 1.0 {
                p.spend(1, t);
                made.push(t);
            }
            t += Duration::from_millis(100);
        }
        for (i, start) in made.iter().enumerate() {
            let within = made[i..]
                .iter()
                .take_while(|m| m.duration_since(*start) < MINUTE)
                .count();
            assert!(within <= 10, "{within} calls in a minute from {i}");
        }
        assert!(
            made.len() >= 45,
            "the budget is used, not hoarded: {}",
            made.len()
        );
    }

    #[test]
    fn call_cost_learns_per_queue_and_counts_a_call_per_chunk() {
        let mut c = CallCost::new(BrokerKind::Rabbitmq, 100);
        assert_eq!(c.estimate(30, 100), 1.0, "one batched call");
        assert_eq!(c.estimate(250, 100), 3.0);
        for _ in 0..30 {
            c.observe(30, 30);
        }
        assert!((c.per_queue() - 1.0).abs() < 0.01, "{}", c.per_queue());
        assert!((c.estimate(30, 100) - 30.0).abs() < 0.5);
        assert_eq!(CallCost::new(BrokerKind::Sqs, 100).estimate(7, 100), 7.0);
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
