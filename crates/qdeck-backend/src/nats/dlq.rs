//! Dead letters on JetStream. The server keeps no DLQ: when a message reaches a consumer's
//! `max_deliver`, or a worker terminates it (`AckTerm`), it publishes an advisory on
//! `$JS.EVENT.ADVISORY.CONSUMER.{MAX_DELIVERIES|MSG_TERMINATED}.<stream>.<consumer>` carrying
//! the stream sequence, and the message itself stays in the stream. A stream that captures
//! those advisories is the consumer's DLQ: found among the streams, or made by `create-dlq`.

use std::collections::HashMap;

use serde_json::json;

use super::model::StreamInfo;
use super::NatsBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::QueueId;

const MAX_DELIVERIES: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES";
const TERMINATED: &str = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED";

/// How long a created capture stream keeps an advisory, and how many at most: dead letters
/// are looked at within days, and an unbounded capture could fill the server's disk.
pub const DEFAULT_MAX_AGE_SECS: u64 = 30 * 86_400;
pub const DEFAULT_MAX_MSGS: i64 = 1_000_000;

/// The two advisory subjects of one consumer.
pub fn advisory_subjects(stream: &str, consumer: &str) -> [String; 2] {
    [
        format!("{MAX_DELIVERIES}.{stream}.{consumer}"),
        format!("{TERMINATED}.{stream}.{consumer}"),
    ]
}

/// Whether NATS subject pattern `pattern` (with `*` and `>`) matches the literal `subject`.
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut p = pattern.split('.');
    let mut s = subject.split('.');
    loop {
        match (p.next(), s.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Which of the two dead-letter advisories of `stream`/`consumer` this stream captures.
fn captured(s: &StreamInfo, stream: &str, consumer: &str) -> [bool; 2] {
    advisory_subjects(stream, consumer)
        .map(|subj| s.config.subjects.iter().any(|p| subject_matches(p, &subj)))
}

/// Whether this stream is a DLQ of `stream`/`consumer`: it captures the consumer's
/// MAX_DELIVERIES advisories (the messages it gave up on), with or without MSG_TERMINATED,
/// whether it names the consumer or covers it with a wildcard (NATS's docs capture
/// `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.*` alone).
pub fn captures(s: &StreamInfo, stream: &str, consumer: &str) -> bool {
    captured(s, stream, consumer)[0]
}

/// What a capture stream takes dead letters of, for a row that has no listed consumer to
/// name: `ORDERS/worker`, `every consumer of ORDERS`, `every consumer of every stream`.
pub fn covers(s: &StreamInfo) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in &s.config.subjects {
        // Tokens 5 and 6 of an advisory subject are the stream and the consumer.
        let t: Vec<&str> = p.split('.').collect();
        let literal = |i: usize| t.get(i).filter(|x| !matches!(**x, "*" | ">")).copied();
        let probe = |kind: &str| {
            let (st, co) = (literal(5).unwrap_or("x"), literal(6).unwrap_or("x"));
            subject_matches(p, &format!("{kind}.{st}.{co}"))
        };
        if !probe(MAX_DELIVERIES) && !probe(TERMINATED) {
            continue;
        }
        let text = match (literal(5), literal(6)) {
            (Some(st), Some(co)) => format!("{st}/{co}"),
            (Some(st), None) => format!("every consumer of {st}"),
            (None, Some(co)) => format!("consumer {co} of every stream"),
            (None, None) => "every consumer of every stream".to_string(),
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    if out.is_empty() {
        "no consumer's dead letters (it captures no MAX_DELIVERIES advisory)".into()
    } else {
        out.join(", ")
    }
}

/// Whether one count of a capture stream's messages is one consumer's dead letters: it takes
/// only dead-letter advisories, of one named consumer. Otherwise they are counted by subject.
fn one_owner(s: &StreamInfo) -> bool {
    if !only_dead_letters(s) {
        return false;
    }
    let mut owners = s
        .config
        .subjects
        .iter()
        .map(|p| owner_of(p).filter(|(a, b)| ![a, b].iter().any(|t| t.contains(['*', '>']))));
    let Some(Some(first)) = owners.next() else {
        return false;
    };
    owners.all(|o| o.as_ref() == Some(&first))
}

/// The filters that pick a capture stream's dead letters out of its other advisories.
pub fn dead_letter_filters() -> [String; 2] {
    [format!("{MAX_DELIVERIES}.>"), format!("{TERMINATED}.>")]
}

/// Whether every subject a capture stream takes is a dead-letter subject (what `create-dlq`
/// makes): then each of its messages is a dead letter. A stream on `$JS.EVENT.ADVISORY.>`
/// also holds naks, acks, API audits and the like, which are no dead letters.
pub fn only_dead_letters(s: &StreamInfo) -> bool {
    let prefixes = [format!("{MAX_DELIVERIES}."), format!("{TERMINATED}.")];
    !s.config.subjects.is_empty()
        && s.config
            .subjects
            .iter()
            .all(|p| prefixes.iter().any(|x| p.starts_with(x.as_str())))
}

/// (stream, consumer) of a dead-letter advisory subject.
fn owner_of(subject: &str) -> Option<(String, String)> {
    let rest = subject
        .strip_prefix(MAX_DELIVERIES)
        .or_else(|| subject.strip_prefix(TERMINATED))?
        .strip_prefix('.')?;
    let (s, c) = rest.split_once('.')?;
    Some((s.to_string(), c.to_string()))
}

/// The dead letters a capture stream holds, in all and per (stream, consumer). A stream of
/// dead letters only counts its messages; a wider one is counted by subject with one
/// `STREAM.INFO` (its other advisories left out).
pub struct DeadCounts {
    pub total: u64,
    pub per_consumer: HashMap<(String, String), u64>,
}

pub async fn dead_counts(b: &NatsBackend, s: &StreamInfo) -> Result<Option<DeadCounts>> {
    if one_owner(s) {
        return Ok(None);
    }
    let v = b
        .conn
        .api(
            &format!("STREAM.INFO.{}", s.config.name),
            &json!({"subjects_filter": "$JS.EVENT.ADVISORY.CONSUMER.>"}),
        )
        .await?;
    let mut out = DeadCounts {
        total: 0,
        per_consumer: HashMap::new(),
    };
    if let Some(subjects) = v.pointer("/state/subjects").and_then(|x| x.as_object()) {
        for (subj, n) in subjects {
            let (Some(owner), Some(n)) = (owner_of(subj), n.as_u64()) else {
                continue;
            };
            out.total += n;
            *out.per_consumer.entry(owner).or_default() += n;
        }
    }
    Ok(Some(out))
}

/// Whether a stream holds dead-letter advisories (of any consumer).
pub fn is_capture(s: &StreamInfo) -> bool {
    s.config.subjects.iter().any(|p| {
        p.starts_with(MAX_DELIVERIES)
            || p.starts_with(TERMINATED)
            || subject_matches(p, &format!("{MAX_DELIVERIES}.x.y"))
    })
}

/// Whether capture stream `s` may hold dead letters of a stream named with `prefix`: one of
/// its subjects names such a stream, or leaves the stream open with a wildcard.
pub fn may_capture_prefix(s: &StreamInfo, prefix: &str) -> bool {
    is_capture(s)
        && s.config.subjects.iter().any(|p| {
            let tokens: Vec<&str> = p.split('.').collect();
            match tokens.get(5) {
                Some(t) => *t == "*" || *t == ">" || t.starts_with(prefix),
                None => tokens.last() == Some(&">"),
            }
        })
}

/// The capture stream of `stream`/`consumer` among `all`: the one made for it alone first,
/// then one that takes both kinds of dead letter, then one that takes nothing else.
pub fn capture_for<'a>(
    all: &'a [StreamInfo],
    stream: &str,
    consumer: &str,
) -> Option<&'a StreamInfo> {
    let mine = capture_name(stream, consumer);
    all.iter()
        .filter(|s| captures(s, stream, consumer))
        .min_by_key(|s| {
            (
                s.config.name != mine,
                !captured(s, stream, consumer)[1],
                !only_dead_letters(s),
                s.config.name.clone(),
            )
        })
}

/// The name `create-dlq` gives the capture stream.
pub fn capture_name(stream: &str, consumer: &str) -> String {
    format!("DLQ_{stream}_{consumer}")
}

/// Find or make the capture stream of `stream`/`consumer`; its id and whether it was made now.
pub async fn create(
    b: &NatsBackend,
    stream: &str,
    consumer: &str,
    max_age_secs: u64,
    max_msgs: i64,
) -> Result<(QueueId, bool)> {
    // The consumer must exist: a capture for a typo would wait forever.
    b.conn
        .api(
            &format!("CONSUMER.INFO.{stream}.{consumer}"),
            &serde_json::Value::Null,
        )
        .await
        .map_err(|e| match e {
            BackendError::NotFound(m) => {
                BackendError::NotFound(format!("no consumer {stream}/{consumer}: {m}"))
            }
            other => other,
        })?;
    let all = b.streams().await?;
    if let Some(s) = capture_for(&all, stream, consumer) {
        return Ok((QueueId::new(s.config.name.clone()), false));
    }
    let name = capture_name(stream, consumer);
    let config = json!({
        "name": name,
        "subjects": advisory_subjects(stream, consumer),
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_msgs": max_msgs,
        "max_bytes": -1,
        "max_age": max_age_secs.saturating_mul(1_000_000_000),
        "max_msg_size": -1,
        "num_replicas": 1,
        "allow_direct": true,
    });
    b.conn
        .api(&format!("STREAM.CREATE.{name}"), &config)
        .await
        .map_err(|e| e.context(format!("creating capture stream {name}")))?;
    Ok((QueueId::new(name), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_nats_does() {
        assert!(subject_matches("a.*.c", "a.b.c"));
        assert!(subject_matches("a.>", "a.b.c"));
        assert!(!subject_matches("a.>", "a"));
        assert!(!subject_matches("a.*", "a.b.c"));
        assert_eq!(owner_of("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.C"), None);
        let cap = |subjects: &[&str]| StreamInfo {
            config: super::super::model::StreamConfig {
                subjects: subjects.iter().map(ToString::to_string).collect(),
                ..Default::default()
            },
            ..Default::default()
        };
        let subjects = advisory_subjects("team-a_WQ", "w");
        let mine = cap(&[subjects[0].as_str(), subjects[1].as_str()]);
        assert!(may_capture_prefix(&mine, "team-a"));
        assert!(!may_capture_prefix(&mine, "team-b"));
        assert!(may_capture_prefix(
            &cap(&["$JS.EVENT.ADVISORY.>"]),
            "team-b"
        ));
        assert!(!may_capture_prefix(&cap(&["orders.>"]), "orders"));
        assert_eq!(
            owner_of("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C"),
            Some(("S".into(), "C".into()))
        );
        assert!(subject_matches(
            "$JS.EVENT.ADVISORY.CONSUMER.*.ORDERS.*",
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.worker"
        ));
    }

    fn named(name: &str, subjects: &[&str]) -> StreamInfo {
        StreamInfo {
            config: super::super::model::StreamConfig {
                name: name.into(),
                subjects: subjects.iter().map(ToString::to_string).collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The captures NATS's docs show, and the ones qdeck makes, are each a DLQ of every
    /// consumer they cover; a stream of other advisories is none.
    #[test]
    fn a_capture_is_the_dlq_of_every_consumer_it_covers() {
        let md = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES";
        let term = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED";
        let covers_worker = [
            named("A", &[&format!("{md}.ORDERS.*")]),
            named("B", &[&format!("{md}.ORDERS.>")]),
            named(
                "C",
                &[&format!("{md}.ORDERS.*"), &format!("{term}.ORDERS.*")],
            ),
            named("D", &[&format!("{md}.ORDERS.worker")]),
            named("E", &[&format!("{md}.>")]),
            named("F", &["$JS.EVENT.ADVISORY.>"]),
            named("G", &["$JS.EVENT.ADVISORY.CONSUMER.*.ORDERS.*"]),
        ];
        for (i, s) in covers_worker.iter().enumerate() {
            assert!(captures(s, "ORDERS", "worker"), "{:?}", s.config.subjects);
            // All but D (which names the worker) cover the stream's other consumers too.
            assert_eq!(
                captures(s, "ORDERS", "other"),
                i != 3,
                "{:?}",
                s.config.subjects
            );
            assert!(!covers(s).is_empty());
        }
        assert!(!captures(&covers_worker[3], "ORDERS", "other"));
        assert!(!captures(&covers_worker[0], "PAYMENTS", "worker"));
        assert!(!captures(
            &named("N", &["$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.*"]),
            "ORDERS",
            "worker"
        ));
        assert_eq!(covers(&covers_worker[0]), "every consumer of ORDERS");
        assert_eq!(covers(&covers_worker[3]), "ORDERS/worker");
        assert_eq!(covers(&covers_worker[4]), "every consumer of every stream");
        assert_eq!(covers(&covers_worker[5]), "every consumer of every stream");
        // Only one named consumer's dead letters are counted by the stream's message count.
        assert!(one_owner(&covers_worker[3]));
        assert!(!one_owner(&covers_worker[0]));
        assert!(!one_owner(&covers_worker[5]));
        let both = advisory_subjects("ORDERS", "worker");
        assert!(one_owner(&named(
            "M",
            &[both[0].as_str(), both[1].as_str()]
        )));
        // The one made for the consumer wins, then one taking both kinds.
        let all = [
            named("A", &[&format!("{md}.ORDERS.*")]),
            named(
                "Z",
                &[&format!("{term}.ORDERS.*"), &format!("{md}.ORDERS.worker")],
            ),
        ];
        assert_eq!(
            capture_for(&all, "ORDERS", "worker").unwrap().config.name,
            "Z"
        );
        assert_eq!(
            capture_for(&all, "ORDERS", "other").unwrap().config.name,
            "A"
        );
    }
}
