//! Each broker's header rules, one table per broker. They sit here, outside the brokers'
//! feature-gated modules, because a build without a broker still reads files exported from it
//! and still names what a copy from it carries; `Backend::header_rules` hands a backend its own.

use qdeck_model::domain::{BrokerKind, Value};

use super::{AttributeRules, HeaderRules, V1Rules};

/// Properties two brokers both have, under a shared name: (shared name, the broker's own).
const AMQP_SHARED: &[(&str, &str)] = &[
    ("content-type", "content_type"),
    ("correlation-id", "correlation_id"),
    ("reply-to", "reply_to"),
    ("message-id", "message_id"),
];

pub const LOCAL: HeaderRules = HeaderRules {
    kind: BrokerKind::Local,
    properties: &[],
    identity: &[],
    shared: &[],
    // Computed by the local browse from the row, so meaningless anywhere else.
    computed: &["state", "due-at", "due-in"],
    keeps_type: |_| true,
    attributes: None,
    text_bodies: None,
    v1: V1Rules {
        system: &["state"],
        ..V1Rules::PLAIN
    },
};

pub const RABBITMQ: HeaderRules = HeaderRules {
    kind: BrokerKind::Rabbitmq,
    // AMQP 0-9-1 basic properties, as pika and lapin name them.
    properties: &[
        "content_type",
        "content_encoding",
        "delivery_mode",
        "priority",
        "correlation_id",
        "reply_to",
        "expiration",
        "message_id",
        "timestamp",
        "type",
        "user_id",
        "app_id",
        "cluster_id",
    ],
    identity: &[],
    shared: AMQP_SHARED,
    computed: &[],
    // AMQP tables have no arbitrary-precision number and no custom type.
    keeps_type: |v| !matches!(v, Value::Number(_) | Value::Custom { .. }),
    attributes: None,
    text_bodies: None,
    v1: V1Rules {
        // What the browse reports about the delivery, properties qdeck's send sets itself,
        // and headers the broker writes.
        system: &[
            "exchange",
            "routing-key",
            "redelivered",
            "delivery-mode",
            "message-id",
            "timestamp",
            "x-death",
            "x-delivery-count",
            "qdeck-key",
        ],
        ..V1Rules::PLAIN
    },
};

pub const SQS: HeaderRules = HeaderRules {
    kind: BrokerKind::Sqs,
    properties: &["MessageGroupId", "MessageDeduplicationId"],
    // FIFO queues drop a message sent again within 5 minutes under the same id.
    identity: &["MessageDeduplicationId"],
    shared: &[],
    computed: &[],
    keeps_type: |v| {
        matches!(
            v,
            Value::String(_) | Value::Number(_) | Value::Bytes(_) | Value::Custom { .. }
        )
    },
    attributes: Some(AttributeRules {
        max: 10,
        over_max: "SQS takes at most 10 message attributes",
        refusal: sqs_refusal,
    }),
    text_bodies: Some("SQS bodies are text"),
    v1: V1Rules {
        system: &[],
        // System attributes were written as bare names, message attributes as `attr.NAME`
        // with `TYPE: value` values.
        only_prefixed: Some("attr."),
        renames: &[],
        typed_text: true,
    },
};

pub const SERVICEBUS: HeaderRules = HeaderRules {
    kind: BrokerKind::Servicebus,
    properties: &[
        "ContentType",
        "MessageId",
        "CorrelationId",
        "SessionId",
        "Label",
        "ReplyTo",
        "To",
        "ReplyToSessionId",
        "PartitionKey",
        "TimeToLive",
    ],
    // Duplicate detection drops a message sent again under the same MessageId.
    identity: &["MessageId"],
    shared: &[
        ("content-type", "ContentType"),
        ("correlation-id", "CorrelationId"),
        ("reply-to", "ReplyTo"),
        ("message-id", "MessageId"),
    ],
    computed: &[],
    keeps_type: |v| matches!(v, Value::String(_) | Value::Bool(_)) || v.is_machine_number(),
    attributes: None,
    text_bodies: None,
    v1: V1Rules {
        // Broker properties the broker sets (the settable ones are sent again).
        system: &[
            "DeliveryCount",
            "EnqueuedSequenceNumber",
            "EnqueuedTimeUtc",
            "LockToken",
            "LockedUntilUtc",
            "MessageId",
            "SequenceNumber",
            "State",
            "TimeToLive",
            "DeadLetterSource",
            "ScheduledEnqueueTimeUtc",
            "SessionId",
            "PartitionKey",
        ],
        only_prefixed: None,
        renames: &[("ContentType", "content-type")],
        typed_text: false,
    },
};

pub const REDIS: HeaderRules = HeaderRules {
    kind: BrokerKind::Redis,
    ..LOCAL_LIKE
};

pub const NATS: HeaderRules = HeaderRules {
    kind: BrokerKind::Nats,
    // NATS headers are all text; the one with a meaning of its own is the publisher's
    // deduplication id, kept apart so a resend can drop it.
    properties: &["Nats-Msg-Id"],
    identity: &["Nats-Msg-Id"],
    keeps_type: |v| matches!(v, Value::String(_)),
    ..LOCAL_LIKE
};

pub const PUBSUB: HeaderRules = HeaderRules {
    kind: BrokerKind::Pubsub,
    // Attributes are all text; the ordering key travels as the message's key.
    keeps_type: |v| matches!(v, Value::String(_)),
    ..LOCAL_LIKE
};

pub const KAFKA: HeaderRules = HeaderRules {
    kind: BrokerKind::Kafka,
    // Kafka headers are bytes: text and bytes travel as they are.
    keeps_type: |v| matches!(v, Value::String(_) | Value::Bytes(_) | Value::Null),
    ..LOCAL_LIKE
};

/// A broker with no properties, no limits and every value type (filled per broker above).
const LOCAL_LIKE: HeaderRules = HeaderRules {
    kind: BrokerKind::Local,
    properties: &[],
    identity: &[],
    shared: &[],
    computed: &[],
    keeps_type: |_| true,
    attributes: None,
    text_bodies: None,
    v1: V1Rules::PLAIN,
};

/// The rules of a broker kind.
pub fn rules_of(kind: BrokerKind) -> &'static HeaderRules {
    match kind {
        BrokerKind::Local => &LOCAL,
        BrokerKind::Rabbitmq => &RABBITMQ,
        BrokerKind::Sqs => &SQS,
        BrokerKind::Servicebus => &SERVICEBUS,
        BrokerKind::Redis => &REDIS,
        BrokerKind::Nats => &NATS,
        BrokerKind::Pubsub => &PUBSUB,
        BrokerKind::Kafka => &KAFKA,
    }
}

/// Why SQS refuses this attribute (names of letters, digits, `_ - .`, no leading `AWS.` or
/// `Amazon.`, up to 256 characters; a value is not empty).
fn sqs_refusal(name: &str, value: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty()
        || name.len() > 256
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        || name.starts_with('.')
        || name.ends_with('.')
        || name.contains("..")
        || lower.starts_with("aws.")
        || lower.starts_with("amazon.")
    {
        Some("not a valid SQS attribute name")
    } else if value.is_empty() {
        Some("SQS attributes cannot be empty")
    } else {
        None
    }
}
