//! Jobs as messages: a BullMQ job hash or a Sidekiq JSON payload turned into a browsed
//! `Message`. Data/args are laid out over lines with their stored text kept (json_text.rs);
//! anything that is not JSON (a pickled RQ job, say) stays the bytes it was, never decoded.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::figures::sidekiq_time_ms;
use super::json_text::{member, pretty_or_raw};
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// Lines of a stack trace shown in the list view; the detail has them all.
const TRACE_HEAD: usize = 3;

fn iso(ms: i64) -> String {
    ms_to_datetime(ms).map_or_else(
        || ms.to_string(),
        |d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

fn text(h: &HashMap<String, Vec<u8>>, k: &str) -> Option<String> {
    h.get(k).map(|v| String::from_utf8_lossy(v).into_owned())
}

fn num(h: &HashMap<String, Vec<u8>>, k: &str) -> Option<i64> {
    text(h, k)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(|f| f as i64)
}

/// BullMQ keeps the stack trace as a JSON array of strings, one per failed attempt.
fn trace_lines(raw: &str) -> Vec<String> {
    match serde_json::from_str::<Vec<String>>(raw) {
        Ok(traces) => traces
            .last()
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default(),
        Err(_) => raw.lines().map(str::to_string).collect(),
    }
}

/// One BullMQ job from its hash. `origin` is set when the job sits in a failed set.
pub fn bull_job(id: &str, h: &HashMap<String, Vec<u8>>, origin: Option<&QueueId>) -> Message {
    let mut headers = Vec::new();
    // Every field is what the job library recorded: metadata (Redis jobs are never sent again
    // through qdeck; a redrive moves the job itself).
    let mut push =
        |k: &str, v: String| headers.push((k.to_string(), Value::String(clean_short(&v, 2000))));
    if let Some(n) = text(h, "name") {
        push("name", n);
    }
    let atm = num(h, "atm");
    if let Some(a) = atm {
        push("attempts made", a.to_string());
    }
    if let Some(opts) = text(h, "opts").and_then(|o| serde_json::from_str::<Json>(&o).ok()) {
        if let Some(a) = opts.get("attempts").and_then(Json::as_i64) {
            push("attempts", a.to_string());
        }
    }
    if let Some(p) = num(h, "priority").filter(|p| *p > 0) {
        push("priority", p.to_string());
    }
    for (k, label) in [
        ("timestamp", "created"),
        ("processedOn", "processed on"),
        ("finishedOn", "finished on"),
    ] {
        if let Some(ms) = num(h, k) {
            push(label, iso(ms));
        }
    }
    if let Some(d) = num(h, "delay").filter(|d| *d > 0) {
        push("delay ms", d.to_string());
    }
    // qdeck's redrive stamp, under the header names every backend uses (count, Unix ms).
    if let Some(n) = num(h, "qdeckRedriven").filter(|n| *n > 0) {
        push("x-qdeck-redriven", n.to_string());
        if let Some(at) = num(h, "qdeckRedrivenAt") {
            push("x-qdeck-redriven-at", at.to_string());
        }
    }
    let reason = text(h, "failedReason");
    if let Some(r) = &reason {
        push("failed reason", r.clone());
    }
    if let Some(st) = text(h, "stacktrace") {
        let lines = trace_lines(&st);
        if !lines.is_empty() {
            push(
                "stack trace",
                lines
                    .iter()
                    .take(TRACE_HEAD)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
            push("stack trace (full)", lines.join("\n"));
        }
    }
    let body = h.get("data").map(|d| pretty_or_raw(d)).unwrap_or_default();
    if h.is_empty() {
        headers.push((
            "note".into(),
            Value::str("job hash is gone (removed while browsing)"),
        ));
    }
    Message {
        id: clean_short(id, 200),
        seq: None,
        enqueued_ms: num(h, "timestamp"),
        receive_count: atm.map(|a| a.max(0) as u64),
        key: None,
        meta: headers,
        body,
        dead_letter: origin.map(|o| DeadLetterInfo {
            // BullMQ's failedReason is the error the processor threw: the application's words.
            why: reason
                .as_deref()
                .filter(|r| !r.trim().is_empty())
                .map(|r| clean_short(r, 500)),
            reason: reason.map(|r| clean_short(&r, 500)),
            description: None,
            origin: Some(o.clone()),
            count: atm.map(|a| a.max(0) as u64),
            at_ms: num(h, "finishedOn"),
        }),
        ..Message::default()
    }
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
