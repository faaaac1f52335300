//! Header mapping for a copy between brokers (`qdeck copy` / `move`): what the source broker
//! set itself is carried as `x-qdeck-NAME`, and what the target cannot take (its
//! `HeaderRules`: SQS takes at most 10 message attributes, restricted names, no empty
//! values) is dropped. Every rename and drop
//! is counted, so the report lists exactly what did not arrive under its own name.

use std::collections::BTreeMap;

use serde::Serialize;

use qdeck_model::domain::{BrokerKind, DeadLetterInfo, Message, OutgoingMessage, Value};

/// Prefix for headers the source broker set: the target keeps them as plain data.
pub const CARRIED_PREFIX: &str = "x-qdeck-";

mod rules;
pub use rules::rules_of;

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

/// What a broker does with a message's fields on send, declared per broker (`rules`), so
/// copy, move, edit and import ask the target's rules instead of naming brokers.
#[derive(Debug)]
pub struct HeaderRules {
    pub kind: BrokerKind,
    /// Standard properties it takes on send, by the names it uses.
    pub properties: &'static [&'static str],
    /// Properties it deduplicates on: a message sent again under the same one within the
    /// broker's window is accepted and never delivered (SQS FIFO's 5 minutes, Service Bus
    /// duplicate detection), so a copy, move, edit or import that kept it could delete an
    /// original whose copy the broker dropped.
    pub identity: &'static [&'static str],
    /// Properties other brokers have too: (shared name, its own name).
    pub shared: &'static [(&'static str, &'static str)],
    /// Metadata its own browse computes, never carried to another broker.
    pub computed: &'static [&'static str],
    /// Whether a header value keeps its type on it.
    pub keeps_type: fn(&Value) -> bool,
    /// Limits on the headers it takes, where it has some.
    pub attributes: Option<AttributeRules>,
    /// Why a binary body cannot be sent to it, where bodies are text.
    pub text_bodies: Option<&'static str>,
    /// How a version-1 export file from it is read.
    pub v1: V1Rules,
}

/// A broker's limits on headers (SQS message attributes).
#[derive(Debug)]
pub struct AttributeRules {
    /// At most this many per message: user headers are kept first.
    pub max: usize,
    /// The reason given for those beyond `max`.
    pub over_max: &'static str,
    /// Why one (name, value) is refused, when it is.
    pub refusal: fn(&str, &str) -> Option<&'static str>,
}

/// Version 1 export files held one list of text headers, the broker's own among them.
#[derive(Debug)]
pub struct V1Rules {
    /// Names the broker set itself: left out on import.
    pub system: &'static [&'static str],
    /// Only names with this prefix were the application's (sent without it).
    pub only_prefixed: Option<&'static str>,
    /// Names sent under another.
    pub renames: &'static [(&'static str, &'static str)],
    /// Values were written as `TYPE: value`.
    pub typed_text: bool,
}

impl V1Rules {
    /// Every header was the application's.
    pub const PLAIN: V1Rules = V1Rules {
        system: &[],
        only_prefixed: None,
        renames: &[],
        typed_text: false,
    };
}

impl HeaderRules {
    /// The name a property of `from` goes under here, when this broker has the same one.
    fn same_property(&self, name: &str, from: &HeaderRules) -> Option<&'static str> {
        let (shared, _) = from.shared.iter().find(|(_, own)| *own == name)?;
        self.shared
            .iter()
            .find(|(s, _)| s == shared)
            .map(|(_, own)| *own)
    }

    /// Take out the properties this broker deduplicates on, for a message that is sent again
    /// (the broker then gives it a fresh one); the names taken out.
    pub fn drop_identity(&self, out: &mut OutgoingMessage) -> Vec<String> {
        let mut dropped = Vec::new();
        out.properties.retain(|(k, _)| {
            let keep = !self.identity.contains(&k.as_str());
            if !keep {
                dropped.push(k.clone());
            }
            keep
        });
        dropped
    }

    /// Why a body cannot travel to this broker as it is, when it cannot.
    pub fn body_refusal(&self, body: &[u8]) -> Option<&'static str> {
        self.text_bodies
            .filter(|_| std::str::from_utf8(body).is_err())
    }

    /// Version 1: the header to send for an exported one, or `None` when this (the source)
    /// broker set it.
    pub fn v1_header(&self, name: &str, value: &Value) -> Option<(String, Value)> {
        let v1 = &self.v1;
        if v1.system.contains(&name) {
            return None;
        }
        let name = match v1.only_prefixed {
            Some(p) => name.strip_prefix(p)?,
            None => name,
        };
        let name = v1
            .renames
            .iter()
            .find(|(from, _)| *from == name)
            .map_or(name, |(_, to)| *to);
        let value = if v1.typed_text {
            Value::str(v1_typed_value(&value.text()))
        } else {
            value.clone()
        };
        Some((name.to_string(), value))
    }
}

/// Version 1 wrote SQS message attributes as `TYPE: value` (`String: acme` → `acme`).
fn v1_typed_value(v: &str) -> &str {
    match v.split_once(": ") {
        Some((ty, rest))
            if ["String", "Number", "Binary"]
                .iter()
                .any(|t| ty == *t || ty.starts_with(&format!("{t}."))) =>
        {
            rest
        }
        _ => v,
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
    from: &HeaderRules,
    to: &HeaderRules,
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
    from: &HeaderRules,
    to: &HeaderRules,
    ledger: &mut HeaderLedger,
) -> OutgoingMessage {
    let mut props = Vec::new();
    // (name in the report, name sent, value, why it was renamed): user headers first, since
    // they are what consumers read and what SQS's attribute cap should keep.
    let mut all: Vec<Entry> = std::mem::take(&mut out.headers)
        .into_iter()
        .map(|(k, v)| (k.clone(), k, v, None))
        .collect();
    let same_kind = from.kind == to.kind;
    for (k, v) in std::mem::take(&mut out.properties) {
        if same_kind {
            props.push((k, v));
        } else if let Some(n) = to.same_property(&k, from) {
            ledger.note(&k, Some(n.to_string()), "the same property on the target");
            props.push((n.to_string(), v));
        } else if to.properties.contains(&k.as_str()) {
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
    for name in to.drop_identity(&mut out) {
        ledger.note(
            &name,
            None,
            "the target deduplicates on it: the copy gets a fresh one",
        );
    }
    for (k, v) in meta {
        // Within one kind the target broker sets its own.
        if same_kind || from.computed.contains(&k.as_str()) {
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
    if let Some(rules) = &to.attributes {
        all.retain(
            |(label, name, v, _)| match (rules.refusal)(name, &v.text()) {
                Some(why) => {
                    ledger.note(label, None, why);
                    false
                }
                None => true,
            },
        );
        for (label, ..) in all.iter().skip(rules.max) {
            ledger.note(label, None, rules.over_max);
        }
        all.truncate(rules.max);
    }
    for (label, name, v, why) in &mut all {
        if let Some(why) = why {
            ledger.note(label, Some(name.clone()), why);
        }
        if !(to.keeps_type)(v) {
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
        let o = map_message(&m, &rules::RABBITMQ, &rules::SERVICEBUS, &mut l);
        assert_eq!(o.properties, pairs(&[("ContentType", "application/json")]));
        assert_eq!(
            o.headers,
            pairs(&[
                ("x-tenant", "acme"),
                ("x-qdeck-app_id", "billing"),
                ("x-qdeck-redelivered", "true")
            ])
        );
        map_message(&m, &rules::RABBITMQ, &rules::SERVICEBUS, &mut l);
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
        let o = map_message(&m, &rules::RABBITMQ, &rules::RABBITMQ, &mut l);
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
        let o = map_message(&dead, &rules::RABBITMQ, &rules::RABBITMQ, &mut l);
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
        let o = map_message(&m, &rules::RABBITMQ, &rules::SQS, &mut l);
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
        let o = map_message(&msg(&hs), &rules::LOCAL, &rules::SQS, &mut l);
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
