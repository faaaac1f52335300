//! Figures no broker gives: trend, time to drain and workers needed, computed from history.
//! Every derived figure says what it came from (`rate_source`, `arithmetic`).

use serde::Serialize;

use super::store::{unpack, unpack_f, QueueEntry, RateSource, Sample};

/// Seconds of history the rates are averaged over.
pub const RATE_WINDOW_SECS: u32 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    Growing,
    Draining,
    Flat,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Derived {
    /// Arrivals per second (broker rate or counter deltas).
    pub in_rate: Option<f64>,
    /// Completions per second.
    pub out_rate: Option<f64>,
    /// Change of depth per second: positive grows, negative drains.
    pub net_rate: Option<f64>,
    pub rate_source: RateSource,
    pub trend: Trend,
    /// Seconds until depth reaches zero at the current net rate.
    pub drain_secs: Option<f64>,
    pub workers: Option<u32>,
    pub per_worker_rate: Option<f64>,
    /// Workers needed to take in arrivals and clear the backlog within `target_secs`.
    pub workers_needed: Option<u32>,
    pub target_secs: f64,
    /// The sum behind `workers_needed`, for the detail panel.
    pub arithmetic: Option<String>,
    /// Age keeps rising while depth stays flat: a poison message or a stuck key.
    pub stuck: bool,
}

fn mean(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs.flatten() {
        sum += x;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

fn window(entry: &QueueEntry) -> Vec<Sample> {
    let Some(last) = entry.history.last() else {
        return Vec::new();
    };
    let from = last.t.saturating_sub(RATE_WINDOW_SECS);
    entry
        .history
        .iter()
        .filter(|s| s.t >= from)
        .copied()
        .collect()
}

/// Net rate from the first and last depth in the window.
fn depth_slope(w: &[Sample]) -> Option<f64> {
    let with_depth: Vec<&Sample> = w.iter().filter(|s| unpack(s.depth).is_some()).collect();
    let (a, b) = (with_depth.first()?, with_depth.last()?);
    let dt = b.t as f64 - a.t as f64;
    (dt >= 1.0).then(|| (b.depth as f64 - a.depth as f64) / dt)
}

pub fn derive(entry: &QueueEntry, target_secs: f64) -> Derived {
    let w = window(entry);
    // The first point has no counter delta yet; skip points without rates.
    let in_rate = mean(w.iter().map(|s| unpack_f(s.in_rate)));
    let out_rate = mean(w.iter().map(|s| unpack_f(s.out_rate)));
    let slope = depth_slope(&w);
    let net_rate = slope.or(match (in_rate, out_rate) {
        (Some(i), Some(o)) => Some(i - o),
        _ => None,
    });
    let rate_source = match entry.rate_source {
        RateSource::Unknown | RateSource::DepthDelta if slope.is_some() => RateSource::DepthDelta,
        s => s,
    };
    let depth = entry.latest.as_ref().and_then(|s| s.depth);
    let eps = 0.05;
    let trend = match net_rate {
        Some(n) if n > eps => Trend::Growing,
        Some(n) if n < -eps => Trend::Draining,
        Some(_) => Trend::Flat,
        None => Trend::Unknown,
    };
    let drain_secs = match (depth, net_rate) {
        (Some(0), _) => Some(0.0),
        (Some(d), Some(n)) if n < -eps => Some(d as f64 / -n),
        _ => None,
    };
    let workers = entry.latest.as_ref().and_then(|s| s.consumers);
    let per_worker_rate = match (out_rate, workers) {
        (Some(o), Some(w)) if w > 0 && o > 0.0 => Some(o / w as f64),
        _ => None,
    };
    let arrivals = in_rate.or(match (out_rate, net_rate) {
        (Some(o), Some(n)) => Some((o + n).max(0.0)),
        _ => None,
    });
    let (workers_needed, arithmetic) = match (per_worker_rate, arrivals, depth) {
        (Some(pw), Some(a), Some(d)) => {
            let (n, text) = workers_needed(a, d, pw, target_secs);
            (Some(n), Some(text))
        }
        _ => (None, None),
    };
    Derived {
        in_rate,
        out_rate,
        net_rate,
        rate_source,
        trend,
        drain_secs,
        workers,
        per_worker_rate,
        workers_needed,
        target_secs,
        arithmetic,
        stuck: is_stuck(&w),
    }
}

/// Workers needed so that arrivals plus the backlog spread over `target_secs` are covered at
/// `per_worker` messages per second each.
pub fn workers_needed(
    arrivals: f64,
    backlog: u64,
    per_worker: f64,
    target_secs: f64,
) -> (u32, String) {
    let backlog_rate = if target_secs > 0.0 {
        backlog as f64 / target_secs
    } else {
        0.0
    };
    let need = (arrivals + backlog_rate) / per_worker;
    let n = need.ceil().max(if arrivals + backlog_rate > 0.0 {
        1.0
    } else {
        0.0
    }) as u32;
    let text = format!(
        "({arrivals:.1} in/s + {backlog} backlog / {target_secs:.0} s) / {per_worker:.1} per worker/s = {need:.2} → {n}"
    );
    (n, text)
}

fn is_stuck(w: &[Sample]) -> bool {
    let ages: Vec<&Sample> = w
        .iter()
        .filter(|s| !s.age_secs.is_nan() && unpack(s.depth).is_some())
        .collect();
    let (Some(a), Some(b)) = (ages.first(), ages.last()) else {
        return false;
    };
    let span = b.t as f64 - a.t as f64;
    if span < 20.0 || b.depth == 0 {
        return false;
    }
    let age_rise = b.age_secs as f64 - a.age_secs as f64;
    let depth_change = (b.depth as f64 - a.depth as f64).abs();
    age_rise >= 0.8 * span && depth_change <= (a.depth as f64 * 0.05).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};
    use crate::engine::store::Store;

    /// One queue fed one sample per second for `secs` seconds; `at(t)` gives the figures.
    fn series(store: &mut Store, secs: i64, at: impl Fn(i64) -> QueueStats) -> QueueId {
        let id = QueueId::new("q");
        store.set_queues(vec![QueueInfo {
            id: id.clone(),
            ..Default::default()
        }]);
        let epoch = store.epoch_ms();
        for t in 0..=secs {
            store.apply(StatsBatch {
                stats: vec![QueueStats {
                    id: id.clone(),
                    at_ms: epoch + t * 1000,
                    ..at(t)
                }],
                errors: vec![],
            });
        }
        id
    }

    /// Counter-based samples: (depth, enqueued_total, completed_total, consumers) at second t.
    fn counters(store: &mut Store, secs: i64, at: impl Fn(u64) -> (u64, u64, u64, u32)) -> QueueId {
        series(store, secs, |t| {
            let (depth, enq, done, consumers) = at(t as u64);
            QueueStats {
                depth: Some(depth),
                enqueued_total: Some(enq),
                completed_total: Some(done),
                consumers: Some(consumers),
                ..Default::default()
            }
        })
    }

    #[test]
    fn ten_in_four_per_worker_needs_three_workers() {
        // One worker doing 4/s while 10/s arrive: backlog grows by 6/s.
        let mut s = Store::new(600, 600, 600.0);
        let id = counters(&mut s, 30, |t| (6 * t, 10 * t, 4 * t, 1));
        let d = s.derived(&id).unwrap();
        assert_eq!(d.rate_source, RateSource::Counters);
        assert!((d.in_rate.unwrap() - 10.0).abs() < 1e-9);
        assert!((d.per_worker_rate.unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(d.trend, Trend::Growing);
        assert!((d.net_rate.unwrap() - 6.0).abs() < 1e-9);
        assert_eq!(d.drain_secs, None);
        // Backlog 180 over 600 s adds 0.3/s: (10 + 0.3) / 4 = 2.575 → 3.
        assert_eq!(d.workers_needed, Some(3));
        assert!(d.arithmetic.unwrap().contains("→ 3"));
    }

    #[test]
    fn seeds_arithmetic_with_no_backlog() {
        assert_eq!(workers_needed(10.0, 0, 4.0, 600.0).0, 3);
        assert_eq!(workers_needed(8.0, 0, 4.0, 600.0).0, 2);
        assert_eq!(workers_needed(0.0, 0, 4.0, 600.0).0, 0);
        // A backlog alone needs at least one worker.
        assert_eq!(workers_needed(0.0, 10, 4.0, 600.0).0, 1);
    }

    #[test]
    fn backlog_draining_by_two_per_second() {
        let mut s = Store::new(600, 600, 600.0);
        // 3 workers at 4/s each, 10/s arriving: net −2/s from a backlog of 1000.
        let id = counters(&mut s, 20, |t| (1000 - 2 * t, 10 * t, 12 * t, 3));
        let d = s.derived(&id).unwrap();
        assert_eq!(d.trend, Trend::Draining);
        assert!((d.net_rate.unwrap() + 2.0).abs() < 1e-9);
        // 960 left at 2/s.
        assert!((d.drain_secs.unwrap() - 480.0).abs() < 1e-6);
    }

    #[test]
    fn depth_only_broker_gets_a_labelled_net_rate() {
        let mut s = Store::new(600, 600, 600.0);
        let id = series(&mut s, 10, |t| QueueStats {
            depth: Some(100 - 5 * t as u64),
            ..Default::default()
        });
        let d = s.derived(&id).unwrap();
        assert_eq!(d.rate_source, RateSource::DepthDelta);
        assert_eq!(d.in_rate, None);
        assert!((d.net_rate.unwrap() + 5.0).abs() < 1e-9);
        assert!((d.drain_secs.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(d.workers_needed, None);
    }

    #[test]
    fn rising_age_with_flat_depth_is_flagged() {
        let mut s = Store::new(600, 600, 600.0);
        let id = series(&mut s, 40, |t| QueueStats {
            depth: Some(3),
            oldest_age_secs: Some(100.0 + t as f64),
            ..Default::default()
        });
        assert!(s.derived(&id).unwrap().stuck);
    }
}
