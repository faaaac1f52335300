//! Each queue's depth over a window, for "growing" and a DLQ's rise in the fleet and the
//! on-fire view. Two consecutive polls are too close: a broker's own figures are seconds old
//! (RabbitMQ's management stats every 5 s), so a DLQ that grows steadily read `+5`, `+0`,
//! `+3`, `+0` poll after poll and its rank jumped with each. Over a window of at least 30 s,
//! and never fewer than three polls, a steady rise reads as one.

use std::collections::{HashMap, VecDeque};

use qdeck_model::domain::QueueId;

/// The shortest window, whatever the refresh.
pub const MIN_WINDOW_MS: i64 = 30_000;

/// Samples kept per queue at most, so a clock that does not move (figures without a time)
/// cannot grow the history without end.
const MAX_SAMPLES: usize = 256;

/// The window for a profile polled every `refresh_secs`: ≥ 30 s, and ≥ three polls.
pub fn window_ms(refresh_secs: f64) -> i64 {
    let three_polls = (refresh_secs.max(0.0) * 3_000.0) as i64;
    MIN_WINDOW_MS.max(three_polls)
}

/// Depth samples per queue, oldest first; the first one is the window's start.
#[derive(Debug, Default, Clone)]
pub struct DepthWindow {
    samples: HashMap<QueueId, VecDeque<(i64, u64)>>,
}

impl DepthWindow {
    /// Record `depth` at `at_ms` and return the depth at the window's start: the newest sample
    /// at least `window_ms` old, else the oldest there is. `None` on a queue's first sample.
    pub fn record(&mut self, q: &QueueId, at_ms: i64, depth: u64, window_ms: i64) -> Option<u64> {
        let s = self.samples.entry(q.clone()).or_default();
        let cutoff = at_ms - window_ms;
        // Keep one sample at or before the cutoff: the start of the window.
        while s.len() >= 2 && s[1].0 <= cutoff {
            s.pop_front();
        }
        while s.len() >= MAX_SAMPLES {
            s.pop_front();
        }
        let start = s.front().map(|(_, d)| *d);
        s.push_back((at_ms, depth));
        start
    }

    /// Forget queues the last listing no longer has.
    pub fn retain(&mut self, keep: impl Fn(&QueueId) -> bool) {
        self.samples.retain(|q, _| keep(q));
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_thirty_seconds_or_three_polls() {
        assert_eq!(window_ms(2.0), 30_000);
        assert_eq!(window_ms(20.0), 60_000);
    }

    /// A DLQ rising 5 every 5 s, polled every 2 s (so every other poll sees the same figure):
    /// poll to poll it reads +5, +0, +5, +0; over the window it reads a steady rise.
    #[test]
    fn a_steady_rise_reads_steady_over_the_window() {
        let q = QueueId::new("orders.dlq");
        let mut w = DepthWindow::default();
        let mut rises = Vec::new();
        for poll in 0..40i64 {
            let at = poll * 2_000;
            let depth = (at / 5_000) as u64 * 5;
            if let Some(start) = w.record(&q, at, depth, window_ms(2.0)) {
                rises.push(depth as i64 - start as i64);
            }
        }
        // Once the window is full, every poll sees a rise of 25 to 35.
        let full = &rises[15..];
        assert!(full.iter().all(|r| (25..=35).contains(r)), "{full:?}");
    }

    #[test]
    fn the_first_sample_has_no_start_and_gone_queues_are_forgotten() {
        let q = QueueId::new("a");
        let mut w = DepthWindow::default();
        assert_eq!(w.record(&q, 0, 3, 30_000), None);
        assert_eq!(w.record(&q, 2_000, 5, 30_000), Some(3));
        w.retain(|_| false);
        assert!(w.is_empty());
    }
}
