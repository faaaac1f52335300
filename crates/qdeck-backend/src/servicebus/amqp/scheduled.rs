//! Messages addressed by sequence number on `$management`: cancelling scheduled ones, and
//! receiving deferred ones (which no receiver gets again otherwise) under a lock.

use fe2o3_amqp::types::primitives::{Array, Value};

use super::convert::AmqpMessage;
use super::peek::messages_of;
use super::Amqp;
use crate::Result;
use qdeck_model::sanitize;

fn seq_array(seqs: &[i64]) -> Value {
    Value::Array(Array::from(
        seqs.iter().map(|n| Value::Long(*n)).collect::<Vec<_>>(),
    ))
}

/// `com.microsoft:cancel-scheduled-message`: the scheduled messages with these sequence
/// numbers are removed before they become due.
pub async fn cancel(amqp: &Amqp, entity: &str, seqs: &[i64]) -> Result<()> {
    let what = format!(
        "cancelling scheduled messages of {}",
        sanitize::clean(entity)
    );
    amqp.request(
        entity,
        "com.microsoft:cancel-scheduled-message",
        vec![("sequence-numbers", seq_array(seqs))],
        &what,
    )
    .await
    .map(|_| ())
}

/// `com.microsoft:receive-by-sequence-number` in peek-lock: the deferred messages with these
/// sequence numbers, each with its lock token (settled with `receive::settle_by_token`).
pub async fn receive_deferred(
    amqp: &Amqp,
    entity: &str,
    seqs: &[i64],
) -> Result<Vec<(AmqpMessage, Option<uuid::Uuid>)>> {
    let what = format!("receiving deferred messages of {}", sanitize::clean(entity));
    amqp.bump("amqp.receive-by-sequence-number", 1);
    let answer = amqp
        .request(
            entity,
            "com.microsoft:receive-by-sequence-number",
            vec![
                ("sequence-numbers", seq_array(seqs)),
                // 1 = peek-lock (0 would remove them as they are sent).
                ("receiver-settle-mode", Value::Uint(1)),
            ],
            &what,
        )
        .await?;
    messages_of(&answer)
}
