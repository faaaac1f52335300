//! The poller's call budget (`max_calls_per_minute`) against the local broker: calls are
//! counted by the backend's `ApiCalls`, the same counters the status line reads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_backend::Backend;
use qdeck_engine::poller::{self, PollConfig, PollEvent};
use qdeck_model::domain::QueueId;

struct Run {
    calls: u64,
    elapsed: Duration,
    /// The queues of each stats answer, in order.
    batches: Vec<HashSet<QueueId>>,
}

/// Poll `h` for `secs` with `visible` on screen and the given budget.
async fn run(h: &Arc<LocalHandle>, budget: Option<u32>, visible: &[QueueId], secs: f64) -> Run {
    let mut cfg = PollConfig::with_refresh(0.05).with_budget(budget);
    cfg.sweep_every = Duration::from_millis(200);
    cfg.sweep_chunk = 20;
    cfg.worst_n = 5;
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let before = h.api_calls().total();
    let t0 = Instant::now();
    let backend: Arc<dyn Backend> = h.clone();
    let handle = poller::spawn(backend, cfg, tx);
    handle.set_visible(visible.to_vec());
    let mut batches = Vec::new();
    let end = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    while let Ok(Some(ev)) = tokio::time::timeout_at(end, rx.recv()).await {
        if let PollEvent::Stats(b) = ev {
            batches.push(b.stats.into_iter().map(|s| s.id).collect());
        }
    }
    handle.stop();
    drop(rx);
    // A call that was in flight at the stop still counts.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Run {
        calls: h.api_calls().total() - before,
        elapsed: t0.elapsed(),
        batches,
    }
}

#[tokio::test]
async fn poller_stays_within_its_call_budget_and_serves_the_screen_first() {
    let dir = tempfile::tempdir().unwrap();
    let h = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
    for i in 0..200 {
        h.0.create_queue(&format!("q{i:03}"), &QueueOptions::default())
            .unwrap();
    }
    h.0.create_queue(
        "zz-jobs",
        &QueueOptions {
            max_receives: Some(3),
            dlq: Some("zz-jobs-dlq".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let visible: Vec<QueueId> = ["q150", "q151", "q152"]
        .iter()
        .map(|n| QueueId::new(*n))
        .collect();

    let free = run(&h, None, &visible, 2.0).await;
    let per_min = 120;
    let capped = run(&h, Some(per_min), &visible, 2.0).await;

    // A bucket of one sweep (here under one call, so one) plus the budget's pace.
    let allowed = 1.0 + per_min as f64 * capped.elapsed.as_secs_f64() / 60.0;
    println!(
        "no budget: {} calls in {:.2} s; budget {per_min}/min: {} calls in {:.2} s (allowed {allowed:.1})",
        free.calls,
        free.elapsed.as_secs_f64(),
        capped.calls,
        capped.elapsed.as_secs_f64()
    );
    assert!(
        capped.calls as f64 <= allowed,
        "{} calls, {allowed:.1} allowed",
        capped.calls
    );
    assert!(
        free.calls as f64 > 3.0 * allowed,
        "without a budget the same poller makes many more calls ({}), so the budget is what holds it",
        free.calls
    );
    assert!(capped.calls >= 2, "the budget is used, not hoarded");
    let first = capped
        .batches
        .first()
        .expect("figures arrived under the budget");
    assert!(
        visible.iter().all(|q| first.contains(q)),
        "the rows on screen are in the first answer"
    );
    assert!(
        first.contains(&QueueId::new("zz-jobs-dlq")),
        "so is the DLQ, before the round-robin"
    );
    assert_eq!(
        first.len(),
        20,
        "one call's worth: 3 on screen, the DLQ and 16 of the rest"
    );
    assert!(
        capped
            .batches
            .iter()
            .all(|b| visible.iter().all(|q| b.contains(q))),
        "every poll the budget allows refreshes the screen"
    );
}
