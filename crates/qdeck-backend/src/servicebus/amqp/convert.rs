//! Service Bus messages as AMQP carries them, in and out of qdeck's message model, following
//! Microsoft's mapping: MessageId, CorrelationId, Label (AMQP subject), SessionId (group-id),
//! ReplyTo, To, ReplyToSessionId and ContentType in the properties section; TimeToLive in the
//! header; custom properties in the application properties, with their AMQP types; broker
//! state in the `x-opt-*` message annotations. Property names are the ones the REST side uses,
//! so a message read over either transport looks the same and copies between them.

use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{
    AmqpValue, ApplicationProperties, Batch, Body, Data, Header, Message, MessageAnnotations,
    MessageId, Properties,
};
use fe2o3_amqp::types::primitives::{Binary, OrderedMap, SimpleValue, Symbol, Timestamp, Value};

use super::super::dlq_parent;
use crate::BackendError;
use qdeck_model::domain::{self, DeadLetterInfo, OutgoingMessage, QueueId};

pub const SEQUENCE: &str = "x-opt-sequence-number";
pub const ENQUEUED_TIME: &str = "x-opt-enqueued-time";
pub const LOCKED_UNTIL: &str = "x-opt-locked-until";
pub const SCHEDULED_TIME: &str = "x-opt-scheduled-enqueue-time";
pub const STATE: &str = "x-opt-message-state";
pub const PARTITION_KEY: &str = "x-opt-partition-key";
pub const DEADLETTER_SOURCE: &str = "x-opt-deadletter-source";

/// A received or peeked message, raw, with the lock token when it was locked.
pub type AmqpMessage = Message<Body<Value>>;

/// An annotation by name.
pub fn annotation<'a>(m: &'a AmqpMessage, key: &str) -> Option<&'a Value> {
    m.message_annotations.as_ref().and_then(|a| {
        a.0.iter()
            .find(|(k, _)| matches!(k, OwnedKey::Symbol(s) if s.as_str() == key))
            .map(|(_, v)| v)
    })
}

pub fn sequence_number(m: &AmqpMessage) -> Option<i64> {
    annotation(m, SEQUENCE).and_then(super::as_i64)
}

fn timestamp_ms(v: &Value) -> Option<i64> {
    match v {
        Value::Timestamp(t) => Some(t.milliseconds()),
        other => super::as_i64(other),
    }
}

pub fn message_id_text(id: &MessageId) -> String {
    match id {
        MessageId::String(s) => s.clone(),
        MessageId::Ulong(n) => n.to_string(),
        MessageId::Uuid(u) => uuid::Uuid::from_bytes(*u.as_inner()).to_string(),
        MessageId::Binary(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

pub fn message_id(m: &AmqpMessage) -> Option<String> {
    m.properties
        .as_ref()
        .and_then(|p| p.message_id.as_ref())
        .map(message_id_text)
}

/// The body's bytes: data sections joined; a string or binary value as its bytes; any other
/// value as its debug text (rare on Service Bus: only AMQP-native senders make them).
pub fn body_bytes(body: &Body<Value>) -> Vec<u8> {
    match body {
        Body::Data(batch) => batch.iter().flat_map(|d| d.0.iter().copied()).collect(),
        Body::Value(AmqpValue(Value::String(s))) => s.as_bytes().to_vec(),
        Body::Value(AmqpValue(Value::Binary(b))) => b.to_vec(),
        Body::Value(AmqpValue(v)) => format!("{v:?}").into_bytes(),
        Body::Sequence(s) => format!("{s:?}").into_bytes(),
        Body::Empty => Vec::new(),
    }
}

/// An AMQP value as a typed qdeck value; types qdeck has no variant for keep their AMQP name.
pub fn from_amqp(v: &Value) -> domain::Value {
    use domain::Value as V;
    let custom = |t: &str, value: V| V::Custom {
        data_type: t.to_string(),
        value: Box::new(value),
    };
    match v {
        Value::Null => V::Null,
        Value::Bool(b) => V::Bool(*b),
        Value::Byte(n) => V::I8(*n),
        Value::Ubyte(n) => V::U8(*n),
        Value::Short(n) => V::I16(*n),
        Value::Ushort(n) => V::U16(*n),
        Value::Int(n) => V::I32(*n),
        Value::Uint(n) => V::U32(*n),
        Value::Long(n) => V::I64(*n),
        Value::Ulong(n) => custom("ulong", V::Number(n.to_string())),
        Value::Float(f) => V::F32(f.0),
        Value::Double(f) => V::F64(f.0),
        Value::Char(c) => custom("char", V::String(c.to_string())),
        Value::String(s) => V::String(s.clone()),
        Value::Symbol(s) => custom("symbol", V::String(s.as_str().to_string())),
        Value::Binary(b) => V::Bytes(b.to_vec()),
        Value::Timestamp(t) => custom("timestamp", V::I64(t.milliseconds())),
        Value::Uuid(u) => custom(
            "uuid",
            V::String(uuid::Uuid::from_bytes(*u.as_inner()).to_string()),
        ),
        other => V::String(format!("{other:?}")),
    }
}

/// A qdeck value as an application property: the inverse of `from_amqp` for the types it
/// makes; values from other brokers as the nearest AMQP type (tables and arrays as text).
pub fn to_amqp(v: &domain::Value) -> SimpleValue {
    use domain::Value as V;
    match v {
        V::Null => SimpleValue::Null,
        V::Bool(b) => SimpleValue::Bool(*b),
        V::I8(n) => SimpleValue::Byte(*n),
        V::U8(n) => SimpleValue::Ubyte(*n),
        V::I16(n) => SimpleValue::Short(*n),
        V::U16(n) => SimpleValue::Ushort(*n),
        V::I32(n) => SimpleValue::Int(*n),
        V::U32(n) => SimpleValue::Uint(*n),
        V::I64(n) => SimpleValue::Long(*n),
        V::F32(f) => SimpleValue::from(*f),
        V::F64(f) => SimpleValue::from(*f),
        V::String(s) => SimpleValue::String(s.clone()),
        V::Bytes(b) => SimpleValue::Binary(Binary::from(b.clone())),
        // A RabbitMQ timestamp is in seconds.
        V::Timestamp(secs) => SimpleValue::Timestamp(Timestamp::from_milliseconds(
            i64::try_from(*secs).unwrap_or(i64::MAX / 1000) * 1000,
        )),
        V::Number(s) => match (s.parse::<i64>(), s.parse::<f64>()) {
            (Ok(n), _) => SimpleValue::Long(n),
            (_, Ok(f)) => SimpleValue::from(f),
            _ => SimpleValue::String(s.clone()),
        },
        V::Custom { data_type, value } => match (data_type.as_str(), value.as_ref()) {
            ("timestamp", V::I64(ms)) => SimpleValue::Timestamp(Timestamp::from_milliseconds(*ms)),
            ("ulong", V::Number(n)) => n
                .parse::<u64>()
                .map_or_else(|_| SimpleValue::String(n.clone()), SimpleValue::Ulong),
            ("symbol", V::String(s)) => SimpleValue::Symbol(Symbol::from(s.as_str())),
            ("uuid", V::String(s)) => uuid::Uuid::parse_str(s).map_or_else(
                |_| SimpleValue::String(s.clone()),
                |u| SimpleValue::Uuid(u.into_bytes().into()),
            ),
            _ => to_amqp(value),
        },
        other => SimpleValue::String(other.text()),
    }
}

fn simple_to_value(v: &SimpleValue) -> Value {
    Value::from(v.clone())
}

fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339())
}

/// Names qdeck gives the standard properties, and what the REST side calls them too.
fn standard_properties(m: &AmqpMessage) -> Vec<(String, domain::Value)> {
    let mut out = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            out.push((k.to_string(), domain::Value::String(v)));
        }
    };
    if let Some(p) = &m.properties {
        push(
            "ContentType",
            p.content_type.as_ref().map(|s| s.as_str().to_string()),
        );
        push("MessageId", p.message_id.as_ref().map(message_id_text));
        push(
            "CorrelationId",
            p.correlation_id.as_ref().map(message_id_text),
        );
        push("SessionId", p.group_id.clone());
        push("Label", p.subject.clone());
        push("ReplyTo", p.reply_to.clone());
        push("To", p.to.clone());
        push("ReplyToSessionId", p.reply_to_group_id.clone());
    }
    push(
        "PartitionKey",
        annotation(m, PARTITION_KEY).map(|v| from_amqp(v).text()),
    );
    if let Some(ttl) = m.header.as_ref().and_then(|h| h.ttl) {
        out.push((
            "TimeToLive".to_string(),
            super::super::ttl::from_amqp_millis(ttl),
        ));
    }
    out
}

/// Broker-set custom properties (dead-lettering): metadata, not the sender's headers.
fn is_broker_property(name: &str) -> bool {
    ["DeadLetterReason", "DeadLetterErrorDescription"]
        .iter()
        .any(|b| b.eq_ignore_ascii_case(name))
}

/// `x-opt-message-state`: 0 active, 1 deferred, 2 scheduled.
pub fn state_name(m: &AmqpMessage) -> Option<&'static str> {
    match annotation(m, STATE).and_then(super::as_i64)? {
        0 => Some("Active"),
        1 => Some("Deferred"),
        2 => Some("Scheduled"),
        _ => None,
    }
}

/// The broker's metadata (`meta`): sequence number, times, delivery count, state, lock.
fn broker_meta(m: &AmqpMessage, lock_token: Option<uuid::Uuid>) -> Vec<(String, domain::Value)> {
    let mut meta = Vec::new();
    if let Some(n) = sequence_number(m) {
        meta.push(("SequenceNumber".into(), domain::Value::I64(n)));
    }
    for (key, name) in [
        (ENQUEUED_TIME, "EnqueuedTimeUtc"),
        (LOCKED_UNTIL, "LockedUntilUtc"),
        (SCHEDULED_TIME, "ScheduledEnqueueTimeUtc"),
    ] {
        if let Some(t) = annotation(m, key).and_then(timestamp_ms).and_then(rfc3339) {
            meta.push((name.into(), domain::Value::String(t)));
        }
    }
    if let Some(h) = &m.header {
        meta.push((
            "DeliveryCount".into(),
            domain::Value::I64(i64::from(h.delivery_count)),
        ));
    }
    if let Some(s) = state_name(m) {
        meta.push(("State".into(), domain::Value::str(s)));
    }
    if let Some(src) = annotation(m, DEADLETTER_SOURCE) {
        meta.push(("DeadLetterSource".into(), from_amqp(src)));
    }
    if let Some(t) = lock_token {
        meta.push(("LockToken".into(), domain::Value::String(t.to_string())));
    }
    meta
}

/// A message as qdeck shows it; `entity` is where it was read (a DLQ fills `dead_letter`).
pub fn to_message(
    m: &AmqpMessage,
    entity: &str,
    lock_token: Option<uuid::Uuid>,
) -> domain::Message {
    let seq = sequence_number(m);
    let mut meta = broker_meta(m, lock_token);
    let mut headers = Vec::new();
    if let Some(app) = &m.application_properties {
        for (k, v) in &app.0 {
            let typed = from_amqp(&simple_to_value(v));
            if is_broker_property(k) {
                meta.push((k.clone(), typed));
            } else {
                headers.push((k.clone(), typed));
            }
        }
    }
    // What `peek --scheduled` sorts and shows by, as on the other brokers.
    if let Some(due) = annotation(m, SCHEDULED_TIME)
        .and_then(timestamp_ms)
        .filter(|_| state_name(m) == Some("Scheduled"))
        .and_then(rfc3339)
    {
        meta.push(("due-at".into(), domain::Value::String(due)));
    }
    let app_text = |k: &str| {
        m.application_properties
            .as_ref()
            .and_then(|a| a.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)))
            .map(|(_, v)| from_amqp(&simple_to_value(v)).text())
    };
    let dead_letter = dlq_parent(entity).map(|parent| DeadLetterInfo {
        reason: app_text("DeadLetterReason"),
        description: app_text("DeadLetterErrorDescription"),
        why: app_text("DeadLetterErrorDescription").filter(|d| !d.trim().is_empty()),
        origin: Some(QueueId::new(
            annotation(m, DEADLETTER_SOURCE)
                .map_or_else(|| parent.to_string(), |v| from_amqp(v).text()),
        )),
        count: None,
        at_ms: None,
    });
    let properties = standard_properties(m);
    let key = m
        .properties
        .as_ref()
        .and_then(|p| p.group_id.clone())
        .or_else(|| annotation(m, PARTITION_KEY).map(|v| from_amqp(v).text()));
    domain::Message {
        id: message_id(m)
            .or_else(|| seq.map(|s| s.to_string()))
            .unwrap_or_default(),
        seq,
        enqueued_ms: annotation(m, ENQUEUED_TIME).and_then(timestamp_ms),
        receive_count: m.header.as_ref().map(|h| u64::from(h.delivery_count)),
        key,
        properties,
        headers,
        meta,
        body: body_bytes(&m.body),
        body_null: false,
        dead_letter,
    }
}

fn text_of(v: &domain::Value) -> String {
    v.text()
}

/// The AMQP message for a message qdeck sends (`qdeck send`, copies from other brokers,
/// edit and import): body as one data section, standard properties where Microsoft maps
/// them, the rest as application properties.
pub fn outgoing(msg: &OutgoingMessage) -> Result<AmqpMessage, BackendError> {
    let mut props = Properties {
        message_id: Some(MessageId::String(uuid::Uuid::new_v4().to_string())),
        group_id: msg.key.clone(),
        ..Default::default()
    };
    let mut header = None;
    let mut annotations = OrderedMap::new();
    for (k, v) in &msg.properties {
        match k.as_str() {
            "MessageId" => props.message_id = Some(MessageId::String(text_of(v))),
            "CorrelationId" => props.correlation_id = Some(MessageId::String(text_of(v))),
            "SessionId" => props.group_id = Some(text_of(v)),
            "Label" | "Subject" => props.subject = Some(text_of(v)),
            "ReplyTo" => props.reply_to = Some(text_of(v)),
            "To" => props.to = Some(text_of(v)),
            "ReplyToSessionId" => props.reply_to_group_id = Some(text_of(v)),
            "ContentType" => props.content_type = Some(Symbol::from(text_of(v).as_str())),
            "PartitionKey" => {
                annotations.insert(
                    OwnedKey::Symbol(Symbol::from(PARTITION_KEY)),
                    Value::String(text_of(v)),
                );
            }
            "TimeToLive" => {
                header = super::super::ttl::amqp_millis(v)?.map(|ms| Header {
                    ttl: Some(ms),
                    ..Default::default()
                });
            }
            _ => {}
        }
    }
    if let Some(d) = msg.delay {
        let at = chrono::Utc::now().timestamp_millis() + d.as_millis() as i64;
        annotations.insert(
            OwnedKey::Symbol(Symbol::from(SCHEDULED_TIME)),
            Value::Timestamp(Timestamp::from_milliseconds(at)),
        );
    }
    let mut app = OrderedMap::new();
    for (k, v) in &msg.headers {
        app.insert(k.clone(), to_amqp(v));
    }
    Ok(Message {
        header,
        delivery_annotations: None,
        message_annotations: (!annotations.is_empty()).then_some(MessageAnnotations(annotations)),
        properties: Some(props),
        application_properties: (!app.is_empty()).then_some(ApplicationProperties(app)),
        body: Body::Data(Batch::from(vec![Data(Binary::from(msg.body.clone()))])),
        footer: None,
    })
}

/// The copy of a received message that redrive sends: the bare message as it was (properties,
/// application properties, body in its own AMQP form), without the broker's annotations and
/// delivery state, keeping the partition key. TimeToLive is not kept (the original's may have
/// run out), as on the REST side.
pub fn copy_of(m: &AmqpMessage) -> AmqpMessage {
    let mut annotations = OrderedMap::new();
    if let Some(pk) = annotation(m, PARTITION_KEY) {
        annotations.insert(OwnedKey::Symbol(Symbol::from(PARTITION_KEY)), pk.clone());
    }
    let mut app = m.application_properties.clone().unwrap_or_default();
    // The broker's dead-letter record belongs to the dead letter, not to the copy.
    app.0.as_inner_mut().retain(|k, _| !is_broker_property(k));
    Message {
        header: None,
        delivery_annotations: None,
        message_annotations: (!annotations.is_empty()).then_some(MessageAnnotations(annotations)),
        properties: m.properties.clone(),
        application_properties: (!app.0.is_empty()).then_some(app),
        body: m.body.clone(),
        footer: None,
    }
}

/// The lock token of a locked delivery: Service Bus sends it as the delivery tag, a GUID in
/// .NET's byte order (the first three groups little-endian).
pub fn lock_token_of_tag(tag: &[u8]) -> Option<uuid::Uuid> {
    let b: [u8; 16] = tag.try_into().ok()?;
    Some(uuid::Uuid::from_bytes_le(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::Value as V;

    #[test]
    fn typed_values_come_back_as_they_went() {
        for v in [
            V::Bool(true),
            V::I32(-7),
            V::I64(1 << 40),
            V::F64(0.25),
            V::str("acme"),
            V::Bytes(vec![0, 255]),
            V::Custom {
                data_type: "timestamp".into(),
                value: Box::new(V::I64(1_700_000_000_123)),
            },
            V::Custom {
                data_type: "uuid".into(),
                value: Box::new(V::str("67e55044-10b1-426f-9247-bb680e5fe0c8")),
            },
        ] {
            let back = from_amqp(&simple_to_value(&to_amqp(&v)));
            assert_eq!(back, v);
        }
    }

    #[test]
    fn an_outgoing_message_maps_standard_properties() {
        let msg = OutgoingMessage {
            body: b"{}".to_vec(),
            key: Some("s1".into()),
            properties: vec![
                ("ContentType".into(), V::str("application/json")),
                ("CorrelationId".into(), V::str("c-1")),
                ("Label".into(), V::str("created")),
                ("MessageId".into(), V::str("m-1")),
            ],
            headers: vec![("tenant".into(), V::str("acme")), ("n".into(), V::I64(3))],
            ..Default::default()
        };
        let m = outgoing(&msg).unwrap();
        let shown = to_message(&m, "q", None);
        assert_eq!(shown.id, "m-1");
        assert_eq!(shown.key.as_deref(), Some("s1"));
        assert_eq!(shown.body, b"{}");
        assert_eq!(shown.field_text("CorrelationId").as_deref(), Some("c-1"));
        assert_eq!(shown.field_text("Label").as_deref(), Some("created"));
        assert_eq!(
            shown.field_text("ContentType").as_deref(),
            Some("application/json")
        );
        assert_eq!(shown.headers[1], ("n".to_string(), V::I64(3)));
    }

    /// A TTL browsed over REST (seconds, a float when not whole; the default means "not set")
    /// goes out over AMQP as the same TTL, and reads back as it was.
    #[test]
    fn an_outgoing_ttl_keeps_its_value_whatever_its_type() {
        let with_ttl = |v: V| OutgoingMessage {
            body: b"x".to_vec(),
            properties: vec![("TimeToLive".into(), v)],
            ..Default::default()
        };
        let ttl_of = |v: V| outgoing(&with_ttl(v)).map(|m| m.header.and_then(|h| h.ttl));
        assert_eq!(ttl_of(V::F64(922_337_203_685.477_5)).unwrap(), None);
        assert_eq!(ttl_of(V::F64(90.25)).unwrap(), Some(90_250));
        assert_eq!(ttl_of(V::I64(3600)).unwrap(), Some(3_600_000));
        let e = ttl_of(V::I64(60 * 86_400)).unwrap_err().to_string();
        assert!(e.contains("TimeToLive"), "{e}");
        let e = ttl_of(V::Bool(true)).unwrap_err().to_string();
        assert!(e.contains("TimeToLive"), "{e}");

        let m = outgoing(&with_ttl(V::F64(90.25))).unwrap();
        let shown = to_message(&m, "q", None);
        assert_eq!(shown.field_text("TimeToLive").as_deref(), Some("90.25"));
    }

    #[test]
    fn lock_tokens_read_in_dotnet_byte_order() {
        let u = uuid::Uuid::parse_str("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
        assert_eq!(lock_token_of_tag(&u.to_bytes_le()), Some(u));
        assert_eq!(lock_token_of_tag(b"short"), None);
    }
}
