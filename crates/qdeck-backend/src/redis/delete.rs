//! Deleting chosen jobs (`purge --where`, `move`, edit-and-resend) from where failed jobs wait:
//! BullMQ's failed set, Sidekiq's dead, retry and schedule sets and RQ's failed registries
//! (with each job's hash and results, as Job#delete). Each batch is one Lua
//! script, atomic on the server, and touches only the jobs named: nothing else is read, leased
//! or counted. An id gone since the browse (retried, removed) is reported missing.

use super::figures::as_i64;
use super::RedisBackend;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{DeleteReport, QueueId};

/// Ids per script run: a Sidekiq set is read whole once per run, so few runs for many ids.
const BATCH: usize = 500;

/// The refusal on a queue whose jobs wait for a worker.
pub(super) fn waiting_refusal(queue: &QueueId) -> String {
    format!(
        "{queue}: chosen jobs are deleted from a failed, dead, retry or schedule set only (a waiting job may be taken by a worker meanwhile); refused"
    )
}

pub async fn delete_ids(
    b: &RedisBackend,
    queue: &QueueId,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let lib = b.owner(queue).await?;
    if let Some(why) = lib.delete_refusal(queue) {
        return Err(BackendError::Refused(why));
    }
    let lib = b.owner_to_change(queue).await?;
    let plan = lib.delete_plan(queue)?;
    let mut cm = b.conn.get().await?;
    progress.set_total(Some(ids.len() as u64));
    progress.phase("deleting");
    let mut report = DeleteReport::default();
    for chunk in ids.chunks(BATCH) {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let args: Vec<String> = plan.prefix.iter().chain(chunk).cloned().collect();
        let v = plan
            .script
            .run(&mut cm, std::slice::from_ref(&plan.key), &args)
            .await?;
        b.calls.bump("delete batch");
        let n = as_i64(&v).unwrap_or(0).max(0) as u64;
        report.deleted += n;
        report.missing += chunk.len() as u64 - n.min(chunk.len() as u64);
        progress.add_done(n);
    }
    Ok(report)
}
