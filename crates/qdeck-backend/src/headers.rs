//! Header mapping for a copy between brokers (`qdeck copy` / `move`): what the source broker
//! set itself is carried as `x-qdeck-NAME`, and what the target cannot take (SQS: at most 10
//! message attributes, restricted names, no empty values) is dropped. Every rename and drop
//! is counted, so the report lists exactly what did not arrive under its own name.

use std::collections::BTreeMap;

use serde::Serialize;

use qdeck_model::domain::{BrokerKind, DeadLetterInfo, Message, OutgoingMessage, Value};

/// Prefix for headers the source broker set: the target keeps them as plain data.
pub const CARRIED_PREFIX: &str = "x-qdeck-";

/// SQS takes at most this many message attributes per message.
const SQS_MAX_ATTRIBUTES: usize = 10;

/// What happened to one header name over the whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderChange {
    pub name: String,
    /// The name it arrived under; `None` when it was dropped.
    pub to: Option<String>,
    pub why: String,
    pub count: u64,
}

impl HeaderChange {
    /// `header NAME → NEW (N message(s): why)`, or `… dropped …`; not escaped.
    pub fn line(&self) -> String {
        let fate = match &self.to {
            Some(to) => format!("→ {to}"),
            None => "dropped".to_string(),
        };
        format!(
            "header {} {fate} ({} message(s): {})",
            self.name, self.count, self.why
        )
    }
}

/// Counts per (name, outcome, reason), in name order for a stable report: one field can be
/// both carried under another name and converted to text, and each is said.
#[derive(Debug, Default)]
pub struct HeaderLedger(BTreeMap<(String, Option<String>, String), u64>);

impl HeaderLedger {
    fn note(&mut self, name: &str, to: Option<String>, why: &str) {
        *self
            .0
            .entry((name.to_string(), to, why.to_string()))
            .or_insert(0) += 1;
    }

    pub fn changes(&self) -> Vec<HeaderChange> {
        self.0
            .iter()
            .map(|((name, to, why), count)| HeaderChange {
                name: name.clone(),
                to: to.clone(),
                why: why.clone(),
                count: *count,
            })
            .collect()
    }
}

/// Standard properties a broker takes on send, by the names it uses.
pub fn properties_of(kind: BrokerKind) -> &'static [&'static str] {
    match kind {
        // AMQP 0-9-1 basic properties, as pika and lapin name them.
        BrokerKind::Rabbitmq => &[
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
        BrokerKind::Sqs => &["MessageGroupId", "MessageDeduplicationId"],
        BrokerKind::Servicebus => &[
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
        // NATS headers are all text; the one with a meaning of its own is the publisher's
        // deduplication id, kept apart so a resend can drop it.
        BrokerKind::Nats => &["Nats-Msg-Id"],
        // Pub/Sub attributes are all text; the ordering key travels as the message's key.
        BrokerKind::Local | BrokerKind::Redis | BrokerKind::Pubsub | BrokerKind::Kafka => &[],
    }
}

/// Properties a broker deduplicates on: a message sent again under the same one within the
/// broker's window is accepted and never delivered (SQS FIFO's 5 minutes, Service Bus
/// duplicate detection), so a copy, move, edit or import that kept it could delete an original
/// whose copy the broker dropped.
pub fn identity_properties(kind: BrokerKind) -> &'static [&'static str] {
    match kind {
        BrokerKind::Sqs => &["MessageDeduplicationId"],
        BrokerKind::Servicebus => &["MessageId"],
        BrokerKind::Nats => &["Nats-Msg-Id"],
        _ => &[],
    }
}

/// Take out the properties `kind` deduplicates on, for a message that is sent again (the
/// broker then gives it a fresh one); the names taken out.
pub fn drop_identity(kind: BrokerKind, out: &mut OutgoingMessage) -> Vec<String> {
    let ids = identity_properties(kind);
    let mut dropped = Vec::new();
    out.properties.retain(|(k, _)| {
        let keep = !ids.contains(&k.as_str());
        if !keep {
            dropped.push(k.clone());
        }
        keep
    });
    dropped
}

/// Properties that mean the same on two brokers: (RabbitMQ name, Service Bus name).
const SAME_PROPERTY: &[(&str, &str)] = &[
    ("content_type", "ContentType"),
    ("correlation_id", "CorrelationId"),
    ("reply_to", "ReplyTo"),
    ("message_id", "MessageId"),
];

/// The name a property of `from` goes under on `to`, when `to` has the same property.
fn same_property(name: &str, from: BrokerKind, to: BrokerKind) -> Option<&'static str> {
    use BrokerKind::{Rabbitmq, Servicebus};
    SAME_PROPERTY.iter().find_map(|(r, s)| match (from, to) {
        (Rabbitmq, Servicebus) if *r == name => Some(*s),
        (Servicebus, Rabbitmq) if *s == name => Some(*r),
        _ => None,
    })
}

/// Metadata that is not carried even across brokers: the ordering key travels as the key,
/// and the local broker's state and due times are computed by its browse.
fn never_carried(from: BrokerKind, name: &str) -> bool {
    from == BrokerKind::Local && matches!(name, "state" | "due-at" | "due-in")
}

/// Whether a header keeps its type on the target broker.
fn keeps_type(to: BrokerKind, v: &Value) -> bool {
    match to {
        BrokerKind::Sqs => matches!(
            v,
            Value::String(_) | Value::Number(_) | Value::Bytes(_) | Value::Custom { .. }
        ),
        BrokerKind::Rabbitmq => !matches!(v, Value::Number(_) | Value::Custom { .. }),
        BrokerKind::Servicebus => {
            matches!(v, Value::String(_) | Value::Bool(_)) || v.is_machine_number()
        }
        BrokerKind::Nats | BrokerKind::Pubsub => matches!(v, Value::String(_)),
        // Kafka headers are bytes: text and bytes travel as they are.
        BrokerKind::Kafka => matches!(v, Value::String(_) | Value::Bytes(_) | Value::Null),
        BrokerKind::Local | BrokerKind::Redis => true,
    }
}

/// The message to send to a `to` broker for `m` browsed on a `from` broker, noting every
/// field that was renamed, changed type or dropped in `ledger`.
///
/// Between two brokers of one kind a message goes as it is: its properties and typed headers,
/// never its metadata (the target sets its own). Across kinds a property the target has under
/// another name is renamed; one it lacks, and the source's metadata, travel as `x-qdeck-NAME`
/// headers; and what the target cannot take (SQS's attribute rules) is dropped. On every
/// copy the recorded dead-letter reason, description and origin go as
/// `x-qdeck-dead-letter-*` stamps.
pub fn map_message(
    m: &Message,
    from: BrokerKind,
    to: BrokerKind,
    ledger: &mut HeaderLedger,
) -> OutgoingMessage {
    map_outgoing(
        OutgoingMessage::resend(m),
        &m.meta,
        m.dead_letter.as_ref(),
        from,
        to,
        ledger,
    )
}

/// `map_message` for a message that is already outgoing (an imported record), with the
/// source's metadata and dead-letter record beside it.
pub fn map_outgoing(
    mut out: OutgoingMessage,
    meta: &[(String, Value)],
    dead_letter: Option<&DeadLetterInfo>,
    from: BrokerKind,
    to: BrokerKind,
    ledger: &mut HeaderLedger,
) -> OutgoingMessage {
    let mut props = Vec::new();
    // (name in the report, name sent, value, why it was renamed): user headers first, since
    // they are what consumers read and what SQS's attribute cap should keep.
    let mut all: Vec<Entry> = std::mem::take(&mut out.headers)
        .into_iter()
        .map(|(k, v)| (k.clone(), k, v, None))
        .collect();
    for (k, v) in std::mem::take(&mut out.properties) {
        if from == to {
            props.push((k, v));
        } else if let Some(n) = same_property(&k, from, to) {
            ledger.note(&k, Some(n.to_string()), "the same property on the target");
            props.push((n.to_string(), v));
        } else if properties_of(to).contains(&k.as_str()) {
            props.push((k, v));
        } else {
            let name = format!("{CARRIED_PREFIX}{k}");
            all.push((
                k,
                name,
                v,
                Some("a property the target broker does not have"),
            ));
        }
    }
    out.properties = props;
    for name in drop_identity(to, &mut out) {
        ledger.note(
            &name,
            None,
            "the target deduplicates on it: the copy gets a fresh one",
        );
    }
    for (k, v) in meta {
        // Within one kind the target broker sets its own.
        if from == to || never_carried(from, k) {
            continue;
        }
        let name = format!("{CARRIED_PREFIX}{k}");
        all.push((k.clone(), name, v.clone(), Some("set by the source broker")));
    }
    // What the source recorded about the dead-lettering is the point of copying a DLQ
    // elsewhere to reproduce: kept as data, since no target would set it.
    if let Some(d) = dead_letter {
        let origin = d.origin.as_ref().map(std::string::ToString::to_string);
        for (what, v) in [
            ("reason", &d.reason),
            ("description", &d.description),
            ("origin", &origin),
        ] {
            if let Some(v) = v {
                all.push((
                    format!("(dead-letter {what})"),
                    format!("{CARRIED_PREFIX}dead-letter-{what}"),
                    Value::str(v.as_str()),
                    Some("recorded by the source broker"),
                ));
            }
        }
    }
    if to == BrokerKind::Sqs {
        all.retain(|(label, name, v, _)| sqs_keeps(label, name, &v.text(), ledger));
        for (label, ..) in all.iter().skip(SQS_MAX_ATTRIBUTES) {
            ledger.note(label, None, "SQS takes at most 10 message attributes");
        }
        all.truncate(SQS_MAX_ATTRIBUTES);
    }
    for (label, name, v, why) in &mut all {
        if let Some(why) = why {
            ledger.note(label, Some(name.clone()), why);
        }
        if !keeps_type(to, v) {
            ledger.note(
                label,
                Some(name.clone()),
                &format!(
                    "a {} value the target has no type for: sent as text",
                    v.type_name()
                ),
            );
            *v = Value::String(v.text());
        }
    }
    out.headers = all.into_iter().map(|(_, n, v, _)| (n, v)).collect();
    out
}

type Entry = (String, String, Value, Option<&'static str>);

/// Whether SQS accepts this attribute (names of letters, digits, `_ - .`, no leading `AWS.`
/// or `Amazon.`, up to 256 characters; a value is not empty), else noted as dropped.
fn sqs_keeps(label: &str, name: &str, value: &str, ledger: &mut HeaderLedger) -> bool {
    let lower = name.to_ascii_lowercase();
    let why = if name.is_empty()
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
        "not a valid SQS attribute name"
    } else if value.is_empty() {
        "SQS attributes cannot be empty"
    } else {
        return true;
    };
    ledger.note(label, None, why);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(h: &[(&str, &str)]) -> Vec<(String, Value)> {
        h.iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect()
    }

    fn msg(headers: &[(&str, &str)]) -> Message {
        Message {
            id: "1".into(),
            headers: pairs(headers),
            body: b"b".to_vec(),
            ..Message::default()
        }
    }

    #[test]
    fn across_kinds_properties_are_renamed_or_carried_and_meta_is_carried() {
        let mut l = HeaderLedger::default();
        let m = Message {
            properties: vec![
                ("content_type".into(), "application/json".into()),
                ("app_id".into(), "billing".into()),
            ],
            meta: pairs(&[("redelivered", "true")]),
            ..msg(&[("x-tenant", "acme")])
        };
        let o = map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Servicebus, &mut l);
        assert_eq!(o.properties, pairs(&[("ContentType", "application/json")]));
        assert_eq!(
            o.headers,
            pairs(&[
                ("x-tenant", "acme"),
                ("x-qdeck-app_id", "billing"),
                ("x-qdeck-redelivered", "true")
            ])
        );
        map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Servicebus, &mut l);
        let lines: Vec<String> = l.changes().iter().map(HeaderChange::line).collect();
        assert_eq!(
            lines,
            vec![
                "header app_id → x-qdeck-app_id (2 message(s): a property the target broker does not have)",
                "header content_type → ContentType (2 message(s): the same property on the target)",
                "header redelivered → x-qdeck-redelivered (2 message(s): set by the source broker)",
            ]
        );
    }

    #[test]
    fn within_one_kind_a_message_goes_as_it_is_without_its_metadata() {
        let mut l = HeaderLedger::default();
        let m = Message {
            properties: vec![("priority".into(), Value::U8(5))],
            headers: vec![("n".into(), Value::I32(7))],
            meta: pairs(&[("x-death", "[]"), ("redelivered", "true")]),
            ..msg(&[])
        };
        let o = map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Rabbitmq, &mut l);
        assert_eq!(o.properties, m.properties);
        assert_eq!(o.headers, m.headers);
        assert!(l.changes().is_empty());
        // The recorded dead-lettering goes as stamps, listed.
        let dead = Message {
            dead_letter: Some(DeadLetterInfo {
                reason: Some("rejected".into()),
                ..Default::default()
            }),
            ..m.clone()
        };
        let o = map_message(&dead, BrokerKind::Rabbitmq, BrokerKind::Rabbitmq, &mut l);
        assert_eq!(o.headers.last().unwrap().0, "x-qdeck-dead-letter-reason");
        assert_eq!(l.changes().len(), 1);
    }

    #[test]
    fn a_type_the_target_lacks_goes_as_text_and_is_listed() {
        let mut l = HeaderLedger::default();
        let m = Message {
            headers: vec![("t".into(), Value::Table(vec![("a".into(), Value::I32(1))]))],
            ..msg(&[])
        };
        let o = map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Sqs, &mut l);
        assert_eq!(o.headers, pairs(&[("t", "{a: 1}")]));
        assert!(
            l.changes()[0].why.contains("a table value"),
            "{:?}",
            l.changes()
        );
    }

    #[test]
    fn sqs_targets_drop_bad_names_empty_values_and_the_eleventh_attribute() {
        let mut l = HeaderLedger::default();
        let mut h: Vec<(String, String)> =
            (0..12).map(|i| (format!("h{i:02}"), "v".into())).collect();
        h.push(("bad name".into(), "v".into()));
        h.push(("empty".into(), String::new()));
        let hs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let o = map_message(&msg(&hs), BrokerKind::Local, BrokerKind::Sqs, &mut l);
        assert_eq!(o.headers.len(), 10);
        assert_eq!(o.headers[9].0, "h09");
        let dropped: Vec<String> = l
            .changes()
            .into_iter()
            .filter(|c| c.to.is_none())
            .map(|c| c.name)
            .collect();
        assert_eq!(dropped, vec!["bad name", "empty", "h10", "h11"]);
    }
}
