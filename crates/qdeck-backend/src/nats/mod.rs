//! NATS JetStream. Queue ids: a stream is its name; a durable consumer is `STREAM/CONSUMER`
//! (its depth is what it has yet to deliver, its in flight what it waits for acks on); a
//! stream capturing a consumer's dead-letter advisories is that consumer's DLQ (see `dlq`).
//! Everything is read by sequence through the JetStream API: no consumer is created to
//! browse and nothing is acked.

mod browse;
mod conn;
mod connz;
mod dlq;
mod figures;
mod model;
mod msg;
mod mutate;
mod redrive;
mod workers;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{NatsSettings, Profile};
use qdeck_model::domain::*;

use conn::Conn;
use model::{ConsumerInfo, StreamInfo};

pub use browse::GONE;
pub use dlq::{capture_name, DEFAULT_MAX_AGE_SECS, DEFAULT_MAX_MSGS};
pub use workers::IDENTITY_NOTE;

pub async fn connect(
    profile: &Profile,
    settings: &NatsSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(NatsBackend::new(
        &profile.name,
        settings,
        secrets,
    )?))
}

/// What a queue id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stream(String),
    Consumer(String, String),
}

impl Target {
    pub fn parse(id: &QueueId) -> Target {
        match id.as_str().split_once('/') {
            Some((s, c)) => Target::Consumer(s.to_string(), c.to_string()),
            None => Target::Stream(id.as_str().to_string()),
        }
    }
}

pub struct NatsBackend {
    conn: Conn,
    calls: Arc<ApiCalls>,
    stream_prefix: Option<String>,
    monitor: Option<connz::Monitor>,
}

impl NatsBackend {
    pub fn new(
        profile_name: &str,
        settings: &NatsSettings,
        secrets: &dyn SecretSource,
    ) -> Result<NatsBackend> {
        let calls = Arc::new(ApiCalls::default());
        Ok(NatsBackend {
            conn: Conn::from_settings(profile_name, settings, secrets, calls.clone())?,
            calls,
            stream_prefix: settings.stream_prefix.clone().filter(|p| !p.is_empty()),
            monitor: settings
                .monitor_url
                .as_deref()
                .filter(|u| !u.trim().is_empty())
                .map(connz::Monitor::new)
                .transpose()?,
        })
    }

    /// Every stream (the profile's prefix applied), from one `STREAM.LIST` page walk.
    async fn streams(&self) -> Result<Vec<StreamInfo>> {
        let all: Vec<StreamInfo> = figures::walk(self, "STREAM.LIST", "streams").await?;
        Ok(match &self.stream_prefix {
            // A capture stream of a listed stream's consumers is listed too, whatever its
            // name: it is their DLQ.
            Some(p) => all
                .into_iter()
                .filter(|s| s.config.name.starts_with(p.as_str()) || dlq::may_capture_prefix(s, p))
                .collect(),
            None => all,
        })
    }

    /// Why `req` cannot run, when it names a target other than its dead letters' origin (a
    /// dead letter goes back only to its own subject, see redrive::check_target): the plan
    /// declares it and the run refuses it before anything moves.
    async fn foreign_target(&self, req: &RedriveRequest) -> Result<Option<String>> {
        let RedriveTarget::Queue(t) = &req.target else {
            return Ok(None);
        };
        let dlq = self.describe(&req.source).await?;
        let own = dlq.dlq_sources.is_empty()
            || dlq.dlq_sources.iter().any(|s| {
                s == t || s.as_str().split_once('/').map(|(stream, _)| stream) == Some(t.as_str())
            });
        Ok((!own).then(|| {
            format!(
                "a JetStream dead letter goes back to its own subject in its stream (target origin), not to {t}"
            )
        }))
    }

    async fn stream(&self, name: &str) -> Result<StreamInfo> {
        let v = self
            .conn
            .api(&format!("STREAM.INFO.{name}"), &serde_json::Value::Null)
            .await
            .map_err(|e| named(e, &format!("no stream {name:?}")))?;
        serde_json::from_value(v).map_err(|e| BackendError::Protocol(format!("STREAM.INFO: {e}")))
    }

    async fn consumer(&self, stream: &str, consumer: &str) -> Result<ConsumerInfo> {
        let v = self
            .conn
            .api(
                &format!("CONSUMER.INFO.{stream}.{consumer}"),
                &serde_json::Value::Null,
            )
            .await
            .map_err(|e| named(e, &format!("no consumer {stream}/{consumer}")))?;
        serde_json::from_value(v).map_err(|e| BackendError::Protocol(format!("CONSUMER.INFO: {e}")))
    }

    /// `qdeck create-dlq STREAM/CONSUMER`: find or create the stream that captures the
    /// consumer's dead-letter advisories; its id and whether it was created now.
    pub async fn create_dlq(
        &self,
        queue: &QueueId,
        max_age_secs: u64,
        max_msgs: i64,
    ) -> Result<(QueueId, bool)> {
        match Target::parse(queue) {
            Target::Consumer(s, c) => dlq::create(self, &s, &c, max_age_secs, max_msgs).await,
            Target::Stream(_) => Err(BackendError::Invalid(format!(
                "{queue} is a stream: a DLQ belongs to a consumer, STREAM/CONSUMER"
            ))),
        }
    }
}

/// A `NotFound` that names what was looked for.
fn named(e: BackendError, what: &str) -> BackendError {
    match e {
        BackendError::NotFound(m) => BackendError::NotFound(format!("{what}: {m}")),
        other => other,
    }
}

#[async_trait]
impl Backend for NatsBackend {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Nats
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::None,
            redrive: RedriveMode::ClientSide,
            age: AgeSource::Exact,
            consumers: ConsumerListing::Listed,
            purge_cooldown_secs: None,
            purge_note: Some(
                "a stream is purged whole (STREAM.PURGE); a DLQ deletes each dead letter's original from its stream, then the advisory".into(),
            ),
            broker_rates: false,
            notes: vec![
                "browse reads by sequence (STREAM.MSG.GET): no consumer is created, nothing is acked or redelivered".into(),
                "JetStream keeps no DLQ: a stream capturing a consumer's MAX_DELIVERIES and MSG_TERMINATED advisories is its DLQ (qdeck create-dlq STREAM/CONSUMER)".into(),
                "age of oldest on a consumer: the time of the first message past its ack floor, read by sequence".into(),
                IDENTITY_NOTE.into(),
            ],
        }
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut caps = self.capabilities();
        if !queue.is_dlq {
            caps.redrive = RedriveMode::Unsupported(match queue.kind {
                QueueKind::Consumer => format!(
                    "redrive starts from the consumer's DLQ{}",
                    match &queue.dlq {
                        Some(d) => format!(" ({d})"),
                        None => format!(": `qdeck create-dlq {}` makes one", queue.id),
                    }
                ),
                _ => "redrive starts from a consumer's DLQ (a stream capturing its dead-letter advisories)".into(),
            });
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        figures::list(self, None).await
    }

    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        let (stream, capture) = match Target::parse(queue) {
            Target::Stream(s) => {
                let info = self.stream(&s).await?;
                (s, dlq::is_capture(&info))
            }
            Target::Consumer(s, c) => {
                self.consumer(&s, &c).await?;
                (s, false)
            }
        };
        // A DLQ's sources are the consumers whose advisories it captures, found among the
        // other streams' consumers: the whole listing, not this stream alone.
        let wanted: HashSet<String> = [stream].into_iter().collect();
        figures::list(self, (!capture).then_some(&wanted))
            .await?
            .into_iter()
            .find(|q| &q.id == queue)
            .ok_or_else(|| BackendError::NotFound(format!("unknown queue {:?}", queue.as_str())))
    }

    /// Exact: JetStream's own counts, read now.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        crate::count_from_stats(self, queue, true).await
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        figures::stats(self, queues).await
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        workers::consumers(self, queue).await
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        let mut plan = crate::plan_redrive_checked(self, req).await?;
        if let Some(why) = self.foreign_target(req).await? {
            plan.mode = RedriveMode::Unsupported(why);
        }
        plan.notes.push(
            "each copy is a new message at a new sequence; its Nats-Msg-Id travels as x-qdeck-nats-msg-id so the stream does not discard the copy as a duplicate".into(),
        );
        Ok(plan)
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        if let Some(why) = self.foreign_target(req).await? {
            return Err(BackendError::Unsupported(why));
        }
        redrive::redrive(self, req, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        mutate::purge(self, queue, progress).await
    }

    fn subject_purge(&self) -> Option<&dyn crate::SubjectPurge> {
        Some(self)
    }

    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }

    fn dlq_creation(&self) -> Option<&dyn crate::DlqCreation> {
        Some(self)
    }
}

#[async_trait]
impl crate::SubjectPurge for NatsBackend {
    async fn count_subject(&self, queue: &QueueId, subject: &str) -> Result<u64> {
        mutate::count_subject(self, queue, subject).await
    }

    async fn purge_subject(
        &self,
        queue: &QueueId,
        subject: &str,
        _progress: &OpProgress,
    ) -> Result<PurgeReport> {
        mutate::purge_subject(self, queue, subject).await
    }
}

#[async_trait]
impl crate::DlqCreation for NatsBackend {
    async fn create_dlq(&self, queue: &QueueId) -> Result<(QueueId, bool)> {
        NatsBackend::create_dlq(self, queue, DEFAULT_MAX_AGE_SECS, DEFAULT_MAX_MSGS).await
    }
}

#[async_trait]
impl DeleteById for NatsBackend {
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        mutate::delete_ids(self, queue, ids, progress).await
    }
}
