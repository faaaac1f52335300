//! The backend contract: one set of behaviours every backend must show, whatever the broker.
//! Each broker supplies a `Fixture` that builds a source queue with a DLQ holding messages;
//! the checks below only use the `Backend` trait.

use std::time::Duration;

use qdeck::backend::{Backend, OpProgress};
use qdeck::domain::*;

/// Builds the scene the checks need on one broker.
pub trait Fixture {
    /// Create `source` with a DLQ, put `ready` messages in `source` and `dead` messages in the
    /// DLQ (dead-lettered by the broker itself, so their origin is recorded). Returns the ids.
    async fn scene(
        &self,
        backend: &dyn Backend,
        tag: &str,
        ready: usize,
        dead: usize,
    ) -> (QueueId, QueueId);
    /// Brokers whose counts settle late (SQS) may need a moment.
    fn settle(&self) -> Duration {
        Duration::ZERO
    }
}

async fn figures(b: &dyn Backend, q: &QueueId) -> QueueStats {
    let batch = b.stats(std::slice::from_ref(q)).await.expect("stats");
    assert!(batch.errors.is_empty(), "stats errors: {:?}", batch.errors);
    batch
        .stats
        .into_iter()
        .find(|s| &s.id == q)
        .expect("figures for the queue")
}

async fn browse_all(b: &dyn Backend, q: &QueueId, force: bool) -> Vec<Message> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..100 {
        let page = b
            .browse(
                q,
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 50,
                    force,
                },
            )
            .await
            .expect("browse");
        let n = page.messages.len();
        out.extend(page.messages);
        match page.next {
            Some(c) if n > 0 => cursor = Some(c),
            _ => break,
        }
    }
    out
}

/// List, figures, browse-without-loss, redrive-to-origin with nothing lost, purge.
pub async fn run<F: Fixture>(b: &dyn Backend, fx: &F, tag: &str) {
    let (ready, dead) = (7usize, 5usize);
    let (src, dlq) = fx.scene(b, tag, ready, dead).await;
    tokio::time::sleep(fx.settle()).await;

    // Queues and their DLQ links, both directions.
    let queues = b.list_queues().await.expect("list_queues");
    let s = queues.iter().find(|q| q.id == src).expect("source listed");
    let d = queues.iter().find(|q| q.id == dlq).expect("dlq listed");
    assert_eq!(s.dlq.as_ref(), Some(&dlq), "source names its DLQ");
    assert!(d.is_dlq, "DLQ is marked as one");
    assert!(d.dlq_sources.contains(&src), "DLQ names its source");

    // Figures match what the scene put there.
    let fs = figures(b, &src).await;
    assert_eq!(fs.depth, Some(ready as u64), "source depth");
    assert_eq!(
        fs.dlq_depth,
        Some(dead as u64),
        "DLQ depth seen from the source"
    );
    let fd = figures(b, &dlq).await;
    assert_eq!(fd.depth, Some(dead as u64), "DLQ depth");

    // Browsing the DLQ shows every message, with its origin, and removes none.
    let seen = browse_all(b, &dlq, false).await;
    assert_eq!(seen.len(), dead, "browse saw every dead letter");
    for m in &seen {
        let origin = m.dead_letter.as_ref().and_then(|d| d.origin.as_ref());
        assert_eq!(
            origin,
            Some(&src),
            "dead letter {} records its origin",
            m.id
        );
    }
    tokio::time::sleep(fx.settle()).await;
    assert_eq!(
        figures(b, &dlq).await.depth,
        Some(dead as u64),
        "browse removed nothing"
    );

    // Redrive to origin: all of them arrive, none is lost, none stays behind.
    let (progress, _rx) = OpProgress::new();
    let req = RedriveRequest {
        source: dlq.clone(),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let report = b.redrive(&req, &progress).await.expect("redrive");
    assert_eq!(report.moved, dead as u64, "moved count: {report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    tokio::time::sleep(fx.settle()).await;
    assert_eq!(figures(b, &dlq).await.depth, Some(0), "DLQ emptied");
    assert_eq!(
        figures(b, &src).await.depth,
        Some((ready + dead) as u64),
        "nothing lost"
    );

    // Purge empties the source.
    let (progress, _rx) = OpProgress::new();
    b.purge(&src, &progress).await.expect("purge");
    tokio::time::sleep(fx.settle()).await;
    assert_eq!(figures(b, &src).await.depth, Some(0), "purged");

    // An unknown queue gets no figures (never zeros): an error for it, or NotFound.
    let ghost = QueueId::new(format!("{tag}-does-not-exist"));
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
            matches!(e, qdeck::backend::BackendError::NotFound(_)),
            "stats of an unknown queue: {e}"
        ),
    }
}
