//! Deleting chosen jobs (`purge --where`, `move`, edit-and-resend) from where failed jobs wait:
//! BullMQ's failed set, Sidekiq's dead, retry and schedule sets and RQ's failed registries
//! (with each job's hash and results, as Job#delete). Each batch is one Lua
//! script, atomic on the server, and touches only the jobs named: nothing else is read, leased
//! or counted. An id gone since the browse (retried, removed) is reported missing.

use super::figures::as_i64;
use super::{RedisBackend, Target};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{DeleteReport, QueueId};

/// Ids per script run: a Sidekiq set is read whole once per run, so few runs for many ids.
const BATCH: usize = 500;

/// Why deleting chosen jobs is refused on `queue`, when it is.
pub fn refusal(queue: &QueueId, t: Option<&Target>) -> Option<String> {
    match t {
        Some(Target::Celery(_)) => Some(format!("{queue}: {}", super::CELERY_NO_CHOSEN)),
        Some(Target::CeleryResults) => Some(format!("{queue}: {}", super::celery_results::READ_ONLY)),
        Some(Target::Bull(_) | Target::SkQueue(_) | Target::Rq(_)) => Some(format!(
            "{queue}: chosen jobs are deleted from a failed, dead, retry or schedule set only (a waiting job may be taken by a worker meanwhile); refused"
        )),
        _ => None,
    }
}

pub async fn delete_ids(
    b: &RedisBackend,
    queue: &QueueId,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let t = b.resolve(queue).await?;
    if let Some(why) = refusal(queue, Some(&t)) {
        return Err(BackendError::Refused(why));
    }
    b.refuse_if_read_only(&t)?;
    let (script, key, prefix) = match &t {
        Target::BullFailed(q) => (
            &b.scripts.bull_remove_ids,
            b.bkey(q, "failed"),
            Some(b.bjob_prefix(q)),
        ),
        Target::RqFailed(q) => (
            &b.scripts.rq_remove_ids,
            super::rq::listing::registry_key("failed", q),
            Some(super::rq::listing::JOB_PREFIX.to_string()),
        ),
        Target::SkDead => (&b.scripts.sidekiq_remove, b.skey("dead"), None),
        Target::SkRetry => (&b.scripts.sidekiq_remove, b.skey("retry"), None),
        _ => (&b.scripts.sidekiq_remove, b.skey("schedule"), None),
    };
    let mut cm = b.conn.get().await?;
    progress.set_total(Some(ids.len() as u64));
    progress.phase("deleting");
    let mut report = DeleteReport::default();
    for chunk in ids.chunks(BATCH) {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let args: Vec<String> = prefix.iter().chain(chunk).cloned().collect();
        let v = script
            .run(&mut cm, std::slice::from_ref(&key), &args)
            .await?;
        b.calls.bump("delete batch");
        let n = as_i64(&v).unwrap_or(0).max(0) as u64;
        report.deleted += n;
        report.missing += chunk.len() as u64 - n.min(chunk.len() as u64);
        progress.add_done(n);
    }
    Ok(report)
}
