//! Azure Service Bus backend: counts and settings from the ATOM management API (`mgmt`),
//! whichever the transport; messages through one `Transport` chosen when the backend is built
//! from the profile's `transport`: AMQP 1.0 (`amqp/`, the default: a true peek, sessions,
//! scheduled and deferred messages) or REST (`rest/`: peek-lock, unlock, complete,
//! receive-and-delete over HTTP). How a redrive copies is the same over both
//! (`copy_policy`). The connection string comes from the variable the profile names, read
//! through the `SecretSource` the backend is built with.
//!
//! REST runtime calls go straight over reqwest, not through `azure_messaging_servicebus` 0.21:
//! see the comment at the top of `rest/runtime.rs` for why (binary bodies, lenient
//! BrokerProperties, keeping the lock URI, custom endpoints). Those crates are dev-dependencies
//! only, kept for the test that documents their failures.
//!
//! Rows: queues and subscriptions with their `$DeadLetterQueue`, and topics (kind `topic`, no
//! DLQ) for their own figures (scheduled messages wait on the topic). An entity with
//! `ForwardDeadLetteredMessagesTo` links its DLQ to the forward target, where its dead letters
//! really are. Counts (`CountDetails`) are the broker's own figures at the time of the GET, so
//! `count` reports them as exact.
//!
//! Verified against stand-ins, not against Azure: REST against `tests/servicebus_standin/`,
//! AMQP against `scripts/sb_standin.sh` (held to Microsoft's own client).

mod amqp;
pub mod connstr;
mod copy_policy;
pub mod entra;
mod http;
pub mod mgmt;
pub mod rest;
mod token_life;
mod transport;
pub mod ttl;

use std::sync::Arc;

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result, Sender};
use copy_policy::target_of;
use http::Rest;
use mgmt::QueueEntry;
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, SbAuth, SbTransport, ServicebusSettings};
use qdeck_model::domain::*;
use qdeck_model::sanitize;
use transport::Transport;

pub const DLQ_SUFFIX: &str = "/$DeadLetterQueue";

/// Deleting by id has no addressed delete to use: this is what it costs the other messages.
pub const DELETE_COST: &str =
    "deleting chosen messages peek-locks every message it passes, completes \
     the chosen ones and unlocks the others (their DeliveryCount +1); only on dead-letter queues";

const AGE_NOTE: &str =
    "Service Bus reports no age of oldest message, and REST cannot peek without locking";

/// Messages that could not be auto-forwarded (or sent on through a transaction) wait here.
pub const TRANSFER_DLQ_SUFFIX: &str = "/$Transfer/$DeadLetterQueue";

/// `orders/$Transfer/$DeadLetterQueue`: the transfer dead-letter queue.
pub fn is_transfer_dlq(entity: &str) -> bool {
    entity
        .len()
        .checked_sub(TRANSFER_DLQ_SUFFIX.len())
        .filter(|c| *c > 0)
        .and_then(|c| entity.get(c..))
        .is_some_and(|t| t.eq_ignore_ascii_case(TRANSFER_DLQ_SUFFIX))
}

/// `orders/$DeadLetterQueue` or `orders/$Transfer/$DeadLetterQueue` → `Some("orders")`.
pub fn dlq_parent(entity: &str) -> Option<&str> {
    if is_transfer_dlq(entity) {
        return entity.get(..entity.len() - TRANSFER_DLQ_SUFFIX.len());
    }
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
    /// The management API (counts, settings, listing), whichever the transport.
    rest: Arc<Rest>,
    /// How messages travel: REST or AMQP (profile `transport`, AMQP by default).
    transport: Box<dyn Transport>,
    /// Also list topics' subscriptions (profile `topics`, default true).
    topics: bool,
    /// The development emulator with no `management_url`: its management API is not on the
    /// connection string's endpoint, so a failed listing says what to set.
    emulator_without_management: bool,
}

/// `orders/Subscriptions/audit` (or its DLQ) is a subscription, not a queue.
pub fn is_subscription(entity: &str) -> bool {
    entity.to_ascii_lowercase().contains("/subscriptions/")
}

pub async fn connect(
    profile: &Profile,
    settings: &ServicebusSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    settings
        .check(&format!("profile '{}'", profile.name))
        .map_err(BackendError::Invalid)?;
    let entra = match settings.auth.unwrap_or_default() {
        SbAuth::Sas => None,
        SbAuth::AzureCli => Some(entra::EntraCredential::azure_cli()),
        SbAuth::WorkloadIdentity => Some(entra::EntraCredential::workload_identity(
            &profile.name,
            secrets,
        )?),
    }
    .map(|c| connstr::Credential::Entra(Arc::new(c)));
    let info = match (entra, settings.namespace.as_deref()) {
        (Some(cred), Some(ns)) => connstr::for_namespace(ns, cred),
        (entra, _) => {
            let var = settings.connection_string_env.trim();
            let cs = secrets.require(&profile.name, "connection_string_env", var)?;
            let parsed = match entra {
                Some(cred) => connstr::parse_endpoint(&cs, cred),
                None => connstr::parse(&cs),
            };
            parsed.map_err(|e| {
                BackendError::Invalid(format!(
                    "profile '{}', ${var}: {}",
                    profile.name,
                    strip_invalid(&e)
                ))
            })?
        }
    };
    let mut info = info;
    info.token_ttl_secs = settings
        .sas_token_ttl_secs()
        .map_err(|e| BackendError::Invalid(format!("profile '{}': {e}", profile.name)))?;
    let runtime_info = info.clone();
    let emulator_without_management = info.emulator
        && settings
            .management_url
            .as_deref()
            .is_none_or(|u| u.trim().is_empty());
    let info = match settings
        .management_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
    {
        Some(u) => info.with_management_url(u).map_err(|e| {
            BackendError::Invalid(format!("profile '{}': {}", profile.name, strip_invalid(&e)))
        })?,
        None => info,
    };
    let rest = Arc::new(Rest::new(info)?);
    let transport: Box<dyn Transport> = match settings.transport.unwrap_or_default() {
        SbTransport::Amqp => Box::new(amqp::Amqp::new(runtime_info, rest.clone())),
        SbTransport::Rest => Box::new(rest::RestTransport::new(rest.clone())),
    };
    Ok(Arc::new(ServiceBus {
        rest,
        transport,
        topics: settings.topics.unwrap_or(true),
        emulator_without_management,
    }))
}

#[async_trait]
impl crate::Sessions for ServiceBus {
    async fn sessions(&self, queue: &QueueId) -> Result<Vec<SessionInfo>> {
        self.transport.sessions(queue).await
    }

    async fn browse_session(
        &self,
        queue: &QueueId,
        session: &str,
        req: &BrowseRequest,
    ) -> Result<Page> {
        self.transport.browse_session(queue, session, req).await
    }
}

impl ServiceBus {
    /// A failed listing against the emulator's AMQP endpoint says what is missing: the
    /// emulator serves its management API elsewhere, and a bare HTTP error does not say so.
    fn emulator_hint(&self, e: BackendError) -> BackendError {
        if !self.emulator_without_management {
            return e;
        }
        let hint = "the Service Bus emulator serves its management API on its own HTTP \
                    port: set management_url in the profile";
        match e {
            BackendError::Unreachable(m) => BackendError::Unreachable(format!("{m}; {hint}")),
            BackendError::Protocol(m) => BackendError::Protocol(format!("{m}; {hint}")),
            BackendError::Other(m) => BackendError::Other(format!("{m}; {hint}")),
            other => other,
        }
    }
}

fn strip_invalid(e: &BackendError) -> String {
    match e {
        BackendError::Invalid(m) => m.clone(),
        other => other.to_string(),
    }
}

fn settings_of(e: &QueueEntry) -> QueueSettings {
    let mut settings = QueueSettings {
        lease_secs: e
            .fields
            .get("LockDuration")
            .and_then(|d| mgmt::iso_duration_secs(d)),
        max_receives: e
            .field_u64("MaxDeliveryCount")
            .and_then(|n| u32::try_from(n).ok()),
        // TimeSpan.MaxValue, the default, is no retention: not 29 million years of it.
        retention_secs: e
            .fields
            .get("DefaultMessageTimeToLive")
            .and_then(|d| mgmt::iso_duration_secs(d))
            .filter(|s| *s < ttl::NOT_SET_FROM_SECS),
        ..Default::default()
    };
    for (k, label) in [
        ("SizeInBytes", "size_bytes"),
        ("Status", "status"),
        ("RequiresSession", "requires_session"),
        ("RequiresDuplicateDetection", "duplicate_detection"),
        (
            "DuplicateDetectionHistoryTimeWindow",
            "duplicate_detection_window",
        ),
        ("EnablePartitioning", "partitioned"),
        ("DeadLetteringOnMessageExpiration", "dead_letter_on_expiry"),
        ("SubscriptionCount", "subscriptions"),
    ] {
        if let Some(v) = e.fields.get(k).filter(|v| !v.is_empty()) {
            settings
                .extra
                .insert(label.to_string(), sanitize::clean(v).into_owned());
        }
    }
    for (k, label) in [
        ("ForwardTo", "forward_to"),
        ("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_to"),
    ] {
        if let Some(v) = e.entity_field(k) {
            settings
                .extra
                .insert(label.to_string(), sanitize::clean(&v).into_owned());
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
    settings
}

/// The rows for one entity: a topic alone (it has no DLQ of its own); a queue or subscription
/// and its `$DeadLetterQueue`. With `ForwardDeadLetteredMessagesTo`, the entity's DLQ link
/// names the forward target, where its dead letters really go.
fn queue_infos(e: &QueueEntry) -> Vec<QueueInfo> {
    let settings = settings_of(e);
    let id = QueueId::new(e.name.clone());
    if e.kind == mgmt::EntryKind::Topic {
        return vec![QueueInfo {
            id,
            kind: QueueKind::Topic,
            is_dlq: false,
            dlq: None,
            dlq_sources: Vec::new(),
            settings,
        }];
    }
    let own_dlq = QueueId::new(format!("{}{DLQ_SUFFIX}", e.name));
    let kind = if e.kind == mgmt::EntryKind::Subscription || is_subscription(&e.name) {
        QueueKind::Subscription
    } else {
        QueueKind::Standard
    };
    let dlq_link = e
        .entity_field("ForwardDeadLetteredMessagesTo")
        .map_or_else(|| own_dlq.clone(), QueueId::new);
    let main = QueueInfo {
        id: id.clone(),
        kind,
        is_dlq: false,
        dlq: Some(dlq_link),
        dlq_sources: Vec::new(),
        settings: settings.clone(),
    };
    let sub_queue = |id: QueueId| QueueInfo {
        id,
        kind,
        is_dlq: true,
        dlq: None,
        dlq_sources: vec![main.id.clone()],
        settings: QueueSettings {
            lease_secs: settings.lease_secs,
            ..Default::default()
        },
    };
    let mut rows = vec![sub_queue(own_dlq)];
    // A row only while it holds messages: most entities never use it.
    if e.count("TransferDeadLetterMessageCount")
        .is_some_and(|n| n > 0)
    {
        rows.push(sub_queue(QueueId::new(format!(
            "{}{TRANSFER_DLQ_SUFFIX}",
            e.name
        ))));
    }
    rows.insert(0, main);
    rows
}

/// An entity shown by name only: the key cannot read its description.
fn name_only(entity: &str) -> QueueEntry {
    QueueEntry {
        name: entity.to_string(),
        kind: if is_subscription(entity) {
            mgmt::EntryKind::Subscription
        } else {
            mgmt::EntryKind::Queue
        },
        ..Default::default()
    }
}

/// Rows for `entries`, with forward targets linked back to the entities that forward their
/// dead letters to them.
fn infos_for(entries: &[QueueEntry]) -> Vec<QueueInfo> {
    let mut out: Vec<QueueInfo> = entries.iter().flat_map(queue_infos).collect();
    let forwards: Vec<(QueueId, QueueId)> = out
        .iter()
        .filter(|q| !q.is_dlq)
        .filter_map(|q| {
            let d = q.dlq.as_ref()?;
            (dlq_parent(d.as_str()).is_none()).then(|| (d.clone(), q.id.clone()))
        })
        .collect();
    for (target, source) in forwards {
        if let Some(t) = out
            .iter_mut()
            .find(|q| q.id.as_str().eq_ignore_ascii_case(target.as_str()))
        {
            t.dlq_sources.push(source);
        }
    }
    out
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
        return QueueStats {
            depth: e.count(dlq_count_field(id.as_str())),
            ..base
        };
    }
    // Dead letters forwarded elsewhere are counted on the target's row, not here.
    let dlq_depth = if e.kind == mgmt::EntryKind::Topic
        || e.entity_field("ForwardDeadLetteredMessagesTo").is_some()
    {
        None
    } else {
        e.count("DeadLetterMessageCount")
    };
    QueueStats {
        depth: e.count("ActiveMessageCount"),
        delayed: e.count("ScheduledMessageCount"),
        dlq_depth,
        ..base
    }
}

/// The CountDetails figure of a dead-letter sub-queue.
pub(super) fn dlq_count_field(entity: &str) -> &'static str {
    if is_transfer_dlq(entity) {
        "TransferDeadLetterMessageCount"
    } else {
        "DeadLetterMessageCount"
    }
}

/// Why figures are missing for every queue of a key without the Manage right.
fn unreadable(e: &BackendError) -> Option<QueueError> {
    match e {
        BackendError::Forbidden { .. } => Some(QueueError::from(e)),
        _ => None,
    }
}

impl ServiceBus {
    /// Single-entity connection strings (EntityPath) cannot list the namespace.
    async fn entries(&self) -> Result<Vec<QueueEntry>> {
        match &self.rest.info.entity_path {
            Some(p) => match mgmt::get_queue(&self.rest, p).await? {
                Some(e) => Ok(vec![e]),
                None => Err(BackendError::NotFound(format!(
                    "the connection string's EntityPath names {}, which does not exist in the namespace",
                    sanitize::clean(p)
                ))),
            },
            None => {
                let mut all = mgmt::list_all(&self.rest).await?;
                if self.topics {
                    // One request per page of topics, then one per page of each topic's
                    // subscriptions (the API has no namespace-wide subscription feed). Topics
                    // are rows too: scheduled messages wait on the topic, not its subscriptions.
                    for t in mgmt::list_topics(&self.rest).await? {
                        let subs = mgmt::list_subscriptions(&self.rest, &t.name).await?;
                        all.push(t);
                        all.extend(subs);
                    }
                }
                Ok(all)
            }
        }
    }

    /// The entity `queue` belongs to (itself, or the parent of a DLQ), with one GET.
    async fn entry_of(&self, queue: &QueueId) -> Result<QueueEntry> {
        let parent = dlq_parent(queue.as_str()).unwrap_or(queue.as_str());
        mgmt::get_queue(&self.rest, parent).await?.ok_or_else(|| {
            BackendError::NotFound(format!(
                "no queue, topic or subscription named {}",
                sanitize::clean(parent)
            ))
        })
    }

    /// The target's description when the key may read it: `Ok(None)` when it may not.
    async fn target_entry(&self, target: &str) -> Result<Option<QueueEntry>> {
        match mgmt::get_queue(&self.rest, target).await {
            Ok(Some(e)) => Ok(Some(e)),
            Ok(None) => Err(BackendError::NotFound(format!(
                "no queue or topic named {} to resubmit to",
                sanitize::clean(target)
            ))),
            Err(BackendError::Forbidden { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn dlq_send_refusal() -> BackendError {
    BackendError::Invalid("Service Bus does not accept messages sent to a dead-letter queue".into())
}

/// The note shown wherever copies into `target` get a new MessageId.
pub fn new_id_note(target: &str, known: bool) -> String {
    let why = if known {
        "has duplicate detection on"
    } else {
        "may have duplicate detection on (this key cannot read its settings)"
    };
    format!(
        "{} {why}: a copy keeping the original MessageId would be accepted and then silently dropped inside the detection window, so each copy gets a new MessageId and keeps the original in the property {}",
        sanitize::clean(target),
        copy_policy::ORIGINAL_ID_PROPERTY
    )
}

#[async_trait]
impl Backend for ServiceBus {
    fn sender(&self) -> Option<&dyn Sender> {
        Some(self)
    }

    fn kind(&self) -> BrokerKind {
        BrokerKind::Servicebus
    }

    fn capabilities(&self) -> Capabilities {
        self.transport.capabilities()
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut caps = self.capabilities();
        let extra = &queue.settings.extra;
        if queue.kind == QueueKind::Topic {
            let why = "a topic holds no messages to receive: its subscriptions do".to_string();
            caps.browse = BrowseEffect::Unsupported(why.clone());
            caps.redrive = RedriveMode::Unsupported(why);
            caps.purge_note = Some(
                "A topic cannot be purged: purge its subscriptions (scheduled messages stay on the topic until due)"
                    .into(),
            );
        }
        if let Some(why) = self.transport.receive_refusal(queue) {
            caps.browse = BrowseEffect::Unsupported(why.clone());
            caps.redrive = RedriveMode::Unsupported(why.clone());
            caps.purge_note = Some(why);
        }
        if extra
            .get("duplicate_detection")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            caps.notes.push(new_id_note(queue.id.as_str(), true));
        }
        if let Some(t) = extra.get("forward_to") {
            caps.notes.push(format!(
                "Auto-forwards every message to {t}: this entity stays empty, its messages are in {t}"
            ));
        }
        if let Some(t) = extra.get("forward_dead_lettered_to") {
            caps.notes.push(format!(
                "Forwards its dead letters to {t}: they are there, not in its own $DeadLetterQueue"
            ));
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let entries = match self.entries().await {
            Ok(e) => e,
            // A key scoped to one entity without Manage: show the entity without settings;
            // `stats` says per row what the key cannot read.
            Err(e @ BackendError::Forbidden { .. }) => match &self.rest.info.entity_path {
                Some(p) => {
                    tracing::warn!("servicebus: {e}");
                    vec![name_only(p)]
                }
                None => return Err(e),
            },
            Err(e) => return Err(self.emulator_hint(e)),
        };
        Ok(infos_for(&entries))
    }

    /// One GET of the entity. Entities that forward their dead letters here are not known
    /// without listing the namespace, so `dlq_sources` of a forward target stays empty.
    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        let entry = match self.entry_of(queue).await {
            Ok(e) => e,
            // No Manage right: the entity by name, as the runtime will address it.
            Err(BackendError::Forbidden { .. }) => {
                name_only(dlq_parent(queue.as_str()).unwrap_or(queue.as_str()))
            }
            Err(e) => return Err(e),
        };
        queue_infos(&entry)
            .into_iter()
            .find(|q| q.id.as_str().eq_ignore_ascii_case(queue.as_str()))
            .ok_or_else(|| {
                BackendError::NotFound(format!(
                    "{} has no such sub-queue (a topic has no dead-letter queue)",
                    sanitize::clean(queue.as_str())
                ))
            })
    }

    /// CountDetails from one GET: the broker's own figures at the time of the request (not a
    /// metric or a cache), so exact. ActiveMessageCount includes locked messages. A key without
    /// Manage cannot read them; over AMQP it counts by peeking instead, so a Listen/Send key
    /// can still plan a redrive or a purge.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        let e = match self.entry_of(queue).await {
            Ok(e) => e,
            Err(e @ BackendError::Forbidden { .. }) => {
                return self.transport.count_unreadable(queue, e).await;
            }
            Err(e) => return Err(e),
        };
        let ready = if dlq_parent(queue.as_str()).is_some() {
            e.count(dlq_count_field(queue.as_str()))
        } else {
            e.count("ActiveMessageCount")
        };
        let ready = ready.ok_or_else(|| {
            BackendError::Protocol(format!(
                "the description of {} has no CountDetails",
                sanitize::clean(queue.as_str())
            ))
        })?;
        Ok(MessageCount {
            ready,
            in_flight: None,
            exact: true,
        })
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let mut parents: Vec<String> = queues
            .iter()
            .map(|q| dlq_parent(q.as_str()).unwrap_or(q.as_str()).to_string())
            .collect();
        parents.sort();
        parents.dedup();
        // A few queues: one GET each. More: one feed page per 100 queues in the namespace.
        let fetched: Result<Vec<QueueEntry>> = if parents.len() <= 3 {
            let mut v = Vec::new();
            let mut failed = None;
            for p in &parents {
                match mgmt::get_queue(&self.rest, p).await {
                    Ok(Some(e)) => v.push(e),
                    Ok(None) => {}
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok(v),
            }
        } else {
            self.entries().await
        };
        let mut batch = StatsBatch::default();
        let entries = match fetched {
            Ok(e) => e,
            // The key cannot read counts: every row says so; the listing still stands.
            Err(e) => match unreadable(&e) {
                Some(why) => {
                    batch.errors = queues.iter().map(|q| (q.clone(), why.clone())).collect();
                    return Ok(batch);
                }
                None => return Err(e),
            },
        };
        let at = now_ms();
        for q in queues {
            let parent = dlq_parent(q.as_str()).unwrap_or(q.as_str());
            match entries.iter().find(|e| e.name.eq_ignore_ascii_case(parent)) {
                Some(e) => batch.stats.push(stats_for(q, e, at)),
                None => batch.errors.push((
                    q.clone(),
                    QueueError::not_found(format!("no entity named {}", sanitize::clean(parent))),
                )),
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
        self.transport.browse(self, queue, req).await
    }

    fn session_reader(&self) -> Option<&dyn crate::Sessions> {
        Some(self)
    }

    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing> {
        self.transport.scheduled()
    }

    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        let source = self.describe(&req.source).await?;
        if let RedriveMode::Unsupported(why) = self.capabilities_for(&source).redrive {
            return Err(BackendError::Unsupported(why));
        }
        let target = target_of(req)?;
        let policy = self.copy_policy(&target).await?;
        let mut count = self.count(&req.source).await?;
        if let Some(m) = req.max {
            count.ready = count.ready.min(m);
        }
        if let Some(ids) = &req.only_ids {
            count.ready = count.ready.min(ids.len() as u64);
        }
        Ok(RedrivePlan {
            count,
            mode: RedriveMode::ClientSide,
            notes: policy.notes,
        })
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        let target = target_of(req)?;
        let policy = self.copy_policy(&target).await?;
        self.transport.redrive(req, policy, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        if dlq_parent(queue.as_str()).is_none() {
            self.refuse_unreceivable(queue).await?;
        }
        self.transport.purge(self, queue, progress).await
    }

    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.rest.calls
    }
}

#[async_trait]
impl Sender for ServiceBus {
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        if dlq_parent(queue.as_str()).is_some() {
            return Err(dlq_send_refusal());
        }
        self.transport.send(queue, msg).await
    }

    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        if dlq_parent(queue.as_str()).is_some() {
            // Each would be refused alike: the answer stops at the first, as `send_many` does.
            return msgs
                .iter()
                .take(1)
                .map(|_| Err(dlq_send_refusal()))
                .collect();
        }
        self.transport.send_many(queue, msgs).await
    }
}

#[async_trait]
impl DeleteById for ServiceBus {
    fn delete_note(&self, _queue: &QueueInfo) -> Option<String> {
        Some(DELETE_COST.into())
    }

    fn delete_refusal(&self, queue: &QueueInfo) -> Option<String> {
        dlq_parent(queue.id.as_str())
            .is_none()
            .then(|| format!("{}: {}; refused", queue.id, DELETE_COST))
    }

    /// Peek-lock → complete the chosen ids, unlock the rest (DeliveryCount +1).
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        self.transport.delete_ids(queue, ids, progress).await
    }
}

impl ServiceBus {
    /// Refuse, before locking anything, an entity REST cannot receive from (a session-enabled
    /// queue or subscription, a topic). A key without Manage cannot tell: the broker decides.
    pub(super) async fn refuse_unreceivable(&self, queue: &QueueId) -> Result<()> {
        let info = match self.describe(queue).await {
            Ok(i) => i,
            Err(BackendError::Forbidden { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(why) = self.transport.receive_refusal(&info) {
            return Err(BackendError::Unsupported(why));
        }
        if info.kind == QueueKind::Topic {
            return Err(BackendError::Unsupported(format!(
                "{} is a topic: it holds no messages to receive; use its subscriptions",
                sanitize::clean(queue.as_str())
            )));
        }
        Ok(())
    }

    /// How copies into `target` are made: with a new MessageId when the target has duplicate
    /// detection on (or when the key cannot read whether it has).
    async fn copy_policy(&self, target: &str) -> Result<copy_policy::CopyPolicy> {
        let entry = self.target_entry(target).await?;
        let (new_ids, known) = match &entry {
            Some(e) => (e.flag("RequiresDuplicateDetection"), true),
            None => (true, false),
        };
        let mut notes = Vec::new();
        if new_ids {
            notes.push(new_id_note(target, known));
        }
        if entry.as_ref().is_some_and(|e| e.flag("RequiresSession")) {
            notes.push(format!(
                "{} requires sessions: copies keep their SessionId; a message without one is refused by the broker and stays in the dead-letter queue",
                sanitize::clean(target)
            ));
        }
        Ok(copy_policy::CopyPolicy { new_ids, notes })
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
        assert_eq!(
            dlq_parent("orders/$Transfer/$DeadLetterQueue"),
            Some("orders")
        );
        assert!(is_transfer_dlq(
            "t/Subscriptions/s/$transfer/$deadletterqueue"
        ));
        assert!(!is_transfer_dlq("/$Transfer/$DeadLetterQueue"));
        assert!(is_subscription("t/Subscriptions/s"));
    }
}
