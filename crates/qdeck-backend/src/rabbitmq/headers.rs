//! AMQP properties and headers as display text, `x-death` as `DeadLetterInfo`, and a stable
//! message id for messages without a `message_id` property.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::BasicProperties;
use sha2::{Digest, Sha256};

use qdeck_model::domain::{DeadLetterInfo, Fields, QueueId, Value};

/// Header values as text, as the views show them.
pub fn value_text(v: &AMQPValue) -> String {
    to_value(v).text()
}

/// An AMQP field value as a typed value, every width and nesting kept.
pub fn to_value(v: &AMQPValue) -> Value {
    match v {
        AMQPValue::Boolean(b) => Value::Bool(*b),
        AMQPValue::ShortShortInt(n) => Value::I8(*n),
        AMQPValue::ShortShortUInt(n) => Value::U8(*n),
        AMQPValue::ShortInt(n) => Value::I16(*n),
        AMQPValue::ShortUInt(n) => Value::U16(*n),
        AMQPValue::LongInt(n) => Value::I32(*n),
        AMQPValue::LongUInt(n) => Value::U32(*n),
        AMQPValue::LongLongInt(n) => Value::I64(*n),
        AMQPValue::Float(n) => Value::F32(*n),
        AMQPValue::Double(n) => Value::F64(*n),
        AMQPValue::DecimalValue(d) => Value::Decimal {
            scale: d.scale,
            value: d.value,
        },
        AMQPValue::ShortString(s) => Value::String(s.as_str().to_string()),
        // Long strings are bytes on the wire; text that is not UTF-8 stays bytes.
        AMQPValue::LongString(s) => match std::str::from_utf8(s.as_bytes()) {
            Ok(t) => Value::String(t.to_string()),
            Err(_) => Value::Bytes(s.as_bytes().to_vec()),
        },
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(to_value).collect()),
        AMQPValue::Timestamp(t) => Value::Timestamp(*t),
        AMQPValue::FieldTable(t) => Value::Table(table_values(t)),
        AMQPValue::ByteArray(b) => Value::Bytes(b.as_slice().to_vec()),
        AMQPValue::Void => Value::Null,
    }
}

fn table_values(t: &FieldTable) -> Vec<(String, Value)> {
    t.inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), to_value(v)))
        .collect()
}

/// A typed value as the AMQP field value it came from. Types AMQP lacks (an SQS number or a
/// custom-typed attribute from another broker) travel as their text.
pub fn to_amqp(v: &Value) -> AMQPValue {
    match v {
        Value::Null => AMQPValue::Void,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::I8(n) => AMQPValue::ShortShortInt(*n),
        Value::U8(n) => AMQPValue::ShortShortUInt(*n),
        Value::I16(n) => AMQPValue::ShortInt(*n),
        Value::U16(n) => AMQPValue::ShortUInt(*n),
        Value::I32(n) => AMQPValue::LongInt(*n),
        Value::U32(n) => AMQPValue::LongUInt(*n),
        Value::I64(n) => AMQPValue::LongLongInt(*n),
        Value::F32(n) => AMQPValue::Float(*n),
        Value::F64(n) => AMQPValue::Double(*n),
        Value::Decimal { scale, value } => AMQPValue::DecimalValue(lapin::types::DecimalValue {
            scale: *scale,
            value: *value,
        }),
        Value::String(s) => AMQPValue::LongString(LongString::from(s.as_bytes())),
        Value::Bytes(b) => AMQPValue::ByteArray(lapin::types::ByteArray::from(b.clone())),
        Value::Timestamp(t) => AMQPValue::Timestamp(*t),
        Value::Array(a) => {
            let mut out = FieldArray::default();
            for x in a {
                out.push(to_amqp(x));
            }
            AMQPValue::FieldArray(out)
        }
        Value::Table(t) => AMQPValue::FieldTable(to_table(t)),
        Value::Number(n) => AMQPValue::LongString(LongString::from(n.as_bytes())),
        Value::Custom { value, .. } => to_amqp(value),
    }
}

pub fn to_table(t: &[(String, Value)]) -> FieldTable {
    let mut out = FieldTable::default();
    for (k, v) in t {
        out.insert(k.as_str().into(), to_amqp(v));
    }
    out
}

fn as_u64(v: &AMQPValue) -> Option<u64> {
    match v {
        AMQPValue::ShortShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortShortUInt(n) => Some(*n as u64),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortUInt(n) => Some(*n as u64),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongUInt(n) => Some(*n as u64),
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::Timestamp(n) => Some(*n),
        _ => None,
    }
}

fn as_text(v: &AMQPValue) -> Option<String> {
    match v {
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        _ => None,
    }
}

pub fn header<'a>(p: &'a BasicProperties, key: &str) -> Option<&'a AMQPValue> {
    p.headers().as_ref().and_then(|h| h.inner().get(key))
}

/// Delivery count on quorum queues (`x-delivery-count`, set once a message was returned).
pub fn delivery_count(p: &BasicProperties) -> Option<u64> {
    header(p, "x-delivery-count").and_then(as_u64)
}

/// Headers the broker writes itself: metadata, never sent again as application headers.
pub fn is_broker_header(name: &str) -> bool {
    name == "x-death"
        || name.starts_with("x-first-death-")
        || name.starts_with("x-last-death-")
        || name == "x-delivery-count"
        || name == "x-received-from"
}

/// The basic properties as (AMQP name, typed value), in the order of the AMQP spec.
pub fn property_list(p: &BasicProperties) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut push = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.push((k.to_string(), v));
        }
    };
    let s = |v: &Option<lapin::types::ShortString>| v.as_ref().map(|s| Value::str(s.as_str()));
    push("content_type", s(p.content_type()));
    push("content_encoding", s(p.content_encoding()));
    push("delivery_mode", p.delivery_mode().map(Value::U8));
    push("priority", p.priority().map(Value::U8));
    push("correlation_id", s(p.correlation_id()));
    push("reply_to", s(p.reply_to()));
    push("expiration", s(p.expiration()));
    push("message_id", s(p.message_id()));
    push("timestamp", p.timestamp().map(Value::Timestamp));
    push("type", s(p.kind()));
    push("user_id", s(p.user_id()));
    push("app_id", s(p.app_id()));
    push("cluster_id", s(p.cluster_id()));
    out
}

/// The header table split into (application headers, broker-written headers), typed.
pub fn split_headers(p: &BasicProperties) -> (Fields, Fields) {
    let mut app = Vec::new();
    let mut broker = Vec::new();
    if let Some(h) = p.headers() {
        for (k, v) in h.inner() {
            let k = k.as_str();
            // The ordering key qdeck's send sets is the message's key, shown as such.
            if k == "qdeck-key" {
                continue;
            }
            let entry = (k.to_string(), to_value(v));
            if is_broker_header(k) {
                broker.push(entry);
            } else {
                app.push(entry);
            }
        }
    }
    (app, broker)
}

/// The basic properties for a message to send: those given (by their AMQP names), and the
/// headers table. A property that is not AMQP's is an error the caller maps beforehand; a
/// numeric one whose value does not fit its AMQP type (a priority of 300, a delivery mode of
/// 1.5, a timestamp that is text) is an error naming it, not a property left out.
pub fn to_properties(
    props: &[(String, Value)],
    headers: FieldTable,
) -> Result<BasicProperties, crate::BackendError> {
    let mut p = BasicProperties::default();
    for (k, v) in props {
        let text = || lapin::types::ShortString::from(v.text());
        let unfit = |ty: &str| {
            crate::BackendError::Invalid(format!(
                "property {k}: {:?} ({}) is not a {ty}",
                qdeck_model::sanitize::clean(&v.text()),
                v.type_name()
            ))
        };
        let octet = || {
            whole(v)
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| unfit("number from 0 to 255"))
        };
        p = match k.as_str() {
            "content_type" => p.with_content_type(text()),
            "content_encoding" => p.with_content_encoding(text()),
            "delivery_mode" => p.with_delivery_mode(octet()?),
            "priority" => p.with_priority(octet()?),
            "correlation_id" => p.with_correlation_id(text()),
            "reply_to" => p.with_reply_to(text()),
            "expiration" => p.with_expiration(text()),
            "message_id" => p.with_message_id(text()),
            "timestamp" => p.with_timestamp(
                whole(v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| unfit("timestamp (seconds since 1970)"))?,
            ),
            "type" => p.with_type(text()),
            "user_id" => p.with_user_id(text()),
            "app_id" => p.with_app_id(text()),
            "cluster_id" => p.with_cluster_id(text()),
            _ => p,
        };
    }
    Ok(p.with_headers(headers))
}

/// An integer value, whatever its width, or a float that is a whole number.
fn whole(v: &Value) -> Option<i64> {
    let f = match v {
        Value::F32(f) => f64::from(*f),
        Value::F64(f) => *f,
        Value::Custom { value, .. } => return whole(value),
        other => return other.as_i64(),
    };
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

/// What `x-death` and `x-first-death-*` say: reason, origin queue (the first death's queue,
/// the default redrive target), count and time of the most recent death.
pub fn parse_dead_letter(p: &BasicProperties) -> Option<DeadLetterInfo> {
    let first_queue = header(p, "x-first-death-queue").and_then(as_text);
    let first_reason = header(p, "x-first-death-reason").and_then(as_text);
    let deaths: Vec<&FieldTable> = match header(p, "x-death") {
        Some(AMQPValue::FieldArray(a)) => a
            .as_slice()
            .iter()
            .filter_map(|v| match v {
                AMQPValue::FieldTable(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if first_queue.is_none() && deaths.is_empty() {
        return None;
    }
    let latest = deaths.first();
    let get = |t: &FieldTable, k: &str| t.inner().get(k).cloned();
    let latest_queue = latest
        .and_then(|t| get(t, "queue"))
        .as_ref()
        .and_then(as_text);
    let origin = first_queue.clone().or_else(|| {
        // Oldest entry last: its queue is where the message first died.
        deaths
            .last()
            .and_then(|t| get(t, "queue"))
            .as_ref()
            .and_then(as_text)
    });
    let reason = first_reason.or_else(|| {
        latest
            .and_then(|t| get(t, "reason"))
            .as_ref()
            .and_then(as_text)
    });
    let count = latest
        .and_then(|t| get(t, "count"))
        .as_ref()
        .and_then(as_u64);
    let at_ms = latest
        .and_then(|t| get(t, "time"))
        .as_ref()
        .and_then(as_u64)
        .map(|s| (s.min(i64::MAX as u64 / 1000) as i64) * 1000);
    let description = latest.map(|t| {
        let ex = get(t, "exchange")
            .as_ref()
            .and_then(as_text)
            .unwrap_or_default();
        let keys = get(t, "routing-keys")
            .as_ref()
            .map(value_text)
            .unwrap_or_default();
        let q = latest_queue.clone().unwrap_or_default();
        format!(
            "last died in '{q}' via exchange {}, routing keys {keys}; {} death record(s)",
            super::figures::exchange_text(&ex),
            deaths.len()
        )
    });
    Some(DeadLetterInfo {
        reason,
        description,
        why: exception_message(p),
        origin: origin.map(QueueId::new),
        count,
        at_ms,
    })
}

/// The exception a consumer recorded before it rejected or republished the message: Spring
/// AMQP's `x-exception-message` (the convention other clients copied).
fn exception_message(p: &BasicProperties) -> Option<String> {
    header(p, "x-exception-message")
        .and_then(as_text)
        .filter(|s| !s.trim().is_empty())
}

/// The message's id: its `message_id` property, else a hash of body and headers (stable
/// across browses, so a browse page's ids can select messages to redrive).
pub fn message_id(p: &BasicProperties, body: &[u8]) -> String {
    if let Some(id) = p.message_id() {
        if !id.as_str().is_empty() {
            return id.as_str().to_string();
        }
    }
    let mut h = Sha256::new();
    h.update(body);
    if let Some(t) = p.timestamp() {
        h.update(t.to_be_bytes());
    }
    // Celery sets no message_id but puts the task id in correlation_id: two tasks with the
    // same arguments (e.g. `billing.charge(1)` and `mail.send(1)`) are two messages.
    if let Some(c) = p.correlation_id() {
        h.update(b"\0correlation_id\0");
        h.update(c.as_str().as_bytes());
    }
    let d = h.finalize();
    let hex: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    fn ls(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s.as_bytes()))
    }

    #[test]
    fn x_death_gives_origin_reason_count_time() {
        let mut death = FieldTable::default();
        death.insert("queue".into(), ls("orders"));
        death.insert("reason".into(), ls("rejected"));
        death.insert("count".into(), AMQPValue::LongLongInt(3));
        death.insert("time".into(), AMQPValue::Timestamp(1_700_000_000));
        death.insert("exchange".into(), ls(""));
        let mut arr = FieldArray::default();
        arr.push(AMQPValue::FieldTable(death));
        let mut h = FieldTable::default();
        h.insert("x-death".into(), AMQPValue::FieldArray(arr));
        h.insert("x-first-death-queue".into(), ls("orders"));
        h.insert("x-first-death-reason".into(), ls("rejected"));
        let p = BasicProperties::default().with_headers(h);
        let d = parse_dead_letter(&p).expect("dead letter info");
        assert_eq!(d.origin, Some(QueueId::new("orders")));
        assert_eq!(d.reason.as_deref(), Some("rejected"));
        assert_eq!(d.count, Some(3));
        assert_eq!(d.at_ms, Some(1_700_000_000_000));
        let text = d.description.as_deref().unwrap_or_default();
        assert!(
            text.contains("via exchange \"\" (default exchange)"),
            "{text}"
        );
        assert!(parse_dead_letter(&BasicProperties::default()).is_none());
        // No exception recorded: nothing more specific than the broker's `rejected`.
        assert_eq!(d.why, None);
    }

    #[test]
    fn the_exception_a_consumer_recorded_is_why_it_died() {
        let mut h = FieldTable::default();
        h.insert("x-first-death-queue".into(), ls("orders"));
        h.insert("x-first-death-reason".into(), ls("rejected"));
        h.insert(
            "x-exception-message".into(),
            ls("customer 42 not found in billing-eu"),
        );
        let d = parse_dead_letter(&BasicProperties::default().with_headers(h)).unwrap();
        assert_eq!(d.reason.as_deref(), Some("rejected"));
        assert_eq!(
            d.why.as_deref(),
            Some("customer 42 not found in billing-eu")
        );
    }

    #[test]
    fn ids_are_stable_without_message_id() {
        let p = BasicProperties::default();
        assert_eq!(message_id(&p, b"a"), message_id(&p, b"a"));
        assert_ne!(message_id(&p, b"a"), message_id(&p, b"b"));
        // Celery's task id travels in correlation_id: equal bodies of two tasks differ.
        let t1 = p.clone().with_correlation_id("task-1".into());
        let t2 = p.clone().with_correlation_id("task-2".into());
        assert_ne!(message_id(&t1, b"a"), message_id(&t2, b"a"));
        assert_eq!(message_id(&t1, b"a"), message_id(&t1, b"a"));
        let p = p.with_message_id("m-1".into());
        assert_eq!(message_id(&p, b"a"), "m-1");
    }
}

/// The redriven copy's properties: `x-qdeck-redriven` counts the redrives the message has
/// been through, `x-qdeck-redriven-at` says when (Unix ms), so the reasons view can tell a
/// message that came back after a redrive.
pub fn stamped(props: BasicProperties, now_ms: i64) -> BasicProperties {
    let mut headers = props.headers().clone().unwrap_or_default();
    let before = headers
        .inner()
        .get("x-qdeck-redriven")
        .and_then(|v| value_text(v).parse::<i64>().ok())
        .unwrap_or(0);
    headers.insert(
        "x-qdeck-redriven".into(),
        AMQPValue::LongLongInt(before + 1),
    );
    headers.insert("x-qdeck-redriven-at".into(), AMQPValue::LongLongInt(now_ms));
    props.with_headers(headers)
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    #[test]
    fn stamping_counts_and_keeps_the_rest() {
        let mut h = FieldTable::default();
        h.insert("trace".into(), AMQPValue::LongString("abc".into()));
        let p = stamped(BasicProperties::default().with_headers(h), 7);
        let p = stamped(p, 9);
        let h = p.headers().clone().unwrap();
        let get = |k: &str| h.inner().get(k).map(value_text);
        assert_eq!(get("x-qdeck-redriven").as_deref(), Some("2"));
        assert_eq!(get("x-qdeck-redriven-at").as_deref(), Some("9"));
        assert_eq!(get("trace").as_deref(), Some("abc"));
    }
}

#[cfg(test)]
mod property_tests {
    use super::*;

    fn one(k: &str, v: Value) -> Result<BasicProperties, crate::BackendError> {
        to_properties(&[(k.to_string(), v)], FieldTable::default())
    }

    /// A numeric property keeps its value whatever width or float it arrived as, and one
    /// that does not fit is refused by name instead of sent without it.
    #[test]
    fn numeric_properties_keep_their_value_or_are_refused_by_name() {
        assert_eq!(*one("priority", Value::U8(5)).unwrap().priority(), Some(5));
        assert_eq!(
            *one("priority", Value::F64(5.0)).unwrap().priority(),
            Some(5)
        );
        assert_eq!(
            *one("delivery_mode", Value::I64(1)).unwrap().delivery_mode(),
            Some(1)
        );
        assert_eq!(
            *one("timestamp", Value::Timestamp(1_764_000_000))
                .unwrap()
                .timestamp(),
            Some(1_764_000_000)
        );
        for (k, v) in [
            ("priority", Value::I64(300)),
            ("priority", Value::F64(2.5)),
            ("delivery_mode", Value::str("persistent")),
            ("timestamp", Value::I64(-1)),
            ("timestamp", Value::Bool(true)),
        ] {
            let e = one(k, v.clone()).unwrap_err().to_string();
            assert!(e.contains(k), "{k} {v:?}: {e}");
        }
    }
}
