//! Redrive (the libraries' retry) and purge. Every batch is one Lua script run, atomic on the
//! server: a crash between batches leaves whole jobs on one side or the other. Progress,
//! cancel and rate are checked between batches; `max` is honoured exactly. What a batch does
//! is the library's (`JobLibrary::redrive_batch`); the batching, pacing and report are here.

use std::time::Duration;

use super::figures::{as_array, as_i64};
use super::library::Batch;
use super::RedisBackend;
use crate::{Backend, BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

/// Jobs per script run when the request does not say (`window`). A script blocks Redis
/// while it runs; 100 jobs keep that well under a millisecond or two.
pub const DEFAULT_BATCH: u64 = 100;

const MODE: &str = "client-side: the library's retry as one atomic Lua script per batch";

fn pair(v: &::redis::Value) -> (u64, u64) {
    let a = as_array(v);
    (
        a.first().and_then(as_i64).unwrap_or(0).max(0) as u64,
        a.get(1).and_then(as_i64).unwrap_or(0).max(0) as u64,
    )
}

/// The refusal of a redrive from a queue that holds no failed jobs.
pub(super) fn not_failed(source: &QueueId) -> BackendError {
    BackendError::Unsupported(format!(
        "{source} is not a failed registry, failed, retry or dead set: nothing to redrive from it"
    ))
}

pub async fn redrive(
    b: &RedisBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    if req.max == Some(0) {
        return Err(BackendError::Invalid("max must be at least 1".into()));
    }
    let lib = b.owner_to_change(&req.source).await?;
    lib.check_redrive(b, req).await?;
    let mut report = RedriveReport {
        mode: MODE.into(),
        ..Default::default()
    };
    let mut batch = req.window.map_or(DEFAULT_BATCH, |w| w.max(1) as u64);
    if let Some(r) = req.rate {
        // At most one second's worth per script call, so the pace holds from the start.
        batch = r.batch(Duration::from_secs(1), batch as usize) as u64;
    }
    let pace = Limiter::new(req.rate);
    let cancel = progress.cancel_token();
    let mut ids: Option<Vec<String>> = req.only_ids.clone();
    let limit = match (&ids, req.max) {
        (Some(v), Some(m)) => (v.len() as u64).min(m),
        (Some(v), None) => v.len() as u64,
        (None, Some(m)) => m,
        (None, None) => b.count(&req.source).await?.ready,
    };
    progress.set_total(Some(limit));
    progress.phase("retrying");
    let mut cm = b.conn.get().await?;
    while report.moved < limit {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let n = batch.min(limit - report.moved);
        pace.take(n, &cancel).await;
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let chunk: Vec<String> = match &mut ids {
            Some(v) if v.is_empty() => break,
            Some(v) => v.drain(..(n as usize).min(v.len())).collect(),
            None => Vec::new(),
        };
        let explicit = ids.is_some();
        // Unreadable jobs stay at the head of the set: later batches start after them.
        let skip = if explicit { 0 } else { report.failed };
        let batch = Batch {
            cm: &mut cm,
            n,
            skip,
            ids: &chunk,
        };
        let reply = lib.redrive_batch(&req.source, batch).await?;
        b.calls.bump("redrive batch");
        let (moved, skipped) = pair(&reply);
        report.moved += moved;
        progress.add_done(moved);
        if skipped > 0 {
            report.failed += skipped;
            progress.add_failed(skipped);
            report.errors.push(if explicit {
                format!("{skipped} job(s) not found where expected (already retried or removed)")
            } else {
                format!("{skipped} job(s) could not be read and were left in place")
            });
        }
        // Nothing left to move (or only unreadable jobs): stop rather than spin.
        if moved == 0 && !explicit {
            break;
        }
    }
    Ok(report)
}

pub async fn purge(
    b: &RedisBackend,
    queue: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let lib = b.owner_to_change(queue).await?;
    progress.phase("purging");
    lib.purge(b, queue, progress).await
}
