//! Messages over Service Bus REST (profile `transport = "rest"`): runtime calls (`runtime`)
//! for send, peek-lock, unlock, complete, renew and receive-and-delete; DLQ browse by
//! lock+unlock (`browse`), client-side resubmit (`resubmit`), purge (`purge`) and delete by
//! id (`delete`). REST has no peek and no session receiver, which is why it refuses more.

pub mod browse;
pub mod delete;
mod purge;
pub mod resubmit;
pub mod runtime;
mod send;
mod stamp;

use std::sync::Arc;

use async_trait::async_trait;

use super::copy_policy::CopyPolicy;
use super::http::Rest;
use super::transport::Transport;
use super::{dlq_parent, ServiceBus, AGE_NOTE, DELETE_COST};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::sanitize;

const NO_SESSIONS: &str =
    "Service Bus REST has no session receiver: sessions need transport = \"amqp\"";

pub(super) struct RestTransport {
    rest: Arc<Rest>,
}

impl RestTransport {
    pub(super) fn new(rest: Arc<Rest>) -> RestTransport {
        RestTransport { rest }
    }
}

#[async_trait]
impl Transport for RestTransport {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::SideEffect(
                "Service Bus REST has no peek: browsing a dead-letter queue locks each message for a moment and unlocks it, \
                 which raises its DeliveryCount by one. Active queues are refused: the same lock+unlock would push \
                 their messages toward MaxDeliveryCount and into the dead-letter queue."
                    .to_string(),
            ),
            redrive: RedriveMode::ClientSide,
            age: AgeSource::Unknown(AGE_NOTE.to_string()),
            consumers: ConsumerListing::Unsupported(
                "Service Bus does not list the receivers of a queue".to_string(),
            ),
            purge_cooldown_secs: None,
            purge_note: Some(
                "Purge receives and deletes messages one by one; messages locked by other receivers and scheduled messages are not purged"
                    .to_string(),
            ),
            broker_rates: false,
            notes: vec![
                "Depth is ActiveMessageCount, which includes locked messages: Service Bus does not report in-flight separately".to_string(),
                "Counts need a key with Manage rights".to_string(),
                "Custom property names travel as HTTP headers and come back lower-cased".to_string(),
                DELETE_COST.to_string(),
            ],
        }
    }

    fn receive_refusal(&self, info: &QueueInfo) -> Option<String> {
        session_refusal(info)
    }

    /// REST cannot count without the description: the refusal stands.
    async fn count_unreadable(
        &self,
        _queue: &QueueId,
        forbidden: BackendError,
    ) -> Result<MessageCount> {
        Err(forbidden)
    }

    async fn browse(&self, sb: &ServiceBus, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        // Forced browse of an active entity: refuse session entities before locking anything.
        if req.force && dlq_parent(queue.as_str()).is_none() {
            sb.refuse_unreceivable(queue).await?;
        }
        browse::browse(&self.rest, queue.as_str(), req).await
    }

    async fn sessions(&self, _queue: &QueueId) -> Result<Vec<SessionInfo>> {
        Err(BackendError::Unsupported(NO_SESSIONS.into()))
    }

    async fn browse_session(
        &self,
        _queue: &QueueId,
        _session: &str,
        _req: &BrowseRequest,
    ) -> Result<Page> {
        Err(BackendError::Unsupported(NO_SESSIONS.into()))
    }

    /// REST cannot peek scheduled messages (only AMQP can).
    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing> {
        None
    }

    async fn redrive(
        &self,
        req: &RedriveRequest,
        policy: CopyPolicy,
        progress: &OpProgress,
    ) -> Result<RedriveReport> {
        resubmit::resubmit(self.rest.clone(), req, policy, progress).await
    }

    async fn purge(
        &self,
        _sb: &ServiceBus,
        queue: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport> {
        purge::purge(self.rest.clone(), queue.as_str(), progress).await
    }

    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        send::send(&self.rest, queue, msg).await
    }

    /// Only on dead-letter queues: on an active one the peek-lock it takes would raise the
    /// DeliveryCount of every message it passes.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        if dlq_parent(queue.as_str()).is_none() {
            return Err(BackendError::Refused(format!(
                "{queue}: {DELETE_COST}; refused"
            )));
        }
        delete::delete_ids(&self.rest, queue.as_str(), ids, progress).await
    }
}

/// Why REST cannot receive from this entity, when it cannot: session-enabled queues and
/// subscriptions need a session receiver (their dead-letter queues do not).
fn session_refusal(info: &QueueInfo) -> Option<String> {
    let session = info
        .settings
        .extra
        .get("requires_session")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    (session && !info.is_dlq).then(|| {
        format!(
            "{} requires sessions, and Service Bus REST has no session receiver: browsing, purging and receiving are refused (its dead-letter queue has no sessions and can be browsed and resubmitted)",
            sanitize::clean(info.id.as_str())
        )
    })
}
