//! Helpers the behaviours share: figures that may lag, whole-queue browses, redrive requests,
//! and counting the calls that receive messages client-side.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use qdeck_backend::{Backend, ProgressState};
use qdeck_model::domain::*;
use tokio::sync::watch;

use super::Fixture;

/// How long a check polls for figures to reach what the broker must hold: lagging figures
/// settle within this, a wrong outcome never does.
pub fn patience<F: Fixture>(fx: &F) -> Duration {
    fx.settle() * 2 + Duration::from_secs(15)
}

/// Ready messages in `q` by `Backend::count` (or by the broker's own client where the fixture
/// reads it: `Fixture::held`), polled until it equals `want` or patience runs out; then
/// asserted.
pub async fn expect_count<F: Fixture>(fx: &F, q: &QueueId, want: usize, what: &str) {
    let b = fx.backend();
    let deadline = Instant::now() + patience(fx);
    loop {
        let got = match fx.held(q).await {
            Some(n) => Ok(n as u64),
            None => b.count(q).await.map(|c| c.ready),
        };
        match got {
            Ok(n) if n == want as u64 => return,
            _ if Instant::now() >= deadline => {
                panic!("{what}: {q} holds {got:?} messages, expected {want}")
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// The figures `stats` gives for one queue, failing on a per-queue error.
pub async fn figures(b: &dyn Backend, q: &QueueId) -> QueueStats {
    let batch = b.stats(std::slice::from_ref(q)).await.expect("stats");
    assert!(batch.errors.is_empty(), "stats errors: {:?}", batch.errors);
    batch
        .stats
        .into_iter()
        .find(|s| &s.id == q)
        .expect("figures for the queue")
}

/// Every message a browse shows, page after page.
pub async fn browse_all(b: &dyn Backend, q: &QueueId, force: bool) -> Vec<Message> {
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

pub fn ids(msgs: &[Message]) -> Vec<String> {
    let mut v: Vec<String> = msgs.iter().map(|m| m.id.clone()).collect();
    v.sort();
    v
}

pub fn request(source: &QueueId, target: RedriveTarget) -> RedriveRequest {
    RedriveRequest {
        source: source.clone(),
        target,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    }
}

/// A redrive that finished with nothing failed, lost or maybe doubled.
pub fn assert_clean(report: &RedriveReport, moved: usize) {
    assert_eq!(report.moved, moved as u64, "moved: {report:?}");
    assert_eq!(report.failed, 0, "failed: {report:?}");
    assert_eq!(
        report.possibly_duplicated, 0,
        "a clean redrive reports no possible duplicates: {report:?}"
    );
    assert!(!report.cancelled, "not cancelled: {report:?}");
}

/// Calls that take messages off a queue on the client: SQS ReceiveMessage, AMQP basic.get /
/// basic.consume, Service Bus peek-lock / receive-delete, the local broker's receive.
pub fn receive_calls(calls: &BTreeMap<String, u64>) -> u64 {
    calls
        .iter()
        .filter(|(op, _)| {
            let op = op.to_ascii_lowercase();
            op.contains("receive")
                || op.contains("basic.get")
                || op.contains("basic.consume")
                || op.contains("peek-lock")
        })
        .map(|(_, n)| n)
        .sum()
}

/// Wait until the operation reports at least `done` messages, or `limit` passes.
pub async fn wait_done(rx: &mut watch::Receiver<ProgressState>, done: u64, limit: Duration) {
    let _ = tokio::time::timeout(limit, async {
        while rx.borrow_and_update().done < done {
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
}

/// Where the backend declares that it cannot do what a case asks (the plan's mode for a
/// redrive target, a facet it does not return), the case does not apply: the case checks that
/// doing it anyway is refused, and says so on stderr (shown with `--nocapture`, and in CI's
/// log), so a case never passes by being skipped in silence.
pub fn does_not_apply(case: &str, declared: &str) {
    eprintln!("contract: {case} does not apply to this backend, as it declares: {declared}");
}

/// Why the backend's plan declares `req` unsupported, if it does; the redrive is then tried
/// and must be refused, moving nothing.
pub async fn declared_unsupported(b: &dyn Backend, req: &RedriveRequest) -> Option<String> {
    let plan = b.plan_redrive(req).await.expect("plan");
    let RedriveMode::Unsupported(why) = plan.mode else {
        return None;
    };
    let res = b.redrive(req, &qdeck_backend::OpProgress::detached()).await;
    assert!(
        res.is_err(),
        "redrive declared unsupported ({why}) but it ran: {res:?}"
    );
    Some(why)
}
