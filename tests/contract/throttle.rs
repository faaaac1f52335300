//! Redrive pacing and cancellation.
//!
//! Pacing is checked from the progress the backend reports, against an upper bound on
//! progress at each moment (`done <= burst + rate * elapsed`): a slow machine only makes that
//! easier to meet, so the check does not flake, yet a backend that ignores the rate breaks
//! it at once.

use std::time::{Duration, Instant};

use qdeck_backend::OpProgress;
use qdeck_model::domain::*;

use super::support::{assert_clean, expect_count, request, wait_done};
use super::{tag, Fixture};

pub async fn redrive_rate_is_honoured<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let (n, rate) = (6usize, 2.0f64);
    let s = fx.scene(&tag("rate"), 0, n).await;
    let mut req = request(&s.dlq, RedriveTarget::Origin);
    req.rate = Some(qdeck_model::rate::Rate::fixed(rate));
    // Backends may move up to one second's worth at once, never more.
    let burst = rate.ceil();

    let (progress, mut rx) = OpProgress::new();
    let started = Instant::now();
    let run = b.redrive(&req, &progress);
    tokio::pin!(run);
    let mut seen: Vec<(f64, u64)> = Vec::new();
    let report = loop {
        tokio::select! {
            r = &mut run => break r,
            changed = rx.changed() => {
                if changed.is_ok() {
                    let done = rx.borrow_and_update().done;
                    // Elapsed read after the value: the bound is on the safe side.
                    seen.push((started.elapsed().as_secs_f64(), done));
                }
            }
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    let report = report.expect("redrive");
    assert_clean(&report, n);
    for &(t, done) in &seen {
        assert!(
            done as f64 <= burst + rate * t + 1e-9,
            "{done} moved after {t:.2} s at {rate}/s (progress seen: {seen:?})"
        );
    }
    // The last messages cannot have moved before this, whatever the pacing scheme.
    let least = (n as f64 - burst) / rate;
    assert!(
        elapsed >= least,
        "{n} messages at {rate}/s took {elapsed:.2} s, under {least:.2} s"
    );
    expect_count(fx, &s.dlq, 0, "DLQ emptied").await;
    expect_count(fx, &s.src, n, "all arrived").await;
}

/// Cancelled mid-run: what moved is in the source, the rest is in the DLQ, nothing twice.
pub async fn redrive_cancel_leaves_everything_accounted_for<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let (ready, dead) = (1usize, 6usize);
    let s = fx.scene(&tag("cancel"), ready, dead).await;
    let mut req = request(&s.dlq, RedriveTarget::Origin);
    req.rate = Some(qdeck_model::rate::Rate::fixed(2.0));
    let (progress, mut rx) = OpProgress::new();
    let canceller = async {
        wait_done(&mut rx, 1, Duration::from_secs(30)).await;
        progress.cancel();
    };
    let (report, ()) = tokio::join!(b.redrive(&req, &progress), canceller);
    let report = report.expect("a cancelled redrive still reports");
    assert!(report.cancelled, "the report says cancelled: {report:?}");
    assert!(
        (1..dead as u64).contains(&report.moved),
        "cancelled after the first move, before the last: {report:?}"
    );
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.possibly_duplicated, 0, "{report:?}");
    let moved = report.moved as usize;
    expect_count(fx, &s.dlq, dead - moved, "what did not move is in the DLQ").await;
    expect_count(fx, &s.src, ready + moved, "what moved is in the source").await;
}
