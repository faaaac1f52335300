//! An RQ job hash (`rq:job:<id>`) and its latest result (`rq:results:<id>`) as a browsed
//! `Message`, read without changing anything.
//!
//! RQ stores the job's call (`data`: function, instance, args, kwargs) zlib-compressed and
//! serialised with pickle unless the queue was given another serializer. Pickle is never
//! decoded here (unpickling runs code chosen by whoever wrote the job): a pickled job shows
//! its `description` (RQ's text of the call, e.g. `app.send(42)`) and its size. A job written
//! with RQ's JSON serializer shows its call as JSON. The traceback of a failed job is in the
//! results stream (rq 2.x: `exc_string`, base64 of zlib) or, from older RQ, in the hash's
//! `exc_info` (zlib); its last line, the exception type and message, is the failure reason.

use std::collections::HashMap;

use base64::Engine;

use crate::redis::figures::{as_array, as_string};
use crate::redis::jobs::{iso, TRACE_HEAD};
use crate::redis::json_text::pretty_or_raw;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// Largest expansion of compressed job data or traceback: past it the text is not expanded
/// (a hostile or broken hash must not make qdeck allocate without bound).
const INFLATE_LIMIT: usize = 4 << 20;

/// RQ's timestamp text (`2026-12-06T02:07:29.178846Z`, older RQ without the fraction) as Unix
/// ms.
pub fn rq_time_ms(s: &str) -> Option<i64> {
    let t = s.trim();
    let t = t.strip_suffix('Z').unwrap_or(t);
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|d| d.and_utc().timestamp_millis())
}

/// RQ's timestamp text for `ms`, as its `utcformat` writes it.
pub fn rq_time_text(ms: i64) -> String {
    ms_to_datetime(ms)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_default()
}

/// zlib-compressed bytes expanded, as RQ reads them: bytes that are not zlib are taken as they
/// are (RQ's own fallback). `Err` when the expansion would pass the limit.
fn inflate(raw: &[u8]) -> Result<Vec<u8>, ()> {
    match miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(raw, INFLATE_LIMIT) {
        Ok(v) => Ok(v),
        Err(e) if e.status == miniz_oxide::inflate::TINFLStatus::HasMoreOutput => Err(()),
        Err(_) => Ok(raw.to_vec()),
    }
}

fn text(h: &HashMap<String, Vec<u8>>, k: &str) -> Option<String> {
    h.get(k)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|s| !s.is_empty())
}

/// What the stored call is, without running any decoder but JSON's.
enum Payload {
    /// RQ's JSON serializer: `[func, instance, args, kwargs]`, the text as stored.
    Json(Vec<u8>),
    Pickle(usize),
    Other(usize),
    TooLarge(usize),
    Missing,
}

fn payload(h: &HashMap<String, Vec<u8>>) -> Payload {
    let Some(raw) = h.get("data") else {
        return Payload::Missing;
    };
    let Ok(data) = inflate(raw) else {
        return Payload::TooLarge(raw.len());
    };
    // Every pickle protocol RQ has used (2 and up) opens with the PROTO opcode.
    if data.first() == Some(&0x80) {
        return Payload::Pickle(data.len());
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&data).is_ok() {
        return Payload::Json(data);
    }
    Payload::Other(data.len())
}

/// The traceback text of the job's latest failure: from its latest result when that is a
/// failure (rq 2.x), else from the hash's `exc_info` (older RQ).
fn traceback(h: &HashMap<String, Vec<u8>>, latest: &::redis::Value) -> Option<String> {
    let fields = result_fields(latest);
    let failed = fields.get("type").map(String::as_str) == Some("2");
    let from_result = fields
        .get("exc_string")
        .filter(|_| failed)
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|z| inflate(&z).ok());
    let raw = from_result.or_else(|| {
        h.get("exc_info")
            .filter(|v| !v.is_empty())
            .and_then(|z| inflate(z).ok())
    })?;
    let t = String::from_utf8_lossy(&raw).trim_end().to_string();
    (!t.is_empty()).then_some(t)
}

/// The fields of the newest entry of an XREVRANGE reply (`[[id, [k, v, …]]]`, or a map of
/// fields under RESP3).
fn result_fields(v: &::redis::Value) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let Some(entry) = as_array(v).first() else {
        return out;
    };
    let Some(fields) = as_array(entry).get(1) else {
        return out;
    };
    match fields {
        ::redis::Value::Map(m) => {
            for (k, x) in m {
                if let (Some(k), Some(x)) = (as_string(k), as_string(x)) {
                    out.insert(k, x);
                }
            }
        }
        other => {
            for kv in as_array(other).chunks(2) {
                if let [k, x] = kv {
                    if let (Some(k), Some(x)) = (as_string(k), as_string(x)) {
                        out.insert(k, x);
                    }
                }
            }
        }
    }
    out
}

/// The exception a Python traceback ends with (`module.Type: message`): its last line that
/// is not indented (frames and source lines are).
pub fn exception_line(trace: &str) -> Option<String> {
    trace
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with(char::is_whitespace))
        .map(|l| l.trim().to_string())
}

/// One job. `latest` is the XREVRANGE reply of its results stream (newest entry); `origin_of`
/// maps the job's origin queue name to its queue id, for jobs in a failed registry.
pub fn rq_job(
    id: &str,
    h: &HashMap<String, Vec<u8>>,
    latest: &::redis::Value,
    origin_of: Option<&dyn Fn(&str) -> QueueId>,
) -> Message {
    let mut meta = Vec::new();
    // Every field is what RQ recorded: metadata (a redrive moves the job itself, nothing is
    // sent again from what is shown here).
    let mut push =
        |k: &str, v: String| meta.push((k.to_string(), Value::String(clean_short(&v, 2000))));
    if h.is_empty() {
        push(
            "note",
            "job hash is gone (expired or removed since it was listed)".into(),
        );
        return Message {
            id: clean_short(id, 200),
            meta,
            ..Message::default()
        };
    }
    let description = text(h, "description");
    if let Some(d) = &description {
        push("description", d.clone());
    }
    let (body, call, function) = body_and_call(h);
    if let Some(f) = function {
        push("function", f);
    }
    push("payload", call);
    let origin = text(h, "origin");
    match &origin {
        Some(o) => push("origin", o.clone()),
        None => push(
            "note",
            "the job hash names no origin queue (malformed)".into(),
        ),
    }
    if let Some(s) = text(h, "status") {
        push("status", s);
    }
    let stamp = |k: &str| text(h, k).and_then(|t| rq_time_ms(&t));
    for (k, label) in [
        ("created_at", "created"),
        ("enqueued_at", "enqueued"),
        ("started_at", "started"),
        ("ended_at", "ended"),
    ] {
        if let Some(ms) = stamp(k) {
            push(label, iso(ms));
        }
    }
    for (k, label) in [
        ("worker_name", "worker"),
        ("timeout", "timeout s"),
        ("retries_left", "retries left"),
        ("dependency_ids", "depends on"),
    ] {
        if let Some(v) = text(h, k) {
            push(label, v);
        }
    }
    // qdeck's redrive stamp, under the header names every backend uses (count, Unix ms).
    if let Some(n) = text(h, "qdeck_redriven").filter(|n| n != "0") {
        push("x-qdeck-redriven", n);
        if let Some(at) = text(h, "qdeck_redriven_at") {
            push("x-qdeck-redriven-at", at);
        }
    }
    let trace = traceback(h, latest);
    let reason = trace.as_deref().and_then(exception_line);
    if let Some(r) = &reason {
        push("exception", r.clone());
    }
    if let Some(t) = &trace {
        let lines: Vec<&str> = t.lines().collect();
        let tail = lines.len().saturating_sub(TRACE_HEAD);
        push("traceback", lines[tail..].join(" | "));
        push("traceback (full)", t.clone());
    }
    let enqueued = stamp("enqueued_at").or_else(|| stamp("created_at"));
    Message {
        id: clean_short(id, 200),
        enqueued_ms: enqueued,
        meta,
        body,
        dead_letter: origin_of.map(|f| DeadLetterInfo {
            // The traceback's last line, `ValueError: card 3 declined`.
            why: reason.as_deref().map(|r| clean_short(r, 500)),
            reason: reason.map(|r| clean_short(&r, 500)),
            description: description.map(|d| clean_short(&d, 500)),
            origin: origin.as_deref().map(f),
            count: None,
            at_ms: stamp("ended_at"),
        }),
        ..Message::default()
    }
}

/// The body qdeck shows for a job, how its payload is stored, and the function it calls where
/// RQ's JSON serializer says (a pickled payload is never unpickled).
fn body_and_call(h: &HashMap<String, Vec<u8>>) -> (Vec<u8>, String, Option<String>) {
    match payload(h) {
        Payload::Json(raw) => {
            let func = serde_json::from_slice::<serde_json::Value>(&raw)
                .ok()
                .and_then(|v| v.get(0).and_then(|f| f.as_str()).map(str::to_string));
            (
                pretty_or_raw(&raw),
                "JSON (RQ's JSON serializer)".to_string(),
                func,
            )
        }
        Payload::Pickle(n) => (
            Vec::new(),
            format!("pickled data, {n} bytes (never unpickled: see the description)"),
            None,
        ),
        Payload::Other(n) => (
            Vec::new(),
            format!("{n} bytes in an unknown serialisation (not decoded)"),
            None,
        ),
        Payload::TooLarge(n) => (
            Vec::new(),
            format!("{n} compressed bytes expanding past 4 MiB (not expanded)"),
            None,
        ),
        Payload::Missing => (
            Vec::new(),
            "none: the job hash has no data field (malformed)".to_string(),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rq_timestamps_read_with_and_without_the_fraction() {
        let a = rq_time_ms("2026-12-06T02:07:29.178846Z").unwrap_or(0);
        let b = rq_time_ms("2026-12-06T02:07:29Z").unwrap_or(0);
        assert_eq!(a - b, 178);
        assert_eq!(rq_time_ms(&rq_time_text(a)), Some(a));
        assert_eq!(rq_time_ms("yesterday"), None);
    }

    #[test]
    fn the_exception_is_the_last_unindented_line_of_the_traceback() {
        let t = "Traceback (most recent call last):\n  File \"x.py\", line 3, in work\n    raise PoisonError(n)\nrq_jobs.PoisonError: order 3 rejected\n";
        assert_eq!(
            exception_line(t).as_deref(),
            Some("rq_jobs.PoisonError: order 3 rejected")
        );
        assert_eq!(exception_line("   \n"), None);
    }
}
