//! Redrive. Native move task first (see `movetask`); client-side otherwise:
//! receive 10 → SendMessageBatch → DeleteMessageBatch only for entries whose send succeeded.
//! A message whose copy landed but whose delete failed (stale receipt handle, error) is
//! counted as possibly duplicated — never lost. Messages that failed or were not selected
//! are held invisible during the run and made visible again at the end.
//!
//! Every copy is stamped with message attributes: `x-qdeck-redrive-run` (this run's id),
//! `x-qdeck-redriven` (how many redrives the message has been through) and
//! `x-qdeck-redriven-at` (Unix ms). A copy that dead-letters again while the run goes on comes
//! back with a new message id; the run knows it by its run id, does not move or count it again,
//! and holds it until the end, when it is made visible in the DLQ. With `max` the run moves at
//! most that many (copies tried, failures included): a redrive ends even when every message
//! it moves is rejected and dead-lettered again.

use super::movetask::{self, MoveOutcome};
use super::redrive_loops::client_side;
use super::SqsBackend;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// SendMessageBatch payload kept under the classic 256 KiB batch limit.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;

/// Message attributes qdeck stamps on each copy.
pub(crate) const RUN_ATTR: &str = "x-qdeck-redrive-run";
pub(crate) const COUNT_ATTR: &str = "x-qdeck-redriven";
pub(crate) const AT_ATTR: &str = "x-qdeck-redriven-at";

pub(crate) async fn redrive(
    b: &SqsBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let mut src = b.resolve_full(&req.source).await?;
    if req.target == RedriveTarget::Origin {
        src.sources = b.dlq_sources(&req.source).await.unwrap_or_default();
    }
    if progress.cancelled() {
        return Ok(RedriveReport {
            mode: "none (cancelled before start)".to_string(),
            cancelled: true,
            ..RedriveReport::default()
        });
    }
    if let RedriveTarget::Queue(t) = &req.target {
        if *t == req.source {
            return Err(BackendError::Invalid(
                "redrive target is the source queue".to_string(),
            ));
        }
    }
    let why_client = if req.only_ids.is_some() {
        "selected messages".to_string()
    } else if req.max.is_some() {
        "a count limit, as the move task moves everything".to_string()
    } else if req.rate.is_some_and(|r| r.per_sec() < 1.0) {
        // The task's MaxNumberOfMessagesPerSecond is a whole number from 1: it would go faster.
        "a rate below 1 message per second, the move task's least".to_string()
    } else {
        match movetask::run(b, &src, req, progress).await? {
            MoveOutcome::Done(r) => return Ok(r),
            MoveOutcome::NotSupported(why) => why,
        }
    };
    let res = client_side(b, &src, req, progress).await;
    b.invalidate(&req.source);
    let mut report = res?;
    report.mode = format!("client-side ({why_client})");
    Ok(report)
}
