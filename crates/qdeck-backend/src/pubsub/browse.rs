//! Browse: Pub/Sub has no peek. Messages are pulled, held until the page is full (so none is
//! shown twice), then nacked together (`modifyAckDeadline` 0): each counts one delivery
//! attempt, which the dialog and the CLI say before anything is pulled. Refused unless forced on
//! a subscription with a dead-letter policy: a browse at the last attempt would dead-letter.

use std::time::Duration;

use super::msg;
use super::names::Target;
use super::PubsubBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// The page size when the request gives none.
const DEFAULT_PAGE: usize = 50;
/// How long the first pull waits for messages; later ones wait less.
const FIRST_WAIT: Duration = Duration::from_secs(10);
const NEXT_WAIT: Duration = Duration::from_secs(2);

pub const EFFECT: &str = "Pub/Sub has no peek: browsing pulls each message and nacks it (modifyAckDeadline 0), which counts one delivery attempt per message shown";

pub async fn browse(b: &PubsubBackend, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let target = Target::parse(queue)?;
    let Target::Subscription { project, .. } = &target else {
        return Err(BackendError::Unsupported(format!(
            "{queue} is a topic: it holds no messages; browse one of its subscriptions"
        )));
    };
    let path = target.path();
    let sub = b.get_subscription(&path).await?;
    if let Some(d) = &sub.dead_letter_policy {
        if !req.force {
            return Err(BackendError::RefusedUnlessForced(format!(
                "{queue} dead-letters after {} delivery attempts; a browse counts one attempt per message and could push a message on its last attempt to the dead-letter topic (force to browse anyway)",
                d.max_delivery_attempts.max(5)
            )));
        }
    }
    let max = if req.max == 0 { DEFAULT_PAGE } else { req.max };
    let origin = b.policy_origin(&sub.topic).await;
    let mut got = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut wait = FIRST_WAIT;
    while got.len() < max {
        let batch = b.pull(&path, max - got.len(), wait).await;
        let batch = match batch {
            Ok(v) => v,
            Err(e) => {
                nack_all(b, &path, &got).await;
                return Err(e);
            }
        };
        if batch.is_empty() {
            break;
        }
        wait = NEXT_WAIT;
        for r in batch {
            let id = r
                .message
                .as_ref()
                .map(|m| m.message_id.clone())
                .unwrap_or_default();
            if seen.insert(id) {
                got.push(r);
            } else {
                // The same message again (redelivered within this browse): give it back now.
                let _ = b.modify_ack_deadline(&path, &[r.ack_id], 0).await;
            }
        }
    }
    nack_all(b, &path, &got).await;
    let messages: Vec<Message> = got
        .iter()
        .map(|r| msg::to_message(r, project, origin.as_ref()))
        .collect();
    let n = messages.len();
    Ok(Page {
        messages,
        next: None,
        effect_note: Some(format!(
            "{n} message{} pulled and nacked (modifyAckDeadline 0): each counted one delivery attempt",
            if n == 1 { "" } else { "s" }
        )),
    })
}

/// Give every held message back. A failure leaves them to come back when their ack deadline
/// passes (the subscription's, 10 s by default): nothing is lost either way.
async fn nack_all(b: &PubsubBackend, path: &str, got: &[super::proto::ReceivedMessage]) {
    let ids: Vec<String> = got.iter().map(|r| r.ack_id.clone()).collect();
    if let Err(e) = b.modify_ack_deadline(path, &ids, 0).await {
        tracing::warn!("pubsub browse: nack of {} messages failed ({e}); they return when their ack deadline passes", ids.len());
    }
}
