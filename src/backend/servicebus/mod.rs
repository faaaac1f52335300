//! Azure Service Bus backend over REST: counts and settings from the ATOM management API
//! (`mgmt`), runtime calls (`runtime`) for send, peek-lock, unlock, complete, renew and
//! receive-and-delete, DLQ browse (`browse`), client-side resubmit (`resubmit`) and purge
//! (`purge`). The connection string comes from the environment variable the profile names.
//!
//! Runtime calls go straight over reqwest, not through `azure_messaging_servicebus` 0.21: see
//! the comment at the top of `runtime.rs` for why (binary bodies, lenient BrokerProperties,
//! keeping the lock URI, custom endpoints).
//!
//! Verified against the in-process stand-in in `tests/servicebus_standin/`, not against Azure.

mod browse;
pub mod connstr;
mod http;
pub mod mgmt;
mod purge;
mod resubmit;
pub mod runtime;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{ApiCalls, Backend, BackendError, OpProgress, Result};
use crate::config::{Profile, ServicebusSettings};
use crate::domain::*;
use http::Rest;
use mgmt::QueueEntry;

pub const DLQ_SUFFIX: &str = "/$DeadLetterQueue";

const AGE_NOTE: &str =
    "Service Bus reports no age of oldest message, and REST cannot peek without locking";

/// `orders/$DeadLetterQueue` → `Some("orders")`.
pub fn dlq_parent(entity: &str) -> Option<&str> {
    let cut = entity
        .len()
        .checked_sub(DLQ_SUFFIX.len())
        .filter(|c| *c > 0)?;
    // `get` so a multi-byte name never panics on a non-boundary index.
    let tail = entity.get(cut..)?;
    tail.eq_ignore_ascii_case(DLQ_SUFFIX)
        .then(|| entity.get(..cut))
        .flatten()
}

pub struct ServiceBus {
    rest: Arc<Rest>,
    /// Also list topics' subscriptions (profile `topics`, default true).
    topics: bool,
}

/// `orders/Subscriptions/audit` (or its DLQ) is a subscription, not a queue.
pub fn is_subscription(entity: &str) -> bool {
    entity.to_ascii_lowercase().contains("/subscriptions/")
}

pub async fn connect(profile: &Profile, settings: &ServicebusSettings) -> Result<Arc<dyn Backend>> {
    let var = settings.connection_string_env.trim();
    if var.is_empty() {
        return Err(BackendError::Invalid(format!(
            "profile '{}': connection_string_env is empty (name the environment variable that holds the connection string)",
            profile.name
        )));
    }
    let cs = std::env::var(var).map_err(|_| {
        BackendError::Invalid(format!(
            "profile '{}': environment variable {var} is not set (it should hold the Service Bus connection string)",
            profile.name
        ))
    })?;
    let info = connstr::parse(&cs).map_err(|e| {
        BackendError::Invalid(format!(
            "profile '{}', ${var}: {}",
            profile.name,
            strip_invalid(&e)
        ))
    })?;
    Ok(Arc::new(ServiceBus {
        rest: Arc::new(Rest::new(info)?),
        topics: settings.topics.unwrap_or(true),
    }))
}

fn strip_invalid(e: &BackendError) -> String {
    match e {
        BackendError::Invalid(m) => m.clone(),
        other => other.to_string(),
    }
}

fn queue_info(e: &QueueEntry) -> (QueueInfo, QueueInfo) {
    let mut settings = QueueSettings {
        lease_secs: e
            .fields
            .get("LockDuration")
            .and_then(|d| mgmt::iso_duration_secs(d)),
        max_receives: e
            .field_u64("MaxDeliveryCount")
            .and_then(|n| u32::try_from(n).ok()),
        retention_secs: e
            .fields
            .get("DefaultMessageTimeToLive")
            .and_then(|d| mgmt::iso_duration_secs(d)),
        ..Default::default()
    };
    for (k, label) in [
        ("SizeInBytes", "size_bytes"),
        ("Status", "status"),
        ("RequiresSession", "requires_session"),
        ("RequiresDuplicateDetection", "duplicate_detection"),
        ("EnablePartitioning", "partitioned"),
        ("ForwardTo", "forward_to"),
        ("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_to"),
        ("DeadLetteringOnMessageExpiration", "dead_letter_on_expiry"),
    ] {
        if let Some(v) = e.fields.get(k).filter(|v| !v.is_empty()) {
            settings.extra.insert(label.to_string(), v.clone());
        }
    }
    for (k, label) in [
        ("TransferMessageCount", "transfer_messages"),
        (
            "TransferDeadLetterMessageCount",
            "transfer_dead_letter_messages",
        ),
    ] {
        if let Some(n) = e.count(k) {
            settings.extra.insert(label.to_string(), n.to_string());
        }
    }
    let dlq_id = QueueId::new(format!("{}{DLQ_SUFFIX}", e.name));
    let kind = if is_subscription(&e.name) {
        QueueKind::Subscription
    } else {
        QueueKind::Standard
    };
    let main = QueueInfo {
        id: QueueId::new(e.name.clone()),
        kind,
        is_dlq: false,
        dlq: Some(dlq_id.clone()),
        dlq_sources: Vec::new(),
        settings: settings.clone(),
    };
    let dlq = QueueInfo {
        id: dlq_id,
        kind,
        is_dlq: true,
        dlq: None,
        dlq_sources: vec![QueueId::new(e.name.clone())],
        settings: QueueSettings {
            lease_secs: settings.lease_secs,
            ..Default::default()
        },
    };
    (main, dlq)
}

fn stats_for(id: &QueueId, e: &QueueEntry, at_ms: i64) -> QueueStats {
    let base = QueueStats {
        id: id.clone(),
        at_ms,
        oldest_age_secs: None,
        age_note: Some(AGE_NOTE.to_string()),
        ..Default::default()
    };
    if dlq_parent(id.as_str()).is_some() {
        QueueStats {
            depth: e.count("DeadLetterMessageCount"),
            ..base
        }
    } else {
        QueueStats {
            depth: e.count("ActiveMessageCount"),
            delayed: e.count("ScheduledMessageCount"),
            dlq_depth: e.count("DeadLetterMessageCount"),
            ..base
        }
    }
}

impl ServiceBus {
    /// Single-entity connection strings (EntityPath) cannot list the namespace.
    async fn entries(&self) -> Result<Vec<QueueEntry>> {
        match &self.rest.info.entity_path {
            Some(p) => Ok(mgmt::get_queue(&self.rest, p).await?.into_iter().collect()),
            None => {
                let mut all = mgmt::list_all(&self.rest).await?;
                if self.topics {
                    // One request per page of topics, then one per page of each topic's
                    // subscriptions (the API has no namespace-wide subscription feed).
                    for t in mgmt::list_topics(&self.rest).await? {
                        all.extend(mgmt::list_subscriptions(&self.rest, &t.name).await?);
                    }
                }
                Ok(all)
            }
        }
    }
}

#[async_trait]
impl Backend for ServiceBus {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Servicebus
    }

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
            ],
        }
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let entries = match self.entries().await {
            Ok(e) => e,
            Err(BackendError::Auth(m)) => match &self.rest.info.entity_path {
                // A Listen/Send key scoped to one entity: show the entity without settings.
                Some(p) => {
                    tracing::warn!("servicebus: {m}");
                    vec![QueueEntry {
                        name: p.clone(),
                        ..Default::default()
                    }]
                }
                None => return Err(BackendError::Auth(m)),
            },
            Err(e) => return Err(e),
        };
        let mut out = Vec::with_capacity(entries.len() * 2);
        for e in &entries {
            let (m, d) = queue_info(e);
            out.push(m);
            out.push(d);
        }
        Ok(out)
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let mut parents: Vec<String> = queues
            .iter()
            .map(|q| dlq_parent(q.as_str()).unwrap_or(q.as_str()).to_string())
            .collect();
        parents.sort();
        parents.dedup();
        // A few queues: one GET each. More: one feed page per 100 queues in the namespace.
        let entries: Vec<QueueEntry> = if parents.len() <= 3 {
            let mut v = Vec::new();
            for p in &parents {
                if let Some(e) = mgmt::get_queue(&self.rest, p).await? {
                    v.push(e);
                }
            }
            v
        } else {
            self.entries().await?
        };
        let at = now_ms();
        let mut batch = StatsBatch::default();
        for q in queues {
            let parent = dlq_parent(q.as_str()).unwrap_or(q.as_str());
            match entries.iter().find(|e| e.name.eq_ignore_ascii_case(parent)) {
                Some(e) => batch.stats.push(stats_for(q, e, at)),
                None => batch
                    .errors
                    .push((q.clone(), format!("no queue named {parent}"))),
            }
        }
        Ok(batch)
    }

    async fn consumers(&self, _queue: &QueueId) -> Result<Vec<Consumer>> {
        Err(BackendError::Unsupported(
            "Service Bus does not list the receivers of a queue".to_string(),
        ))
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(&self.rest, queue.as_str(), req).await
    }

    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        if dlq_parent(queue.as_str()).is_some() {
            return Err(BackendError::Invalid(
                "Service Bus does not accept messages sent to a dead-letter queue".to_string(),
            ));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let mut props = Map::new();
        props.insert("MessageId".into(), Value::String(id.clone()));
        if let Some(k) = &msg.key {
            props.insert("SessionId".into(), Value::String(k.clone()));
        }
        if let Some(d) = msg.delay {
            let at = chrono::Utc::now() + chrono::Duration::milliseconds(d.as_millis() as i64);
            props.insert(
                "ScheduledEnqueueTimeUtc".into(),
                Value::String(at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()),
            );
        }
        let mut content_type = None;
        let mut custom = Vec::new();
        for (k, v) in msg.headers {
            if k.eq_ignore_ascii_case("content-type") {
                content_type = Some(v);
            } else if runtime::SETTABLE.iter().any(|s| s.eq_ignore_ascii_case(&k)) {
                props.insert(k, Value::String(v));
            } else {
                // Custom properties are JSON values in headers: strings are quoted.
                custom.push((k, Value::String(v).to_string()));
            }
        }
        let out = runtime::Outgoing {
            body: msg.body,
            content_type,
            props,
            custom,
        };
        runtime::send(&self.rest, queue.as_str(), &out).await?;
        Ok(Some(id))
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        resubmit::resubmit(self.rest.clone(), req, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        purge::purge(self.rest.clone(), queue.as_str(), progress).await
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.rest.calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlq_parent_handles_any_name() {
        assert_eq!(dlq_parent("orders/$DeadLetterQueue"), Some("orders"));
        assert_eq!(dlq_parent("orders/$deadletterqueue"), Some("orders"));
        assert_eq!(dlq_parent("/$DeadLetterQueue"), None);
        assert_eq!(dlq_parent("orders"), None);
        assert_eq!(dlq_parent("ééééééééééééééééééé"), None);
        assert!(is_subscription("t/Subscriptions/s"));
    }
}
