//! Header mapping for a copy between brokers (`qdeck copy` / `move`): what the source broker
//! set itself is carried as `x-qdeck-NAME`, and what the target cannot take (SQS: at most 10
//! message attributes, restricted names, no empty values) is dropped. Every rename and drop
//! is counted, so the report lists exactly what did not arrive under its own name.

use std::collections::BTreeMap;

use serde::Serialize;

use super::transfer::{sendable, Record};
use crate::domain::{BrokerKind, Message, OutgoingMessage};

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

/// Counts per (name, outcome), in name order for a stable report.
#[derive(Debug, Default)]
pub struct HeaderLedger(BTreeMap<(String, Option<String>), (String, u64)>);

impl HeaderLedger {
    fn note(&mut self, name: &str, to: Option<String>, why: &str) {
        let e = self
            .0
            .entry((name.to_string(), to))
            .or_insert_with(|| (why.to_string(), 0));
        e.1 += 1;
    }

    pub fn changes(&self) -> Vec<HeaderChange> {
        self.0
            .iter()
            .map(|((name, to), (why, count))| HeaderChange {
                name: name.clone(),
                to: to.clone(),
                why: why.clone(),
                count: *count,
            })
            .collect()
    }
}

/// The message to send to a `to` broker for `m` browsed on a `from` broker, noting every
/// header that was renamed or dropped in `ledger`.
pub fn map_message(
    m: &Message,
    from: BrokerKind,
    to: BrokerKind,
    ledger: &mut HeaderLedger,
) -> OutgoingMessage {
    let rec = Record::from_message(m, from, "");
    let (mut out, _) = rec.to_outgoing();
    // (name in the report, name sent, value, why it was renamed): user headers first, since
    // they are what consumers read and what SQS's attribute cap should keep.
    let mut all: Vec<Entry> = std::mem::take(&mut out.headers)
        .into_iter()
        .map(|(k, v)| (k.clone(), k, v, None))
        .collect();
    for (k, v) in &m.headers {
        if sendable(Some(from), k).is_some() {
            continue;
        }
        // The key travels as the key; the local broker's `state` is computed by the browse.
        if (from == BrokerKind::Rabbitmq && k == "qdeck-key")
            || (from == BrokerKind::Local && k == "state")
        {
            continue;
        }
        let name = format!("{CARRIED_PREFIX}{k}");
        all.push((k.clone(), name, v.clone(), Some("set by the source broker")));
    }
    // What the source recorded about the dead-lettering is the point of copying a DLQ
    // elsewhere to reproduce: kept as data, since no target would set it.
    if let Some(d) = &m.dead_letter {
        let origin = d.origin.as_ref().map(|q| q.to_string());
        for (what, v) in [
            ("reason", &d.reason),
            ("description", &d.description),
            ("origin", &origin),
        ] {
            if let Some(v) = v {
                all.push((
                    format!("(dead-letter {what})"),
                    format!("{CARRIED_PREFIX}dead-letter-{what}"),
                    v.clone(),
                    Some("recorded by the source broker"),
                ));
            }
        }
    }
    if to == BrokerKind::Sqs {
        all.retain(|(label, name, v, _)| sqs_keeps(label, name, v, ledger));
        for (label, ..) in all.iter().skip(SQS_MAX_ATTRIBUTES) {
            ledger.note(label, None, "SQS takes at most 10 message attributes");
        }
        all.truncate(SQS_MAX_ATTRIBUTES);
    }
    for (label, name, _, why) in &all {
        if let Some(why) = why {
            ledger.note(label, Some(name.clone()), why);
        }
    }
    out.headers = all.into_iter().map(|(_, n, v, _)| (n, v)).collect();
    out
}

type Entry = (String, String, String, Option<&'static str>);

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

    fn msg(headers: &[(&str, &str)]) -> Message {
        Message {
            id: "1".into(),
            seq: None,
            enqueued_ms: None,
            receive_count: None,
            key: None,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: b"b".to_vec(),
            dead_letter: None,
        }
    }

    #[test]
    fn broker_set_headers_are_carried_under_the_prefix_and_counted() {
        let mut l = HeaderLedger::default();
        let m = msg(&[
            ("x-tenant", "acme"),
            ("message-id", "u1"),
            ("qdeck-key", "k"),
        ]);
        let o = map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Local, &mut l);
        assert_eq!(
            o.headers,
            vec![
                ("x-tenant".to_string(), "acme".to_string()),
                ("x-qdeck-message-id".to_string(), "u1".to_string())
            ]
        );
        map_message(&m, BrokerKind::Rabbitmq, BrokerKind::Local, &mut l);
        assert_eq!(
            l.changes(),
            vec![HeaderChange {
                name: "message-id".into(),
                to: Some("x-qdeck-message-id".into()),
                why: "set by the source broker".into(),
                count: 2
            }]
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
