//! Figures no broker gives: trend, time to drain and workers needed, computed from history.
//! Every derived figure says what it came from (`rate_source`, `arithmetic`).

use serde::Serialize;

use super::store::{unpack, unpack_f, QueueEntry, RateSource, Sample};
use qdeck_model::domain::QueueStats;

/// Seconds of history the rates are averaged over.
pub const RATE_WINDOW_SECS: u32 = 60;
/// Seconds of work at the current worker count the console needs before a per-worker rate is
/// given; until then the figure reads "measuring". A one-shot `--sample` measures over its own
/// gap instead (`Store::measure_secs`): two polls are all the work it sees.
pub const MEASURE_SECS: u32 = 20;

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
    /// The rates are from the seconds since the worker count changed, not the last
    /// `RATE_WINDOW_SECS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_workers_changed: Option<u32>,
    pub workers: Option<u32>,
    pub per_worker_rate: Option<f64>,
    /// The worker count changed too recently to know what one worker does: no per-worker
    /// rate and no workers-needed yet.
    pub measuring: bool,
    /// Workers needed to take in arrivals and clear the backlog within `target_secs`.
    pub workers_needed: Option<u32>,
    pub target_secs: f64,
    /// The sum behind `workers_needed`, for the detail panel.
    pub arithmetic: Option<String>,
    /// Age keeps rising while depth stays flat: a poison message or a stuck key.
    pub stuck: bool,
    /// How old the figures were when the broker answered, where they come from a metric
    /// sampled and published late (Cloud Monitoring); `None` for figures read live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures_age_secs: Option<f64>,
}

/// Seconds between two independent measurements of the queue's figures: a metric's sampling
/// interval (Cloud Monitoring: 60), 0 for figures read live.
pub fn sample_secs(entry: &QueueEntry) -> u32 {
    entry.latest.as_ref().map_or(0, QueueStats::sample_secs)
}

/// Seconds of history the rates are averaged over: `RATE_WINDOW_SECS`, or two sampling
/// intervals of a metric, so that a window always spans a change the metric can show.
pub fn rate_window_secs(entry: &QueueEntry) -> u32 {
    RATE_WINDOW_SECS.max(2 * sample_secs(entry))
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
    let from = last.t.saturating_sub(rate_window_secs(entry));
    entry
        .history
        .iter()
        .filter(|s| s.t >= from)
        .copied()
        .collect()
}

/// The rate figures alone: what sorting the queue table by a rate or by ETA needs, for every
/// queue on each refresh. One pass over the window and no allocation, where `derive` builds
/// the whole panel; `derive` takes these from here, so the two never disagree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub in_rate: Option<f64>,
    pub out_rate: Option<f64>,
    /// Change of depth per second from the first and last depth in the window.
    pub depth_slope: Option<f64>,
    pub net_rate: Option<f64>,
    pub trend: Trend,
    pub drain_secs: Option<f64>,
    /// When the window starts at the last change of the worker count rather than
    /// `RATE_WINDOW_SECS` ago: the seconds of history it covers since.
    pub since_workers_changed: Option<u32>,
}

/// The history points from `from` on, oldest first, without allocating. Points are pushed in
/// time order, so they are the newest `n`: found from the end, then read oldest first as
/// `window` does (the same sums to the last bit).
fn points_since(entry: &QueueEntry, from: u32) -> impl Iterator<Item = &Sample> {
    let h = &entry.history;
    let n = h.iter().rev().take_while(|s| s.t >= from).count();
    h.iter().skip(h.len() - n)
}

/// Where the rate window starts, and the worker-count change it was cut at, if any. The
/// window restarts at the change the per-worker figures already measure from
/// (`QueueEntry::workers_since`) once a point after it has arrived: rates of the old workers
/// would keep saying "growing" for a minute after scaling up. A change seen at the first
/// point of the history is only the first count, not a change.
fn window_start(entry: &QueueEntry, newest: u32) -> (u32, Option<u32>) {
    let from = newest.saturating_sub(rate_window_secs(entry));
    let oldest = entry.history.iter().next().map_or(newest, |s| s.t);
    match entry.workers_since {
        Some(c) if c > from && c > oldest && c < newest => (c, Some(c)),
        _ => (from, None),
    }
}

pub fn rates(entry: &QueueEntry) -> Rates {
    let (mut in_sum, mut in_n, mut out_sum, mut out_n) = (0.0, 0usize, 0.0, 0usize);
    let (mut first, mut last): (Option<&Sample>, Option<&Sample>) = (None, None);
    let mut since_workers_changed = None;
    if let Some(newest) = entry.history.last() {
        let (from, cut) = window_start(entry, newest.t);
        since_workers_changed = cut.map(|c| newest.t - c);
        for s in points_since(entry, from) {
            // The rates at the change point span the poll before it, old workers included:
            // they start after it; depth starts at it.
            let rated = cut.is_none_or(|c| s.t > c);
            // The first point has no counter delta yet; points without rates are skipped.
            if let Some(x) = unpack_f(s.in_rate).filter(|_| rated) {
                in_sum += x;
                in_n += 1;
            }
            if let Some(x) = unpack_f(s.out_rate).filter(|_| rated) {
                out_sum += x;
                out_n += 1;
            }
            if unpack(s.depth).is_some() {
                first.get_or_insert(s);
                last = Some(s);
            }
        }
    }
    let in_rate = (in_n > 0).then(|| in_sum / in_n as f64);
    let out_rate = (out_n > 0).then(|| out_sum / out_n as f64);
    // No growth is judged over less than one of the metric's sampling intervals: two polls
    // of a figure sampled each minute show the same measurement, not a flat queue.
    let min_dt = f64::from(sample_secs(entry).max(1));
    let depth_slope = first.zip(last).and_then(|(a, b)| {
        let dt = b.t as f64 - a.t as f64;
        (dt >= min_dt).then(|| (b.depth as f64 - a.depth as f64) / dt)
    });
    // In, out and net from the same window, so net = in − out on the screen; the depth slope
    // only when the broker gives no rates.
    let net_rate = match (in_rate, out_rate) {
        (Some(i), Some(o)) => Some(i - o),
        _ => depth_slope,
    };
    let depth = entry.latest.as_ref().and_then(|s| s.depth);
    let eps = 0.05;
    let trend = match net_rate {
        Some(n) if n > eps => Trend::Growing,
        Some(n) if n < -eps => Trend::Draining,
        Some(_) => Trend::Flat,
        None => Trend::Unknown,
    };
    // Counted from when the broker answered: figures measured minutes earlier have had that
    // long to drain already.
    let figures_age = entry
        .latest
        .as_ref()
        .map_or(0.0, QueueStats::figures_age_secs);
    let drain_secs = match (depth, net_rate) {
        (Some(0), _) => Some(0.0),
        (Some(d), Some(n)) if n < -eps => Some((d as f64 / -n - figures_age).max(0.0)),
        _ => None,
    };
    Rates {
        in_rate,
        out_rate,
        depth_slope,
        net_rate,
        trend,
        drain_secs,
        since_workers_changed,
    }
}

/// The figures the console shows, with its `MEASURE_SECS` rule.
pub fn derive(entry: &QueueEntry, target_secs: f64) -> Derived {
    derive_with(entry, target_secs, MEASURE_SECS)
}

/// `derive`, giving a per-worker rate once the rates cover `measure_secs` of work at the
/// current worker count.
pub fn derive_with(entry: &QueueEntry, target_secs: f64, measure_secs: u32) -> Derived {
    let w = window(entry);
    let Rates {
        in_rate,
        out_rate,
        depth_slope,
        net_rate,
        trend,
        drain_secs,
        since_workers_changed,
    } = rates(entry);
    let rate_source = match entry.rate_source {
        RateSource::Unknown | RateSource::DepthDelta if depth_slope.is_some() => {
            RateSource::DepthDelta
        }
        s => s,
    };
    let depth = entry.latest.as_ref().and_then(|s| s.depth);
    // The pool the operator runs, not the processes alive at this instant.
    let workers = entry.pool.size();
    // What one worker does, from the work done since the worker count last changed: the old
    // count's completions divided by the new count is what read 6, then 8, after `+ +`.
    let since = entry.workers_since.unwrap_or(0);
    let stable: Vec<&Sample> = w
        .iter()
        .filter(|s| s.t >= since && unpack_f(s.out_rate).is_some())
        .collect();
    // The work measured starts at the first point seen at this worker count, rate or not: a
    // counter delta covers the time since the point before it, so the first poll of a
    // one-shot sample (no delta yet) still starts the measured work.
    let stable_from = w.iter().find(|s| s.t >= since).map(|s| s.t);
    let stable_secs = match (stable_from, stable.last()) {
        (Some(a), Some(b)) => b.t.saturating_sub(a),
        _ => 0,
    };
    let measuring = workers.is_some_and(|n| n > 0) && stable_secs < measure_secs;
    let stable_out = mean(stable.iter().map(|s| unpack_f(s.out_rate)));
    let per_worker_rate = match (stable_out, workers) {
        (Some(o), Some(n)) if !measuring && n > 0 && o > 0.0 => Some(o / n as f64),
        _ => None,
    };
    let arrivals = in_rate.or(match (out_rate, net_rate) {
        (Some(o), Some(n)) => Some((o + n).max(0.0)),
        _ => None,
    });
    let (workers_needed, arithmetic) = match (per_worker_rate, arrivals, depth) {
        (Some(pw), Some(a), Some(d)) => {
            let (mut n, mut text) = workers_needed(a, d, pw, target_secs);
            // An empty queue whose workers keep up needs no more of them, whatever the
            // division says (a rejecting consumer's rate undercounts its work).
            if let Some(have) = workers.filter(|h| d == 0 && *h > 0 && n > *h) {
                n = have;
                text.push_str(&format!(" (depth 0 and keeping up: {have} is enough)"));
            }
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
        since_workers_changed,
        workers,
        per_worker_rate,
        measuring,
        workers_needed,
        target_secs,
        arithmetic,
        stuck: stuck(entry),
        figures_age_secs: entry
            .latest
            .as_ref()
            .filter(|s| s.sampled.is_some())
            .map(QueueStats::figures_age_secs),
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

/// Age keeps rising while depth stays flat over the rate window (`rate_window_secs`): a poison
/// message or a stuck key. Without allocating, so the ETA sort can ask it of every queue.
pub fn stuck(entry: &QueueEntry) -> bool {
    let Some(newest) = entry.history.last() else {
        return false;
    };
    let from = newest.t.saturating_sub(rate_window_secs(entry));
    let mut aged =
        points_since(entry, from).filter(|s| !s.age_secs.is_nan() && unpack(s.depth).is_some());
    let Some(a) = aged.next() else {
        return false;
    };
    let b = aged.last().unwrap_or(a);
    let span = b.t as f64 - a.t as f64;
    if span < 20f64.max(f64::from(sample_secs(entry))) || b.depth == 0 {
        return false;
    }
    let age_rise = b.age_secs as f64 - a.age_secs as f64;
    let depth_change = (b.depth as f64 - a.depth as f64).abs();
    age_rise >= 0.8 * span && depth_change <= (a.depth as f64 * 0.05).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use qdeck_model::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};

    /// One queue fed one sample per second for `secs` seconds; `at(t)` gives the figures.
    fn series(store: &mut Store, secs: i64, at: impl Fn(i64) -> QueueStats) -> QueueId {
        let id = QueueId::new("q");
        store.set_queues(
            vec![QueueInfo {
                id: id.clone(),
                ..Default::default()
            }],
            qdeck_model::domain::now_ms(),
        );
        let epoch = store.epoch_ms();
        for t in 0..=secs {
            store.apply(
                StatsBatch {
                    stats: vec![QueueStats {
                        id: id.clone(),
                        at_ms: epoch + t * 1000,
                        ..at(t)
                    }],
                    errors: vec![],
                },
                qdeck_model::domain::now_ms(),
            );
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

    /// 60 s with 1 worker at 4/s, then `+ +` at t = 60: 3 workers at 4/s each.
    fn plus_plus(t: u64) -> (u64, u64, u64, u32) {
        let done = if t <= 60 { 4 * t } else { 240 + 12 * (t - 60) };
        let enq = 10 * t;
        (enq - done, enq, done, if t < 60 { 1 } else { 3 })
    }

    #[test]
    fn worker_count_change_mid_window_says_measuring_not_six() {
        // Right after + +: the old 60 s of completions divided by 3 used to read 1.3/s
        // per worker, so 6 to 8 workers "needed".
        let mut s = Store::new(600, 600, 600.0);
        let id = counters(&mut s, 65, plus_plus);
        let d = s.derived(&id).unwrap();
        assert!(d.measuring, "{d:?}");
        assert_eq!(d.per_worker_rate, None);
        assert_eq!(d.workers_needed, None);
        // 25 s later the window since the change is long enough: 12/s over 3 is 4/s each.
        let mut s = Store::new(600, 600, 600.0);
        let id = counters(&mut s, 90, plus_plus);
        let d = s.derived(&id).unwrap();
        assert!(!d.measuring);
        assert!((d.per_worker_rate.unwrap() - 4.0).abs() < 0.3, "{d:?}");
        // (10 in/s + backlog 600/600 s) / 4 = 2.75 → 3, never 6 or 8.
        assert_eq!(d.workers_needed, Some(3), "{:?}", d.arithmetic);
    }

    /// The demo's crashing workers: four workers at 3/s each, one of them crashing and being
    /// replaced every few seconds, so the count reads 4, 4, 3, 4, … The pool is four, and
    /// the figure is there rather than "measuring" (it read measuring in 15 of 16 samples).
    #[test]
    fn crashing_workers_still_give_workers_needed() {
        let mut s = Store::new(600, 600, 600.0);
        let id = counters(&mut s, 90, |t| {
            let done = 12 * t;
            let enq = 15 * t;
            (enq - done, enq, done, if t % 5 == 2 { 3 } else { 4 })
        });
        let d = s.derived(&id).unwrap();
        assert!(!d.measuring, "{d:?}");
        assert_eq!(d.workers, Some(4));
        assert!((d.per_worker_rate.unwrap() - 3.0).abs() < 0.3, "{d:?}");
        assert!(d.workers_needed.is_some(), "{d:?}");
    }

    /// A one-shot sample: two polls 10 s apart, one worker in both. The first poll has no
    /// counter delta, yet the second's covers the 10 s between them at that worker count.
    #[test]
    fn two_polls_measure_the_work_between_them() {
        let mut s = Store::new(2400, 240, 600.0);
        let id = QueueId::new("q");
        s.set_queues(
            vec![QueueInfo {
                id: id.clone(),
                ..Default::default()
            }],
            qdeck_model::domain::now_ms(),
        );
        let epoch = s.epoch_ms();
        for (t, done) in [(0, 0), (10, 40)] {
            s.apply(
                StatsBatch {
                    stats: vec![QueueStats {
                        id: id.clone(),
                        at_ms: epoch + t * 1000,
                        depth: Some(600),
                        enqueued_total: Some(10 * t as u64),
                        completed_total: Some(done),
                        consumers: Some(1),
                        ..Default::default()
                    }],
                    errors: vec![],
                },
                qdeck_model::domain::now_ms(),
            );
        }
        // The console's rule wants 20 s of work at this count: still measuring.
        assert!(s.derived(&id).unwrap().measuring);
        // Measured over the sample's own 10 s: 4/s for the one worker, (10 + 1) / 4 → 3.
        s.measure_secs = 10;
        let d = s.derived(&id).unwrap();
        assert!(!d.measuring, "{d:?}");
        assert!((d.per_worker_rate.unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(d.workers_needed, Some(3), "{:?}", d.arithmetic);
    }

    /// 10/s arrive from a backlog of 200. One worker does 6/s until the poll at t = 60 sees
    /// three (`+ +`), which do 18/s: depth stops growing by 4/s and falls by 8/s.
    fn scaled_up(t: u64) -> (u64, u64, u64, u32) {
        let enq = 200 + 10 * t;
        let done = if t <= 60 { 6 * t } else { 360 + 18 * (t - 60) };
        (enq - done, enq, done, if t < 60 { 1 } else { 3 })
    }

    /// The console's store (600 s over 240 points) polled every 2 s up to `until`.
    fn polled_every_two_seconds(until: u64, at: impl Fn(u64) -> QueueStats) -> (Store, QueueId) {
        let mut s = Store::with_defaults();
        let id = QueueId::new("q");
        s.set_queues(
            vec![QueueInfo {
                id: id.clone(),
                ..Default::default()
            }],
            qdeck_model::domain::now_ms(),
        );
        s.set_on_screen(std::slice::from_ref(&id), qdeck_model::domain::now_ms());
        let epoch = s.epoch_ms();
        for t in (0..=until).step_by(2) {
            s.apply(
                StatsBatch {
                    stats: vec![QueueStats {
                        id: id.clone(),
                        at_ms: epoch + t as i64 * 1000,
                        ..at(t)
                    }],
                    errors: vec![],
                },
                qdeck_model::domain::now_ms(),
            );
        }
        (s, id)
    }

    fn scaled_up_counters(t: u64) -> QueueStats {
        let (depth, enq, done, consumers) = scaled_up(t);
        QueueStats {
            depth: Some(depth),
            enqueued_total: Some(enq),
            completed_total: Some(done),
            consumers: Some(consumers),
            ..Default::default()
        }
    }

    #[test]
    fn trend_and_eta_follow_a_scale_up_within_two_polls() {
        let (s, id) = polled_every_two_seconds(58, scaled_up_counters);
        let before = s.derived(&id).unwrap();
        assert_eq!(before.trend, Trend::Growing, "{before:?}");
        assert_eq!(before.since_workers_changed, None);
        // The poll at 60 sees 3 workers; two polls later the old worker's minute is gone.
        let (s, id) = polled_every_two_seconds(64, scaled_up_counters);
        let d = s.derived(&id).unwrap();
        assert_eq!(d.trend, Trend::Draining, "{d:?}");
        assert!((d.net_rate.unwrap() + 8.0).abs() < 1e-6, "{d:?}");
        // 408 left at 8/s.
        assert!((d.drain_secs.unwrap() - 51.0).abs() < 1e-6, "{d:?}");
        assert!(d.since_workers_changed.is_some(), "{d:?}");
        assert!(
            d.measuring,
            "per-worker figures still wait for 20 s of the new count"
        );
        // The sort reads the same figures.
        let r = rates(s.get(&id).unwrap());
        assert_eq!((r.trend, r.drain_secs), (d.trend, d.drain_secs));
    }

    /// A broker that gives depth and consumers but no counters: only the depth slope says
    /// where the queue goes, and it needs the point at the change and one after it, which the
    /// store keeps even between its 2.5 s points (the change seen at 62, between two).
    #[test]
    fn depth_only_trend_follows_a_scale_up_within_two_polls() {
        let depth_only = |t: u64| {
            let (depth, _, _, consumers) = scaled_up(t.saturating_sub(2));
            QueueStats {
                depth: Some(depth),
                consumers: Some(consumers),
                ..Default::default()
            }
        };
        let (s, id) = polled_every_two_seconds(66, depth_only);
        let d = s.derived(&id).unwrap();
        assert_eq!(d.rate_source, RateSource::DepthDelta);
        assert_eq!(d.trend, Trend::Draining, "{d:?}");
        assert!((d.net_rate.unwrap() + 8.0).abs() < 1e-6, "{d:?}");
        assert!(d.drain_secs.is_some_and(f64::is_finite), "{d:?}");
    }

    #[test]
    fn the_first_worker_count_seen_is_no_change() {
        // Two polls of a steady queue (what `ls --sample` takes): rates from both, no cut.
        let mut s = Store::with_defaults();
        let id = counters(&mut s, 30, |t| (6 * t, 10 * t, 4 * t, 1));
        let d = s.derived(&id).unwrap();
        assert_eq!(d.since_workers_changed, None);
        assert_eq!(d.trend, Trend::Growing);
    }

    #[test]
    fn empty_queue_that_keeps_up_never_needs_more_workers() {
        // A consumer that rejects 10 %: acks 15.7/s of 17.4/s arriving, depth stays 0.
        let mut s = Store::new(600, 600, 600.0);
        let id = series(&mut s, 60, |t| QueueStats {
            depth: Some(0),
            consumers: Some(1),
            in_rate: Some(17.4),
            out_rate: Some(15.7),
            enqueued_total: Some(17 * t as u64),
            ..Default::default()
        });
        let d = s.derived(&id).unwrap();
        assert_eq!(d.workers_needed, Some(1), "{:?}", d.arithmetic);
    }

    #[test]
    fn net_is_in_minus_out_from_the_same_window() {
        let mut s = Store::new(600, 600, 600.0);
        // Depth jumps (a purge mid-window) but the rates say +6/s: net agrees with in − out.
        let id = counters(&mut s, 40, |t| {
            let depth = if t < 20 { 6 * t } else { 6 * (t - 20) };
            (depth, 10 * t, 4 * t, 1)
        });
        let d = s.derived(&id).unwrap();
        let (i, o, n) = (d.in_rate.unwrap(), d.out_rate.unwrap(), d.net_rate.unwrap());
        assert!((n - (i - o)).abs() < 1e-9, "in {i} out {o} net {n}");
    }

    /// The table sorts by `rates` and shows `derive`: a queue must sort where its figures say.
    #[test]
    fn rates_for_sorting_are_the_figures_derive_shows() {
        let mut s = Store::new(600, 600, 600.0);
        let growing = counters(&mut s, 90, |t| (6 * t, 10 * t, 4 * t, 1));
        let mut s2 = Store::new(600, 600, 600.0);
        let draining = counters(&mut s2, 90, |t| (1000 - 2 * t, 10 * t, 12 * t, 3));
        let mut s3 = Store::new(600, 600, 600.0);
        let depth_only = series(&mut s3, 10, |t| QueueStats {
            depth: Some(100 - 5 * t as u64),
            ..Default::default()
        });
        let mut s4 = Store::new(600, 600, 600.0);
        let nothing = series(&mut s4, 10, |_| QueueStats::default());
        for (store, id) in [
            (&s, growing),
            (&s2, draining),
            (&s3, depth_only),
            (&s4, nothing),
        ] {
            let e = store.get(&id).unwrap();
            let (r, d) = (rates(e), derive(e, store.drain_target_secs));
            assert_eq!(
                (r.in_rate, r.out_rate, r.net_rate, r.trend, r.drain_secs),
                (d.in_rate, d.out_rate, d.net_rate, d.trend, d.drain_secs)
            );
        }
        assert_eq!(
            rates(s4.get(&QueueId::new("q")).unwrap()).trend,
            Trend::Unknown
        );
    }
}

#[cfg(test)]
#[path = "derive_sampled_tests.rs"]
mod sampled_tests;
