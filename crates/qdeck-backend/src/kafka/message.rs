//! A Kafka record as a qdeck `Message`: id `PARTITION:OFFSET`, the key as text where it is
//! UTF-8 (else as bytes in the metadata), headers as text where they are UTF-8, else bytes,
//! and null where the header value is null; a null value is an empty body with
//! `body_null` set, never confused with an empty one (the views show it as `(null)`).

use bytes::Bytes;

use super::dlt;
use super::fetch::KRecord;
use qdeck_model::domain::*;

pub fn id(partition: i32, offset: i64) -> String {
    format!("{partition}:{offset}")
}

/// `PARTITION:OFFSET` back into its parts.
pub fn parse_id(id: &str) -> Option<(i32, i64)> {
    let (p, o) = id.split_once(':')?;
    Some((p.parse().ok()?, o.parse().ok()?))
}

/// A header's value: text when it reads as text, else bytes (shown as hex). Spring writes its
/// partition and offset headers as big-endian integers, whose bytes are valid UTF-8 but would
/// show as control characters.
fn value_of(v: &Option<Bytes>) -> Value {
    match v {
        None => Value::Null,
        Some(b) => match text_of(b) {
            Some(s) => Value::String(s.to_string()),
            None => Value::Bytes(b.to_vec()),
        },
    }
}

/// `b` as text, unless it is not UTF-8 or holds control characters other than tab and newlines.
fn text_of(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok().filter(|s| {
        !s.chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    })
}

pub fn to_message(r: &KRecord) -> Message {
    let mut meta = vec![
        ("partition".to_string(), Value::I32(r.partition)),
        ("offset".to_string(), Value::I64(r.offset)),
        (
            "timestamp_type".to_string(),
            Value::String(
                if r.timestamp_type == 1 {
                    "LogAppendTime"
                } else {
                    "CreateTime"
                }
                .into(),
            ),
        ),
    ];
    let key = match &r.key {
        None => {
            meta.push(("key".into(), Value::Null));
            None
        }
        Some(k) => match text_of(k) {
            Some(s) => Some(s.to_string()),
            None => {
                meta.push(("key".into(), Value::Bytes(k.to_vec())));
                None
            }
        },
    };
    let dead_letter = dlt::origin(r).map(|o| {
        meta.push((
            "dead_letter_convention".into(),
            Value::String(o.convention.into()),
        ));
        if let Some(p) = o.partition {
            meta.push(("original_partition".into(), Value::I32(p)));
        }
        if let Some(off) = o.offset {
            meta.push(("original_offset".into(), Value::I64(off)));
        }
        if let Some(g) = &o.group {
            meta.push(("original_group".into(), Value::String(g.clone())));
        }
        DeadLetterInfo {
            reason: o.reason.clone().or_else(|| o.message.clone()),
            description: o.message.clone(),
            why: o.message.clone().filter(|m| !m.trim().is_empty()),
            origin: o.topic.clone().map(QueueId),
            count: o.delivery_count,
            at_ms: None,
        }
    });
    Message {
        id: id(r.partition, r.offset),
        seq: Some(r.offset),
        enqueued_ms: Some(r.timestamp),
        receive_count: dead_letter.as_ref().and_then(|d| d.count),
        key,
        properties: Vec::new(),
        headers: r
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), value_of(v)))
            .collect(),
        meta,
        body: r.value.as_ref().map(|v| v.to_vec()).unwrap_or_default(),
        body_null: r.value.is_none(),
        dead_letter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_that_are_not_text_stay_bytes() {
        // Spring's kafka_dlt-original-partition: a big-endian int, valid UTF-8 but NULs.
        let int = Some(Bytes::from_static(&[0, 0, 0, 3]));
        assert_eq!(value_of(&int), Value::Bytes(vec![0, 0, 0, 3]));
        let text = Some(Bytes::from_static(b"timeout after 30000 ms\n\tat Foo"));
        assert_eq!(
            value_of(&text),
            Value::String("timeout after 30000 ms\n\tat Foo".into())
        );
        assert_eq!(value_of(&None), Value::Null);
        let escape = Some(Bytes::from_static(b"\x1b[2J"));
        assert!(matches!(value_of(&escape), Value::Bytes(_)));
    }

    #[test]
    fn a_null_value_is_flagged_and_an_empty_one_is_not() {
        let record = |value: Option<Bytes>| KRecord {
            topic: "orders".into(),
            partition: 0,
            offset: 7,
            timestamp: 0,
            timestamp_type: 0,
            key: Some(Bytes::from_static(b"order-7")),
            value,
            headers: Vec::new(),
        };
        let tombstone = to_message(&record(None));
        assert!(tombstone.body_null && tombstone.body_is_null());
        assert!(
            !tombstone.meta.iter().any(|(k, _)| k == "value"),
            "the flag is the one mark of a null value"
        );
        let empty = to_message(&record(Some(Bytes::new())));
        assert!(!empty.body_null && !empty.body_is_null());
        assert!(empty.body.is_empty());
    }
}
