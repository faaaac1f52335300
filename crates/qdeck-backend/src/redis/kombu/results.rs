//! Celery's failed tasks from a Redis result backend: Celery writes each task's outcome to
//! `celery-task-meta-<task id>` (JSON: `status`, `result` — for a failure `{exc_type,
//! exc_message, exc_module}` —, `traceback`, `date_done`, and with `result_extended = True`
//! also `name`, `args`, `kwargs`, `worker`, `retries`, `queue`). Celery keeps no dead-letter
//! queue on Redis; its FAILURE results are the nearest thing, shown as the read-only queue
//! `celery-results/failed`: a result holds the task's outcome, not its message, so there is
//! nothing to resend or remove from a queue.
//!
//! A result backend has no index of failures: figures and browse scan the result keys
//! (SCAN + MGET per page), bounded by `MAX_SCANNED`.

use serde_json::Value as Json;

use crate::redis::conn::map_err;
use crate::redis::figures::as_string;
use crate::redis::listing::scan_step;
use crate::redis::RedisBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// The queue id of the failed results.
pub const RESULTS_ID: &str = "celery-results/failed";
const KEY_PREFIX: &str = "celery-task-meta-";
/// Result keys read at most per scan; more are left out with a note.
const MAX_SCANNED: usize = 200_000;
/// Why a result cannot be redriven, purged or deleted here.
pub const READ_ONLY: &str = "a Celery result holds the task's outcome, not its message: there is nothing to resend (send the task again from the application); results expire by Celery's result_expires";

/// Whether the database holds any Celery result (a bounded SCAN that stops at the first).
pub async fn present(b: &RedisBackend) -> Result<bool> {
    let mut cm = b.conn.get().await?;
    let mut cursor: u64 = 0;
    for _ in 0..50 {
        let (next, keys) = scan_step(b, &mut cm, cursor, &format!("{KEY_PREFIX}*"), 5000).await?;
        if !keys.is_empty() {
            return Ok(true);
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    Ok(false)
}

/// One scan of the results: every FAILURE result, oldest `date_done` first; how many result
/// keys were read; whether the scan stopped at `MAX_SCANNED`.
pub type Scan = (Vec<Json>, usize, bool);

/// Figures scan at most this often (a scan reads every result key); browse always scans.
const SCAN_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// The last scan while fresh, else a new one.
async fn failures_cached(b: &RedisBackend) -> Result<std::sync::Arc<Scan>> {
    let mut slot = b.kombu.results_scan.lock().await;
    if let Some((at, s)) = slot.as_ref() {
        if at.elapsed() < SCAN_FRESH {
            return Ok(s.clone());
        }
    }
    let s = std::sync::Arc::new(failures(b).await?);
    *slot = Some((std::time::Instant::now(), s.clone()));
    Ok(s)
}

/// Every FAILURE result, oldest `date_done` first, and how many results were read.
pub async fn failures(b: &RedisBackend) -> Result<Scan> {
    let mut cm = b.conn.get().await?;
    let mut cursor: u64 = 0;
    let mut failed = Vec::new();
    let mut scanned = 0usize;
    loop {
        let (next, keys) = scan_step(b, &mut cm, cursor, &format!("{KEY_PREFIX}*"), 1000).await?;
        if !keys.is_empty() {
            let vals: Vec<::redis::Value> = ::redis::cmd("MGET")
                .arg(&keys)
                .query_async(&mut cm)
                .await
                .map_err(map_err)?;
            b.calls.bump("MGET");
            scanned += keys.len();
            failed.extend(
                vals.iter()
                    .filter_map(as_string)
                    .filter_map(|t| serde_json::from_str::<Json>(&t).ok())
                    .filter(|d| d.get("status").and_then(Json::as_str) == Some("FAILURE")),
            );
        }
        cursor = next;
        if cursor == 0 || scanned >= MAX_SCANNED {
            break;
        }
    }
    failed.sort_by_key(done_ms);
    Ok((failed, scanned, cursor != 0))
}

fn done_ms(d: &Json) -> i64 {
    d.get("date_done")
        .and_then(Json::as_str)
        .and_then(crate::celery::iso_ms)
        .unwrap_or(i64::MAX)
}

/// `ValueError: card 1 declined`, from the result's exception fields.
fn reason(d: &Json) -> String {
    let r = d.get("result");
    let ty = r
        .and_then(|r| r.get("exc_type"))
        .and_then(Json::as_str)
        .unwrap_or("failure");
    let msg = match r.and_then(|r| r.get("exc_message")) {
        Some(Json::Array(parts)) => parts
            .iter()
            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    if msg.is_empty() {
        ty.to_string()
    } else {
        format!("{ty}: {msg}")
    }
}

/// A FAILURE result as a message: the stored JSON as its body, the task's identity in the
/// headers Celery's own messages use (so it decodes and groups as that task), the failure as
/// its dead-letter reason and the traceback in its metadata.
pub fn message(d: &Json, raw_len_hint: Option<usize>) -> Message {
    let s = |k: &str| d.get(k).and_then(Json::as_str).map(|v| clean_short(v, 300));
    let id = s("task_id").unwrap_or_else(|| "?".into());
    let mut m = Message {
        id: id.clone(),
        body: d.to_string().into_bytes(),
        ..Default::default()
    };
    if let Some(name) = s("name") {
        m.headers.push(("task".into(), Value::str(name)));
        m.headers.push(("id".into(), Value::str(id)));
        for (k, h) in [("args", "argsrepr"), ("kwargs", "kwargsrepr")] {
            if let Some(v) = d.get(k).filter(|v| !v.is_null()) {
                m.headers
                    .push((h.into(), Value::str(clean_short(&v.to_string(), 300))));
            }
        }
    } else {
        m.meta.push((
            "note".into(),
            Value::str("the task name is stored only with result_extended = True"),
        ));
    }
    if let Some(r) = d.get("retries").and_then(Json::as_i64) {
        m.headers.push(("retries".into(), Value::I64(r)));
    }
    m.meta.push(("status".into(), Value::str("FAILURE")));
    for k in ["worker", "date_done", "traceback"] {
        if let Some(v) = d.get(k).and_then(Json::as_str) {
            m.meta.push((k.into(), Value::str(v)));
        }
    }
    m.meta.push(("read-only".into(), Value::str(READ_ONLY)));
    if let Some(n) = raw_len_hint {
        m.meta.push(("stored bytes".into(), Value::I64(n as i64)));
    }
    let at = done_ms(d);
    m.enqueued_ms = (at != i64::MAX).then_some(at);
    m.dead_letter = Some(DeadLetterInfo {
        reason: Some(clean_short(&reason(d), 300)),
        description: None,
        // The exception, `ValueError: card 3 declined`: the application's own words.
        why: Some(clean_short(&reason(d), 300)),
        origin: s("queue").map(QueueId::new),
        count: None,
        at_ms: m.enqueued_ms,
    });
    m
}

fn scan_note(scanned: usize, cut: bool) -> String {
    if cut {
        format!(
            "from a scan of the first {scanned} result keys (more are stored): counts are a floor"
        )
    } else {
        format!(
            "from a scan of all {scanned} result keys: a result backend keeps no index of failures"
        )
    }
}

pub async fn figures(b: &RedisBackend, id: &QueueId) -> Result<QueueStats> {
    let scan = failures_cached(b).await?;
    let (failed, scanned, cut) = (&scan.0, scan.1, scan.2);
    let at_ms = now_ms();
    let oldest = failed.first().map(done_ms).filter(|t| *t != i64::MAX);
    Ok(QueueStats {
        id: id.clone(),
        at_ms,
        depth: Some(failed.len() as u64),
        in_flight: Some(0),
        delayed: Some(0),
        oldest_age_secs: oldest.map(|t| ((at_ms - t).max(0) as f64) / 1000.0),
        age_note: Some(format!(
            "age is the oldest failure's date_done; {}",
            scan_note(scanned, cut)
        )),
        ..Default::default()
    })
}

pub async fn page(b: &RedisBackend, off: usize, max: usize) -> Result<Page> {
    let (failed, scanned, cut) = failures(b).await?;
    // A browse saw the results as they are now: figures start from it.
    *b.kombu.results_scan.lock().await = None;
    let messages: Vec<Message> = failed
        .iter()
        .skip(off)
        .take(max)
        .map(|d| message(d, None))
        .collect();
    let next = (off + messages.len() < failed.len()).then(|| format!("r:{}", off + max));
    Ok(Page {
        messages,
        next,
        effect_note: Some(format!(
            "FAILURE results of the Redis result backend, oldest first, {}",
            scan_note(scanned, cut)
        )),
    })
}

/// The refusal for every change on the results queue.
pub fn refuse() -> BackendError {
    BackendError::Unsupported(format!("{RESULTS_ID}: {READ_ONLY}"))
}

/// The queue's listing entry.
pub fn info() -> QueueInfo {
    let mut settings = QueueSettings::default();
    settings
        .extra
        .insert("library".into(), "Celery result backend (Redis)".into());
    settings.extra.insert(
        "holds".into(),
        "FAILURE results (celery-task-meta-*): the failed view, read-only".into(),
    );
    settings.extra.insert(
        qdeck_model::domain::DLQ_OF.into(),
        "every Celery task with a result (a result does not record its queue)".into(),
    );
    QueueInfo {
        id: QueueId::new(RESULTS_ID),
        kind: QueueKind::Standard,
        is_dlq: true,
        dlq: None,
        dlq_sources: Vec::new(),
        settings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_result_is_a_read_only_message_grouped_by_task_and_exception() {
        let d: Json = serde_json::from_str(
            r#"{"status": "FAILURE", "result": {"exc_type": "ValueError", "exc_message": ["card 3 declined"], "exc_module": "builtins"},
                "traceback": "Traceback (most recent call last):\n ValueError: card 3 declined", "children": [],
                "date_done": "2026-12-06T05:00:00.000000+00:00", "task_id": "t-1", "name": "billing.charge",
                "args": [3], "kwargs": {}, "worker": "w1@h", "retries": 0, "queue": "billing"}"#,
        )
        .unwrap();
        let m = message(&d, None);
        assert_eq!(m.id, "t-1");
        assert_eq!(
            m.dead_letter.as_ref().unwrap().reason.as_deref(),
            Some("ValueError: card 3 declined")
        );
        // The failure signature that triage groups by leads with this task name.
        assert_eq!(
            crate::celery::task_of(&m).as_deref(),
            Some("billing.charge")
        );
        assert!(m.meta.iter().any(|(k, _)| k == "traceback"));
        let plain: Json = serde_json::from_str(
            r#"{"status": "FAILURE", "result": {"exc_type": "KeyError", "exc_message": []}, "task_id": "t-2"}"#,
        )
        .unwrap();
        let m = message(&plain, None);
        assert_eq!(
            m.dead_letter.as_ref().unwrap().reason.as_deref(),
            Some("KeyError")
        );
        assert!(crate::celery::decode(&m).is_none());
    }
}

#[cfg(test)]
mod dlq_of_tests {
    /// The failed view is a DLQ no queue dead-letters into by name: its row says whose
    /// failures it holds rather than an empty name.
    #[test]
    fn the_failed_view_says_what_it_is_the_dlq_of() {
        let of = super::info().dlq_of().unwrap_or_default();
        assert!(of.contains("Celery task"), "{of:?}");
    }
}
