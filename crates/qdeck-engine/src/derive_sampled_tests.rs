//! Figures from a metric sampled once a minute and read minutes late (Pub/Sub's Cloud
//! Monitoring): the history holds each measurement once, at its own time; no trend is judged
//! over less than a sampling interval; the drain ETA counts the time the figures are late.

use super::*;
use crate::alerts::Figures;
use crate::store::Store;
use qdeck_model::domain::{QueueId, QueueInfo, QueueStats, Sampled, StatsBatch};

const EVERY: i64 = 60;
const LAG: i64 = 150;

/// A queue (a DLQ when `dlq`) polled every 5 s for `secs` seconds. Each poll reads the
/// metric's newest point: the last whole minute (counted from the store's epoch) at least `LAG`
/// seconds back, holding `depth(seconds since the first point)`.
fn polled(store: &mut Store, dlq: bool, secs: i64, depth: impl Fn(i64) -> u64) -> QueueId {
    let id = QueueId::new("sub");
    store.set_queues(
        vec![QueueInfo {
            id: id.clone(),
            is_dlq: dlq,
            ..Default::default()
        }],
        qdeck_model::domain::now_ms(),
    );
    let base = store.epoch_ms() + EVERY * 1000;
    // The first poll reads the point at `base`.
    let start = base + LAG * 1000;
    for t in (0..=secs).step_by(5) {
        let now = start + t * 1000;
        let point = base + (now - LAG * 1000 - base).div_euclid(EVERY * 1000) * EVERY * 1000;
        let point_secs = (point - base) / 1000;
        store.apply(
            StatsBatch {
                stats: vec![QueueStats {
                    id: id.clone(),
                    at_ms: now,
                    depth: Some(depth(point_secs)),
                    sampled: Some(Sampled {
                        at_ms: point,
                        every_secs: EVERY as u32,
                    }),
                    ..Default::default()
                }],
                errors: vec![],
            },
            qdeck_model::domain::now_ms(),
        );
    }
    id
}

#[test]
fn repeated_reads_of_one_measurement_are_one_point_and_no_trend() {
    let mut s = Store::new(600, 600, 600.0);
    // 55 s of polls inside one minute of the metric: twelve reads of one point.
    let id = polled(&mut s, false, 55, |t| 1000 + 10 * t as u64);
    assert_eq!(
        s.get(&id).unwrap().history.len(),
        1,
        "one point per measurement"
    );
    let d = s.derived(&id).unwrap();
    // Twelve equal reads are one measurement, not a flat queue.
    assert_eq!(d.trend, Trend::Unknown, "{d:?}");
    assert_eq!(d.net_rate, None, "{d:?}");
    assert!(d.figures_age_secs.unwrap() >= LAG as f64, "{d:?}");
}

#[test]
fn growth_is_judged_over_whole_sampling_intervals() {
    let mut s = Store::new(600, 600, 600.0);
    // Depth grows 2 per second of measured time, polled for five minutes.
    let id = polled(&mut s, false, 300, |t| 100 + 2 * t as u64);
    assert_eq!(s.get(&id).unwrap().history.len(), 6, "a point a minute");
    let d = s.derived(&id).unwrap();
    assert_eq!(d.trend, Trend::Growing, "{d:?}");
    let net = d.net_rate.unwrap();
    assert!(
        (net - 2.0).abs() < 1e-9,
        "the slope of the measurements: {net}"
    );
    assert_eq!(d.rate_source, RateSource::DepthDelta);
}

#[test]
fn drain_eta_counts_the_minutes_the_figures_are_late() {
    let mut s = Store::new(600, 600, 600.0);
    // Draining 1 per second of measured time from 10,000.
    let id = polled(&mut s, false, 300, |t| 10_000 - t as u64);
    let e = s.get(&id).unwrap();
    let latest = e.latest.as_ref().unwrap();
    let age = latest.figures_age_secs();
    assert!(age >= LAG as f64, "{age}");
    let d = s.derived(&id).unwrap();
    let depth = latest.depth.unwrap() as f64;
    let eta = d.drain_secs.unwrap();
    assert!(
        (eta - (depth - age)).abs() < 1e-6,
        "depth {depth} at 1/s, measured {age} s before the answer: eta {eta}"
    );
}

#[test]
fn dead_letter_growth_needs_a_whole_interval_and_rules_read_figure_age() {
    // Within one sampling interval there is no growth to judge, not a growth of 0.
    let mut s = Store::new(600, 600, 600.0);
    let id = polled(&mut s, true, 55, |t| 5 + t as u64);
    let f = Figures::of(s.get(&id).unwrap(), 600.0);
    assert_eq!(f.dlq_growth, None, "{f:?}");
    assert!(f.figure_age.unwrap() >= LAG as f64, "{f:?}");
    // Two measurements a minute apart: 60 more dead letters.
    let mut s = Store::new(600, 600, 600.0);
    let id = polled(&mut s, true, 65, |t| 5 + t as u64);
    let f = Figures::of(s.get(&id).unwrap(), 600.0);
    assert_eq!(f.dlq_growth, Some(60.0), "{f:?}");
    let c = crate::alerts::Condition::parse("figure_age > 2m").unwrap();
    assert!(c.holds(&f));
}
