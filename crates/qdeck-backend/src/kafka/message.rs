//! A Kafka record as a qdeck `Message`: id `PARTITION:OFFSET`, the key as text where it is
//! UTF-8 (else as bytes in the metadata), headers as text where they are UTF-8, else bytes,
//! and null where the header value is null; a null value is an empty body marked `null` in
//! the metadata, never confused with an empty one.

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

fn value_of(v: &Option<Bytes>) -> Value {
    match v {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => Value::Bytes(b.to_vec()),
        },
    }
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
        Some(k) => match std::str::from_utf8(k) {
            Ok(s) => Some(s.to_string()),
            Err(_) => {
                meta.push(("key".into(), Value::Bytes(k.to_vec())));
                None
            }
        },
    };
    if r.value.is_none() {
        meta.push(("value".into(), Value::Null));
    }
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
        dead_letter,
    }
}
