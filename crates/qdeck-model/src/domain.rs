//! Broker-neutral types shared by the backends, the engine, the CLI and the console.
//!
//! A figure a broker cannot give is `None` (rendered `—`), never zero. JSON field names of the
//! serialised types are part of the CLI's stable output (see README "JSON output").

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

mod groups;
mod seek;
mod value;
pub use crate::queue_error::{QueueError, QueueErrorKind};
pub use groups::{
    GroupDeletePlan, OffsetResetPlan, OffsetResetReport, PartitionFigures, PartitionReset, ResetTo,
};
pub use seek::{SeekPlan, SeekReport};
pub use value::Value;

/// Named typed values in broker order: a message's properties, headers or metadata.
pub type Fields = Vec<(String, Value)>;

/// A queue as the backend addresses it. The text is backend-defined (SQS: queue name,
/// RabbitMQ: `vhost/name` only when several vhosts are shown, else the name; Service Bus:
/// entity path such as `orders` or `orders/$DeadLetterQueue`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueueId(pub String);

impl QueueId {
    pub fn new(s: impl Into<String>) -> Self {
        QueueId(s.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for QueueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which broker a backend speaks to. Code branches on this (or better, on a capability),
/// never on a name string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerKind {
    Local,
    Rabbitmq,
    Sqs,
    Servicebus,
    Redis,
    Nats,
    Pubsub,
    Kafka,
}

impl BrokerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerKind::Local => "local",
            BrokerKind::Rabbitmq => "rabbitmq",
            BrokerKind::Sqs => "sqs",
            BrokerKind::Servicebus => "servicebus",
            BrokerKind::Redis => "redis",
            BrokerKind::Nats => "nats",
            BrokerKind::Pubsub => "pubsub",
            BrokerKind::Kafka => "kafka",
        }
    }
}

impl std::fmt::Display for BrokerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many messages a queue holds right now, for decisions (is it empty? how many will a
/// redrive move?). `exact` is false where the broker only has an estimate (SQS's
/// approximate figures): then no decision may refuse work because of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageCount {
    /// Ready / visible / active messages.
    pub ready: u64,
    /// Leased / unacknowledged / locked, where known.
    pub in_flight: Option<u64>,
    pub exact: bool,
}

/// What flavour of queue this is, as far as it changes what the console can say or do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    #[default]
    Standard,
    Fifo,
    Classic,
    Quorum,
    Stream,
    Subscription,
    /// A Service Bus topic: shown for its own figures (scheduled messages wait on it).
    Topic,
    /// A JetStream consumer (`STREAM/CONSUMER`): its figures are what it has yet to deliver
    /// and what it waits for acks on, out of its stream.
    Consumer,
}

/// Static settings read with the queue list. Unknown values are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSettings {
    /// Lease / visibility timeout / lock duration, seconds.
    pub lease_secs: Option<f64>,
    /// Receives/deliveries after which the broker dead-letters a message.
    pub max_receives: Option<u32>,
    pub retention_secs: Option<f64>,
    /// Key-ordering policy (local broker: parallel | exclusive | ordered).
    pub key_policy: Option<String>,
    /// Anything else worth showing on the detail panel, already as display text.
    pub extra: BTreeMap<String, String>,
}

/// One queue from `list_queues`, with DLQ links in both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    pub id: QueueId,
    pub kind: QueueKind,
    /// True when this queue is some other queue's dead-letter target.
    pub is_dlq: bool,
    /// Where this queue's dead letters go.
    pub dlq: Option<QueueId>,
    /// Queues that dead-letter into this one.
    pub dlq_sources: Vec<QueueId>,
    pub settings: QueueSettings,
}

/// The `settings.extra` key under which a backend says what a DLQ with no `dlq_sources` is the
/// DLQ of, or why it cannot name the queues.
pub const DLQ_OF: &str = "dlq of";

impl QueueInfo {
    /// What this DLQ is the DLQ of, as a row says it: its sources, else the backend's note,
    /// else that the broker does not tell. `None` for a queue that is no DLQ; never empty.
    pub fn dlq_of(&self) -> Option<String> {
        if !self.is_dlq {
            return None;
        }
        if !self.dlq_sources.is_empty() {
            let names: Vec<&str> = self.dlq_sources.iter().map(QueueId::as_str).collect();
            return Some(names.join(","));
        }
        Some(
            match self
                .settings
                .extra
                .get(DLQ_OF)
                .filter(|n| !n.trim().is_empty())
            {
                Some(note) => note.clone(),
                None => "? (the broker does not say which queues dead-letter here)".to_string(),
            },
        )
    }
}

/// Live figures for one queue at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    pub id: QueueId,
    /// Unix time in milliseconds when the broker answered.
    pub at_ms: i64,
    /// Visible / ready / active messages.
    pub depth: Option<u64>,
    /// Leased / not visible / unacknowledged / locked.
    pub in_flight: Option<u64>,
    /// Delayed / scheduled.
    pub delayed: Option<u64>,
    /// Depth of this queue's DLQ, when it has one.
    pub dlq_depth: Option<u64>,
    /// Age of the oldest message, seconds.
    pub oldest_age_secs: Option<f64>,
    /// Why age is missing, or where it came from when it is not exact (e.g. "CloudWatch, 2 min late").
    pub age_note: Option<String>,
    pub consumers: Option<u32>,
    /// Monotonic counters from the broker, when it keeps them (rates are derived from deltas).
    pub enqueued_total: Option<u64>,
    pub completed_total: Option<u64>,
    pub dead_lettered_total: Option<u64>,
    /// Rates the broker computed itself, messages per second.
    pub in_rate: Option<f64>,
    pub out_rate: Option<f64>,
    /// Messages the broker deleted before this reader got to them (Kafka: a group's committed
    /// offset below the partition's log start offset, a retention breach), summed over the
    /// partitions. `None` where the broker has no such notion; `Some(0)` when none are lost.
    pub lost: Option<u64>,
    /// What a log keeps whether or not its readers consumed it (a JetStream limits or interest
    /// stream, a Kafka topic, a RabbitMQ stream): retention, not backlog. Such a row leaves
    /// `depth` and `oldest_age_secs` `None`, since its readers' rows carry the backlog, so
    /// nothing ranks on fire, fires a rule or fails `check` on what is merely kept; a rule
    /// reads it only by name (`retained`).
    #[serde(default)]
    pub retained: Option<u64>,
    /// Age of the oldest retained message, seconds (`retained_age`).
    #[serde(default)]
    pub retained_age_secs: Option<f64>,
    /// When the figures were measured, where that is not when the broker answered (a metric
    /// sampled each minute and published minutes late). `None`: as of `at_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<Sampled>,
    /// Messages this queue forwarded to its dead-letter queue over a recent window, where the
    /// broker counts them (Pub/Sub's `dead_letter_message_count`). `None`: no such count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded: Option<Forwarded>,
}

/// A count of dead-lettered messages over the last `window_secs` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forwarded {
    pub count: u64,
    pub window_secs: u32,
}

/// The time a metric's figures describe and how often the metric is sampled: Cloud
/// Monitoring writes a point a minute, readable a few minutes later. Figures that repeat
/// between two points are the same measurement, and no change shows over less than one
/// sampling interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampled {
    /// Unix time in milliseconds the figures describe (the point's end time).
    pub at_ms: i64,
    /// Seconds between two points of the metric.
    pub every_secs: u32,
}

impl QueueStats {
    /// Seconds the figures were old when the broker answered: 0 for figures read live.
    pub fn figures_age_secs(&self) -> f64 {
        self.sampled
            .map_or(0.0, |s| ((self.at_ms - s.at_ms).max(0)) as f64 / 1000.0)
    }

    /// Seconds between two independent measurements: 0 for figures read live.
    pub fn sample_secs(&self) -> u32 {
        self.sampled.map_or(0, |s| s.every_secs)
    }
}

/// Result of one `stats` call: figures for queues that answered, errors for those that did not.
#[derive(Debug, Clone, Default)]
pub struct StatsBatch {
    pub stats: Vec<QueueStats>,
    /// Queues whose figures could not be read, each with why, by kind.
    pub errors: Vec<(QueueId, QueueError)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckMode {
    Manual,
    Auto,
    Unknown,
}

/// What a worker is doing, as a value scripts compare (`Consumer::state` is the text people
/// read, with the broker's detail and durations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Taking work: seen within seconds, or subscribed and receiving deliveries.
    Active,
    /// Holding messages or running jobs now.
    Busy,
    /// Connected or seen recently, doing nothing.
    Idle,
    /// Subscribed but not given deliveries (a single-active-consumer standby).
    Waiting,
    /// Finishing its work before it stops (Sidekiq's quiet).
    Stopping,
    /// Not seen for a minute or more, or its heartbeat stopped.
    Gone,
    /// A lease of it expired without an ack: it crashed or lost its lease.
    LeaseLost,
    Unknown,
}

/// One session of a session-enabled Service Bus entity: its id, the messages it holds (as far
/// as a bounded peek counted them) and its session state, where the broker gave them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub messages: Option<u64>,
    /// True when `messages` stopped at the count limit: there are at least that many.
    #[serde(default)]
    pub messages_capped: bool,
    #[serde(default, with = "crate::domain::body_serde")]
    pub state: Vec<u8>,
    /// Why the state could not be read (another receiver holds the session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_note: Option<String>,
}

/// A worker consuming a queue: a RabbitMQ consumer, or a lease holder on the local broker.
/// In JSON `state` is the value (`WorkerState`) and `state_text` the display text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consumer {
    pub queue: QueueId,
    /// Consumer tag / worker id.
    pub tag: String,
    /// Where it connects from (channel, peer address, host), display text.
    pub peer: Option<String>,
    /// 0 means unlimited.
    pub prefetch: Option<u32>,
    pub ack_mode: AckMode,
    /// Display text: "active", "idle 20s", "gone 2m", "lease lost ×2", …
    #[serde(rename = "state_text")]
    pub state: String,
    #[serde(rename = "state")]
    pub status: WorkerState,
    /// Unix ms the state began where the broker tells it (an idle or gone worker: when it was
    /// last active), from which the display text's duration counts.
    #[serde(rename = "state_since_ms")]
    pub status_since_ms: Option<i64>,
    /// Messages it holds right now.
    pub holding: Option<u64>,
    pub processed: Option<u64>,
    pub failed: Option<u64>,
    /// Messages per second it completed over its recent window.
    pub rate: Option<f64>,
    pub last_seen_ms: Option<i64>,
}

/// What the broker recorded about a dead-lettered message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeadLetterInfo {
    /// The broker's own word for it (`rejected`, `maxReceiveCount exceeded`, `max_deliveries`).
    pub reason: Option<String>,
    pub description: Option<String>,
    /// Why it died in the words of whoever failed it, the most specific text the message
    /// records (an exception message, an error description, a termination reason), as its
    /// backend reads it; `None` where only the broker's generic `reason` is known. The message
    /// view's `why` line and the DLQ list's REASON show it first.
    #[serde(default)]
    pub why: Option<String>,
    /// The queue the message was dead-lettered from (the redrive target by default).
    pub origin: Option<QueueId>,
    pub count: Option<u64>,
    pub at_ms: Option<i64>,
}

/// A message as browsed, in four parts: the body, the standard properties the application
/// set (named as the broker names them), the application headers with their types, and what
/// the broker added (read-only: no send path sends it again). Body is raw bytes; views decide
/// between text, JSON and hex.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    /// Broker sequence number where there is one.
    pub seq: Option<i64>,
    pub enqueued_ms: Option<i64>,
    pub receive_count: Option<u64>,
    pub key: Option<String>,
    /// Standard properties: AMQP basic properties (`content_type`, …), SQS
    /// `MessageGroupId`/`MessageDeduplicationId`, Service Bus `ContentType`, `CorrelationId`, …
    #[serde(default)]
    pub properties: Vec<(String, Value)>,
    /// Application headers / message attributes / custom properties, in broker order.
    #[serde(default)]
    pub headers: Vec<(String, Value)>,
    /// Broker metadata: `x-death`, redelivered, exchange, routing key, SQS system attributes,
    /// Service Bus broker-set properties, the local broker's state.
    #[serde(default)]
    pub meta: Vec<(String, Value)>,
    #[serde(with = "crate::domain::body_serde")]
    pub body: Vec<u8>,
    /// The body is null rather than empty (Kafka's null value, a tombstone): set by a backend
    /// whose broker tells the two apart, and written out only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_null: bool,
    pub dead_letter: Option<DeadLetterInfo>,
}

/// Which part of a message a field belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Meta,
    Property,
    Header,
}

impl Message {
    /// Every field as (part, name, value): metadata, then properties, then headers.
    pub fn fields(&self) -> impl Iterator<Item = (Part, &str, &Value)> {
        fn tag(p: Part) -> impl Fn(&(String, Value)) -> (Part, &str, &Value) {
            move |(k, v)| (p, k.as_str(), v)
        }
        self.meta
            .iter()
            .map(tag(Part::Meta))
            .chain(self.properties.iter().map(tag(Part::Property)))
            .chain(self.headers.iter().map(tag(Part::Header)))
    }

    /// Every field as (name, display text), in the order of `fields`: what views, predicates
    /// and reason signatures read.
    pub fn text_fields(&self) -> Vec<(String, String)> {
        self.fields()
            .map(|(_, k, v)| (k.to_string(), v.text()))
            .collect()
    }

    /// Whether the body is null rather than empty (see `body_null`).
    pub fn body_is_null(&self) -> bool {
        self.body_null && self.body.is_empty()
    }

    /// The display text of the first field of that name (case-insensitive), any part.
    pub fn field_text(&self, name: &str) -> Option<String> {
        self.fields()
            .find(|(_, k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, _, v)| v.text())
    }

    /// When a delayed or scheduled message falls due: the `due-at` field (RFC 3339) a
    /// backend's scheduled listing puts on it.
    pub fn due_ms(&self) -> Option<i64> {
        let v = self.field_text("due-at")?;
        chrono::DateTime::parse_from_rfc3339(&v)
            .ok()
            .map(|t| t.timestamp_millis())
    }
}

/// Bodies travel in JSON as UTF-8 text when they are valid UTF-8, else as base64 with a marker.
pub mod body_serde {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Text(String),
        Binary { base64: String },
    }

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(b) {
            Ok(t) => Repr::Text(t.to_string()).serialize(s),
            Err(_) => Repr::Binary {
                base64: base64::engine::general_purpose::STANDARD.encode(b),
            }
            .serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Text(t) => Ok(t.into_bytes()),
            Repr::Binary { base64 } => base64::engine::general_purpose::STANDARD
                .decode(base64)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A message to publish (CLI `send`, import, edit, copy, the demo, tests): body, standard
/// properties and typed headers. Nothing of a browsed message's metadata goes in here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutgoingMessage {
    pub body: Vec<u8>,
    pub key: Option<String>,
    pub delay: Option<Duration>,
    /// Standard properties, named as the target broker names them.
    pub properties: Vec<(String, Value)>,
    pub headers: Vec<(String, Value)>,
}

impl OutgoingMessage {
    /// A message with text headers (`qdeck send -H k=v`, the demo, tests).
    pub fn text(body: impl Into<Vec<u8>>, headers: &[(&str, &str)]) -> OutgoingMessage {
        OutgoingMessage {
            body: body.into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), Value::str(*v)))
                .collect(),
            ..OutgoingMessage::default()
        }
    }

    /// The message a browsed one would be sent again as: its body, key, properties and
    /// headers; never its metadata.
    pub fn resend(m: &Message) -> OutgoingMessage {
        OutgoingMessage {
            body: m.body.clone(),
            key: m.key.clone(),
            delay: None,
            properties: m.properties.clone(),
            headers: m.headers.clone(),
        }
    }
}

/// What browsing does to a message on this broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum BrowseEffect {
    /// A true peek: nothing about the message changes.
    None,
    /// Browsing changes something; the text says what (shown before browsing).
    SideEffect(String),
    /// Browsing this queue is not possible; the text says why.
    Unsupported(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum RedriveMode {
    /// The broker moves messages itself (SQS move task, RabbitMQ shovel).
    Native(String),
    /// qdeck copies each message, waits for the broker to confirm, then deletes the original.
    ClientSide,
    Unsupported(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum AgeSource {
    Exact,
    /// From a metric that lags; the text says by how much.
    Metric(String),
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum ConsumerListing {
    /// Consumers are listed with prefetch and ack mode.
    Listed,
    /// Workers are known by the leases they hold.
    Leases,
    Unsupported(String),
}

/// What a broker can and cannot do. The console and CLI read this instead of guessing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    pub browse: BrowseEffect,
    pub redrive: RedriveMode,
    pub age: AgeSource,
    pub consumers: ConsumerListing,
    /// Minimum time between two purges of one queue (SQS: 60 s).
    pub purge_cooldown_secs: Option<u64>,
    /// Caveat shown in the purge dialog (e.g. "unacknowledged messages are not purged").
    pub purge_note: Option<String>,
    /// Whether rates come from the broker or are derived from depth deltas.
    pub broker_rates: bool,
    /// Free-form notes for the detail panel.
    pub notes: Vec<String>,
}

/// Where a redrive sends messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "queue")]
pub enum RedriveTarget {
    /// Each message back to the queue it was dead-lettered from.
    Origin,
    Queue(QueueId),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveRequest {
    pub source: QueueId,
    pub target: RedriveTarget,
    /// Move at most this many.
    pub max: Option<u64>,
    /// Messages per second, at most (checked where it was given).
    pub rate: Option<crate::rate::Rate>,
    /// Only these message ids (from a browse); `None` means all.
    pub only_ids: Option<Vec<String>>,
    /// At most this many copies sent but not yet confirmed-and-deleted at once: what a crash
    /// may duplicate. `None`: the backend's default (stated in `--help`).
    pub window: Option<u32>,
}

/// What a redrive would do, computed without changing anything. The dry run prints it; the
/// real run computes the same plan, asks, and then moves at most `count.ready`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedrivePlan {
    /// Messages that will move (already capped by `max` and `only_ids`).
    pub count: MessageCount,
    pub mode: RedriveMode,
    /// What the user should know before confirming (new message ids, side effects, caps).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RedriveReport {
    pub moved: u64,
    pub failed: u64,
    /// Copied but the original could not be confirmed deleted: it may be delivered twice.
    pub possibly_duplicated: u64,
    /// How the move was done ("client-side", "shovel", "move task").
    pub mode: String,
    pub cancelled: bool,
    pub errors: Vec<String>,
    /// A one-pass filtered redrive: messages it tested against the predicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examined: Option<u64>,
    /// A one-pass filtered redrive: messages that matched (moved + failed among them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<u64>,
}

/// What deleting chosen messages (by id) did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeleteReport {
    pub deleted: u64,
    /// Ids no longer in the queue (consumed, redriven or deleted since the browse).
    pub missing: u64,
    /// Messages a worker holds a live lease on: left in place.
    pub leased: u64,
    pub cancelled: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PurgeReport {
    /// Messages removed, when the broker says.
    pub purged: Option<u64>,
    pub note: Option<String>,
}

/// A page of browsed messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page {
    pub messages: Vec<Message>,
    /// Opaque cursor for the next page; `None` at the end.
    pub next: Option<String>,
    /// What browsing did (e.g. "receive count of 12 messages went up by one").
    pub effect_note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BrowseRequest {
    pub cursor: Option<String>,
    pub max: usize,
    /// Browse even where it could push a message toward its DLQ.
    pub force: bool,
}

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn ms_to_datetime(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}
