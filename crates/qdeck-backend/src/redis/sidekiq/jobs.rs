//! A Sidekiq job as a message: its JSON payload (class, queue, retry fields, error class and
//! message, backtrace) with its args laid out over lines, the stored text kept (json_text.rs).
//! A payload that is not JSON stays the bytes it was, never decoded.

use serde_json::Value as Json;

use crate::redis::jobs::{iso, TRACE_HEAD};
use crate::redis::json_text::{member, pretty_or_raw};
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// enqueued_at of a Sidekiq payload, in ms (Sidekiq 6 writes float seconds, 7.x integer ms).
pub fn sidekiq_time_ms(v: &serde_json::Value) -> Option<i64> {
    let f = v.as_f64()?;
    Some(if f > 1e11 {
        f as i64
    } else {
        (f * 1000.0) as i64
    })
}

/// One Sidekiq job from its JSON payload. `origin_of` maps a payload's queue name to the
/// queue id shown; it is used for jobs in the dead and retry sets.
pub fn sidekiq_job(
    raw: &[u8],
    score: Option<f64>,
    origin_of: Option<&dyn Fn(&str) -> QueueId>,
) -> Message {
    let Ok(Json::Object(j)) = serde_json::from_slice::<Json>(raw) else {
        return Message {
            id: format!("(not JSON, {} bytes)", raw.len()),
            meta: vec![(
                "payload".into(),
                Value::str("not JSON: shown as stored, never decoded or unpickled"),
            )],
            body: raw.to_vec(),
            ..Default::default()
        };
    };
    let s = |k: &str| j.get(k).and_then(Json::as_str).map(str::to_string);
    let mut headers = Vec::new();
    // Every field is what the job library recorded: metadata (Redis jobs are never sent again
    // through qdeck; a redrive moves the job itself).
    let mut push =
        |k: &str, v: String| headers.push((k.to_string(), Value::String(clean_short(&v, 2000))));
    let class = s("wrapped").or_else(|| s("class"));
    if let Some(c) = &class {
        push("class", c.clone());
    }
    if let Some(q) = s("queue") {
        push("queue", q);
    }
    let retry_count = j.get("retry_count").and_then(Json::as_i64);
    if let Some(r) = retry_count {
        push("retry count", r.to_string());
    }
    if let Some(r) = j.get("retry") {
        push("retry", r.to_string());
    }
    for (k, label) in [
        ("created_at", "created"),
        ("enqueued_at", "enqueued"),
        ("failed_at", "failed at"),
        ("retried_at", "retried at"),
    ] {
        if let Some(ms) = j.get(k).and_then(sidekiq_time_ms) {
            push(label, iso(ms));
        }
    }
    if let Some(sc) = score {
        push("score (run/died at)", iso((sc * 1000.0) as i64));
    }
    if let Some(n) = j
        .get("qdeck_redriven")
        .and_then(Json::as_i64)
        .filter(|n| *n > 0)
    {
        push("x-qdeck-redriven", n.to_string());
        if let Some(at) = j.get("qdeck_redriven_at").and_then(Json::as_i64) {
            push("x-qdeck-redriven-at", at.to_string());
        }
    }
    let reason = s("error_class");
    let message = s("error_message");
    if let Some(c) = &reason {
        push("error class", c.clone());
    }
    if let Some(m) = &message {
        push("error message", m.clone());
    }
    if let Some(bt) = j.get("error_backtrace") {
        match bt {
            Json::Array(lines) => {
                let lines: Vec<String> = lines
                    .iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect();
                push(
                    "backtrace",
                    lines
                        .iter()
                        .take(TRACE_HEAD)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" | "),
                );
                push("backtrace (full)", lines.join("\n"));
            }
            // Sidekiq 6 stores it zlib-compressed and base64-encoded.
            Json::String(b) => push(
                "backtrace",
                format!("compressed by Sidekiq ({} bytes, not expanded)", b.len()),
            ),
            _ => {}
        }
    }
    // From the payload's text, not `j`: decoded, an integer past 64 bits would be a float.
    let body = member(raw, "args").map(pretty_or_raw).unwrap_or_default();
    let queue = s("queue");
    Message {
        id: clean_short(&s("jid").unwrap_or_default(), 200),
        seq: None,
        enqueued_ms: j.get("enqueued_at").and_then(sidekiq_time_ms),
        receive_count: retry_count.map(|r| r.max(0) as u64 + 1),
        key: None,
        meta: headers,
        body,
        dead_letter: origin_of.map(|f| DeadLetterInfo {
            why: sidekiq_why(reason.as_deref(), message.as_deref()),
            reason: reason.map(|r| clean_short(&r, 200)),
            description: message.map(|m| clean_short(&m, 500)),
            origin: queue.as_deref().map(f),
            count: retry_count.map(|r| r.max(0) as u64),
            at_ms: j.get("failed_at").and_then(sidekiq_time_ms),
        }),
        ..Message::default()
    }
}

/// Sidekiq's `error_class: error_message` (`Stripe::CardError: card 3 declined`), or whichever
/// of the two the job records.
fn sidekiq_why(class: Option<&str>, message: Option<&str>) -> Option<String> {
    let text = match (class, message.filter(|m| !m.trim().is_empty())) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (None, Some(m)) => m.to_string(),
        (Some(c), None) => c.to_string(),
        (None, None) => return None,
    };
    Some(clean_short(&text, 500))
}

#[cfg(test)]
mod tests {
    use super::sidekiq_why;

    #[test]
    fn sidekiqs_error_class_and_message_say_why() {
        assert_eq!(
            sidekiq_why(Some("Stripe::CardError"), Some("card 3 declined")).as_deref(),
            Some("Stripe::CardError: card 3 declined")
        );
        assert_eq!(
            sidekiq_why(Some("Timeout"), Some(" ")).as_deref(),
            Some("Timeout")
        );
        assert_eq!(sidekiq_why(None, None), None);
    }
}
