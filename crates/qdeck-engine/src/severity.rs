//! How badly a queue is "on fire", for the cross-profile on-fire view.
//!
//! ```text
//! severity = 40·G + 30·A + 30·S            (0 ‥ 100)
//! G  DLQ growth:   0 when the DLQ depth did not rise over its window (≥ 30 s),
//!                  else min(1, 0.5 + log10(rise) / 4)   (1 → 0.5, 10 → 0.75, 100+ → 1)
//! A  age:          min(1, age of oldest / (2 × max_age)) (at the threshold → 0.5)
//! S  not draining: 1 when depth > 0 and rose over its window;
//!                  0.5 when depth > 0 and nothing goes out (out-rate 0, no consumer, or
//!                  out-rate unknown and the depth did not fall); else 0
//! ```
//!
//! A and the "nothing goes out" half of S need one poll only, so a queue with an old message
//! or no consumer ranks on the first poll; only G and "rising" wait for a second one.
//!
//! A growing DLQ weighs most because it means messages are failing right now; an old message
//! and a queue that does not drain each say the consumers are behind.

/// What one queue's last two polls say, broker-neutral.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Signals {
    /// DLQ depth now minus at the start of its window (`depth_window`; only for DLQs;
    /// `None` on the first poll).
    pub dlq_rise: Option<i64>,
    pub age_secs: Option<f64>,
    pub depth: Option<u64>,
    /// Depth at the start of its window.
    pub previous_depth: Option<u64>,
    /// Messages per second leaving the queue, when the broker says.
    pub out_rate: Option<f64>,
    /// Consumers attached, when the broker says.
    pub consumers: Option<u32>,
}

/// The score of the module doc, 0 ‥ 100. `max_age_secs` is `[fire] max_age_secs`.
pub fn severity(s: &Signals, max_age_secs: f64) -> f64 {
    let g = match s.dlq_rise {
        Some(r) if r > 0 => (0.5 + (r as f64).log10() / 4.0).min(1.0),
        _ => 0.0,
    };
    let a = match s.age_secs {
        Some(age) if max_age_secs > 0.0 => (age / (2.0 * max_age_secs)).clamp(0.0, 1.0),
        _ => 0.0,
    };
    let depth = s.depth.unwrap_or(0);
    let rose = s.previous_depth.is_some_and(|p| depth > p);
    let fell = s.previous_depth.is_some_and(|p| depth < p);
    // Known from one poll: nobody consumes, or the broker's own out-rate is 0.
    let stuck = s.consumers == Some(0)
        || match s.out_rate {
            Some(r) => r <= 0.0,
            None => s.previous_depth.is_some() && !fell,
        };
    let n = if depth == 0 {
        0.0
    } else if rose {
        1.0
    } else if stuck {
        0.5
    } else {
        0.0
    };
    40.0 * g + 30.0 * a + 30.0 * n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_queue_scores_zero() {
        let s = Signals {
            depth: Some(0),
            previous_depth: Some(0),
            age_secs: Some(0.0),
            ..Signals::default()
        };
        assert_eq!(severity(&s, 300.0), 0.0);
    }

    #[test]
    fn each_term_follows_the_formula() {
        let dlq = |r| Signals {
            dlq_rise: Some(r),
            ..Signals::default()
        };
        assert_eq!(severity(&dlq(-3), 300.0), 0.0);
        assert_eq!(severity(&dlq(1), 300.0), 20.0);
        assert_eq!(severity(&dlq(10), 300.0), 30.0);
        assert_eq!(severity(&dlq(1_000), 300.0), 40.0);
        let old = |a| Signals {
            age_secs: Some(a),
            ..Signals::default()
        };
        assert_eq!(severity(&old(300.0), 300.0), 15.0);
        assert_eq!(severity(&old(6_000.0), 300.0), 30.0);
        let q = |d, p, out| Signals {
            depth: Some(d),
            previous_depth: p,
            out_rate: out,
            ..Signals::default()
        };
        assert_eq!(severity(&q(9, Some(5), Some(2.0)), 300.0), 30.0, "rising");
        assert_eq!(
            severity(&q(5, Some(5), Some(0.0)), 300.0),
            15.0,
            "nothing out"
        );
        assert_eq!(
            severity(&q(5, Some(5), None), 300.0),
            15.0,
            "flat, rate unknown"
        );
        assert_eq!(severity(&q(4, Some(5), None), 300.0), 0.0, "draining");
        assert_eq!(
            severity(&q(5, None, None), 300.0),
            0.0,
            "first poll, rate unknown: no trend yet"
        );
        assert_eq!(
            severity(&q(5, None, Some(0.0)), 300.0),
            15.0,
            "first poll, the broker says nothing goes out"
        );
        let idle = |consumers| Signals {
            depth: Some(5),
            consumers: Some(consumers),
            ..Signals::default()
        };
        assert_eq!(severity(&idle(0), 300.0), 15.0, "first poll, no consumer");
        assert_eq!(severity(&idle(2), 300.0), 0.0, "first poll, consumers");
    }

    #[test]
    fn an_old_message_with_no_consumer_ranks_from_one_poll() {
        let s = Signals {
            depth: Some(3),
            age_secs: Some(900.0),
            consumers: Some(0),
            ..Signals::default()
        };
        assert_eq!(severity(&s, 300.0), 30.0 + 15.0);
    }

    #[test]
    fn a_growing_dlq_outranks_an_old_message() {
        let dlq = Signals {
            dlq_rise: Some(3),
            depth: Some(3),
            previous_depth: Some(0),
            ..Signals::default()
        };
        let old = Signals {
            age_secs: Some(400.0),
            depth: Some(10),
            previous_depth: Some(11),
            out_rate: Some(1.0),
            ..Signals::default()
        };
        assert!(severity(&dlq, 300.0) > severity(&old, 300.0));
    }
}
