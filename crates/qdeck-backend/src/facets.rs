//! Abilities only some brokers have, each behind an accessor of `Backend` that answers
//! `None` where the broker lacks it, so "can it" and "do it" are one answer and no broker
//! carries a method that only fails. The `*_of` functions give the facet or the refusal that
//! says why, in the words a user reads.

use async_trait::async_trait;

use crate::celery::workers::{Request, WorkerReport};
use crate::{Backend, BackendError, OpProgress, Result};
use qdeck_model::domain::{BrowseRequest, Page, PurgeReport, QueueId, SessionInfo};

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
