//! RQ's requeue and purge, each batch one Lua script run (scripts.rs). The batching,
//! pacing, cancel and report are mutate.rs's, shared with BullMQ and Sidekiq.

use ::redis::Value;

use super::jobs::rq_time_text;
use super::listing::{queue_key, registry_key, JOB_PREFIX, QUEUES, QUEUE_PREFIX};
use super::Rq;
use crate::redis::library::{purged, remove_batches, Batch};
use crate::redis::RedisBackend;
use crate::{OpProgress, Result};
use qdeck_model::domain::*;

const PURGE_BATCH: u64 = 1000;

/// Requeue up to `n` jobs of `queue`'s failed registry (the ids given, else the first ones
/// after `skip` unreadable jobs left by earlier batches). The reply is
/// `{moved, unreadable or missing}`.
pub(super) async fn requeue_batch(lib: &Rq, queue: &str, batch: Batch<'_>) -> Result<Value> {
    let now = now_ms();
    let keys = vec![registry_key("failed", queue), QUEUES.to_string()];
    let mut args = vec![
        JOB_PREFIX.to_string(),
        QUEUE_PREFIX.to_string(),
        rq_time_text(now),
        now.to_string(),
        batch.n.to_string(),
        batch.skip.to_string(),
    ];
    args.extend(batch.ids.iter().cloned());
    lib.scripts.requeue.run(batch.cm, &keys, &args).await
}

/// Empty a queue (as Queue#empty: every job popped with its job hash) or its failed registry
/// (every job out of it with its hash and results), a batch per script run.
pub(super) async fn purge(
    lib: &Rq,
    b: &RedisBackend,
    queue: &str,
    failed: bool,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let (key, kind) = if failed {
        (registry_key("failed", queue), "zset")
    } else {
        (queue_key(queue), "list")
    };
    let args = [
        JOB_PREFIX.to_string(),
        PURGE_BATCH.to_string(),
        kind.to_string(),
    ];
    let mut cm = b.conn.get().await?;
    let (n, cancelled) =
        remove_batches(b, &mut cm, &lib.scripts.remove, &key, &args, progress).await?;
    let note = if failed {
        "failed registry emptied: job hashes and results removed with it"
    } else {
        "queue emptied (as RQ's Queue#empty): job hashes removed with it; started, scheduled and deferred jobs stay"
    };
    Ok(purged(n, cancelled, note))
}
