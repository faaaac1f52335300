//! Browse over AMQP without consuming: basic.get without ack, then one nack(multiple,
//! requeue) and a channel close (which requeues anything left). The side effect (redelivered
//! flag; quorum delivery count +1) is declared in the capabilities; quorum queues with a
//! delivery limit are refused unless forced.

use lapin::options::{BasicGetOptions, BasicNackOptions};

use super::conn::amqp_error_needing;
use super::headers::{
    delivery_count, header, message_id, parse_dead_letter, property_list, split_headers, to_value,
};
use super::version::effective_delivery_limit;
use super::RabbitBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Deepest a browse reaches (cursor offset + page): each page re-reads the messages before it.
pub const MAX_WINDOW: usize = 5000;

pub async fn browse(b: &RabbitBackend, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let (skip, max) = window(req)?;
    let (vhost, name) = b.resolve(queue);
    let limit = counted_limit(b, queue, req).await?;
    let fetched = fetch_and_return(b, queue, (&vhost, &name), skip + max).await?;
    Ok(page_of(fetched, queue, skip, max, limit))
}

/// Messages to pass over (the cursor) and to show: `(skip, max)`.
fn window(req: &BrowseRequest) -> Result<(usize, usize)> {
    let skip: usize = match &req.cursor {
        None => 0,
        Some(c) => c
            .parse()
            .map_err(|_| BackendError::Invalid(format!("bad browse cursor '{c}'")))?,
    };
    let max = req.max.clamp(1, MAX_WINDOW);
    // qdeck's own bound, not a risk to the messages: `--force` does not lift it.
    if skip + max > MAX_WINDOW {
        return Err(BackendError::Refused(format!(
            "browsing past the first {MAX_WINDOW} messages would hold too many unacknowledged messages"
        )));
    }
    Ok((skip, max))
}

/// The delivery limit a browse counts against (a quorum queue's), after refusing what must be
/// refused: streams, and unless forced, a counted limit or a queue whose type is unknown.
async fn counted_limit(
    b: &RabbitBackend,
    queue: &QueueId,
    req: &BrowseRequest,
) -> Result<Option<u32>> {
    let (row, v) = tokio::join!(b.queue_row(queue), b.broker_version(false));
    match row {
        Ok(row) => {
            if row.kind() == QueueKind::Stream {
                return Err(BackendError::Unsupported(
                    "browsing streams is not supported (they need a stream consumer with an offset)".into(),
                ));
            }
            let limit = effective_delivery_limit(&row, v);
            if let Some(d) = limit.filter(|d| d.browse_counts) {
                if !req.force {
                    return Err(BackendError::RefusedUnlessForced(format!(
                        "'{queue}' is a quorum queue with delivery limit {}: on RabbitMQ {} browsing returns each message with nack+requeue, which adds one to its delivery count, and a message reaching the limit is dead-lettered or dropped; use --force to browse anyway",
                        d.describe(v),
                        v.map_or_else(|| "(version unknown)".to_string(), |v| v.to_string())
                    )));
                }
            }
            Ok(limit.filter(|d| d.browse_counts).map(|d| d.limit))
        }
        Err(
            e
            @ (BackendError::NotFound(_) | BackendError::Auth(_) | BackendError::Forbidden { .. }),
        ) => Err(e),
        // Management API down: the queue type is unknown, so only a forced browse proceeds.
        Err(e) if !req.force => Err(BackendError::RefusedUnlessForced(format!(
            "cannot tell whether '{queue}' has a delivery limit ({e}); use --force to browse anyway"
        ))),
        Err(_) => Ok(None),
    }
}

/// What a browse fetched (and has already returned to the queue).
struct Fetched {
    got: Vec<lapin::message::Delivery>,
    /// Messages the broker said were left behind the last one fetched.
    remaining: u32,
}

/// Get up to `n` messages without ack, then give them all back and wait until the queue
/// counts them again. An error after some were fetched still shows those.
async fn fetch_and_return(
    b: &RabbitBackend,
    queue: &QueueId,
    (vhost, name): (&str, &str),
    n: usize,
) -> Result<Fetched> {
    let ch = b.pool.channel(vhost).await?;
    b.calls.bump("amqp:basic.get");
    let mut got = Vec::new();
    let mut last_tag = None;
    let mut remaining = 0u32;
    let mut error = None;
    for _ in 0..n {
        match ch
            .basic_get(name.into(), BasicGetOptions { no_ack: false })
            .await
        {
            Ok(Some(m)) => {
                remaining = m.message_count;
                last_tag = Some(m.delivery.delivery_tag);
                got.push(m.delivery);
            }
            Ok(None) => {
                remaining = 0;
                break;
            }
            Err(e) => {
                error = Some(amqp_error_needing(
                    &e,
                    &format!("browse '{queue}'"),
                    &format!("read on queue {name} in vhost {vhost}"),
                ));
                break;
            }
        }
    }
    b.calls
        .bump_by("amqp:basic.get", got.len().saturating_sub(1) as u64);
    let first = got.iter().filter(|d| !d.redelivered).count();
    b.own_gets
        .record(queue, got.len() as u64, first as u64, now_ms());
    // Return everything we hold, whatever happened above; closing the channel requeues too.
    if let Some(tag) = last_tag {
        let _ = ch
            .basic_nack(
                tag,
                BasicNackOptions {
                    multiple: true,
                    requeue: true,
                },
            )
            .await;
    }
    // The broker requeues asynchronously (quorum queues through their log): wait, briefly,
    // until the queue counts them again, so "browse returned" means "messages are back".
    if !got.is_empty() {
        super::delete::wait_requeued(b, &ch, name, remaining as u64 + got.len() as u64).await;
    }
    let _ = ch.close(200, "browse done".into()).await;
    if let Some(e) = error {
        if got.is_empty() {
            return Err(e);
        }
    }
    Ok(Fetched { got, remaining })
}

/// The page from what was fetched: the messages past `skip`, the next cursor, and the note
/// saying what the browse did to them.
fn page_of(
    Fetched { got, remaining }: Fetched,
    queue: &QueueId,
    skip: usize,
    max: usize,
    limit: Option<u32>,
) -> Page {
    let returned = got.len();
    let mut at_limit = 0usize;
    let messages: Vec<Message> = got
        .into_iter()
        .enumerate()
        .skip(skip)
        .map(|(pos, mut d)| {
            let body = std::mem::take(&mut d.data);
            let m = message_of(&d, body, pos as i64);
            if let (Some(l), Some(c)) = (limit, m.receive_count) {
                if c + 1 >= l as u64 {
                    at_limit += 1;
                }
            }
            m
        })
        .collect();
    let next = if returned == skip + max && remaining > 0 {
        Some((skip + max).to_string())
    } else {
        None
    };
    let mut note = format!(
        "{returned} message(s) were fetched and returned to '{queue}' with nack+requeue: their redelivered flag is now set"
    );
    if limit.is_some() {
        note.push_str("; their quorum delivery count went up by one");
    }
    if at_limit > 0 {
        note.push_str(&format!(
            "; {at_limit} message(s) are at or next to the delivery limit and will be dead-lettered on their next return"
        ));
    }
    Page {
        messages,
        next,
        effect_note: Some(note),
    }
}

/// A delivery as qdeck shows it (browse) and tests it (a one-pass filtered redrive): `body` is
/// the delivery's data, taken out by the caller so a redrive can hand it back for the copy.
pub(super) fn message_of(d: &lapin::message::Delivery, body: Vec<u8>, seq: i64) -> Message {
    let p = &d.properties;
    let (headers, broker) = split_headers(p);
    let mut meta = vec![
        ("exchange".to_string(), Value::str(d.exchange.as_str())),
        (
            "routing-key".to_string(),
            Value::str(d.routing_key.as_str()),
        ),
        ("redelivered".to_string(), Value::Bool(d.redelivered)),
    ];
    meta.extend(broker);
    Message {
        id: message_id(p, &body),
        seq: Some(seq),
        enqueued_ms: p
            .timestamp()
            .map(|t| (t.min(i64::MAX as u64 / 1000) as i64) * 1000),
        receive_count: delivery_count(p),
        key: header(p, "qdeck-key").map(|v| to_value(v).text()),
        properties: property_list(p),
        headers,
        meta,
        body_null: false,
        dead_letter: parse_dead_letter(p),
        body,
    }
}
