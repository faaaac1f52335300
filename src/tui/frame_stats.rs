//! The console's own frame figures, written to the log so a benchmark (or a user reporting a
//! slow console) can read them from the real binary in a real terminal: how long the first
//! frame took after the queue list arrived, and per minute how many frames were drawn and how
//! long drawing took (mean and worst). Only counters: nothing grows with time.

use std::time::{Duration, Instant};

/// How often the draw figures are logged.
const EVERY: Duration = Duration::from_secs(60);

pub struct FrameStats {
    /// When the first queue list arrived, until the frame showing it is drawn.
    list_at: Option<Instant>,
    list_len: usize,
    first_done: bool,
    since: Instant,
    frames: u64,
    total: Duration,
    worst: Duration,
    size: (u16, u16),
}

impl Default for FrameStats {
    fn default() -> Self {
        FrameStats {
            list_at: None,
            list_len: 0,
            first_done: false,
            since: Instant::now(),
            frames: 0,
            total: Duration::ZERO,
            worst: Duration::ZERO,
            size: (0, 0),
        }
    }
}

impl FrameStats {
    /// The queue list arrived (before the update that builds the table from it).
    pub fn list_arrived(&mut self, at: Instant, queues: usize) {
        if !self.first_done && self.list_at.is_none() {
            self.list_at = Some(at);
            self.list_len = queues;
        }
    }

    /// A frame was drawn in `took`, at `size` (columns × rows).
    pub fn drawn(&mut self, took: Duration, size: (u16, u16)) {
        if let (false, Some(at)) = (self.first_done, self.list_at) {
            self.first_done = true;
            tracing::info!(
                "first frame after the queue list: {:.1} ms ({} queues, {}x{})",
                at.elapsed().as_secs_f64() * 1000.0,
                self.list_len,
                size.0,
                size.1
            );
        }
        self.frames += 1;
        self.total += took;
        self.worst = self.worst.max(took);
        self.size = size;
        if self.since.elapsed() >= EVERY {
            self.flush();
        }
    }

    /// Log the draw figures since the last line (also when the console quits).
    pub fn flush(&mut self) {
        if self.frames == 0 {
            return;
        }
        let mean = self.total.as_secs_f64() * 1e6 / self.frames as f64;
        tracing::info!(
            "frames: {} in {:.0} s, draw mean {:.0} µs, worst {:.0} µs at {}x{}",
            self.frames,
            self.since.elapsed().as_secs_f64(),
            mean,
            self.worst.as_secs_f64() * 1e6,
            self.size.0,
            self.size.1
        );
        *self = FrameStats {
            list_at: self.list_at,
            list_len: self.list_len,
            first_done: self.first_done,
            ..FrameStats::default()
        };
    }
}
