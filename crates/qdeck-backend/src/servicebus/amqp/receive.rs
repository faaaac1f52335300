//! Receiving with a lock (peek-lock: the broker locks each message until it is completed,
//! abandoned or the lock expires, and counts the delivery) or without (receive-and-delete),
//! settlement by disposition on the receiving link, and lock renewal and settlement by lock
//! token on `$management` for when the link is gone.

use std::time::Duration;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::types::messaging::{Body, Modified};
use fe2o3_amqp::types::primitives::{Array, Value};
use fe2o3_amqp::Receiver;

use super::convert::{self, AmqpMessage};
use super::errors::link_error;
use super::{Amqp, Mode};
use crate::Result;
use qdeck_model::sanitize;

/// A message held under a lock (or already removed, for receive-and-delete).
pub struct Locked {
    pub msg: AmqpMessage,
    pub token: Option<uuid::Uuid>,
    info: DeliveryInfo,
}

pub struct LockReceiver {
    rx: Receiver,
    what: String,
}

impl LockReceiver {
    /// A receiver on `entity`; credit is granted per `batch`, so a peek-lock receiver locks
    /// only what it asked for.
    pub async fn open(amqp: &Amqp, entity: &str, mode: Mode) -> Result<LockReceiver> {
        Self::open_session(amqp, entity, mode, None).await
    }

    /// A receiver on one session of a session-enabled entity (`session`), or on the entity.
    pub async fn open_session(
        amqp: &Amqp,
        entity: &str,
        mode: Mode,
        session: Option<&str>,
    ) -> Result<LockReceiver> {
        Ok(LockReceiver {
            rx: amqp.receiver(entity, mode, session, None).await?,
            what: format!("receiving from {}", sanitize::clean(entity)),
        })
    }

    /// The next message, or `None` when none came within `wait`.
    pub async fn next(&mut self, wait: Duration) -> Result<Option<Locked>> {
        match tokio::time::timeout(wait, self.rx.recv::<Body<Value>>()).await {
            Err(_) => Ok(None),
            Ok(Err(e)) => Err(link_error(e, &self.what)),
            Ok(Ok(d)) => {
                let (info, msg) = d.into_parts();
                let token = convert::lock_token_of_tag(info.delivery_tag());
                Ok(Some(Locked { msg, token, info }))
            }
        }
    }

    /// Up to `n` messages: waits `first` for the first one, then takes what arrives within
    /// `rest` of each other. Where the link fails after some arrived, those are returned (they
    /// are locked, and settle by lock token) and the next call meets the failure.
    pub async fn batch(
        &mut self,
        n: usize,
        first: Duration,
        rest: Duration,
    ) -> Result<Vec<Locked>> {
        self.rx
            .set_credit(u32::try_from(n).unwrap_or(u32::MAX))
            .await
            .map_err(|e| link_error(e, &self.what))?;
        let mut out = Vec::new();
        while out.len() < n {
            let wait = if out.is_empty() { first } else { rest };
            match self.next(wait).await {
                Ok(Some(l)) => out.push(l),
                Ok(None) => break,
                Err(_) if !out.is_empty() => break,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Complete: the broker removes the message.
    pub async fn complete(&self, l: &Locked) -> Result<()> {
        self.rx
            .accept(l.info.clone())
            .await
            .map_err(|e| link_error(e, &self.what))
    }

    /// Abandon: the lock is released and the message can be received again (its delivery
    /// count stays raised).
    pub async fn abandon(&self, l: &Locked) -> Result<()> {
        let modified = Modified {
            delivery_failed: Some(true),
            undeliverable_here: None,
            message_annotations: None,
        };
        self.rx
            .modify(l.info.clone(), modified)
            .await
            .map_err(|e| link_error(e, &self.what))
    }

    /// Abandon every message given, reporting how many could not be.
    pub async fn abandon_all(&self, held: &[Locked]) -> usize {
        let mut failed = 0;
        for l in held {
            if self.abandon(l).await.is_err() {
                failed += 1;
            }
        }
        failed
    }

    pub async fn close(self) {
        // A link the broker already detached may never answer our detach.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.rx.close()).await;
    }
}

fn token_array(tokens: &[uuid::Uuid]) -> Value {
    Value::Array(Array::from(
        tokens
            .iter()
            .map(|t| Value::Uuid((*t.as_bytes()).into()))
            .collect::<Vec<_>>(),
    ))
}

/// Renew the locks of `tokens` on `entity` (`com.microsoft:renew-lock`).
pub async fn renew_locks(amqp: &Amqp, entity: &str, tokens: &[uuid::Uuid]) -> Result<()> {
    if tokens.is_empty() {
        return Ok(());
    }
    let what = format!("renewing locks on {}", sanitize::clean(entity));
    amqp.request(
        entity,
        "com.microsoft:renew-lock",
        vec![("lock-tokens", token_array(tokens))],
        &what,
    )
    .await
    .map(|_| ())
}

/// Settle by lock token through `$management` (`com.microsoft:update-disposition`), for when
/// the link that received the messages is gone: `completed`, `abandoned` or `suspended`
/// (dead-lettered).
pub async fn settle_by_token(
    amqp: &Amqp,
    entity: &str,
    tokens: &[uuid::Uuid],
    status: &str,
) -> Result<()> {
    let what = format!("settling messages of {}", sanitize::clean(entity));
    amqp.request(
        entity,
        "com.microsoft:update-disposition",
        vec![
            ("disposition-status", Value::String(status.to_string())),
            ("lock-tokens", token_array(tokens)),
        ],
        &what,
    )
    .await
    .map(|_| ())
}
