//! AMQP properties and headers as display text, `x-death` as `DeadLetterInfo`, and a stable
//! message id for messages without a `message_id` property.

use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;
use sha2::{Digest, Sha256};

use crate::domain::{DeadLetterInfo, QueueId};

/// Header values as text. Broker text passes through unchanged (the views escape it);
/// byte arrays show as hex.
pub fn value_text(v: &AMQPValue) -> String {
    match v {
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Float(n) => n.to_string(),
        AMQPValue::Double(n) => n.to_string(),
        AMQPValue::DecimalValue(d) => format!("{}e-{}", d.value, d.scale),
        AMQPValue::ShortString(s) => s.as_str().to_string(),
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::FieldArray(a) => {
            let parts: Vec<String> = a.as_slice().iter().map(value_text).collect();
            format!("[{}]", parts.join(", "))
        }
        AMQPValue::Timestamp(t) => timestamp_text(*t),
        AMQPValue::FieldTable(t) => table_text(t),
        AMQPValue::ByteArray(b) => b.as_slice().iter().map(|x| format!("{x:02x}")).collect(),
        AMQPValue::Void => String::new(),
    }
}

fn table_text(t: &FieldTable) -> String {
    let parts: Vec<String> = t
        .inner()
        .iter()
        .map(|(k, v)| format!("{}: {}", k.as_str(), value_text(v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn timestamp_text(secs: u64) -> String {
    chrono::DateTime::from_timestamp(secs.min(i64::MAX as u64) as i64, 0)
        .map(|d| d.to_rfc3339())
        .unwrap_or_else(|| secs.to_string())
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

/// Properties then headers, as (name, text), in a fixed order.
pub fn header_list(p: &BasicProperties) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            out.push((k.to_string(), v));
        }
    };
    push(
        "content-type",
        p.content_type().as_ref().map(|s| s.to_string()),
    );
    push(
        "content-encoding",
        p.content_encoding().as_ref().map(|s| s.to_string()),
    );
    push("delivery-mode", p.delivery_mode().map(|d| d.to_string()));
    push("priority", p.priority().map(|d| d.to_string()));
    push(
        "correlation-id",
        p.correlation_id().as_ref().map(|s| s.to_string()),
    );
    push("reply-to", p.reply_to().as_ref().map(|s| s.to_string()));
    push("expiration", p.expiration().as_ref().map(|s| s.to_string()));
    push("message-id", p.message_id().as_ref().map(|s| s.to_string()));
    push("timestamp", p.timestamp().map(timestamp_text));
    push("type", p.kind().as_ref().map(|s| s.to_string()));
    push("user-id", p.user_id().as_ref().map(|s| s.to_string()));
    push("app-id", p.app_id().as_ref().map(|s| s.to_string()));
    if let Some(h) = p.headers() {
        for (k, v) in h.inner() {
            out.push((k.as_str().to_string(), value_text(v)));
        }
    }
    out
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
            "last died in '{q}' (exchange '{ex}', routing keys {keys}); {} death record(s)",
            deaths.len()
        )
    });
    Some(DeadLetterInfo {
        reason,
        description,
        origin: origin.map(QueueId::new),
        count,
        at_ms,
    })
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
        assert!(parse_dead_letter(&BasicProperties::default()).is_none());
    }

    #[test]
    fn ids_are_stable_without_message_id() {
        let p = BasicProperties::default();
        assert_eq!(message_id(&p, b"a"), message_id(&p, b"a"));
        assert_ne!(message_id(&p, b"a"), message_id(&p, b"b"));
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
