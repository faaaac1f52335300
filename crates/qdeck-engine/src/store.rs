//! The state store: latest figures per queue, bounded history, and the figures qdeck derives
//! (rates, trend, time to drain, workers needed). Backends feed it; views and commands read it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::derive::{derive_with, Derived};
use super::ring::Ring;
use qdeck_model::domain::{QueueError, QueueId, QueueInfo, QueueStats, StatsBatch};

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
    v.map_or(MISSING, |x| x.min(u32::MAX as u64 - 1) as u32)
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
    /// Last error for this queue alone (AccessDenied, deleted…), by kind; cleared by the next
    /// success.
    pub error: Option<QueueError>,
    /// Local time (ms) the latest figures arrived.
    pub updated_ms: Option<i64>,
    pub rate_source: RateSource,
    /// History time (`Sample::t`) the worker pool last changed size: per-worker figures are
    /// measured from there, not divided across workers that were not there.
    pub workers_since: Option<u32>,
    /// The worker pool (`worker_pool`): a crashed worker and its replacement count once.
    pub pool: crate::worker_pool::WorkerPool,
    /// Local time (ms) the queue was last on screen or alerting (or listed, for a new one):
    /// its history ring is kept while this is within `history_secs`.
    pub needed_ms: i64,
}

/// How far before its creation the store's epoch lies: figures a metric measured minutes
/// before the first poll still go into the history at their own time (`QueueStats::sampled`).
const EPOCH_BEFORE_MS: i64 = 3_600_000;

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
    /// Seconds of work at the current worker count before a per-worker rate is given
    /// (`derive::MEASURE_SECS` in the console; a one-shot sample's own gap).
    pub measure_secs: u32,
    /// Set on every change; the console clears it after drawing.
    pub dirty: bool,
    /// Error of the whole backend (unreachable, auth); rows go stale meanwhile.
    pub backend_error: Option<String>,
    pub last_ok_ms: Option<i64>,
    /// How long a ring outlives the last time its queue was on screen or alerting.
    history_ms: i64,
    /// Age of oldest at which a queue counts as alerting (`[fire] max_age_secs`).
    pub alert_age_secs: f64,
    on_screen: HashSet<QueueId>,
    /// Queues an alert rule reads rates or growth of: their history is kept like the
    /// screen's.
    watched: HashSet<QueueId>,
    last_freed_ms: i64,
}

impl Store {
    /// `history_secs` of history at up to `points` points per queue.
    pub fn new(history_secs: u64, points: usize, drain_target_secs: f64) -> Store {
        let points = points.max(2);
        Store {
            epoch_ms: qdeck_model::domain::now_ms() - EPOCH_BEFORE_MS,
            entries: Vec::new(),
            index: HashMap::new(),
            ring_cap: points,
            resolution_secs: history_secs as f64 / points as f64,
            drain_target_secs,
            measure_secs: super::derive::MEASURE_SECS,
            dirty: true,
            backend_error: None,
            last_ok_ms: None,
            history_ms: history_secs as i64 * 1000,
            alert_age_secs: 300.0,
            on_screen: HashSet::new(),
            watched: HashSet::new(),
            last_freed_ms: 0,
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

    /// Replace the queue list, keeping history of queues that remain. Every write takes the
    /// caller's clock (the console's, or the wall clock for a one-shot command): the store
    /// reads none.
    pub fn set_queues(&mut self, queues: Vec<QueueInfo>, now: i64) {
        let mut old: HashMap<QueueId, QueueEntry> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.info.id.clone(), e))
            .collect();
        self.index.clear();
        // A queue new to the listing gets one `history_secs` to come on screen or alert.
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
                    pool: crate::worker_pool::WorkerPool::default(),
                    needed_ms: now,
                },
            };
            self.index.insert(entry.info.id.clone(), self.entries.len());
            self.entries.push(entry);
        }
        self.dirty = true;
    }

    /// A poll's answer, stamped `now`: the console stamps it with its own clock, the one its
    /// ages and staleness are read against.
    pub fn apply(&mut self, batch: StatsBatch, now: i64) {
        for s in batch.stats {
            self.apply_one(s, now);
        }
        for (id, err) in batch.errors {
            if let Some(&i) = self.index.get(&id) {
                self.entries[i].error = Some(err);
            }
        }
        if now - self.last_freed_ms >= 1000 {
            self.free_rings(now);
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
        let keep = self.on_screen.contains(&s.id)
            || self.watched.contains(&s.id)
            || is_alerting(&s, self.entries[i].info.is_dlq, self.alert_age_secs);
        let history_ms = self.history_ms;
        let e = &mut self.entries[i];
        if keep {
            e.needed_ms = now_ms;
        }
        let wanted = now_ms - e.needed_ms < history_ms;
        let (in_rate, out_rate, source) = point_rates(e.latest.as_ref(), &s);
        e.rate_source = source;
        // A metric's point goes in at the time it describes: polls that read the same point
        // again land on the same second and are not due, so they add no flat stretch.
        let measured_ms = s.sampled.map_or(s.at_ms, |m| m.at_ms);
        let sample = Sample {
            t: (((measured_ms.max(epoch)) - epoch) / 1000) as u32,
            depth: pack(s.depth),
            in_flight: pack(s.in_flight),
            delayed: pack(s.delayed),
            dlq_depth: pack(s.dlq_depth),
            age_secs: s.oldest_age_secs.map_or(f32::NAN, |a| a as f32),
            in_rate: in_rate.map_or(f32::NAN, |r| r as f32),
            out_rate: out_rate.map_or(f32::NAN, |r| r as f32),
        };
        let pool_before = e.pool.size();
        let pool_now = e.pool.record(s.at_ms, s.consumers);
        let changed = e.latest.is_none() || pool_before != pool_now;
        if changed {
            e.workers_since = Some(sample.t);
        }
        // The point that sees the worker count change and the first after it are kept
        // whatever the resolution: the rates restart there (`derive::rates`), so the trend
        // follows a scaling within two polls. The first count seen (at the first point) is
        // no change.
        let due = match (e.history.iter().next(), e.history.last()) {
            (Some(first), Some(last)) => {
                let at_change = e
                    .workers_since
                    .is_some_and(|c| first.t < c && last.t <= c && c <= sample.t);
                (sample.t as f64 - last.t as f64) >= res || (at_change && sample.t > last.t)
            }
            _ => true,
        };
        if due && wanted {
            e.history.push(sample);
        }
        e.latest = Some(s);
        e.error = None;
        e.updated_ms = Some(now_ms);
    }

    /// The queues on screen now: their history is kept. Those leaving the screen keep theirs
    /// for `history_secs` more.
    pub fn set_on_screen(&mut self, ids: &[QueueId], now: i64) {
        let new: HashSet<QueueId> = ids.iter().cloned().collect();
        if new == self.on_screen {
            return;
        }
        for id in self.on_screen.difference(&new) {
            if let Some(&i) = self.index.get(id) {
                self.entries[i].needed_ms = now;
            }
        }
        self.on_screen = new;
    }

    /// No queue is on screen (a view of no queue: the fleet, `:alerts`, `:ops`): the poller
    /// then asks only on its sweep.
    pub fn nothing_on_screen(&self) -> bool {
        self.on_screen.is_empty()
    }

    /// The queues alert rules need the history of (rates, growth): kept whatever is on screen.
    pub fn set_watched(&mut self, ids: HashSet<QueueId>) {
        self.watched = ids;
    }

    /// Free the history of queues neither on screen nor alerting for `history_secs` (as of
    /// `now_ms`); their latest figures stay. Runs from `apply` once a second.
    pub fn free_rings(&mut self, now_ms: i64) {
        self.last_freed_ms = now_ms;
        let (screen, limit) = (&self.on_screen, self.history_ms);
        for e in &mut self.entries {
            if screen.contains(&e.info.id) || self.watched.contains(&e.info.id) {
                e.needed_ms = now_ms;
            } else if now_ms - e.needed_ms >= limit && e.history.allocated_bytes() > 0 {
                e.history.free();
            }
        }
    }

    /// Queues holding history now.
    pub fn rings_held(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.history.allocated_bytes() > 0)
            .count()
    }

    /// The whole backend failed: keep figures, mark them stale with why.
    pub fn backend_failed(&mut self, err: String) {
        self.backend_error = Some(err);
        self.dirty = true;
    }

    pub fn derived(&self, id: &QueueId) -> Option<Derived> {
        let e = self.get(id)?;
        Some(derive_with(e, self.drain_target_secs, self.measure_secs))
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

/// Alerting enough to keep history for: a DLQ holding messages (the DLQ itself or its
/// source queue) or a message older than the alert age.
fn is_alerting(s: &QueueStats, is_dlq: bool, alert_age_secs: f64) -> bool {
    (is_dlq && s.depth.is_some_and(|d| d > 0))
        || s.dlq_depth.is_some_and(|d| d > 0)
        || s.oldest_age_secs.is_some_and(|a| a >= alert_age_secs)
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
    use qdeck_model::domain::{QueueErrorKind, QueueInfo};

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
        s.set_queues(vec![info("a"), info("b")], qdeck_model::domain::now_ms());
        let st = QueueStats {
            id: QueueId::new("a"),
            at_ms: s.epoch_ms() + 1000,
            depth: Some(5),
            ..Default::default()
        };
        s.apply(
            StatsBatch {
                stats: vec![st],
                errors: vec![(
                    QueueId::new("b"),
                    QueueError::new(QueueErrorKind::Permission, "AccessDenied"),
                )],
            },
            qdeck_model::domain::now_ms(),
        );
        let e = s.get(&QueueId::new("b")).unwrap().error.clone().unwrap();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (QueueErrorKind::Permission, "AccessDenied")
        );
        s.set_queues(vec![info("a"), info("c")], qdeck_model::domain::now_ms());
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(&QueueId::new("a")).unwrap().history.len(), 1);
        assert!(s.get(&QueueId::new("b")).is_none());
    }

    fn feed(s: &mut Store, names: &[&str], t: i64, dlq_depth: u64) {
        for n in names {
            let st = QueueStats {
                id: QueueId::new(*n),
                at_ms: t,
                depth: Some(3),
                dlq_depth: Some(dlq_depth),
                ..Default::default()
            };
            s.apply_one(st, t);
        }
    }

    fn points(s: &Store, name: &str) -> usize {
        s.get(&QueueId::new(name)).unwrap().history.len()
    }

    #[test]
    fn queues_an_alert_rule_watches_keep_their_history_off_screen() {
        let mut s = Store::new(60, 10, 600.0);
        s.set_queues(
            vec![info("watched"), info("other")],
            qdeck_model::domain::now_ms(),
        );
        s.set_watched([QueueId::new("watched")].into_iter().collect());
        let t0 = qdeck_model::domain::now_ms();
        for k in 0..5 {
            feed(&mut s, &["watched", "other"], t0 + k * 7_000, 0);
        }
        s.free_rings(t0 + 200_000);
        assert_eq!((points(&s, "watched"), points(&s, "other")), (5, 0));
        feed(&mut s, &["watched", "other"], t0 + 207_000, 0);
        assert_eq!((points(&s, "watched"), points(&s, "other")), (6, 0));
    }

    #[test]
    fn rings_of_queues_off_screen_are_freed_after_history_secs_figures_kept() {
        let mut s = Store::new(60, 10, 600.0);
        // The console's clock, a day ahead of the wall clock: the store goes by the clock it
        // is given (a store reading the wall clock frees "left" a day early).
        let t0 = qdeck_model::domain::now_ms() + 86_400_000;
        s.set_queues(vec![info("seen"), info("unseen"), info("left")], t0);
        s.set_on_screen(&[QueueId::new("seen"), QueueId::new("left")], t0);
        let all = ["seen", "unseen", "left"];
        for k in 0..5 {
            feed(&mut s, &all, t0 + k * 7_000, 0);
        }
        assert_eq!((points(&s, "seen"), points(&s, "unseen")), (5, 5));
        // "left" leaves the screen now: it keeps its ring for history_secs from here.
        s.set_on_screen(&[QueueId::new("seen")], t0);
        s.free_rings(t0 + 30_000);
        assert_eq!(s.rings_held(), 3, "nothing is older than history_secs yet");
        s.free_rings(t0 + 61_000);
        assert_eq!(
            points(&s, "unseen"),
            0,
            "not on screen for history_secs: freed"
        );
        assert_eq!(points(&s, "left"), 0);
        assert_eq!(points(&s, "seen"), 5, "on screen: kept");
        assert_eq!(s.rings_held(), 1);
        let e = s.get(&QueueId::new("unseen")).unwrap();
        assert_eq!(
            e.latest.as_ref().and_then(|l| l.depth),
            Some(3),
            "figures kept"
        );
        // Polled again while nobody needs it: no ring grows back.
        feed(&mut s, &all, t0 + 70_000, 0);
        assert_eq!((points(&s, "unseen"), points(&s, "seen")), (0, 6));
        // Its DLQ fills: it is alerting, so its history starts again.
        feed(&mut s, &["unseen"], t0 + 77_000, 4);
        feed(&mut s, &["unseen"], t0 + 84_000, 5);
        assert_eq!(points(&s, "unseen"), 2);
        s.free_rings(t0 + 100_000);
        assert_eq!(
            points(&s, "unseen"),
            2,
            "alerting within history_secs: kept"
        );
    }
}
