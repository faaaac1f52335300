//! Abilities only some brokers have, each behind an accessor of `Backend` that answers
//! `None` where the broker lacks it, so "can it" and "do it" are one answer and no broker
//! carries a method that only fails. The `*_of` functions give the facet or the refusal that
//! says why, in the words a user reads.

use async_trait::async_trait;

use crate::celery::workers::{Request, WorkerReport};
use crate::{Backend, BackendError, DeleteById, MessageFilter, OpProgress, Result};
use qdeck_model::domain::{
    BrokerKind, BrowseRequest, DeleteReport, Page, PurgeReport, QueueId, QueueInfo, RedriveReport,
    RedriveRequest, SessionInfo,
};

/// Messages carry a subject and can be purged by it (NATS JetStream).
#[async_trait]
pub trait SubjectPurge: Send + Sync {
    /// How many messages of `queue` have a subject `subject` matches (NATS wildcards), for
    /// the confirmation.
    async fn count_subject(&self, queue: &QueueId, subject: &str) -> Result<u64>;

    /// Purge only the messages whose subject `subject` matches, in one server-side call; the
    /// others stay.
    async fn purge_subject(
        &self,
        queue: &QueueId,
        subject: &str,
        progress: &OpProgress,
    ) -> Result<PurgeReport>;
}

/// Message sessions of a session-enabled entity (Service Bus).
#[async_trait]
pub trait Sessions: Send + Sync {
    /// The sessions, with what the broker says about each.
    async fn sessions(&self, queue: &QueueId) -> Result<Vec<SessionInfo>>;

    /// A page of one session's messages, as `browse` reads them.
    async fn browse_session(
        &self,
        queue: &QueueId,
        session: &str,
        req: &BrowseRequest,
    ) -> Result<Page>;
}

/// Celery's remote control, where the broker carries Celery (RabbitMQ, Redis).
#[async_trait]
pub trait CeleryRemote: Send + Sync {
    /// The workers, asked with one broadcast of read-only inspect commands on the
    /// `celery.pidbox` mailbox, answered within `celery::workers::TIMEOUT`.
    async fn workers(&self) -> Result<WorkerReport>;

    /// Send one command that changes workers (`revoke`, `pool_grow`, `pool_shrink`); callers
    /// pass the gate (tier `full`) and audit it. The answers.
    async fn control(&self, req: &Request) -> Result<WorkerReport>;
}

/// Creating a dead-letter capture where the broker keeps no DLQ of its own (NATS JetStream:
/// a stream of the consumer's dead-letter advisories).
#[async_trait]
pub trait DlqCreation: Send + Sync {
    /// The DLQ's id, and whether it was created now (`false`: one existed already).
    async fn create_dlq(&self, queue: &QueueId) -> Result<(QueueId, bool)>;
}

pub fn subject_purge_of<'a, B: Backend + ?Sized>(
    b: &'a B,
    queue: &QueueId,
) -> Result<&'a dyn SubjectPurge> {
    b.subject_purge().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "{queue}: purging by subject works on NATS JetStream streams, not on {}",
            b.kind()
        ))
    })
}

pub fn sessions_of<B: Backend + ?Sized>(b: &B) -> Result<&dyn Sessions> {
    b.session_reader()
        .ok_or_else(|| BackendError::Unsupported(format!("{} has no message sessions", b.kind())))
}

pub fn celery_of<B: Backend + ?Sized>(b: &B) -> Result<&dyn CeleryRemote> {
    b.celery_remote().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "Celery's remote control is reached on RabbitMQ and Redis, not on {}",
            b.kind()
        ))
    })
}

pub fn dlq_creation_of<'a, B: Backend + ?Sized>(
    b: &'a B,
    queue: &QueueId,
) -> Result<&'a dyn DlqCreation> {
    b.dlq_creation().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "{queue}: {} dead-letters through its own settings; qdeck creates DLQs only for NATS JetStream consumers",
            b.kind()
        ))
    })
}

/// Messages that wait for a future due time (delayed sends, retry back-off, scheduled
/// messages), where the broker can list them: Service Bus over AMQP, Redis job libraries,
/// the local broker.
#[async_trait]
pub trait ScheduledListing: Send + Sync {
    /// A page of them, each with `due-at` / `due-in` headers. Apart from `browse` so a broker
    /// that cannot list them never answers with ready messages instead.
    async fn browse_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page>;

    /// Cancel one of them, `id` as `browse_scheduled` shows it (Service Bus cancels by
    /// sequence number; the others delete it by id, `cancel_by_delete`).
    async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        progress: &OpProgress,
    ) -> Result<DeleteReport>;
}

/// A one-pass filtered redrive: the source is read once and each message is tested as it
/// arrives, instead of being scanned for ids first (RabbitMQ, Pub/Sub).
#[async_trait]
pub trait FilteredRedrive: Send + Sync {
    /// Whether it works on this queue: `Some(what reading leaves on the messages that do not
    /// match)`, for the confirmation; `None` where this queue cannot be read that way.
    fn reading_effect(&self, queue: &QueueInfo) -> Option<String>;

    /// Copy → confirm → delete the messages of `req.source` that pass `filter`, in one pass
    /// over the messages ready at the start (or `filter.max_examined` of them); `req.max`
    /// caps the matching ones moved. The others are left in the source (the side effect of
    /// reading them is the one `capabilities().browse` declares). The report's `examined`
    /// and `matched` say how far the pass got.
    async fn redrive_matching(
        &self,
        req: &RedriveRequest,
        filter: &MessageFilter,
        progress: &OpProgress,
    ) -> Result<RedriveReport>;
}

/// Cancelling a scheduled message by deleting it by id, for the brokers that keep scheduled
/// messages as messages (Redis job libraries, the local broker).
pub async fn cancel_by_delete(
    deleter: &dyn DeleteById,
    queue: &QueueId,
    id: &str,
    progress: &OpProgress,
) -> Result<DeleteReport> {
    deleter.delete_ids(queue, &[id.to_string()], progress).await
}

/// The backend's scheduled listing, or the refusal that says why it has none, with the
/// broker's own count of delayed messages when it keeps one.
pub async fn scheduled_of<'a, B: Backend + ?Sized>(
    b: &'a B,
    queue: &QueueId,
) -> Result<&'a dyn ScheduledListing> {
    if let Some(s) = b.scheduled() {
        return Ok(s);
    }
    let why = match b.kind() {
        BrokerKind::Sqs => {
            "SQS cannot list delayed messages; ApproximateNumberOfMessagesDelayed counts them"
                .to_string()
        }
        BrokerKind::Rabbitmq => "RabbitMQ cannot list delayed messages: the delayed-message \
             plugin keeps them inside its exchange, which has no browse API"
            .to_string(),
        BrokerKind::Servicebus => "Service Bus REST cannot peek scheduled messages (only the \
             AMQP transport can); ScheduledMessageCount counts them"
            .to_string(),
        kind => format!("{kind} keeps no scheduled (delayed) messages qdeck can list"),
    };
    Err(crate::refusal_with_delayed(b, queue, &why).await)
}

/// The backend's one-pass filtered redrive for `queue`, with what reading leaves on the
/// messages that do not match; `None` where the broker or this queue has none (the caller
/// then scans for ids first).
pub fn filtered_redrive_for<'a, B: Backend + ?Sized>(
    b: &'a B,
    queue: &QueueInfo,
) -> Option<(&'a dyn FilteredRedrive, String)> {
    let f = b.filtered_redrive()?;
    f.reading_effect(queue).map(|effect| (f, effect))
}

pub fn filtered_redrive_of<B: Backend + ?Sized>(b: &B) -> Result<&dyn FilteredRedrive> {
    b.filtered_redrive().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "a one-pass filtered redrive works on RabbitMQ and Pub/Sub, not on {}",
            b.kind()
        ))
    })
}

pub fn seeker_of<'a, B: Backend + ?Sized>(
    b: &'a B,
    queue: &QueueId,
) -> Result<&'a dyn crate::Seeker> {
    b.seeker().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "{queue}: seeking back to a time works on Pub/Sub subscriptions, not on {}",
            b.kind()
        ))
    })
}

/// The optional abilities `b` has with `queue`, each read from its own accessor, so what
/// `qdeck stats` says it can do is what the commands find.
pub fn abilities<B: Backend + ?Sized>(b: &B, queue: &QueueInfo) -> Vec<&'static str> {
    [
        (b.sender().is_some(), "send"),
        (b.deleter().is_some(), "delete by id"),
        (b.scheduled().is_some(), "scheduled listing"),
        (b.session_reader().is_some(), "sessions"),
        (b.subject_purge().is_some(), "purge by subject"),
        (
            filtered_redrive_for(b, queue).is_some(),
            "one-pass filtered redrive",
        ),
        (b.celery_remote().is_some(), "Celery remote control"),
        (b.dlq_creation().is_some(), "DLQ creation"),
        (b.group_admin().is_some(), "consumer groups"),
        (b.seeker().is_some(), "seek (replay)"),
        (b.queue_creation().is_some(), "queue creation"),
    ]
    .into_iter()
    .filter_map(|(has, name)| has.then_some(name))
    .collect()
}

/// Creating queues with their settings, where qdeck owns the broker (the local broker): other
/// brokers' queues are made with their own tools.
#[async_trait]
pub trait QueueCreation: Send + Sync {
    /// Create `name` with `opts`; an existing queue takes the new settings and keeps its
    /// messages.
    async fn create_queue(&self, name: &str, opts: &crate::local::QueueOptions) -> Result<()>;
}

pub fn queue_creation_of<B: Backend + ?Sized>(b: &B) -> Result<&dyn QueueCreation> {
    b.queue_creation().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "qdeck creates queues on the local broker; {} queues are made with its own tools",
            b.kind()
        ))
    })
}
