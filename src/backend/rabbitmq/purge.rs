//! Purge (`queue.purge`: ready messages only) and send (publish with a confirm).

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueuePurgeOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::BasicProperties;

use super::conn::{amqp_error, amqp_error_needing};
use super::RabbitBackend;
use crate::backend::{BackendError, OpProgress, Result};
use crate::domain::*;

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

pub async fn send(
    b: &RabbitBackend,
    queue: &QueueId,
    msg: OutgoingMessage,
) -> Result<Option<String>> {
    if msg.delay.is_some() {
        return Err(BackendError::Unsupported(
            "delayed messages need the delayed-message exchange plugin, which qdeck does not use"
                .into(),
        ));
    }
    let (vhost, name) = b.resolve(queue);
    let ch = b.pool.channel(&vhost).await?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "confirm.select"))?;
    let id = uuid::Uuid::new_v4().to_string();
    let mut headers = FieldTable::default();
    for (k, v) in &msg.headers {
        headers.insert(
            k.as_str().into(),
            AMQPValue::LongString(LongString::from(v.as_bytes())),
        );
    }
    if let Some(k) = &msg.key {
        headers.insert(
            "qdeck-key".into(),
            AMQPValue::LongString(LongString::from(k.as_bytes())),
        );
    }
    let props = BasicProperties::default()
        .with_message_id(id.as_str().into())
        .with_timestamp(chrono::Utc::now().timestamp().max(0) as u64)
        .with_delivery_mode(2)
        .with_headers(headers);
    b.calls.bump("amqp:basic.publish");
    let confirm = ch
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
        .map_err(|e| {
            amqp_error_needing(&e, &format!("publish to '{queue}'"), &write_right(&vhost))
        })?
        .await
        .map_err(|e| {
            amqp_error_needing(&e, &format!("publish to '{queue}'"), &write_right(&vhost))
        })?;
    let _ = ch.close(200, "send done".into()).await;
    match confirm {
        lapin::Confirmation::Ack(Some(_)) => Err(BackendError::NotFound(format!(
            "queue '{queue}' not found: the message was returned unroutable"
        ))),
        lapin::Confirmation::Ack(None) | lapin::Confirmation::NotRequested => Ok(Some(id)),
        lapin::Confirmation::Nack(_) => Err(BackendError::Refused(format!(
            "the broker refused the message for '{queue}' (nack)"
        ))),
    }
}

/// Publishing through the default exchange needs write on it.
pub fn write_right(vhost: &str) -> String {
    format!("write on exchange amq.default in vhost {vhost}")
}
