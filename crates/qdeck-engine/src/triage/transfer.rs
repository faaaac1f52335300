//! Export and import records: one JSON object per message, one per line (JSON Lines), the
//! format both `qdeck export` and the console's save write. The body travels as UTF-8 text or
//! `{"base64": …}` (as `domain::body_serde` does); properties, headers and metadata as
//! `[name, value]` pairs in broker order, so duplicates and order survive, with typed values
//! (`domain::Value`: `7`, `true`, `{"$i32": 7}`, nested tables).
//!
//! Version 2 (`"v": 2`) keeps the message's four parts apart: what the application set
//! (`properties`, `headers`) is sent again on import, what the broker added (`meta`) is not.
//! Version 1 files (no `v`) had one list of text `headers` holding all three; on import the
//! names the source broker sets itself are left out, as that version did (the broker's
//! `HeaderRules::v1`).

use serde::{Deserialize, Serialize};

use qdeck_model::domain::{BrokerKind, DeadLetterInfo, Message, OutgoingMessage, Value};

/// The version this build writes.
pub const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Format version; absent in version 1 files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub enqueued_ms: Option<i64>,
    #[serde(default)]
    pub receive_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<(String, Value)>,
    #[serde(default)]
    pub headers: Vec<(String, Value)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meta: Vec<(String, Value)>,
    #[serde(with = "qdeck_model::domain::body_serde")]
    pub body: Vec<u8>,
    #[serde(default)]
    pub dead_letter: Option<DeadLetterInfo>,
    /// The broker the record was exported from.
    #[serde(default)]
    pub broker: Option<BrokerKind>,
    /// The queue it was exported from.
    #[serde(default)]
    pub queue: Option<String>,
}

impl Record {
    pub fn from_message(m: &Message, broker: BrokerKind, queue: &str) -> Record {
        Record {
            v: Some(FORMAT),
            id: Some(m.id.clone()),
            seq: m.seq,
            key: m.key.clone(),
            enqueued_ms: m.enqueued_ms,
            receive_count: m.receive_count,
            properties: m.properties.clone(),
            headers: m.headers.clone(),
            meta: m.meta.clone(),
            body: m.body.clone(),
            dead_letter: m.dead_letter.clone(),
            broker: Some(broker),
            queue: Some(queue.to_string()),
        }
    }

    /// One line of the file (no newline: serde_json escapes newlines inside strings).
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// Parse one line; the error is one line of text.
    pub fn parse_line(line: &str) -> Result<Record, String> {
        let r: Record = serde_json::from_str(line).map_err(|e| e.to_string())?;
        match r.v {
            Some(v) if v > FORMAT => Err(format!(
                "format version {v} is newer than this qdeck reads (up to {FORMAT})"
            )),
            _ => Ok(r),
        }
    }

    /// The message to send, and the names of the fields left out because the source broker
    /// set them itself.
    pub fn to_outgoing(&self) -> (OutgoingMessage, Vec<String>) {
        let out = OutgoingMessage {
            body: self.body.clone(),
            key: self.key.clone(),
            delay: None,
            properties: self.properties.clone(),
            headers: Vec::new(),
        };
        if self.v.is_some() {
            let dropped = self.meta.iter().map(|(k, _)| k.clone()).collect();
            return (
                OutgoingMessage {
                    headers: self.headers.clone(),
                    ..out
                },
                dropped,
            );
        }
        let mut headers = Vec::new();
        let mut dropped = Vec::new();
        let rules = self.broker.map(qdeck_backend::headers::rules_of);
        for (k, v) in &self.headers {
            match rules {
                None => headers.push((k.clone(), v.clone())),
                Some(r) => match r.v1_header(k, v) {
                    Some(h) => headers.push(h),
                    None => dropped.push(k.clone()),
                },
            }
        }
        (OutgoingMessage { headers, ..out }, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_text_bodies_round_trip_through_a_line() {
        for body in [b"plain text".to_vec(), vec![0, 159, 146, 150, 255, b'\n']] {
            let r = Record {
                v: Some(FORMAT),
                properties: vec![("content_type".into(), Value::str("text/plain"))],
                meta: vec![("redelivered".into(), Value::Bool(true))],
                id: Some("1".into()),
                seq: None,
                key: Some("k".into()),
                enqueued_ms: Some(5),
                receive_count: None,
                headers: vec![("a".into(), Value::I32(1)), ("a".into(), Value::str("2"))],
                body: body.clone(),
                dead_letter: None,
                broker: Some(BrokerKind::Local),
                queue: Some("q".into()),
            };
            let line = r.to_line().unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(Record::parse_line(&line).unwrap(), r);
        }
    }

    #[test]
    fn a_minimal_line_needs_only_a_body_and_typos_are_errors() {
        let r = Record::parse_line(r#"{"body":"hi"}"#).unwrap();
        assert_eq!(r.body, b"hi");
        assert!(Record::parse_line(r#"{"bdy":"hi"}"#).is_err());
        assert!(Record::parse_line(r#"{"body":{"base64":"!!"}}"#).is_err());
        assert!(Record::parse_line("not json").is_err());
    }

    #[test]
    fn version_two_sends_properties_and_headers_and_never_meta() {
        let r = Record::parse_line(
            r#"{"v":2,"properties":[["priority",{"$u8":5}]],"headers":[["n",7],["t",{"a":{"$i32":1}}]],"meta":[["x-death",[]]],"body":"b","broker":"rabbitmq"}"#,
        )
        .unwrap();
        let (m, dropped) = r.to_outgoing();
        assert_eq!(m.properties, vec![("priority".to_string(), Value::U8(5))]);
        assert_eq!(
            m.headers,
            vec![
                ("n".to_string(), Value::I64(7)),
                (
                    "t".to_string(),
                    Value::Table(vec![("a".to_string(), Value::I32(1))])
                )
            ]
        );
        assert_eq!(dropped, vec!["x-death"]);
        assert!(Record::parse_line(r#"{"v":3,"body":""}"#)
            .unwrap_err()
            .contains("newer"));
    }

    #[test]
    fn broker_set_headers_are_not_sent_again() {
        let rec = |broker, headers: &[(&str, &str)]| Record {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), Value::str(*v)))
                .collect(),
            broker: Some(broker),
            ..Record::parse_line(r#"{"body":""}"#).unwrap()
        };
        let (m, dropped) = rec(
            BrokerKind::Sqs,
            &[
                ("ApproximateReceiveCount", "3"),
                ("attr.x-tenant", "String: acme"),
            ],
        )
        .to_outgoing();
        assert_eq!(
            m.headers,
            vec![("x-tenant".to_string(), Value::str("acme"))]
        );
        assert_eq!(dropped, vec!["ApproximateReceiveCount"]);
        let (m, _) = rec(BrokerKind::Local, &[("state", "ready"), ("x", "1")]).to_outgoing();
        assert_eq!(m.headers, vec![("x".to_string(), Value::str("1"))]);
        let (m, _) = rec(
            BrokerKind::Rabbitmq,
            &[("message-id", "u"), ("x-death", "[]"), ("x-tenant", "a")],
        )
        .to_outgoing();
        assert_eq!(m.headers, vec![("x-tenant".to_string(), Value::str("a"))]);
        let (m, _) = rec(
            BrokerKind::Servicebus,
            &[
                ("DeliveryCount", "2"),
                ("ContentType", "application/json"),
                ("Label", "l"),
            ],
        )
        .to_outgoing();
        assert_eq!(
            m.headers,
            vec![
                ("content-type".to_string(), Value::str("application/json")),
                ("Label".to_string(), Value::str("l"))
            ]
        );
    }
}
