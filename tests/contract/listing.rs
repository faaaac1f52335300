//! Queues, their DLQ links, their figures, unknown queues and purge.

use std::time::{Duration, Instant};

use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::*;

use super::support::{expect_count, figures, patience};
use super::{tag, Fixture};

/// The source names its DLQ and the DLQ names its source, in the list and in `describe`.
pub async fn lists_dlq_links_both_ways<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("links"), 1, 1).await;
    let queues = b.list_queues().await.expect("list_queues");
    let src = queues
        .iter()
        .find(|q| q.id == s.src)
        .expect("source listed");
    let dlq = queues.iter().find(|q| q.id == s.dlq).expect("DLQ listed");
    assert_eq!(src.dlq.as_ref(), Some(&s.dlq), "source names its DLQ");
    assert!(!src.is_dlq, "the source is not marked as a DLQ");
    assert!(dlq.is_dlq, "DLQ is marked as one");
    assert!(dlq.dlq_sources.contains(&s.src), "DLQ names its source");

    let d_src = b.describe(&s.src).await.expect("describe source");
    assert_eq!(
        d_src.dlq.as_ref(),
        Some(&s.dlq),
        "describe: source names its DLQ"
    );
    let d_dlq = b.describe(&s.dlq).await.expect("describe DLQ");
    assert!(d_dlq.is_dlq, "describe: DLQ is marked as one");
    assert!(
        d_dlq.dlq_sources.contains(&s.src),
        "describe: DLQ names its source"
    );
}

/// Depths (a log's retained count) from `stats` and `count` equal what the scene put there.
pub async fn figures_match_the_scene<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("figures"), 3, 2).await;
    let want = (Some(3), Some(2), Some(2));
    let deadline = Instant::now() + patience(fx);
    let got = loop {
        let (fs, fd) = (figures(b, &s.src).await, figures(b, &s.dlq).await);
        // What the source holds: a log (a Kafka topic) reports it as retention, not depth.
        let got = (fs.depth.or(fs.retained), fs.dlq_depth, fd.depth);
        if got == want || Instant::now() >= deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        got, want,
        "(source depth, DLQ depth seen from the source, DLQ depth)"
    );
    expect_count(fx, &s.src, 3, "count of the source").await;
    expect_count(fx, &s.dlq, 2, "count of the DLQ").await;
}

/// An unknown queue gets an error, never invented figures.
pub async fn unknown_queue_gets_no_figures<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let ghost = QueueId::new(tag("ghost"));
    match b.stats(std::slice::from_ref(&ghost)).await {
        Ok(batch) => {
            assert!(
                batch.stats.iter().all(|s| s.id != ghost),
                "figures invented for an unknown queue: {:?}",
                batch.stats
            );
            assert!(
                batch.errors.iter().any(|(q, _)| q == &ghost),
                "no error for an unknown queue: {:?}",
                batch.errors
            );
        }
        Err(e) => assert!(
            matches!(e, BackendError::NotFound(_)),
            "stats of an unknown queue: {e:?}"
        ),
    }
    match b.describe(&ghost).await {
        Err(BackendError::NotFound(_)) => {}
        other => panic!("describe of an unknown queue: {other:?}"),
    }
    if let Ok(c) = b.count(&ghost).await {
        panic!("count of an unknown queue invented {c:?}");
    }
}

/// Purge empties the source and leaves its DLQ alone. A backend that cannot purge this kind
/// of queue (a NATS consumer holds no messages of its own) answers with the typed
/// `Unsupported`, and then nothing changes.
pub async fn purge_empties_the_queue<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("purge"), 4, 2).await;
    expect_count(fx, &s.src, 4, "source before the purge").await;
    let report = match b.purge(&s.src, &OpProgress::detached()).await {
        Err(BackendError::Unsupported(why)) => {
            super::support::does_not_apply("purge_empties_the_queue", &why);
            expect_count(fx, &s.src, 4, "a refused purge removed nothing").await;
            expect_count(fx, &s.dlq, 2, "a refused purge left the DLQ alone").await;
            return;
        }
        r => r.expect("purge"),
    };
    if let Some(n) = report.purged {
        assert_eq!(n, 4, "purged count, when the broker says: {report:?}");
    }
    expect_count(fx, &s.src, 0, "source after the purge").await;
    expect_count(fx, &s.dlq, 2, "the DLQ is not purged with its source").await;
}
