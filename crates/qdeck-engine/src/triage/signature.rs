//! Failure signature of a dead-lettered message: the reason the broker recorded, the error text
//! the application or broker attached, and the origin queue. Texts that differ only in numbers,
//! UUIDs, hex or quoted ids normalise to the same signature, so one bug is one group.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use qdeck_model::domain::Message;

/// Headers that carry a broker's dead-letter reason (RabbitMQ, Service Bus).
pub const REASON_HEADERS: &[&str] = &["x-first-death-reason", "DeadLetterReason"];

/// Headers that carry error text (RabbitMQ/Spring, Service Bus).
pub const ERROR_HEADERS: &[&str] = &["x-exception-message", "DeadLetterErrorDescription"];

/// What to read besides the built-in header names.
#[derive(Debug, Clone, Default)]
pub struct SignatureConfig {
    /// Extra header names holding error text (per profile, e.g. `x-error`).
    pub extra_headers: Vec<String>,
}

impl SignatureConfig {
    /// The profile's `reason_headers` first, then `[triage] reason_headers`: a profile knows
    /// best what its applications write.
    pub fn for_session(loaded: &qdeck_model::config::Loaded) -> SignatureConfig {
        let mut extra = loaded.profile.reason_headers.clone();
        for h in &loaded.config.triage.reason_headers {
            if !extra.contains(h) {
                extra.push(h.clone());
            }
        }
        SignatureConfig {
            extra_headers: extra,
        }
    }
}

/// A message's failure signature.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Signature {
    /// Normalised text: the grouping key and what `signature ~ "…"` matches.
    pub text: String,
    /// Origin queue, when recorded.
    pub origin: Option<String>,
}

/// Shown when a message records no reason at all.
pub const NO_REASON: &str = "(no reason recorded)";

/// Longest normalised text kept; error texts with stack traces are cut here.
const MAX_LEN: usize = 200;

/// A field's value by name, ignoring ASCII case (brokers and clients disagree on case), in
/// any part of the message (metadata such as `x-first-death-queue`, properties, headers). A
/// text value is borrowed; other types give their display text.
pub fn header<'a>(m: &'a Message, name: &str) -> Option<Cow<'a, str>> {
    // A name written with the SQS prefix of earlier versions (`attr.NAME`) finds NAME.
    let bare = name.strip_prefix("attr.").unwrap_or(name);
    m.fields()
        .find(|(_, k, _)| k.eq_ignore_ascii_case(name) || k.eq_ignore_ascii_case(bare))
        .map(|(_, _, v)| match v.as_str() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(v.text()),
        })
}

/// The broker's reason, from `DeadLetterInfo` or the reason headers.
pub fn broker_reason(m: &Message) -> Option<Cow<'_, str>> {
    m.dead_letter
        .as_ref()
        .and_then(|d| d.reason.as_deref())
        .map(Cow::Borrowed)
        .or_else(|| REASON_HEADERS.iter().find_map(|h| header(m, h)))
        .filter(|s| !s.trim().is_empty())
}

/// Error text: the first of the configured headers, the error headers, then the broker's
/// description.
pub fn error_text<'a>(m: &'a Message, cfg: &SignatureConfig) -> Option<Cow<'a, str>> {
    cfg.extra_headers
        .iter()
        .map(String::as_str)
        .chain(ERROR_HEADERS.iter().copied())
        .find_map(|h| header(m, h))
        .or_else(|| {
            m.dead_letter
                .as_ref()
                .and_then(|d| d.description.as_deref())
                .map(Cow::Borrowed)
        })
        .filter(|s| !s.trim().is_empty())
}

/// Why the message died, the most specific text first: the header the profile names
/// (`reason_headers`: its applications know best), the failure's own words as its backend
/// read them (`DeadLetterInfo::why`), the error headers of a message its broker did not mark
/// dead (Spring AMQP republishes with `x-exception-message` and no `x-death`), and only then
/// the broker's generic reason (`rejected`). Raw text: views clean it.
pub fn why<'a>(m: &'a Message, cfg: &SignatureConfig) -> Option<Cow<'a, str>> {
    fn given(s: &str) -> bool {
        !s.trim().is_empty()
    }
    cfg.extra_headers
        .iter()
        .find_map(|h| header(m, h).filter(|s| given(s)))
        .or_else(|| {
            m.dead_letter
                .as_ref()
                .and_then(|d| d.why.as_deref())
                .map(Cow::Borrowed)
                .filter(|s| given(s))
        })
        .or_else(|| {
            ERROR_HEADERS
                .iter()
                .find_map(|h| header(m, h).filter(|s| given(s)))
        })
        .or_else(|| broker_reason(m))
}

/// Every reason text the message records, raw (what `reason = "…"` compares against).
pub fn reason_texts<'a>(m: &'a Message, cfg: &SignatureConfig) -> Vec<Cow<'a, str>> {
    [broker_reason(m), error_text(m, cfg)]
        .into_iter()
        .flatten()
        .collect()
}

/// Origin queue: recorded dead-letter origin, else the RabbitMQ first-death queue header.
pub fn origin(m: &Message) -> Option<String> {
    m.dead_letter
        .as_ref()
        .and_then(|d| d.origin.as_ref())
        .map(std::string::ToString::to_string)
        .or_else(|| header(m, "x-first-death-queue").map(Cow::into_owned))
}

pub fn signature(m: &Message, cfg: &SignatureConfig) -> Signature {
    let raw = match (broker_reason(m), error_text(m, cfg)) {
        (Some(r), Some(e)) if r != e => format!("{r}: {e}"),
        (Some(r), _) => r.into_owned(),
        (None, Some(e)) => e.into_owned(),
        (None, None) => NO_REASON.to_string(),
    };
    let text = normalize(&raw);
    // A broker that records no failure text (Pub/Sub) still says how many deliveries failed:
    // kept as written, beside the source (`origin`), unless a header the user named holds text.
    let text = match qdeck_backend::no_failure_text::deliveries_group(m) {
        Some(k) if error_text(m, cfg).is_none() => format!("{text} {k}"),
        _ => text,
    };
    // One Celery task failing one way is one group: its name leads, kept as written (task
    // names may hold digits the normalisation would blur).
    let text = match qdeck_backend::celery::task_of(m) {
        Some(task) => format!("{}: {text}", qdeck_model::sanitize::clean_short(&task, 80)),
        None => text,
    };
    Signature {
        text,
        origin: origin(m),
    }
}

static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| qdeck_model::literal::regex(r#""[^"\s]*\d[^"\s]*"|'[^'\s]*\d[^'\s]*'"#));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    qdeck_model::literal::regex(
        r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    )
});
/// `0x…`, or a run of 8+ hex digits that has at least one digit and one letter (hashes, ids).
static HEX: LazyLock<Regex> = LazyLock::new(|| {
    qdeck_model::literal::regex(
        r"(?i)\b0x[0-9a-f]+\b|\b(?:[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*|[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*)\b",
    )
});
static DIGITS: LazyLock<Regex> = LazyLock::new(|| qdeck_model::literal::regex(r"\d+(?:\.\d+)?"));

/// Replace what varies between occurrences of one failure with placeholders: quoted tokens
/// holding a digit → `"<id>"`, UUIDs → `<uuid>`, hex → `<hex>`, numbers → `<n>`; whitespace
/// collapsed; long texts cut.
pub fn normalize(text: &str) -> String {
    let t = QUOTED.replace_all(text, |c: &regex::Captures| {
        let q = &c[0][..1];
        format!("{q}<id>{q}")
    });
    let t = UUID.replace_all(&t, "<uuid>");
    let t = HEX.replace_all(&t, |c: &regex::Captures| {
        let s = &c[0];
        if s.len() >= 8 || s.to_ascii_lowercase().starts_with("0x") {
            "<hex>".to_string()
        } else {
            s.to_string()
        }
    });
    let t = DIGITS.replace_all(&t, "<n>");
    let mut out = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.len() > MAX_LEN {
        let mut cut = MAX_LEN;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::domain::{DeadLetterInfo, QueueId, Value};

    fn msg(headers: &[(&str, &str)], dl: Option<DeadLetterInfo>) -> Message {
        Message {
            id: "1".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect(),
            dead_letter: dl,
            ..Default::default()
        }
    }

    #[test]
    fn numbers_uuids_hex_and_quoted_ids_normalise_together() {
        let a = normalize("order 1234 failed: customer 3f2504e0-4f89-11d3-9a0c-0305e82c3301 not found (hash deadbeef01)");
        let b = normalize("order 98 failed: customer 6ba7b810-9dad-11d1-80b4-00c04fd430c8 not found (hash 0a1b2c3d4e)");
        assert_eq!(a, b);
        assert_eq!(
            a,
            "order <n> failed: customer <uuid> not found (hash <hex>)"
        );
        assert_eq!(
            normalize("no such sku 'AB-1234' at 0x7ffe"),
            normalize("no such sku 'ZZ-9' at 0x10")
        );
        assert_eq!(normalize("timeout after 2.5s"), "timeout after <n>s");
    }

    #[test]
    fn different_words_stay_different() {
        assert_ne!(
            normalize("field 'email' missing"),
            normalize("field 'name' missing")
        );
        assert_eq!(normalize("field 'email'  missing"), "field 'email' missing");
        // Plain words made of hex letters are not ids.
        assert_eq!(normalize("bad face"), "bad face");
    }

    #[test]
    fn long_texts_are_cut_on_a_char_boundary() {
        let s = normalize(&"é".repeat(300));
        assert!(s.ends_with('…'));
        assert!(s.len() <= MAX_LEN + '…'.len_utf8());
    }

    #[test]
    fn why_is_the_most_specific_text_recorded() {
        let cfg = SignatureConfig::default();
        let dead = |text: Option<&str>| Message {
            dead_letter: Some(DeadLetterInfo {
                reason: Some("rejected".into()),
                description: Some("last died in 'orders' via exchange ''".into()),
                why: text.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        };
        // The backend's reading of the failure beats the broker's word; a route is no reason.
        let m = dead(Some("customer 42 not found"));
        assert_eq!(why(&m, &cfg).as_deref(), Some("customer 42 not found"));
        assert_eq!(why(&dead(None), &cfg).as_deref(), Some("rejected"));
        assert_eq!(why(&dead(Some("  ")), &cfg).as_deref(), Some("rejected"));
        // A header the profile names comes first; error headers serve a message no broker
        // marked dead.
        let mut named = dead(Some("customer 42 not found"));
        named
            .headers
            .push(("x-error".into(), Value::str("billing down")));
        let cfg_x = SignatureConfig {
            extra_headers: vec!["x-error".into()],
        };
        assert_eq!(why(&named, &cfg_x).as_deref(), Some("billing down"));
        let republished = Message {
            headers: vec![("x-exception-message".into(), Value::str("boom"))],
            ..Default::default()
        };
        assert_eq!(why(&republished, &cfg).as_deref(), Some("boom"));
        assert_eq!(why(&Message::default(), &cfg), None);
    }

    #[test]
    fn reason_comes_from_dead_letter_info_then_headers() {
        let dl = DeadLetterInfo {
            reason: Some("rejected".into()),
            origin: Some(QueueId::new("orders")),
            ..Default::default()
        };
        let m = msg(&[("x-exception-message", "order 12 invalid")], Some(dl));
        let s = signature(&m, &SignatureConfig::default());
        assert_eq!(s.text, "rejected: order <n> invalid");
        assert_eq!(s.origin.as_deref(), Some("orders"));

        let m = msg(
            &[
                ("DeadLetterReason", "MaxDeliveryCountExceeded"),
                (
                    "DeadLetterErrorDescription",
                    "Message could not be consumed after 10 delivery attempts.",
                ),
            ],
            None,
        );
        assert_eq!(
            signature(&m, &SignatureConfig::default()).text,
            "MaxDeliveryCountExceeded: Message could not be consumed after <n> delivery attempts."
        );
        let m = msg(
            &[
                ("x-first-death-reason", "expired"),
                ("x-first-death-queue", "q1"),
            ],
            None,
        );
        let s = signature(&m, &SignatureConfig::default());
        assert_eq!(
            (s.text.as_str(), s.origin.as_deref()),
            ("expired", Some("q1"))
        );
    }

    #[test]
    fn configured_headers_come_first_and_sqs_attributes_match() {
        let cfg = SignatureConfig {
            extra_headers: vec!["x-error".into()],
        };
        let m = msg(
            &[("X-Error", "db down 3"), ("x-exception-message", "other")],
            None,
        );
        assert_eq!(signature(&m, &cfg).text, "db down <n>");
        assert_eq!(signature(&msg(&[], None), &cfg).text, NO_REASON);
    }

    #[test]
    fn pubsub_dead_letters_group_by_a_named_attribute_else_deliveries_and_source() {
        let dl = |count: Option<u64>, origin: &str| {
            Some(DeadLetterInfo {
                reason: Some(qdeck_backend::no_failure_text::DELIVERIES_RAN_OUT.into()),
                origin: Some(QueueId::new(origin)),
                count,
                ..Default::default()
            })
        };
        let attrs = [("why", "schema v2 rejected")];
        let cfg = SignatureConfig::default();
        let five = signature(&msg(&attrs, dl(Some(5), "p/orders")), &cfg);
        assert_eq!(
            five.text,
            "max delivery attempts reached after 5 deliveries"
        );
        assert_eq!(five.origin.as_deref(), Some("p/orders"));
        // The count is kept as written: 5 and 100 deliveries are two groups.
        let hundred = signature(&msg(&attrs, dl(Some(100), "p/orders")), &cfg);
        assert_ne!(hundred, five);
        let other = signature(&msg(&attrs, dl(Some(5), "p/billing")), &cfg);
        assert_ne!(other, five, "another source is another group");
        assert_eq!(
            signature(&msg(&attrs, dl(None, "p/orders")), &cfg).text,
            "max delivery attempts reached deliveries not recorded"
        );
        // The attribute the user names groups instead of the count.
        let by_why = SignatureConfig {
            extra_headers: vec!["why".into()],
        };
        assert_eq!(
            signature(&msg(&attrs, dl(Some(5), "p/orders")), &by_why),
            signature(&msg(&attrs, dl(Some(100), "p/orders")), &by_why)
        );
        assert_eq!(
            signature(&msg(&attrs, dl(Some(5), "p/orders")), &by_why).text,
            "max delivery attempts reached: schema v<n> rejected"
        );
    }

    #[test]
    fn celery_tasks_group_by_task_name_then_failure() {
        let dl = || {
            Some(DeadLetterInfo {
                reason: Some("rejected".into()),
                ..Default::default()
            })
        };
        let a = msg(&[("task", "billing.charge2"), ("id", "u-1")], dl());
        let b = msg(&[("task", "mail.send"), ("id", "u-2")], dl());
        let cfg = SignatureConfig::default();
        assert_eq!(signature(&a, &cfg).text, "billing.charge2: rejected");
        assert_ne!(signature(&a, &cfg), signature(&b, &cfg));
        // A `task` header alone (no Celery id) is no Celery message.
        let c = msg(&[("task", "x")], dl());
        assert_eq!(signature(&c, &cfg).text, "rejected");
    }
}
