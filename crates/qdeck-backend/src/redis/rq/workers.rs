//! RQ workers of a queue: `rq:workers:<queue>` names their hashes (`rq:worker:<name>`), which
//! hold the host and pid, the queues, the state (`busy` with `current_job`, `idle`,
//! `suspended`), the last heartbeat and the counts of successful and failed jobs and of time
//! spent working. RQ lets a worker's hash expire when its heartbeat stops (its `worker_ttl`,
//! 420 s by default, plus 60 s) and writes `death` when it stops cleanly; either shows it gone.

use ::redis::Value;

use super::jobs::rq_time_ms;
use super::listing::WORKER_PREFIX;
use crate::redis::conn::map_err;
use crate::redis::figures::{as_array, as_string};
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// A heartbeat older than RQ's default worker_ttl and grace (420 s + 60 s): the worker is gone
/// even if its hash has not expired yet (a worker run with a longer ttl).
const BEAT_STALE_SECS: i64 = 480;

const FIELDS: [&str; 11] = [
    "hostname",
    "pid",
    "queues",
    "state",
    "current_job",
    "last_heartbeat",
    "successful_job_count",
    "failed_job_count",
    "total_working_time",
    "death",
    "current_job_working_time",
];

pub async fn workers(b: &RedisBackend, id: &QueueId, queue: &str) -> Result<Vec<Consumer>> {
    let mut cm = b.conn.get().await?;
    let mut keys: Vec<String> = ::redis::cmd("SMEMBERS")
        .arg(format!("rq:workers:{queue}"))
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("SMEMBERS");
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    keys.sort();
    let mut pipe = ::redis::pipe();
    // A key of another type answers with its own error (shown as a worker without a hash)
    // instead of failing the list.
    pipe.ignore_errors();
    for k in &keys {
        pipe.cmd("HMGET").arg(k).arg(&FIELDS[..]);
    }
    let replies: Vec<Value> = pipe.query_async(&mut cm).await.map_err(map_err)?;
    b.calls.bump("pipeline");
    let now = now_ms();
    Ok(keys
        .iter()
        .zip(replies.iter())
        .map(|(k, v)| worker(id, k, as_array(v), now))
        .collect())
}

fn worker(id: &QueueId, key: &str, h: &[Value], now: i64) -> Consumer {
    let f = |i: usize| h.get(i).and_then(as_string).filter(|s| !s.is_empty());
    let num = |i: usize| f(i).and_then(|s| s.trim().parse::<f64>().ok());
    let name = key.strip_prefix(WORKER_PREFIX).unwrap_or(key);
    let beat = f(5).and_then(|t| rq_time_ms(&t));
    let dead = f(9).and_then(|t| rq_time_ms(&t));
    let expired = h.iter().all(|v| matches!(v, Value::Nil));
    let stale = beat.is_some_and(|t| now - t > BEAT_STALE_SECS * 1000);
    let gone = expired || dead.is_some() || stale;
    let state = f(3).unwrap_or_default();
    let current = f(4);
    let status = if gone {
        WorkerState::Gone
    } else if state == "busy" || current.is_some() {
        WorkerState::Busy
    } else if state == "suspended" {
        WorkerState::Stopping
    } else {
        WorkerState::Idle
    };
    let worked = num(8).map_or_else(String::new, |s| format!(" · worked {s:.1}s"));
    let text = if expired {
        "gone (its hash expired: heartbeat stopped)".to_string()
    } else if dead.is_some() {
        "gone (stopped)".to_string()
    } else if stale {
        "gone (heartbeat stopped)".to_string()
    } else {
        let mut s = if state.is_empty() {
            "registered".to_string()
        } else {
            state.clone()
        };
        if let Some(j) = &current {
            let run = num(10).map_or_else(String::new, |t| format!(" ({t:.0}s)"));
            s.push_str(&format!(" · job {j}{run}"));
        }
        s.push_str(&format!(" · queues {}", f(2).unwrap_or_default()));
        s.push_str(&worked);
        clean_short(&s, 200)
    };
    let host = f(0).unwrap_or_else(|| "?".into());
    let pid = f(1).unwrap_or_else(|| "?".into());
    Consumer {
        queue: id.clone(),
        tag: clean_short(name, 100),
        peer: (!expired).then(|| clean_short(&format!("{host} pid {pid}"), 100)),
        // An RQ worker runs one job at a time.
        prefetch: Some(1),
        ack_mode: AckMode::Manual,
        state: text,
        status,
        status_since_ms: if gone { dead.or(beat) } else { None },
        holding: Some(u64::from(!gone && current.is_some())),
        processed: num(6).map(|v| v as u64),
        failed: num(7).map(|v| v as u64),
        rate: None,
        last_seen_ms: beat,
    }
}
