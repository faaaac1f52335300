//! How messages travel to and from Service Bus: REST (`rest/`) or AMQP 1.0 (`amqp/`), chosen
//! once when the backend is built from the profile's `transport`. The management API (counts,
//! settings, listing) is the same over both and stays with `ServiceBus`; everything that
//! touches messages goes through this trait.
//!
//! Methods that must first ask about the entity (its description, its scheduled count) get
//! the backend as `sb`: the answer comes from the management API, which the transports share.

use async_trait::async_trait;

use super::copy_policy::CopyPolicy;
use super::ServiceBus;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

#[async_trait]
pub(super) trait Transport: Send + Sync {
    /// What this transport's browse, redrive and purge do to messages.
    fn capabilities(&self) -> Capabilities;

    /// Why this transport cannot receive from `info` at all, when it cannot.
    fn receive_refusal(&self, info: &QueueInfo) -> Option<String>;

    /// A count for a key that may not read the entity's description (`forbidden` is why).
    async fn count_unreadable(
        &self,
        queue: &QueueId,
        forbidden: BackendError,
    ) -> Result<MessageCount>;

    async fn browse(&self, sb: &ServiceBus, queue: &QueueId, req: &BrowseRequest) -> Result<Page>;

    async fn sessions(&self, queue: &QueueId) -> Result<Vec<SessionInfo>>;

    async fn browse_session(
        &self,
        queue: &QueueId,
        session: &str,
        req: &BrowseRequest,
    ) -> Result<Page>;

    /// Listing and cancelling scheduled messages, where this transport can peek them.
    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing>;

    /// Copy dead letters from `req.source` to its target, each deleted only once copied.
    async fn redrive(
        &self,
        req: &RedriveRequest,
        policy: CopyPolicy,
        progress: &OpProgress,
    ) -> Result<RedriveReport>;

    /// Receive and delete everything in `queue` (the entity checks are done).
    async fn purge(
        &self,
        sb: &ServiceBus,
        queue: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport>;

    /// Send one message to an entity that is not a dead-letter queue.
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>>;

    /// Send several, stopping at the first failure (the `Sender::send_many` contract).
    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        let mut out = Vec::with_capacity(msgs.len());
        for m in msgs {
            let r = self.send(queue, m).await;
            let stop = r.is_err();
            out.push(r);
            if stop {
                break;
            }
        }
        out
    }

    /// Delete the chosen messages by id, where this transport can without harm to the rest.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport>;
}
