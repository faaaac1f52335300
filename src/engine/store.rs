//! The state store: latest figures per queue, bounded history, and the figures qdeck derives
//! (rates, trend, time to drain, workers needed). Backends feed it; views and commands read it.

use std::collections::HashMap;

use serde::Serialize;

use super::derive::{derive, Derived};
use super::ring::Ring;
use crate::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};

/// One history point, kept compact (32 bytes) so 10,000 queues × 240 points stay near 77 MB.
/// Missing figures are `u32::MAX` / NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the store's epoch.
    pub t: u32,
    pub depth: u32,
    pub in_flight: u32,
    pub delayed: u32,
    pub dlq_depth: u32,
    pub age_secs: f32,
    /// Arrival and completion rates at this point (broker rates or counter deltas).
    pub in_rate: f32,
    pub out_rate: f32,
}

pub const MISSING: u32 = u32::MAX;

fn pack(v: Option<u64>) -> u32 {
    v.map(|x| x.min(u32::MAX as u64 - 1) as u32)
        .unwrap_or(MISSING)
}

pub fn unpack(v: u32) -> Option<f64> {
    (v != MISSING).then_some(v as f64)
}

pub fn unpack_f(v: f32) -> Option<f64> {
    (!v.is_nan()).then_some(v as f64)
}

/// Where a queue's rates come from: labelled on screen and in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSource {
    /// The broker reports rates itself (RabbitMQ message_stats).
    Broker,
    /// Derived from the broker's enqueued/completed counters.
    Counters,
    /// Only the net rate, derived from changes in depth.
    DepthDelta,
    Unknown,
}

#[derive(Debug, Clone)]
pub struct QueueEntry {
    pub info: QueueInfo,
    pub latest: Option<QueueStats>,
    pub history: Ring<Sample>,
    /// Last error for this queue alone (AccessDenied, deleted…); cleared by the next success.
    pub error: Option<String>,
    /// Local time (ms) the latest figures arrived.
    pub updated_ms: Option<i64>,
    pub rate_source: RateSource,
    /// History time (`Sample::t`) the consumer count last changed: per-worker figures are
    /// measured from there, not divided across workers that were not there.
    pub workers_since: Option<u32>,
}

#[derive(Debug)]
pub struct Store {
    epoch_ms: i64,
    entries: Vec<QueueEntry>,
    index: HashMap<QueueId, usize>,
    ring_cap: usize,
    /// Minimum seconds between two history points.
    resolution_secs: f64,
    /// For "workers needed to drain within …".
    pub drain_target_secs: f64,
    /// Set on every change; the console clears it after drawing.
    pub dirty: bool,
    /// Error of the whole backend (unreachable, auth); rows go stale meanwhile.
    pub backend_error: Option<String>,
    pub last_ok_ms: Option<i64>,
}

impl Store {
    /// `history_secs` of history at up to `points` points per queue.
    pub fn new(history_secs: u64, points: usize, drain_target_secs: f64) -> Store {
        let points = points.max(2);
        Store {
            epoch_ms: crate::domain::now_ms(),
            entries: Vec::new(),
            index: HashMap::new(),
            ring_cap: points,
            resolution_secs: history_secs as f64 / points as f64,
            drain_target_secs,
            dirty: true,
            backend_error: None,
            last_ok_ms: None,
        }
    }

    pub fn with_defaults() -> Store {
        Store::new(600, 240, 600.0)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[QueueEntry] {
        &self.entries
    }

    pub fn get(&self, id: &QueueId) -> Option<&QueueEntry> {
        self.index.get(id).map(|&i| &self.entries[i])
    }

    /// Replace the queue list, keeping history of queues that remain.
    pub fn set_queues(&mut self, queues: Vec<QueueInfo>) {
        let mut old: HashMap<QueueId, QueueEntry> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.info.id.clone(), e))
            .collect();
        self.index.clear();
        for info in queues {
            let entry = match old.remove(&info.id) {
                Some(mut e) => {
                    e.info = info;
                    e
                }
                None => QueueEntry {
                    info,
                    latest: None,
                    history: Ring::new(self.ring_cap),
                    error: None,
                    updated_ms: None,
                    rate_source: RateSource::Unknown,
                    workers_since: None,
                },
            };
            self.index.insert(entry.info.id.clone(), self.entries.len());
            self.entries.push(entry);
        }
        self.dirty = true;
    }

    pub fn apply(&mut self, batch: StatsBatch) {
        let now = crate::domain::now_ms();
        for s in batch.stats {
            self.apply_one(s, now);
        }
        for (id, err) in batch.errors {
            if let Some(&i) = self.index.get(&id) {
                self.entries[i].error = Some(err);
            }
        }
        self.backend_error = None;
        self.last_ok_ms = Some(now);
        self.dirty = true;
    }

    pub fn apply_one(&mut self, s: QueueStats, now_ms: i64) {
        let Some(&i) = self.index.get(&s.id) else {
            return;
        };
        let epoch = self.epoch_ms;
        let res = self.resolution_secs;
        let e = &mut self.entries[i];
        let (in_rate, out_rate, source) = point_rates(e.latest.as_ref(), &s);
        e.rate_source = source;
        let sample = Sample {
            t: (((s.at_ms.max(epoch)) - epoch) / 1000) as u32,
            depth: pack(s.depth),
            in_flight: pack(s.in_flight),
            delayed: pack(s.delayed),
            dlq_depth: pack(s.dlq_depth),
            age_secs: s.oldest_age_secs.map(|a| a as f32).unwrap_or(f32::NAN),
            in_rate: in_rate.map(|r| r as f32).unwrap_or(f32::NAN),
            out_rate: out_rate.map(|r| r as f32).unwrap_or(f32::NAN),
        };
        let due = match e.history.last() {
            Some(last) => (sample.t as f64 - last.t as f64) >= res,
            None => true,
        };
        let changed = match e.latest.as_ref() {
            Some(prev) => prev.consumers != s.consumers,
            None => true,
        };
        if changed {
            e.workers_since = Some(sample.t);
        }
        if due {
            e.history.push(sample);
        }
        e.latest = Some(s);
        e.error = None;
        e.updated_ms = Some(now_ms);
    }

    /// The whole backend failed: keep figures, mark them stale with why.
    pub fn backend_failed(&mut self, err: String) {
        self.backend_error = Some(err);
        self.dirty = true;
    }

    pub fn derived(&self, id: &QueueId) -> Option<Derived> {
        let e = self.get(id)?;
        Some(derive(e, self.drain_target_secs))
    }

    /// Seconds since the store's epoch, for history points.
    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }

    /// Upper bound of history memory, bytes.
    pub fn history_bytes_max(&self) -> usize {
        self.entries.len() * self.ring_cap * std::mem::size_of::<Sample>()
    }
}

/// Rates at one point: the broker's own when it gives them, else counter deltas since the
/// previous figures. Depth deltas are handled in `derive` (they give only a net rate).
fn point_rates(
    prev: Option<&QueueStats>,
    cur: &QueueStats,
) -> (Option<f64>, Option<f64>, RateSource) {
    if cur.in_rate.is_some() || cur.out_rate.is_some() {
        return (cur.in_rate, cur.out_rate, RateSource::Broker);
    }
    if let Some(p) = prev {
        let dt = (cur.at_ms - p.at_ms) as f64 / 1000.0;
        let delta = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) if dt > 0.0 && b >= a => Some((b - a) as f64 / dt),
            _ => None,
        };
        let i = delta(p.enqueued_total, cur.enqueued_total);
        let o = delta(p.completed_total, cur.completed_total);
        if i.is_some() || o.is_some() {
            return (i, o, RateSource::Counters);
        }
    }
    if cur.enqueued_total.is_some() || cur.completed_total.is_some() {
        return (None, None, RateSource::Counters);
    }
    if cur.depth.is_some() {
        return (None, None, RateSource::DepthDelta);
    }
    (None, None, RateSource::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::QueueInfo;

    fn info(name: &str) -> QueueInfo {
        QueueInfo {
            id: QueueId::new(name),
            ..Default::default()
        }
    }

    #[test]
    fn sample_is_compact() {
        assert_eq!(std::mem::size_of::<Sample>(), 32);
    }

    #[test]
    fn set_queues_keeps_history_of_remaining_queues() {
        let mut s = Store::new(600, 10, 600.0);
        s.set_queues(vec![info("a"), info("b")]);
        let st = QueueStats {
            id: QueueId::new("a"),
            at_ms: s.epoch_ms() + 1000,
            depth: Some(5),
            ..Default::default()
        };
        s.apply(StatsBatch {
            stats: vec![st],
            errors: vec![(QueueId::new("b"), "AccessDenied".into())],
        });
        assert_eq!(
            s.get(&QueueId::new("b")).unwrap().error.as_deref(),
            Some("AccessDenied")
        );
        s.set_queues(vec![info("a"), info("c")]);
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(&QueueId::new("a")).unwrap().history.len(), 1);
        assert!(s.get(&QueueId::new("b")).is_none());
    }
}
