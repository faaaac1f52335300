//! Send: publish through the default exchange with publisher confirms. A batch is published
//! on one channel with every confirm in flight at once, so it costs one round trip instead of
//! one per message (plus a channel opened and closed per message, as a lone send does).

use futures::future::join_all;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, LongString};
use lapin::{BasicProperties, Confirmation};

use super::conn::{amqp_error, amqp_error_needing};
use super::headers::{to_properties, to_table};
use super::purge::write_right;
use super::RabbitBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Properties of a sent message: those the message carries (an edited, copied or imported
/// message keeps its own id, time and delivery mode), typed headers, and the ordering key as
/// `qdeck-key`. A message without an id or time gets a fresh id, the time, and persistence.
/// `user_id` goes only when it is the connection's own user: RabbitMQ refuses any other.
fn properties(msg: &OutgoingMessage, id: &str, user: &str) -> Result<BasicProperties> {
    let mut headers = to_table(&msg.headers);
    if let Some(k) = &msg.key {
        headers.insert(
            "qdeck-key".into(),
            AMQPValue::LongString(LongString::from(k.as_bytes())),
        );
    }
    let own: Vec<(String, Value)> = msg
        .properties
        .iter()
        .filter(|(k, v)| k != "user_id" || v.text() == user)
        .cloned()
        .collect();
    let mut p = to_properties(&own, headers)?;
    if p.message_id().is_none() {
        p = p.with_message_id(id.into());
    }
    if p.timestamp().is_none() {
        p = p.with_timestamp(chrono::Utc::now().timestamp().max(0) as u64);
    }
    if p.delivery_mode().is_none() {
        p = p.with_delivery_mode(2);
    }
    Ok(p)
}

fn delayed_refusal() -> BackendError {
    BackendError::Unsupported(
        "delayed messages need the delayed-message exchange plugin, which qdeck does not use"
            .into(),
    )
}

/// What the broker's confirm says about one message.
fn outcome(c: Confirmation, queue: &QueueId, id: String) -> Result<Option<String>> {
    match c {
        Confirmation::Ack(Some(_)) => Err(BackendError::NotFound(format!(
            "queue '{queue}' not found: the message was returned unroutable"
        ))),
        Confirmation::Ack(None) | Confirmation::NotRequested => Ok(Some(id)),
        Confirmation::Nack(_) => Err(BackendError::Refused(format!(
            "the broker refused the message for '{queue}' (nack)"
        ))),
    }
}

pub async fn send_many(
    b: &RabbitBackend,
    queue: &QueueId,
    msgs: Vec<OutgoingMessage>,
) -> Vec<Result<Option<String>>> {
    // A delayed message is refused where it stands; the ones before it are sent.
    let sendable = msgs.iter().take_while(|m| m.delay.is_none()).count();
    let mut out = match publish_all(b, queue, &msgs[..sendable]).await {
        Ok(v) => v,
        Err(e) => return vec![Err(e)],
    };
    if sendable < msgs.len() && out.iter().all(Result::is_ok) {
        out.push(Err(delayed_refusal()));
    }
    out
}

/// Publish every message on one confirming channel, then wait for all confirms. An error
/// before any publish (no channel, no confirm mode) is the whole batch's.
async fn publish_all(
    b: &RabbitBackend,
    queue: &QueueId,
    msgs: &[OutgoingMessage],
) -> Result<Vec<Result<Option<String>>>> {
    if msgs.is_empty() {
        return Ok(Vec::new());
    }
    let (vhost, name) = b.resolve(queue);
    let ch = b.pool.channel(&vhost).await?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "confirm.select"))?;
    let needing = |e: &lapin::Error| {
        amqp_error_needing(e, &format!("publish to '{queue}'"), &write_right(&vhost))
    };
    let mut pending = Vec::with_capacity(msgs.len());
    let mut stopped = None;
    for msg in msgs {
        let props = match properties(msg, &uuid::Uuid::new_v4().to_string(), b.user()) {
            Ok(p) => p,
            Err(e) => {
                // Nothing after it is sent, as when the channel fails.
                stopped = Some(e);
                break;
            }
        };
        let id = props
            .message_id()
            .as_ref()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        b.calls.bump("amqp:basic.publish");
        match ch
            .basic_publish(
                "".into(),
                name.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &msg.body,
                props,
            )
            .await
        {
            Ok(confirm) => pending.push((id, confirm)),
            Err(e) => {
                // The channel is gone: nothing after this one can be sent on it.
                stopped = Some(needing(&e));
                break;
            }
        }
    }
    let (ids, confirms): (Vec<String>, Vec<_>) = pending.into_iter().unzip();
    let mut out: Vec<Result<Option<String>>> = join_all(confirms)
        .await
        .into_iter()
        .zip(ids)
        .map(|(c, id)| match c {
            Ok(c) => outcome(c, queue, id),
            // No confirm: the copy may or may not be there.
            Err(e) => Err(needing(&e)),
        })
        .collect();
    out.extend(stopped.map(Err));
    let _ = ch.close(200, "send done".into()).await;
    Ok(out)
}

pub async fn send(
    b: &RabbitBackend,
    queue: &QueueId,
    msg: OutgoingMessage,
) -> Result<Option<String>> {
    // A delayed message gets its refusal from `send_many`, as in a batch.
    send_many(b, queue, vec![msg])
        .await
        .pop()
        .unwrap_or_else(|| Err(BackendError::Other("the broker gave no answer".into())))
}
