//! The poller: one tokio task per backend that keeps the store fed without the UI ever
//! awaiting the network.
//!
//! - `list_queues` every `list_every` (the queue list changes rarely);
//! - stats for the visible queues every `refresh`;
//! - the rest in chunks on a slower sweep (`sweep_every`), round-robin;
//! - one request at a time: a tick that comes while a poll runs is skipped;
//! - errors back off exponentially (up to `max_backoff`); every poll has a timeout, so a hung
//!   broker makes rows stale instead of freezing anything;
//! - API calls per minute are measured from the backend's counters and sent along.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

use super::budget::{self, Budget};
use crate::backend::Backend;
use crate::config::redact::redact;
use crate::domain::{QueueId, QueueInfo, StatsBatch};

#[derive(Debug, Clone)]
pub struct PollConfig {
    pub refresh: Duration,
    pub list_every: Duration,
    pub sweep_every: Duration,
    /// Queues per stats call in the sweep.
    pub sweep_chunk: usize,
    pub max_backoff: Duration,
    /// A poll that takes longer is abandoned and reported as an error.
    pub timeout: Duration,
}

impl PollConfig {
    pub fn with_refresh(refresh_secs: f64) -> PollConfig {
        let refresh = Duration::from_secs_f64(refresh_secs.clamp(0.1, 3600.0));
        PollConfig {
            refresh,
            list_every: (refresh * 15).max(Duration::from_secs(30)),
            sweep_every: (refresh * 5).max(Duration::from_secs(5)),
            sweep_chunk: 100,
            max_backoff: Duration::from_secs(60),
            timeout: (refresh * 4).max(Duration::from_secs(10)),
        }
    }
}

#[derive(Debug, Clone)]
pub enum PollEvent {
    Queues(Vec<QueueInfo>),
    Stats(StatsBatch),
    /// The whole backend failed (already redacted, one line).
    Error(String),
    /// A poll started / finished: the status line shows a spinner.
    Busy(bool),
    /// API calls per minute over the last minute (None until a minute of data exists… or at
    /// least two samples).
    /// API calls per minute over the last minute, and the SQS cost per hour at that pace.
    ApiRate(Budget),
}

/// Control side of a running poller. Dropping it stops the task.
pub struct PollerHandle {
    visible: watch::Sender<Vec<QueueId>>,
    wake: Arc<Notify>,
    cancel: CancellationToken,
}

impl PollerHandle {
    /// The queues on screen now (polled first and often).
    pub fn set_visible(&self, ids: Vec<QueueId>) {
        self.visible.send_if_modified(|v| {
            if *v != ids {
                *v = ids;
                true
            } else {
                false
            }
        });
    }

    /// Poll now (list and visible stats), skipping any backoff.
    pub fn refresh_now(&self) {
        self.wake.notify_one();
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

impl Drop for PollerHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

struct Poller {
    backend: Arc<dyn Backend>,
    cfg: PollConfig,
    tx: mpsc::Sender<PollEvent>,
    visible: watch::Receiver<Vec<QueueId>>,
    all: Vec<QueueId>,
    sweep_pos: usize,
    calls: VecDeque<(Instant, BTreeMap<String, u64>)>,
}

pub fn spawn(
    backend: Arc<dyn Backend>,
    cfg: PollConfig,
    tx: mpsc::Sender<PollEvent>,
) -> PollerHandle {
    let (vtx, vrx) = watch::channel(Vec::new());
    let wake = Arc::new(Notify::new());
    let cancel = CancellationToken::new();
    let p = Poller {
        backend,
        cfg,
        tx,
        visible: vrx,
        all: Vec::new(),
        sweep_pos: 0,
        calls: VecDeque::new(),
    };
    let (w, c) = (wake.clone(), cancel.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = c.cancelled() => {}
            _ = p.run(w) => {}
        }
    });
    PollerHandle {
        visible: vtx,
        wake,
        cancel,
    }
}

impl Poller {
    async fn send(&self, ev: PollEvent) -> bool {
        self.tx.send(ev).await.is_ok()
    }

    async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = crate::backend::Result<T>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.cfg.timeout, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(one_line(&e.to_string())),
            Err(_) => Err(format!(
                "no answer from the broker within {} s",
                self.cfg.timeout.as_secs()
            )),
        }
    }

    async fn run(mut self, wake: Arc<Notify>) {
        let mut failures: u32 = 0;
        let mut last_list: Option<Instant> = None;
        let mut last_sweep: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if !self.send(PollEvent::Busy(true)).await {
                return;
            }
            let mut result: Result<(), String> = Ok(());
            if last_list.is_none_or(|t| now.duration_since(t) >= self.cfg.list_every) {
                match self.timed(self.backend.list_queues()).await {
                    Ok(qs) => {
                        self.all = qs.iter().map(|q| q.id.clone()).collect();
                        last_list = Some(now);
                        if !self.send(PollEvent::Queues(qs)).await {
                            return;
                        }
                    }
                    Err(e) => result = Err(e),
                }
            }
            if result.is_ok() {
                let visible = self.visible.borrow_and_update().clone();
                let mut ids: Vec<QueueId> = visible
                    .into_iter()
                    .filter(|id| self.all.contains(id) || self.all.is_empty())
                    .collect();
                let sweep_due =
                    last_sweep.is_none_or(|t| now.duration_since(t) >= self.cfg.sweep_every);
                if sweep_due && !self.all.is_empty() {
                    last_sweep = Some(now);
                    // First sweep covers everything, in chunks; later ones a chunk at a time.
                    let n = self.cfg.sweep_chunk.max(1);
                    for _ in 0..n.min(self.all.len()) {
                        let id = &self.all[self.sweep_pos % self.all.len()];
                        self.sweep_pos = (self.sweep_pos + 1) % self.all.len();
                        if !ids.contains(id) {
                            ids.push(id.clone());
                        }
                    }
                }
                for chunk in ids.chunks(self.cfg.sweep_chunk.max(1)) {
                    match self.timed(self.backend.stats(chunk)).await {
                        Ok(batch) => {
                            if !self.send(PollEvent::Stats(batch)).await {
                                return;
                            }
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
            }
            let wait = match result {
                Ok(()) => {
                    failures = 0;
                    self.cfg.refresh
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    if !self.send(PollEvent::Error(e)).await {
                        return;
                    }
                    backoff(self.cfg.refresh, failures, self.cfg.max_backoff)
                }
            };
            if let Some(rate) = self.api_rate() {
                if !self.send(PollEvent::ApiRate(rate)).await {
                    return;
                }
            }
            if !self.send(PollEvent::Busy(false)).await {
                return;
            }
            // Sleep until the next poll, or until the visible set changes or a refresh is
            // asked for (a request made while a poll ran is kept by Notify and served now).
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = wake.notified() => { last_list = None; }
                r = self.visible.changed() => {
                    if r.is_err() { return; }
                    // Give fast scrolling a moment to settle.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
            }
        }
    }

    fn api_rate(&mut self) -> Option<Budget> {
        let now = Instant::now();
        self.calls
            .push_back((now, self.backend.api_calls().snapshot()));
        while self
            .calls
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > Duration::from_secs(60))
        {
            self.calls.pop_front();
        }
        let (t0, c0) = self.calls.front()?;
        let (t1, c1) = self.calls.back()?;
        let dt = t1.duration_since(*t0);
        if dt < Duration::from_secs(1) {
            return None;
        }
        budget::between(self.backend.kind(), c0, c1, dt)
    }
}

pub fn backoff(base: Duration, failures: u32, max: Duration) -> Duration {
    let f = 2u32.saturating_pow(failures.min(16));
    base.saturating_mul(f).min(max).max(base)
}

fn one_line(s: &str) -> String {
    redact(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_secs(2);
        let m = Duration::from_secs(60);
        assert_eq!(backoff(b, 1, m), Duration::from_secs(4));
        assert_eq!(backoff(b, 3, m), Duration::from_secs(16));
        assert_eq!(backoff(b, 30, m), m);
    }
}
