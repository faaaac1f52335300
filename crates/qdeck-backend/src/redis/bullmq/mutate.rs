//! BullMQ's retry (Job#retry of failed jobs into their own queue) and drain/clean, each batch
//! one run of a script that follows BullMQ's own.

use ::redis::Value;

use super::Bullmq;
use crate::redis::library::{purged, remove_batches, Batch};
use crate::redis::RedisBackend;
use crate::{OpProgress, Result};
use qdeck_model::domain::PurgeReport;

/// Jobs per purge script run.
const PURGE_BATCH: u64 = 1000;

pub(super) async fn retry_batch(lib: &Bullmq, q: &str, batch: Batch<'_>) -> Result<Value> {
    let keys: Vec<String> = [
        "failed",
        "wait",
        "meta",
        "active",
        "marker",
        "prioritized",
        "pc",
        "events",
    ]
    .iter()
    .map(|k| lib.key(q, k))
    .collect();
    let mut args = vec![lib.job_prefix(q), batch.n.to_string()];
    args.extend(batch.ids.iter().cloned());
    lib.scripts.retry.run(batch.cm, &keys, &args).await
}

/// Drains a BullMQ queue (waiting, paused, prioritized) or cleans its failed set, removing
/// the job hashes with the ids, in batches.
pub(super) async fn purge(
    lib: &Bullmq,
    b: &RedisBackend,
    q: &str,
    failed: bool,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let mut cm = b.conn.get().await?;
    let mut total = 0u64;
    let parts: &[(&str, &str)] = if !failed {
        &[
            ("wait", "list"),
            ("paused", "list"),
            ("prioritized", "zset"),
        ]
    } else {
        &[("failed", "zset")]
    };
    let note = if !failed {
        "drained: waiting and prioritized jobs removed with their job hashes; active and delayed jobs stay"
    } else {
        "failed set cleaned, job hashes removed"
    };
    for (key, kind) in parts {
        let args = [lib.job_prefix(q), PURGE_BATCH.to_string(), kind.to_string()];
        let (n, cancelled) = remove_batches(
            b,
            &mut cm,
            &lib.scripts.remove,
            &lib.key(q, key),
            &args,
            progress,
        )
        .await?;
        total += n;
        if cancelled {
            return Ok(purged(total, true, note));
        }
    }
    Ok(purged(total, false, note))
}
