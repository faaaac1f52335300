//! Sidekiq's workers: the `processes` set, each process's heartbeat hash and its `:workers`
//! hash of jobs in progress; a process whose heartbeat key expired (Sidekiq gives it 60 s)
//! or whose beat is older than that is shown as gone, not busy.

use super::Sidekiq;
use crate::redis::conn::map_err;
use crate::redis::figures::{as_array, as_f64, as_i64, as_string};
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// Sidekiq expires a heartbeat after 60 s; a beat older than this is a stopped process.
const BEAT_STALE_SECS: f64 = 60.0;

pub(super) async fn processes(
    lib: &Sidekiq,
    b: &RedisBackend,
    id: &QueueId,
    only: Option<&str>,
) -> Result<Vec<Consumer>> {
    let mut cm = b.conn.get().await?;
    let procs: Vec<String> = ::redis::cmd("SMEMBERS")
        .arg(lib.key("processes"))
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    if procs.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = ::redis::pipe();
    for p in &procs {
        pipe.cmd("HMGET")
            .arg(lib.key(p))
            .arg(&["info", "busy", "beat", "quiet"]);
        pipe.hgetall(lib.key(&format!("{p}:workers")));
    }
    let replies: Vec<::redis::Value> = pipe.query_async(&mut cm).await.map_err(map_err)?;
    b.calls.bump("pipeline");
    let now = now_ms() as f64 / 1000.0;
    let mut out = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        let h = as_array(&replies[2 * i]);
        let info = h
            .first()
            .and_then(as_string)
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
        let queues: Vec<String> = info
            .as_ref()
            .and_then(|i| i.get("queues"))
            .and_then(|q| q.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(q) = only {
            if !queues.iter().any(|x| x == q) {
                continue;
            }
        }
        let busy = h.get(1).and_then(as_i64);
        let beat = h.get(2).and_then(as_f64);
        let quiet = h.get(3).and_then(as_string).as_deref() == Some("true");
        let gone = match beat {
            None => true,
            Some(t) => now - t > BEAT_STALE_SECS,
        };
        let host = info
            .as_ref()
            .and_then(|i| i.get("hostname"))
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        let pid = info
            .as_ref()
            .and_then(|i| i.get("pid"))
            .map_or_else(|| "?".into(), std::string::ToString::to_string);
        let concurrency = info
            .as_ref()
            .and_then(|i| i.get("concurrency"))
            .and_then(serde_json::Value::as_u64)
            .map(|v| v as u32);
        let jobs = in_progress(&replies[2 * i + 1], now);
        let status = if gone {
            WorkerState::Gone
        } else if quiet {
            WorkerState::Stopping
        } else if busy.unwrap_or(0) > 0 {
            WorkerState::Busy
        } else {
            WorkerState::Idle
        };
        let state = if gone {
            "gone (heartbeat stopped)".to_string()
        } else {
            let mut s = if quiet {
                "quiet/stopping".to_string()
            } else if busy.unwrap_or(0) > 0 {
                "busy".to_string()
            } else {
                "idle".to_string()
            };
            s.push_str(&format!(" · queues {}", clean_short(&queues.join(","), 80)));
            if !jobs.is_empty() {
                s.push_str(" · ");
                s.push_str(&jobs.join(", "));
            }
            s
        };
        out.push(Consumer {
            queue: id.clone(),
            tag: clean_short(p, 100),
            peer: Some(clean_short(&format!("{host} pid {pid}"), 100)),
            prefetch: concurrency,
            ack_mode: AckMode::Manual,
            state,
            status,
            // Gone since its last heartbeat.
            status_since_ms: beat.filter(|_| gone).map(|t| (t * 1000.0) as i64),
            holding: if gone {
                Some(0)
            } else {
                busy.map(|v| v.max(0) as u64)
            },
            processed: None,
            failed: None,
            rate: None,
            last_seen_ms: beat.map(|t| (t * 1000.0) as i64),
        });
    }
    Ok(out)
}

/// "queue Class (12s)" for each job a process is running.
fn in_progress(v: &::redis::Value, now: f64) -> Vec<String> {
    let a = as_array(v);
    let mut pairs: Vec<&::redis::Value> = Vec::new();
    if a.iter().all(|x| matches!(x, ::redis::Value::Array(_))) {
        for p in a {
            if let Some(x) = as_array(p).get(1) {
                pairs.push(x);
            }
        }
    } else {
        for p in a.chunks(2) {
            if let Some(x) = p.get(1) {
                pairs.push(x);
            }
        }
    }
    if let ::redis::Value::Map(m) = v {
        pairs = m.iter().map(|(_, x)| x).collect();
    }
    let mut out = Vec::new();
    for w in pairs {
        let Some(j) = as_string(w).and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        else {
            continue;
        };
        let queue = j.get("queue").and_then(|q| q.as_str()).unwrap_or("?");
        // Sidekiq 6 keeps the payload as an object, 7 as a JSON string.
        let payload = match j.get("payload") {
            Some(serde_json::Value::String(s)) => serde_json::from_str(s).ok(),
            other => other.cloned(),
        };
        let class = payload
            .as_ref()
            .and_then(|p| p.get("wrapped").or_else(|| p.get("class")))
            .and_then(|c| c.as_str())
            .unwrap_or("?");
        let run = j
            .get("run_at")
            .and_then(serde_json::Value::as_f64)
            .map(|t| if t > 1e11 { t / 1000.0 } else { t })
            .map_or_else(|| "?".into(), |t| format!("{:.0}s", (now - t).max(0.0)));
        out.push(clean_short(&format!("{queue} {class} ({run})"), 120));
    }
    out.sort();
    out
}
