//! Purge (`queue.purge`: ready messages only).

use lapin::options::QueuePurgeOptions;

use super::conn::amqp_error_needing;
use super::RabbitBackend;
use crate::{OpProgress, Result};
use qdeck_model::domain::*;

pub const PURGE_NOTE: &str = "unacknowledged messages (held by consumers) are not purged";

pub async fn purge(
    b: &RabbitBackend,
    queue: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let (vhost, name) = b.resolve(queue);
    progress.phase("purging");
    let ch = b.pool.channel(&vhost).await?;
    b.calls.bump("amqp:queue.purge");
    let n = ch
        .queue_purge(name.as_str().into(), QueuePurgeOptions::default())
        .await
        .map_err(|e| {
            amqp_error_needing(
                &e,
                &format!("purge '{queue}'"),
                &format!("read on queue {name} in vhost {vhost}"),
            )
        })?;
    let _ = ch.close(200, "purge done".into()).await;
    progress.add_done(n as u64);
    progress.phase("done");
    Ok(PurgeReport {
        purged: Some(n as u64),
        note: Some(PURGE_NOTE.to_string()),
    })
}

/// Publishing through the default exchange needs write on it.
pub fn write_right(vhost: &str) -> String {
    format!("write on exchange amq.default in vhost {vhost}")
}
