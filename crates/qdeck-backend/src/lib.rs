//! qdeck's backends: the contract (one async trait every broker implements; what a broker
//! cannot do is declared in `capabilities()`, never faked) and the brokers, each behind its
//! feature. Celery (`celery`) rides on the RabbitMQ and Redis (kombu) brokers; `headers` holds
//! each broker's header rules. Depends on `qdeck-model` only.

pub mod api_calls;
pub mod celery;
pub mod error;
pub mod facets;
pub mod filter;
pub mod headers;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod local;
pub mod message_filter;
#[cfg(feature = "nats")]
pub mod nats;
pub mod net_error;
pub mod no_failure_text;
pub mod progress;
#[cfg(feature = "pubsub")]
pub mod pubsub;
#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "servicebus")]
pub mod servicebus;
#[cfg(feature = "sqs")]
pub mod sqs;
pub mod tls;

use std::sync::Arc;

use async_trait::async_trait;

pub use api_calls::ApiCalls;
pub use error::BackendError;
pub use facets::{
    cancel_by_delete, celery_of, dlq_creation_of, filtered_redrive_for, filtered_redrive_of,
    queue_creation_of, scheduled_of, seeker_of, sessions_of, subject_purge_of, CeleryRemote,
    DlqCreation, FilteredRedrive, QueueCreation, ScheduledListing, Sessions, SubjectPurge,
};
pub use filter::QueueFilter;
pub use message_filter::MessageFilter;
pub use progress::{OpProgress, ProgressState};

use qdeck_model::config::secret::{Environment, SecretSource};
use qdeck_model::config::{Profile, ProfileKind};
use qdeck_model::domain::*;

pub type Result<T> = std::result::Result<T, BackendError>;

#[async_trait]
pub trait Backend: Send + Sync {
    fn kind(&self) -> BrokerKind;

    /// What the broker can do in general (the detail panel's notes, the help).
    fn capabilities(&self) -> Capabilities;

    /// What the broker can do with this one queue: a RabbitMQ stream cannot be browsed, a
    /// quorum queue counts browses toward its delivery limit, a Service Bus session queue
    /// cannot be received over REST. Dialogs and commands describe what will really happen
    /// from this, re-read with the queue list.
    fn capabilities_for(&self, _queue: &QueueInfo) -> Capabilities {
        self.capabilities()
    }

    /// Names, static settings and DLQ links in both directions.
    async fn list_queues(&self) -> Result<Vec<QueueInfo>>;

    /// The queues whose id matches `filter`. Backends whose broker filters by name override
    /// this to fetch less (RabbitMQ `name`+`use_regex`, SQS `QueueNamePrefix`); there, DLQ
    /// links are those the matched queues name, so a matched DLQ whose sources do not match
    /// may not be marked as one. The default lists everything and filters here.
    async fn list_queues_matching(&self, filter: &QueueFilter) -> Result<Vec<QueueInfo>> {
        Ok(filter_client_side(self.list_queues().await?, filter))
    }

    /// One queue's settings and DLQ links. Backends that can address a queue directly
    /// override this so that single-queue commands do not list (and, on SQS, pay for) every
    /// queue. `NotFound` when it does not exist.
    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        find_listed(self, queue).await
    }

    /// Messages in the queue now, from the most current source the broker has (RabbitMQ: a
    /// passive declare, not the management API's cached figures). Decisions use this, never a
    /// polled statistic.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        count_from_stats(self, queue, false).await
    }

    /// Live figures, batched where the API allows. A queue that fails alone lands in
    /// `StatsBatch::errors`; the call fails as a whole only when the broker does.
    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch>;

    /// Who consumes this queue. `Unsupported` where the broker cannot say.
    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>>;

    /// A page of messages without removing any. Where the broker has no side-effect-free
    /// peek, the effect is in `capabilities().browse`; refuse (`Refused`) where browsing could
    /// dead-letter a message unless `req.force`.
    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page>;

    /// Listing (and cancelling) messages that wait for a future due time, where the broker
    /// can: `None` elsewhere (`scheduled_of` gives the refusal, with the broker's count).
    fn scheduled(&self) -> Option<&dyn ScheduledListing> {
        None
    }

    /// Message sessions, where the broker has them (Service Bus): `None` elsewhere.
    fn session_reader(&self) -> Option<&dyn Sessions> {
        None
    }

    /// What `redrive(req)` would do, without changing anything: the same checks the real run
    /// makes (unknown target, no recorded origin, unsupported queue) fail here the same way.
    /// Backends with extra checks override it and call it from `redrive`.
    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        plan_redrive_checked(self, req).await
    }

    /// Copy → broker confirms → delete. Reports progress and stops at `progress.cancelled()`.
    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport>;

    /// A one-pass filtered redrive, where the broker has one (RabbitMQ, Pub/Sub): `None`
    /// elsewhere, where a filtered redrive scans for ids first.
    fn filtered_redrive(&self) -> Option<&dyn FilteredRedrive> {
        None
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport>;

    /// Purging by subject, where messages carry one (NATS JetStream): `None` elsewhere.
    fn subject_purge(&self) -> Option<&dyn SubjectPurge> {
        None
    }

    /// Deleting chosen messages (by id from a browse), where this broker can: `None` where it
    /// cannot, so "can it" and "do it" are one answer. Checked before scanning for a
    /// selection, and by edit-and-resend before it sends anything, so a broker that cannot
    /// remove one message never ends up holding both versions.
    fn deleter(&self) -> Option<&dyn DeleteById> {
        None
    }

    /// Publishing messages, where this broker takes them from qdeck: `None` where only the
    /// broker's own clients should add them (Redis job libraries), so send, edit, import,
    /// copy and move refuse before they read or change anything (`sender_of`).
    fn sender(&self) -> Option<&dyn Sender> {
        None
    }

    /// Celery's remote control, where the broker carries Celery (RabbitMQ, Redis): `None`
    /// elsewhere.
    fn celery_remote(&self) -> Option<&dyn CeleryRemote> {
        None
    }

    /// Consumer-group administration (moving a group's offsets, deleting a group), where the
    /// broker has consumer groups: `None` where it has none (every broker but Kafka).
    fn group_admin(&self) -> Option<&dyn GroupAdmin> {
        None
    }

    /// Seeking a subscription back to a time (replay), where the broker can: `None` where it
    /// cannot (every broker but Pub/Sub).
    fn seeker(&self) -> Option<&dyn Seeker> {
        None
    }

    /// What this broker does with a message's fields on send (properties, identity, types
    /// and limits), for copy, move, edit and import.
    fn header_rules(&self) -> &'static headers::HeaderRules {
        headers::rules_of(self.kind())
    }

    /// API calls made so far, per operation name (SQS and CloudWatch bill per call).
    fn api_calls(&self) -> &ApiCalls;

    /// Creating queues with their settings, where qdeck owns the broker (the local broker):
    /// `None` elsewhere.
    fn queue_creation(&self) -> Option<&dyn QueueCreation> {
        None
    }

    /// Creating a dead-letter capture, where the broker keeps no DLQ of its own (NATS
    /// JetStream): `None` elsewhere.
    fn dlq_creation(&self) -> Option<&dyn DlqCreation> {
        None
    }
}

/// The checks every redrive makes before it moves anything (source and target exist, an
/// exact current count capped by `max` and the selection), with the mode `capabilities_for`
/// declares. Backends whose mode depends on the request or the endpoint adjust the result.
pub async fn plan_redrive_checked<B: Backend + ?Sized>(
    b: &B,
    req: &RedriveRequest,
) -> Result<RedrivePlan> {
    let info = b.describe(&req.source).await?;
    if let RedriveTarget::Queue(t) = &req.target {
        b.describe(t).await?;
    }
    let mut count = b.count(&req.source).await?;
    if let Some(m) = req.max {
        count.ready = count.ready.min(m);
    }
    if let Some(ids) = &req.only_ids {
        count.ready = count.ready.min(ids.len() as u64);
    }
    Ok(RedrivePlan {
        count,
        mode: b.capabilities_for(&info).redrive,
        notes: Vec::new(),
    })
}

/// The refusal for brokers that cannot list delayed messages: `why`, plus the broker's own
/// count when it keeps one (the refusal stands either way).
pub(crate) async fn refusal_with_delayed<B: Backend + ?Sized>(
    b: &B,
    queue: &QueueId,
    why: &str,
) -> BackendError {
    let delayed = b
        .stats(std::slice::from_ref(queue))
        .await
        .ok()
        .and_then(|batch| batch.stats.into_iter().next())
        .and_then(|st| st.delayed);
    BackendError::Unsupported(match delayed {
        Some(n) => format!("{why} ({n} now)"),
        None => why.to_string(),
    })
}

/// A broker's publishing of messages, the capability behind `Backend::sender`.
#[async_trait]
pub trait Sender: Send + Sync {
    /// Publish one message; returns its id when the broker gives one.
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>>;

    /// Publish several messages to one queue, in order, as one batch where the broker has one
    /// (a transaction, pipelined confirms, SendMessageBatch). The answer has one entry per
    /// message tried, in the order given: its id, or why that one was not sent. A failure
    /// that would repeat for every message (queue gone, connection lost) ends the batch, and
    /// the messages not tried are absent from the answer. Default: one `send` each, stopping
    /// at the first failure.
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
}

/// The backend's sender, or the refusal that says why this broker takes no messages from qdeck.
pub fn sender_of<B: Backend + ?Sized>(b: &B) -> Result<&dyn Sender> {
    b.sender().ok_or_else(|| {
        BackendError::Unsupported(match b.kind() {
            BrokerKind::Redis => "jobs are added with the job library's own client (BullMQ \
                 Queue#add, Sidekiq perform_async), which sets the fields its workers expect"
                .to_string(),
            kind => format!("the {kind} backend cannot publish messages"),
        })
    })
}

/// A broker's consumer-group administration, the capability behind `Backend::group_admin`.
/// Both operations need the group empty, as the broker does: a group with members is
/// refused (`BackendError::Refused`) with one line naming it, when planned and again when run.
#[async_trait]
pub trait GroupAdmin: Send + Sync {
    /// What moving `row`'s (a group reading a topic) committed offsets to `to` would do, per
    /// partition, read now. Nothing is changed.
    async fn plan_offset_reset(&self, row: &QueueId, to: ResetTo) -> Result<OffsetResetPlan>;

    /// Commit the plan's new offsets (as planned: a later run never moves further than the
    /// user saw).
    async fn reset_offsets(&self, plan: &OffsetResetPlan) -> Result<OffsetResetReport>;

    /// What deleting `group` loses (its committed offsets and the topics they are on).
    async fn plan_group_delete(&self, group: &str) -> Result<GroupDeletePlan>;

    /// Delete `group` and its committed offsets.
    async fn delete_group(&self, group: &str) -> Result<()>;

    /// `row`'s partitions now: log bounds, the group's committed offset and the member that
    /// holds each, for the console's partition table.
    async fn partitions(&self, row: &QueueId) -> Result<Vec<PartitionFigures>>;
}

/// Replay, the capability behind `Backend::seeker`: a subscription sought back to a time
/// delivers again what was published since (as far as the broker keeps it) and acknowledges
/// what was published before.
#[async_trait]
pub trait Seeker: Send + Sync {
    /// What seeking `queue` back to `to_ms` (Unix ms) would do, in words. Nothing is changed.
    async fn plan_seek(&self, queue: &QueueId, to_ms: i64) -> Result<SeekPlan>;

    /// Seek as planned.
    async fn seek(&self, plan: &SeekPlan) -> Result<SeekReport>;
}

/// A broker's deleting of chosen messages, the capability behind `Backend::deleter`.
#[async_trait]
pub trait DeleteById: Send + Sync {
    /// Why `delete_ids` would refuse this queue (it could dead-letter messages nobody chose),
    /// so edit-and-resend and `purge --where` stop before sending or scanning anything.
    fn delete_refusal(&self, _queue: &QueueInfo) -> Option<String> {
        None
    }

    /// What deleting chosen messages does to the other messages of this queue, for the
    /// confirmation (RabbitMQ's redelivered flag, SQS receive counts, Service Bus delivery
    /// counts); `None` where the others are not touched.
    fn delete_note(&self, _queue: &QueueInfo) -> Option<String> {
        None
    }

    /// Delete these messages (ids from a browse) and no others. RabbitMQ and SQS do it by
    /// receive → match → delete, which sets every other message's redelivered flag or raises
    /// its receive count (and refuse where that could dead-letter one); Service Bus does it by
    /// peek-lock → complete / unlock on dead-letter queues only; Redis removes them from a
    /// failed, dead, retry or schedule set in one script per batch.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport>;
}
/// The listed queues whose id matches.
pub fn filter_client_side(all: Vec<QueueInfo>, filter: &QueueFilter) -> Vec<QueueInfo> {
    all.into_iter()
        .filter(|q| filter.matches(q.id.as_str()))
        .collect()
}

/// Connect the backend a profile names, its secrets read from the process environment.
/// Cheap for every kind: no network until first use, except where the client library insists.
pub async fn build(profile: &Profile) -> Result<Arc<dyn Backend>> {
    build_with(profile, &Environment).await
}

/// As `build`, the variables the profile names read from `secrets`. They are resolved here,
/// once: a backend keeps the `Secret`s, never the source.
pub async fn build_with(
    profile: &Profile,
    #[allow(unused_variables)] secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    match &profile.kind {
        ProfileKind::Local(s) => Ok(Arc::new(local::LocalHandle::open(&s.resolved_path())?)),
        #[cfg(feature = "rabbitmq")]
        ProfileKind::Rabbitmq(s) => rabbitmq::connect(profile, s, secrets).await,
        #[cfg(feature = "sqs")]
        ProfileKind::Sqs(s) => sqs::connect(profile, s, secrets).await,
        #[cfg(feature = "servicebus")]
        ProfileKind::Servicebus(s) => servicebus::connect(profile, s, secrets).await,
        #[cfg(feature = "redis")]
        ProfileKind::Redis(s) => redis::connect(profile, s, secrets).await,
        #[cfg(feature = "nats")]
        ProfileKind::Nats(s) => nats::connect(profile, s, secrets).await,
        #[cfg(feature = "pubsub")]
        ProfileKind::Pubsub(s) => pubsub::connect(profile, s, secrets).await,
        #[cfg(feature = "kafka")]
        ProfileKind::Kafka(s) => kafka::connect(profile, s, secrets),
        #[allow(unreachable_patterns)]
        other => Err(BackendError::Unsupported(format!(
            "this qdeck was built without the {} backend (cargo feature {:?})",
            other.name(),
            other.name()
        ))),
    }
}

/// `queue`'s entry in the full queue list, for backends that cannot address one queue alone.
pub(crate) async fn find_listed<B: Backend + ?Sized>(b: &B, queue: &QueueId) -> Result<QueueInfo> {
    b.list_queues()
        .await?
        .into_iter()
        .find(|q| &q.id == queue)
        .ok_or_else(|| BackendError::NotFound(format!("unknown queue {:?}", queue.as_str())))
}

/// A count read from one queue's statistics: `exact` when those come from the broker's own
/// data rather than a cached figure; a per-queue error becomes the error of its kind.
pub(crate) async fn count_from_stats<B: Backend + ?Sized>(
    b: &B,
    queue: &QueueId,
    exact: bool,
) -> Result<MessageCount> {
    let batch = b.stats(std::slice::from_ref(queue)).await?;
    if let Some((_, e)) = batch.errors.into_iter().next() {
        return Err(e.into());
    }
    let st = batch.stats.into_iter().next();
    Ok(MessageCount {
        // A log's retained messages are no backlog, but they are what a purge removes.
        ready: st
            .as_ref()
            .and_then(|s| s.depth.or(s.retained))
            .unwrap_or(0),
        in_flight: st.as_ref().and_then(|s| s.in_flight),
        exact,
    })
}
