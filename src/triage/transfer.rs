//! Export and import records: one JSON object per message, one per line (JSON Lines). The
//! body travels as UTF-8 text or `{"base64": …}` (as `domain::body_serde` does), headers as
//! `[name, value]` pairs in broker order, so duplicates and order survive.
//!
//! Headers a broker sets itself (SQS system attributes, RabbitMQ's message-id and x-death,
//! Service Bus broker properties, the local broker's `state`) are exported for reading but not
//! sent again on import: the target broker sets its own. The record's `broker` says which
//! names those are.

use serde::{Deserialize, Serialize};

use crate::domain::{BrokerKind, DeadLetterInfo, Message, OutgoingMessage};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
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
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(with = "crate::domain::body_serde")]
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
            id: Some(m.id.clone()),
            seq: m.seq,
            key: m.key.clone(),
            enqueued_ms: m.enqueued_ms,
            receive_count: m.receive_count,
            headers: m.headers.clone(),
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
        serde_json::from_str(line).map_err(|e| e.to_string())
    }

    /// The message to send, and the names of the headers left out because the source broker
    /// set them itself.
    pub fn to_outgoing(&self) -> (OutgoingMessage, Vec<String>) {
        let mut headers = Vec::new();
        let mut dropped = Vec::new();
        for (k, v) in &self.headers {
            match sendable(self.broker, k) {
                Some(name) if self.broker == Some(BrokerKind::Sqs) => {
                    headers.push((name, super::signature::sqs_attribute_value(v).to_string()))
                }
                Some(name) => headers.push((name, v.clone())),
                None => dropped.push(k.clone()),
            }
        }
        (
            OutgoingMessage {
                body: self.body.clone(),
                key: self.key.clone(),
                delay: None,
                headers,
            },
            dropped,
        )
    }
}

/// Service Bus broker properties the broker sets (the settable ones are sent again).
const SERVICEBUS_SYSTEM: &[&str] = &[
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
];

/// What the RabbitMQ browse reports about the delivery, properties qdeck's send sets itself,
/// and headers the broker writes.
const RABBITMQ_SYSTEM: &[&str] = &[
    "exchange",
    "routing-key",
    "redelivered",
    "delivery-mode",
    "message-id",
    "timestamp",
    "x-death",
    "x-delivery-count",
    "qdeck-key",
];

/// The header name to send for an exported one, or `None` when the source broker set it.
pub(crate) fn sendable(broker: Option<BrokerKind>, name: &str) -> Option<String> {
    let keep = |n: &str| Some(n.to_string());
    match broker {
        Some(BrokerKind::Local) if name == "state" => None,
        // SQS: system attributes are bare names, message attributes `attr.NAME`.
        Some(BrokerKind::Sqs) => name.strip_prefix("attr.").and_then(keep),
        Some(BrokerKind::Rabbitmq) if RABBITMQ_SYSTEM.contains(&name) => None,
        Some(BrokerKind::Servicebus) if SERVICEBUS_SYSTEM.contains(&name) => None,
        Some(BrokerKind::Servicebus) if name == "ContentType" => keep("content-type"),
        _ => keep(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_text_bodies_round_trip_through_a_line() {
        for body in [b"plain text".to_vec(), vec![0, 159, 146, 150, 255, b'\n']] {
            let r = Record {
                id: Some("1".into()),
                seq: None,
                key: Some("k".into()),
                enqueued_ms: Some(5),
                receive_count: None,
                headers: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
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
    fn broker_set_headers_are_not_sent_again() {
        let rec = |broker, headers: &[(&str, &str)]| Record {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
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
            vec![("x-tenant".to_string(), "acme".to_string())]
        );
        assert_eq!(dropped, vec!["ApproximateReceiveCount"]);
        let (m, _) = rec(BrokerKind::Local, &[("state", "ready"), ("x", "1")]).to_outgoing();
        assert_eq!(m.headers, vec![("x".to_string(), "1".to_string())]);
        let (m, _) = rec(
            BrokerKind::Rabbitmq,
            &[("message-id", "u"), ("x-death", "[]"), ("x-tenant", "a")],
        )
        .to_outgoing();
        assert_eq!(m.headers, vec![("x-tenant".to_string(), "a".to_string())]);
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
                ("content-type".to_string(), "application/json".to_string()),
                ("Label".to_string(), "l".to_string())
            ]
        );
    }
}
