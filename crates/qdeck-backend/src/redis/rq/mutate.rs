//! RQ's requeue and purge, each batch one Lua script run (scripts.rs). The batching,
//! pacing, cancel and report are mutate.rs's, shared with BullMQ and Sidekiq.

use ::redis::aio::ConnectionManager;
use ::redis::Value;

use super::jobs::rq_time_text;
use super::listing::{queue_key, registry_key, JOB_PREFIX, QUEUES, QUEUE_PREFIX};
use crate::redis::figures::as_i64;
use crate::redis::RedisBackend;
use crate::{OpProgress, Result};
use qdeck_model::domain::*;

const PURGE_BATCH: u64 = 1000;

/// Requeue up to `n` jobs of `queue`'s failed registry (the ids in `chunk` when given, else
/// the first ones after `skip` unreadable jobs left by earlier batches). The reply is
/// `{moved, unreadable or missing}`.
pub async fn requeue_batch(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    queue: &str,
    n: u64,
    skip: u64,
    chunk: &[String],
) -> Result<Value> {
    let now = now_ms();
    let keys = vec![registry_key("failed", queue), QUEUES.to_string()];
    let mut args = vec![
        JOB_PREFIX.to_string(),
        QUEUE_PREFIX.to_string(),
        rq_time_text(now),
        now.to_string(),
        n.to_string(),
        skip.to_string(),
    ];
    args.extend(chunk.iter().cloned());
    b.scripts.rq_requeue.run(cm, &keys, &args).await
}

/// Empty a queue (as Queue#empty: every job popped with its job hash) or its failed registry
/// (every job out of it with its hash and results), a batch per script run.
pub async fn purge(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    queue: &str,
    failed: bool,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let (key, kind) = if failed {
        (registry_key("failed", queue), "zset")
    } else {
        (queue_key(queue), "list")
    };
    let mut purged = 0u64;
    loop {
        if progress.cancelled() {
            return Ok(PurgeReport {
                purged: Some(purged),
                note: Some("cancelled".into()),
            });
        }
        let v = b
            .scripts
            .rq_remove
            .run(
                cm,
                std::slice::from_ref(&key),
                &[
                    JOB_PREFIX.to_string(),
                    PURGE_BATCH.to_string(),
                    kind.to_string(),
                ],
            )
            .await?;
        b.calls.bump("purge batch");
        let n = as_i64(&v).unwrap_or(0).max(0) as u64;
        purged += n;
        progress.add_done(n);
        if n == 0 {
            break;
        }
    }
    let note = if failed {
        "failed registry emptied: job hashes and results removed with it"
    } else {
        "queue emptied (as RQ's Queue#empty): job hashes removed with it; started, scheduled and deferred jobs stay"
    };
    Ok(PurgeReport {
        purged: Some(purged),
        note: Some(note.into()),
    })
}
