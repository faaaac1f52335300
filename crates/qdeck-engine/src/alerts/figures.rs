//! The figures an alert rule's `when` reads: what qdeck already derives for a queue (its
//! latest figures, the rates and workers from its history) and its profile's health.

use crate::derive;
use crate::store::{unpack, QueueEntry};

/// How far back `dlq_growth` looks.
pub const GROWTH_WINDOW_SECS: u32 = 300;

/// One queue's figures at one poll. `None` is "not known": no comparison holds on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub depth: Option<f64>,
    pub in_flight: Option<f64>,
    pub delayed: Option<f64>,
    /// Age of the oldest message, seconds.
    pub age: Option<f64>,
    pub dlq_depth: Option<f64>,
    /// Dead letters added over the last [`GROWTH_WINDOW_SECS`] (or the history held, when
    /// shorter): the DLQ's own depth for a DLQ, else the depth of the queue's DLQ.
    pub dlq_growth: Option<f64>,
    pub consumers: Option<f64>,
    pub in_rate: Option<f64>,
    pub out_rate: Option<f64>,
    pub workers: Option<f64>,
    pub workers_needed: Option<f64>,
    /// Records deleted before the reader read them (a Kafka group's retention breach).
    pub lost: Option<f64>,
    /// Seconds until the queue drains at the current net rate.
    pub eta: Option<f64>,
    /// What a log keeps after its readers read it, and the age of its oldest (a JetStream
    /// limits stream, a Kafka topic): retention, never in `depth` or `age`, read only when a
    /// rule names it.
    pub retained: Option<f64>,
    pub retained_age: Option<f64>,
    /// How old the figures were when the broker answered, for figures from a metric sampled
    /// and published minutes late (Pub/Sub's Cloud Monitoring); 0 for figures read live.
    pub figure_age: Option<f64>,
    /// Messages the queue's broker forwarded to its dead-letter queue over its own recent
    /// window (Pub/Sub's `dead_letter_message_count` over 10 minutes); `None` elsewhere.
    pub forwarded: Option<f64>,
    /// The profile's last poll failed.
    pub unreachable: bool,
    /// The figures are older than three refresh periods.
    pub stale: bool,
}

/// The names `when` knows, for errors and the docs.
pub const NAMES: &str = "depth, in_flight, delayed, age, dlq_depth, dlq_growth, consumers, \
                         in_rate, out_rate, workers, workers_needed, lost, eta, retained, \
                         retained_age, figure_age, forwarded, unreachable, stale";

impl Figures {
    /// A queue's figures from the store, with `target_secs` for workers needed.
    pub fn of(entry: &QueueEntry, target_secs: f64) -> Figures {
        let d = derive::derive(entry, target_secs);
        let s = entry.latest.as_ref();
        let n = |v: Option<u64>| v.map(|x| x as f64);
        Figures {
            depth: s.and_then(|s| n(s.depth)),
            in_flight: s.and_then(|s| n(s.in_flight)),
            delayed: s.and_then(|s| n(s.delayed)),
            age: s.and_then(|s| s.oldest_age_secs),
            dlq_depth: s.and_then(|s| n(s.dlq_depth)),
            dlq_growth: dlq_growth(entry),
            consumers: s.and_then(|s| s.consumers.map(f64::from)),
            in_rate: d.in_rate,
            out_rate: d.out_rate,
            workers: d.workers.map(f64::from),
            workers_needed: d.workers_needed.map(f64::from),
            lost: s.and_then(|s| n(s.lost)),
            eta: d.drain_secs,
            retained: s.and_then(|s| n(s.retained)),
            retained_age: s.and_then(|s| s.retained_age_secs),
            figure_age: Some(d.figures_age_secs.unwrap_or(0.0)),
            forwarded: s.and_then(|s| s.forwarded).map(|f| f.count as f64),
            unreachable: false,
            stale: false,
        }
    }
}

/// Growth of the dead letters over the window: latest minus the earliest point within it.
fn dlq_growth(entry: &QueueEntry) -> Option<f64> {
    let held = |p: &crate::store::Sample| {
        if entry.info.is_dlq {
            unpack(p.depth)
        } else {
            unpack(p.dlq_depth)
        }
    };
    let last = entry.history.last()?;
    let now = held(last)?;
    let from = last.t.saturating_sub(GROWTH_WINDOW_SECS);
    let first = entry.history.iter().find(|p| p.t >= from)?;
    // Growth over less than one sampling interval of a metric would compare a measurement
    // with itself (and a single point with nothing).
    if last.t - first.t < derive::sample_secs(entry).max(1) {
        return None;
    }
    Some(now - held(first)?)
}
