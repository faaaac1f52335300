//! Sending: unsettled transfers whose outcome the broker settles (accepted = stored), many in
//! flight at once on one link. A message counts as sent only once the broker accepted it.

use fe2o3_amqp::link::SendError;
use fe2o3_amqp::types::messaging::Outcome;
use fe2o3_amqp::Sender;
use tokio_util::sync::CancellationToken;

use super::convert::AmqpMessage;
use super::errors::link_error;
use super::Amqp;
use crate::{BackendError, Result};
use qdeck_model::sanitize;

/// Transfers in flight on one link before the oldest outcome is awaited.
const IN_FLIGHT: usize = 128;

/// What the broker's outcome means for one message.
pub fn outcome(r: std::result::Result<Outcome, SendError>, what: &str) -> Result<()> {
    match r {
        Ok(Outcome::Accepted(_)) => Ok(()),
        Ok(Outcome::Rejected(rej)) => Err(match rej.error {
            Some(e) => link_error(e, what),
            None => BackendError::Invalid(format!("{what}: the broker rejected the message")),
        }),
        Ok(other) => Err(BackendError::Protocol(format!(
            "{what}: the broker did not store the message ({other:?})"
        ))),
        Err(e) => Err(link_error(e, what)),
    }
}

/// A sending link kept for a run (redrive, send_many).
pub struct Link {
    sender: Sender,
    what: String,
}

impl Link {
    pub async fn open(amqp: &Amqp, entity: &str) -> Result<Link> {
        Ok(Link {
            sender: amqp.sender(entity).await?,
            what: format!("sending to {}", sanitize::clean(entity)),
        })
    }

    /// Send one message and wait until the broker accepted it.
    pub async fn send(&mut self, m: AmqpMessage) -> Result<()> {
        let r = self.sender.send(m).await;
        outcome(r, &self.what)
    }

    /// Send every message, up to `IN_FLIGHT` at once; one result per message tried, in order.
    /// A failure to hand a message to the link (the link or connection is gone) ends the run.
    pub async fn send_all(&mut self, msgs: Vec<AmqpMessage>) -> Vec<Result<()>> {
        self.send_all_until(msgs, &CancellationToken::new()).await
    }

    /// `send_all`, handing no more messages to the link once `stop` is cancelled (those
    /// already handed over are waited for): fewer results than messages then.
    pub async fn send_all_until(
        &mut self,
        msgs: Vec<AmqpMessage>,
        stop: &CancellationToken,
    ) -> Vec<Result<()>> {
        let mut out = Vec::with_capacity(msgs.len());
        let mut pending = std::collections::VecDeque::new();
        for m in msgs {
            if stop.is_cancelled() {
                break;
            }
            if pending.len() >= IN_FLIGHT {
                if let Some(f) = pending.pop_front() {
                    out.push(outcome(f.await, &self.what));
                }
            }
            match self.sender.send_batchable(m).await {
                Ok(f) => pending.push_back(f),
                Err(e) => {
                    for f in pending.drain(..) {
                        out.push(outcome(f.await, &self.what));
                    }
                    out.push(Err(link_error(e, &self.what)));
                    return out;
                }
            }
        }
        for f in pending {
            out.push(outcome(f.await, &self.what));
        }
        out
    }

    pub async fn close(self) {
        let _ = self.sender.close().await;
    }
}

/// Send one message on a link of its own.
pub async fn send_one(amqp: &Amqp, entity: &str, m: AmqpMessage) -> Result<()> {
    let mut link = Link::open(amqp, entity).await?;
    amqp.bump("amqp.send", 1);
    let r = link.send(m).await;
    link.close().await;
    r
}
