//! Sidekiq's retry (SortedEntry#retry from the dead or retry set to each job's own queue) and
//! clear (Sidekiq::Queue#clear, SortedSet#clear).

use ::redis::Value;

use super::{Key, Sidekiq};
use crate::redis::conn::map_err;
use crate::redis::library::Batch;
use crate::redis::RedisBackend;
use crate::{OpProgress, Result};
use qdeck_model::domain::PurgeReport;

pub(super) async fn retry_batch(lib: &Sidekiq, set: &str, batch: Batch<'_>) -> Result<Value> {
    let keys = vec![lib.key(set), lib.key("queues")];
    let now = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
    let mut args = vec![lib.ns.clone(), format!("{now:.6}"), batch.n.to_string()];
    args.extend(batch.ids.iter().cloned());
    lib.scripts.retry.run(batch.cm, &keys, &args).await
}

pub(super) async fn purge(
    lib: &Sidekiq,
    b: &RedisBackend,
    key: &Key,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let cm = &mut b.conn.get().await?;
    let (n, note) = match key {
        Key::Queue(q) => {
            // As Sidekiq::Queue#clear: the list goes and the queue leaves the `queues` set.
            let list = lib.key(&format!("queue:{q}"));
            let (n, _, _): (u64, u64, u64) = ::redis::pipe()
                .atomic()
                .llen(&list)
                .del(&list)
                .srem(lib.key("queues"), q)
                .query_async(cm)
                .await
                .map_err(map_err)?;
            (n, "queue cleared (Sidekiq::Queue#clear)")
        }
        sorted => {
            let set = lib.key(sorted.set().unwrap_or("schedule"));
            let (n, _): (u64, u64) = ::redis::pipe()
                .atomic()
                .zcard(&set)
                .del(&set)
                .query_async(cm)
                .await
                .map_err(map_err)?;
            (n, "sorted set cleared (as Sidekiq's SortedSet#clear)")
        }
    };
    progress.add_done(n);
    Ok(PurgeReport {
        purged: Some(n),
        note: Some(note.into()),
    })
}
