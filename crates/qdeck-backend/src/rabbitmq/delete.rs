//! Delete chosen messages by id (a `purge --where` selection, edit-and-resend). AMQP has no
//! delete by id, so this takes messages with basic.get (manual ack), acks those whose id (the
//! one browse shows) was chosen and holds the others unacknowledged until the pass ends, so
//! none is read twice; then one nack(multiple, requeue) returns them. Returned messages carry
//! the redelivered flag and, on classic queues, go to the back of the queue; on quorum queues
//! their delivery count goes up by one, so a quorum queue with a delivery limit is refused.

use std::collections::HashSet;

use lapin::options::{BasicAckOptions, BasicGetOptions, BasicNackOptions, QueueDeclareOptions};
use lapin::types::FieldTable;

use super::conn::{amqp_error, amqp_error_needing};
use super::headers::message_id;
use super::version::effective_delivery_limit;
use super::RabbitBackend;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{DeleteReport, QueueId, QueueKind};

/// Most messages one pass reads (all but the chosen ones held unacknowledged meanwhile).
pub const MAX_SCAN: usize = 10_000;

pub async fn delete_ids(
    b: &RabbitBackend,
    queue: &QueueId,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    refuse_unsafe_queue(b, queue).await?;
    let (vhost, name) = b.resolve(queue);

    let mut wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    progress.set_total(Some(wanted.len() as u64));
    progress.phase("reading");
    let ch = b.pool.channel(&vhost).await?;
    let mut r = DeleteReport::default();
    let mut held = 0u64;
    let mut last_held = None;
    let mut remaining = 0u32;
    let mut error = None;
    let mut read = 0usize;
    while !wanted.is_empty() && read < MAX_SCAN {
        if progress.cancelled() {
            r.cancelled = true;
            break;
        }
        b.calls.bump("amqp:basic.get");
        let m = match ch
            .basic_get(name.as_str().into(), BasicGetOptions { no_ack: false })
            .await
        {
            Ok(Some(m)) => m,
            Ok(None) => {
                remaining = 0;
                break;
            }
            Err(e) => {
                error = Some(amqp_error_needing(
                    &e,
                    &format!("delete from '{queue}'"),
                    &format!("read on queue {name} in vhost {vhost}"),
                ));
                break;
            }
        };
        read += 1;
        remaining = m.message_count;
        let d = m.delivery;
        let mid = message_id(&d.properties, &d.data);
        if wanted.remove(mid.as_str()) {
            b.calls.bump("amqp:basic.ack");
            if let Err(e) = ch
                .basic_ack(d.delivery_tag, BasicAckOptions { multiple: false })
                .await
            {
                error = Some(amqp_error(&e, &format!("ack in '{queue}'")));
                break;
            }
            r.deleted += 1;
            progress.update(|s| s.done = r.deleted);
        } else {
            held += 1;
            last_held = Some(d.delivery_tag);
        }
    }
    // Return everything held, whatever happened above; closing the channel requeues too.
    if let Some(tag) = last_held {
        b.calls.bump("amqp:basic.nack");
        let _ = ch
            .basic_nack(
                tag,
                BasicNackOptions {
                    multiple: true,
                    requeue: true,
                },
            )
            .await;
        wait_requeued(b, &ch, &name, remaining as u64 + held).await;
    }
    let _ = ch.close(200, "delete done".into()).await;
    if let Some(e) = error {
        if r.deleted == 0 {
            return Err(e);
        }
        tracing::warn!("delete from '{queue}' stopped early: {e}");
        r.cancelled = true;
    }
    // After a cancelled or failed pass the ids not reached are not known to be gone.
    if !r.cancelled {
        r.missing = wanted.len() as u64;
        if read >= MAX_SCAN && !wanted.is_empty() {
            tracing::warn!("delete from '{queue}': stopped after {MAX_SCAN} messages");
        }
    }
    progress.phase(if r.cancelled { "cancelled" } else { "done" });
    Ok(r)
}

/// A queue this pass could harm is refused before anything is read: a stream cannot delete,
/// and a quorum queue with a delivery limit counts each returned message as a delivery.
async fn refuse_unsafe_queue(b: &RabbitBackend, queue: &QueueId) -> Result<()> {
    let (row, v) = tokio::join!(b.queue_row(queue), b.broker_version(false));
    let row = match row {
        Ok(row) => row,
        Err(
            e
            @ (BackendError::NotFound(_) | BackendError::Auth(_) | BackendError::Forbidden { .. }),
        ) => return Err(e),
        Err(e) => {
            return Err(BackendError::Refused(format!(
                "cannot tell whether '{queue}' has a delivery limit ({e}); not deleting"
            )))
        }
    };
    if row.kind() == QueueKind::Stream {
        return Err(BackendError::Unsupported(
            "deleting chosen messages from a stream is not possible (streams are append-only)"
                .into(),
        ));
    }
    if let Some(d) = effective_delivery_limit(&row, v).filter(|d| d.browse_counts) {
        return Err(BackendError::Refused(format!(
            "'{queue}' is a quorum queue with delivery limit {}: deleting chosen messages \
             returns every other message it passes with nack+requeue (delivery count +1), \
             which could dead-letter or drop messages nobody chose",
            d.describe(v)
        )));
    }
    Ok(())
}

/// The broker requeues asynchronously (quorum queues through their log): wait, at most 3 s,
/// until the queue counts `want` messages again, so "browse/delete returned" means "the
/// returned messages are back".
pub(super) async fn wait_requeued(b: &RabbitBackend, ch: &lapin::Channel, name: &str, want: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        b.calls.bump("amqp:queue.declare");
        match ch
            .queue_declare(
                name.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
        {
            Ok(q) if q.consumer_count() == 0 && (q.message_count() as u64) < want => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            _ => break,
        }
    }
}
