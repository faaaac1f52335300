//! qdeck's own browsing, taken out of the queue's OUT/s. A browse is basic.get in ack mode
//! followed by nack+requeue, and RabbitMQ counts every get in `deliver_get`; a message got
//! for the first time is not in `redeliver`, so `deliver_get − redeliver` (the work consumers
//! did) would show the browse as consumers' work. A get of a message already delivered is in
//! both and cancels out. So for a while after a browse the broker's `get` rate, scaled to the
//! share of first deliveries in that browse, is taken off the out rate.
//!
//! Only the broker's rates are corrected. Without them (statistics disabled) the counters are
//! used as they are, and a browse counts once in them. The share of first deliveries is that
//! of qdeck's browses in the last minute together: when browses straddle one of the broker's
//! samples, the correction for that sample is approximate (never below 0).

use std::collections::HashMap;
use std::sync::Mutex;

use qdeck_model::domain::{QueueId, QueueStats};

/// How long after a browse its gets may still be in the broker's rates: the management
/// plugin samples every 5 s by default, and its figures reach a poll some seconds later.
/// Generous, since only gets are taken off: a consumer's deliveries never are.
pub const WINDOW_MS: i64 = 60_000;

#[derive(Debug, Clone, Copy)]
struct Browse {
    at_ms: i64,
    /// Messages got, and how many of them for the first time (not redelivered).
    got: u64,
    first: u64,
}

#[derive(Debug, Default)]
pub struct OwnGets(Mutex<HashMap<QueueId, Browse>>);

impl OwnGets {
    pub fn record(&self, queue: &QueueId, got: u64, first: u64, at_ms: i64) {
        if got == 0 {
            return;
        }
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Browses close together may share one of the broker's samples: their shares add up.
        let b = m.entry(queue.clone()).or_insert(Browse {
            at_ms,
            got: 0,
            first: 0,
        });
        if at_ms - b.at_ms > WINDOW_MS {
            (b.got, b.first) = (0, 0);
        }
        b.at_ms = at_ms;
        b.got += got;
        b.first += first;
    }

    /// Takes qdeck's own first gets out of `s.out_rate`, given the broker's `get` rate.
    pub fn correct(&self, s: &mut QueueStats, get_rate: Option<f64>) {
        let browse = {
            let m = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            m.get(&s.id).copied()
        };
        let (Some(b), Some(get), Some(out)) = (browse, get_rate, s.out_rate) else {
            return;
        };
        if s.at_ms - b.at_ms > WINDOW_MS {
            return;
        }
        let ours = get * b.first as f64 / b.got as f64;
        s.out_rate = Some((out - ours).max(0.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(at_ms: i64, out: f64) -> QueueStats {
        QueueStats {
            id: QueueId::new("q"),
            at_ms,
            out_rate: Some(out),
            ..Default::default()
        }
    }

    #[test]
    fn a_fresh_browse_leaves_only_the_consumers_work() {
        let own = OwnGets::default();
        own.record(&QueueId::new("q"), 20, 20, 1_000);
        let mut s = stats(6_000, 4.0 + 17.0);
        own.correct(&mut s, Some(17.0));
        assert_eq!(s.out_rate, Some(4.0));
    }

    #[test]
    fn redelivered_gets_already_cancel_and_are_not_taken_twice() {
        let own = OwnGets::default();
        // Half of the browse were messages delivered before: in redeliver too.
        own.record(&QueueId::new("q"), 20, 10, 1_000);
        let mut s = stats(6_000, 3.0 + 5.0);
        own.correct(&mut s, Some(10.0));
        assert_eq!(s.out_rate, Some(3.0));
    }

    #[test]
    fn browses_in_one_sample_share_it() {
        let own = OwnGets::default();
        own.record(&QueueId::new("q"), 20, 20, 1_000);
        own.record(&QueueId::new("q"), 20, 0, 2_000);
        // The sample: 40 gets, 20 of them redelivered; 2 consumer deliveries a second.
        let mut s = stats(6_000, 2.0 + 4.0);
        own.correct(&mut s, Some(8.0));
        assert_eq!(s.out_rate, Some(2.0));
    }

    #[test]
    fn outside_the_window_or_on_another_queue_nothing_changes() {
        let own = OwnGets::default();
        own.record(&QueueId::new("q"), 20, 20, 1_000);
        let mut late = stats(1_000 + WINDOW_MS + 1, 9.0);
        own.correct(&mut late, Some(9.0));
        assert_eq!(late.out_rate, Some(9.0));
        let mut other = stats(2_000, 9.0);
        other.id = QueueId::new("other");
        own.correct(&mut other, Some(9.0));
        assert_eq!(other.out_rate, Some(9.0));
    }
}
