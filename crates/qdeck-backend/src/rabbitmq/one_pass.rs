//! The limits of a one-pass filtered redrive (`redrive --where` on RabbitMQ). The pass
//! consumes the DLQ and keeps every message that does not match unacknowledged until it ends
//! (so none comes round twice), then closing the channel requeues them: they keep their body,
//! headers and properties and gain the redelivered flag, as after a browse.
//!
//! What that costs, and why the pass is capped:
//! - qdeck keeps only the delivery tag of a held message (the body is dropped once tested).
//!   The pass consumes on channels of at most 300 unacknowledged messages each (`LANE` in
//!   redrive.rs), one consumer at a time: once a lane holds half its prefetch, its consumer is
//!   cancelled and the next lane's starts, and deliveries are examined in queue order.
//!   Deliveries pushed but not yet tested are bounded by the prefetch credit left (a few
//!   hundred bodies), and a pass takes at most half the channels the connection may open
//!   (lanes grow past 300 when needed; a pass of `MAX_EXAMINED` opens under 1,000 of
//!   RabbitMQ's default channel_max of 2,047).
//! - The broker keeps every held message as unacknowledged on its channel until the pass
//!   ends, bodies included (it may page them to disk), and closes a channel whose oldest
//!   delivery stays unacknowledged past its `consumer_timeout` (30 min by default): the held
//!   messages then return early, nothing is lost, and the report carries the error.
//!
//! So a pass examines at most `MAX_EXAMINED` messages and `MAX_BYTES` of them; beyond, it is
//! refused before anything moves and `--limit` examines the first part of the queue.

use super::version::effective_delivery_limit;
use super::RabbitBackend;
use crate::{BackendError, MessageFilter, Result};
use qdeck_model::domain::{QueueId, QueueKind, RedriveRequest};

/// Most messages one pass examines (and may hold unacknowledged at once).
pub const MAX_EXAMINED: u64 = 250_000;
/// Most bytes of ready messages one pass examines (from the management API's average size).
pub const MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// What reading the non-matching messages does to them, for the confirmation.
pub const EFFECT: &str = "the messages that do not match are held unacknowledged until the pass ends and then returned with requeue: unchanged, except that they carry the redelivered flag (on quorum queues their delivery count goes up by one)";

/// Refusals before the pass: streams, a delivery limit the returns would count toward
/// (unless forced, as for a browse), an id filter on top of a predicate.
pub async fn check(b: &RabbitBackend, req: &RedriveRequest, f: &MessageFilter) -> Result<()> {
    if req.only_ids.is_some() {
        return Err(BackendError::Invalid(
            "a filtered redrive takes a predicate or chosen ids, not both".into(),
        ));
    }
    let queue = &req.source;
    let (row, v) = tokio::join!(b.queue_row(queue), b.broker_version(false));
    let row = match row {
        Ok(row) => row,
        Err(e @
(BackendError::NotFound(_) | BackendError::Auth(_) | BackendError::Forbidden {
.. })) => return Err(e),
        Err(_) if f.force => return Ok(()),
        Err(e) => {
            return Err(BackendError::RefusedUnlessForced(format!(
                "cannot tell whether '{queue}' has a delivery limit ({e}); use --force to redrive anyway"
            )))
        }
    };
    if row.kind() == QueueKind::Stream {
        return Err(BackendError::Unsupported(
            "a filtered redrive from a stream is not possible (streams are append-only)".into(),
        ));
    }
    if let Some(d) = effective_delivery_limit(&row, v).filter(|d| d.browse_counts) {
        if !f.force {
            return Err(BackendError::RefusedUnlessForced(format!(
                "'{queue}' is a quorum queue with delivery limit {}: a filtered redrive returns every message that does not match with requeue (delivery count +1), which could dead-letter or drop messages nobody chose; use --force to redrive anyway",
                d.describe(v)
            )));
        }
    }
    Ok(())
}

/// Refuse a pass over more than the caps allow, before anything moves.
pub async fn check_size(b: &RabbitBackend, queue: &QueueId, examine: u64) -> Result<()> {
    if examine > MAX_EXAMINED {
        return Err(BackendError::Refused(format!(
            "'{queue}' holds {examine} messages: a filtered redrive holds every message that does not match unacknowledged until its pass ends, at most {MAX_EXAMINED}; use --limit {MAX_EXAMINED} (or less) to examine the first part of the queue"
        )));
    }
    if let Some((bytes, msgs)) = b.queue_bytes(queue).await.filter(|(_, m)| *m > 0) {
        let est = (bytes / msgs).saturating_mul(examine);
        if est > MAX_BYTES {
            let fit = (MAX_BYTES / (bytes / msgs).max(1)).max(1);
            return Err(BackendError::Refused(format!(
                "'{queue}': the {examine} messages to examine hold about {} MiB: a filtered redrive holds every message that does not match unacknowledged until its pass ends, at most {} MiB; use --limit {fit} (or less) to examine the first part of the queue",
                est / (1024 * 1024),
                MAX_BYTES / (1024 * 1024)
            )));
        }
    }
    Ok(())
}
