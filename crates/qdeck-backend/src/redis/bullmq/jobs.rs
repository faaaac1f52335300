//! A BullMQ job as a message: its job hash (name, opts, timestamps, failedReason, stack trace)
//! with its data laid out over lines, the stored text kept (json_text.rs).

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::redis::jobs::{iso, num, text, TRACE_HEAD};
use crate::redis::json_text::pretty_or_raw;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

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
