//! The backend contract: one async trait every broker implements. What a broker cannot do is
//! declared in `capabilities()`, never faked.

pub mod api_calls;
pub mod error;
pub mod local;
pub mod progress;
pub mod rabbitmq;
pub mod servicebus;
pub mod sqs;

use std::sync::Arc;

use async_trait::async_trait;

pub use api_calls::ApiCalls;
pub use error::BackendError;
pub use progress::{OpProgress, ProgressState};

use crate::config::{Profile, ProfileKind};
use crate::domain::*;

pub type Result<T> = std::result::Result<T, BackendError>;

#[async_trait]
pub trait Backend: Send + Sync {
    /// "local", "rabbitmq", "sqs", "servicebus".
    fn kind(&self) -> &'static str;

    fn capabilities(&self) -> Capabilities;

    /// Names, static settings and DLQ links in both directions.
    async fn list_queues(&self) -> Result<Vec<QueueInfo>>;

    /// Live figures, batched where the API allows. A queue that fails alone lands in
    /// `StatsBatch::errors`; the call fails as a whole only when the broker does.
    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch>;

    /// Who consumes this queue. `Unsupported` where the broker cannot say.
    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>>;

    /// A page of messages without removing any. Where the broker has no side-effect-free
    /// peek, the effect is in `capabilities().browse`; refuse (`Refused`) where browsing could
    /// dead-letter a message unless `req.force`.
    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page>;

    /// Publish one message; returns its id when the broker gives one.
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>>;

    /// Copy → broker confirms → delete. Reports progress and stops at `progress.cancelled()`.
    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport>;

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport>;

    /// API calls made so far, per operation name (SQS and CloudWatch bill per call).
    fn api_calls(&self) -> &ApiCalls;
}

/// Connect the backend a profile names. Cheap for every kind: no network until first use,
/// except where the client library insists.
pub async fn build(profile: &Profile) -> Result<Arc<dyn Backend>> {
    match &profile.kind {
        ProfileKind::Local(s) => Ok(Arc::new(local::LocalHandle::open(&s.resolved_path())?)),
        ProfileKind::Rabbitmq(s) => rabbitmq::connect(profile, s).await,
        ProfileKind::Sqs(s) => sqs::connect(profile, s).await,
        ProfileKind::Servicebus(s) => servicebus::connect(profile, s).await,
    }
}
