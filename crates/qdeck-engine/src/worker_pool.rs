//! The size of a queue's worker pool: the most consumers seen over the last half minute.
//! What a broker counts is the processes alive at one instant, so a worker that crashes and
//! is replaced reads 4, 3, 4 within seconds. Per-worker rates and "workers needed" divided by
//! that count restarted their measurement at every crash and read "measuring" almost all the
//! time; the pool counts the crashed worker and its replacement once, and changes when the
//! operator scales.

use std::collections::VecDeque;

/// How far back the pool looks.
pub const POOL_WINDOW_MS: i64 = 30_000;

#[derive(Debug, Clone, Default)]
pub struct WorkerPool {
    /// (broker time ms, consumers) seen within the window, oldest first.
    seen: VecDeque<(i64, u32)>,
}

impl WorkerPool {
    /// Record a count at `at_ms`; the pool size after it. `None` counts are not recorded
    /// (a broker that does not say), and leave the size as it was.
    pub fn record(&mut self, at_ms: i64, consumers: Option<u32>) -> Option<u32> {
        if let Some(n) = consumers {
            while self
                .seen
                .front()
                .is_some_and(|(t, _)| *t < at_ms - POOL_WINDOW_MS)
            {
                self.seen.pop_front();
            }
            self.seen.push_back((at_ms, n));
        }
        self.size()
    }

    pub fn size(&self) -> Option<u32> {
        self.seen.iter().map(|(_, n)| *n).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_and_its_replacement_count_once_and_a_scaling_counts() {
        let mut p = WorkerPool::default();
        let sizes: Vec<Option<u32>> = [4, 3, 4, 4, 3, 4]
            .iter()
            .enumerate()
            .map(|(i, n)| p.record(i as i64 * 2_000, Some(*n)))
            .collect();
        assert!(sizes.iter().all(|s| *s == Some(4)), "{sizes:?}");
        // Scaled up: at once.
        assert_eq!(p.record(12_000, Some(6)), Some(6));
        // Scaled down: once the window has passed.
        assert_eq!(p.record(14_000, Some(2)), Some(6));
        assert_eq!(p.record(14_000 + POOL_WINDOW_MS + 1, Some(2)), Some(2));
        assert_eq!(p.record(50_000, None), Some(2));
    }
}
