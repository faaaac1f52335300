//! How a redrive copies dead letters, whichever transport carries them: the entity the copies
//! go to, and whether they get a new MessageId. Shared by `rest` and `amqp`, so a redrive
//! refuses and copies alike over either.

use super::{dlq_parent, is_subscription};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Custom property holding the original MessageId of a copy sent with a new one.
pub const ORIGINAL_ID_PROPERTY: &str = "OriginalMessageId";

/// How copies are made, decided from the target's settings before the run.
#[derive(Debug, Clone, Default)]
pub struct CopyPolicy {
    /// Give each copy a new MessageId (the target has, or may have, duplicate detection).
    pub new_ids: bool,
    /// Said in the dialog (plan) and in the report.
    pub notes: Vec<String>,
}

/// The entity copies go to, after the checks every resubmit makes.
pub fn target_of(req: &RedriveRequest) -> Result<String> {
    let source = req.source.as_str();
    let Some(parent) = dlq_parent(source) else {
        return Err(BackendError::Invalid(format!(
            "resubmit moves messages out of a dead-letter queue: use {}/$DeadLetterQueue as the source",
            qdeck_model::sanitize::clean(source)
        )));
    };
    let target = match &req.target {
        RedriveTarget::Origin if is_subscription(parent) => {
            return Err(BackendError::Invalid(format!(
                "{} is a subscription and cannot receive messages: choose the topic (every subscription gets a copy) or a queue as the target",
                qdeck_model::sanitize::clean(parent)
            )))
        }
        RedriveTarget::Origin => parent.to_string(),
        RedriveTarget::Queue(q) => q.as_str().to_string(),
    };
    if dlq_parent(&target).is_some() {
        return Err(BackendError::Invalid(
            "Service Bus does not accept messages sent to a dead-letter queue".into(),
        ));
    }
    Ok(target)
}
