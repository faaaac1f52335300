//! Age of the oldest message from CloudWatch (`AWS/SQS` `ApproximateAgeOfOldestMessage`,
//! Maximum, 60 s period), ≤500 queues per GetMetricData call, on its own slower cadence.
//! The value is cached in the backend; `stats` returns it labelled as a metric with its age.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::one_line;
use super::cwjson;
use super::{lock, ops, SqsBackend};
use qdeck_model::domain::*;

/// GetMetricData accepts at most 500 metric queries per call.
pub(crate) const MAX_QUERIES: usize = 500;
/// Look back this far for the latest datapoint.
const WINDOW_SECS: i64 = 15 * 60;
pub(crate) const DEFAULT_INTERVAL_SECS: u64 = 120;
/// Ordinary queues per poll whose age is read (CloudWatch bills every metric).
pub(crate) const DEFAULT_WORST_N: usize = 50;

#[derive(Debug, Clone)]
struct AgeEntry {
    fetched_at: Instant,
    /// (value in seconds, datapoint time in Unix ms)
    point: Option<(f64, i64)>,
    error: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct AgeCache {
    entries: Mutex<HashMap<QueueId, AgeEntry>>,
    sweeping: AtomicBool,
}

/// Clears `sweeping` when the sweep ends, even on early return.
struct SweepGuard<'a>(&'a AtomicBool);
impl Drop for SweepGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn interval(b: &SqsBackend) -> Duration {
    Duration::from_secs(
        b.settings
            .age_interval_secs
            .unwrap_or(DEFAULT_INTERVAL_SECS)
            .max(1),
    )
}

fn fmt_secs(s: i64) -> String {
    let s = s.max(0);
    if s < 120 {
        format!("{s} s")
    } else if s < 7200 {
        format!("{} min", s / 60)
    } else {
        format!("{} h", s / 3600)
    }
}

/// Fill `oldest_age_secs` and `age_note` from the cache, sweeping CloudWatch first for the
/// queues whose cached value is older than the age interval.
pub(crate) async fn fill(b: &SqsBackend, stats: &mut [QueueStats]) {
    if !b.settings.cloudwatch.unwrap_or(true) {
        for s in stats.iter_mut() {
            s.age_note = Some("CloudWatch age is disabled in this profile".to_string());
        }
        return;
    }
    let every = interval(b);
    let chosen = worth_reading(b, stats);
    let due: Vec<QueueId> = {
        let entries = lock(&b.age.entries);
        stats
            .iter()
            .filter(|s| chosen.contains(&s.id))
            .filter(|s| {
                entries
                    .get(&s.id)
                    .is_none_or(|e| e.fetched_at.elapsed() >= every)
            })
            .map(|s| s.id.clone())
            .collect()
    };
    if !due.is_empty()
        && b.age
            .sweeping
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    {
        let _g = SweepGuard(&b.age.sweeping);
        sweep(b, &due).await;
    }
    let entries = lock(&b.age.entries);
    let now = now_ms();
    for s in stats.iter_mut() {
        let empty = s.depth.unwrap_or(0) + s.in_flight.unwrap_or(0) == 0;
        // A value read while it held messages says nothing once it is empty.
        let cached = entries.get(&s.id).filter(|_| !empty);
        match cached {
            None if !chosen.contains(&s.id) => {
                s.age_note = Some(skipped_note(b, s));
            }
            None => {
                s.age_note = Some("CloudWatch age not read yet".to_string());
            }
            Some(e) => {
                let read = fmt_secs(e.fetched_at.elapsed().as_secs() as i64);
                match (&e.point, &e.error) {
                    (Some((v, ts)), _) => {
                        s.oldest_age_secs = Some(*v);
                        let when = ms_to_datetime(*ts)
                            .map(|d| d.format("%H:%M UTC").to_string())
                            .unwrap_or_default();
                        s.age_note = Some(format!(
                            "CloudWatch metric (1-min Maximum) at {when}, {} old, read {read} \
                             ago; lags by minutes",
                            fmt_secs((now - ts) / 1000)
                        ));
                    }
                    (None, Some(err)) => {
                        s.age_note = Some(format!("CloudWatch: {err}"));
                    }
                    (None, None) => {
                        s.age_note = Some(format!(
                            "no CloudWatch datapoint in the last {} min (queue idle or metric \
                             not published yet), read {read} ago",
                            WINDOW_SECS / 60
                        ));
                    }
                }
            }
        }
    }
}

/// The queues whose age is worth a billed metric: only those holding messages (an empty
/// queue has no oldest message); of those every DLQ and the `age_worst_n` fullest others.
fn worth_reading(b: &SqsBackend, stats: &[QueueStats]) -> HashSet<QueueId> {
    let n = b.settings.age_worst_n.unwrap_or(DEFAULT_WORST_N);
    let meta = lock(&b.meta);
    let mut chosen = HashSet::new();
    let mut ordinary: Vec<(u64, &QueueId)> = Vec::new();
    for s in stats {
        let held = s.depth.unwrap_or(0) + s.in_flight.unwrap_or(0);
        if held == 0 {
            continue;
        }
        let is_dlq = meta.get(&s.id).is_some_and(|m| !m.sources.is_empty());
        if is_dlq || n == 0 {
            chosen.insert(s.id.clone());
        } else {
            ordinary.push((held, &s.id));
        }
    }
    ordinary.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.as_str().cmp(b.1.as_str())));
    chosen.extend(ordinary.into_iter().take(n).map(|(_, id)| id.clone()));
    chosen
}

fn skipped_note(b: &SqsBackend, s: &QueueStats) -> String {
    if s.depth.unwrap_or(0) + s.in_flight.unwrap_or(0) == 0 {
        return "queue empty: no oldest message, CloudWatch not read".to_string();
    }
    format!(
        "CloudWatch age is read for DLQs and the {} fullest queues of a poll (age_worst_n); \
         not this one yet",
        b.settings.age_worst_n.unwrap_or(DEFAULT_WORST_N)
    )
}

/// One GetMetricData per 500 queues per region.
async fn sweep(b: &SqsBackend, ids: &[QueueId]) {
    let mut by_region: HashMap<usize, Vec<(QueueId, String)>> = HashMap::new();
    for id in ids {
        let meta = match b.resolve(id).await {
            Ok(m) => m,
            Err(e) => {
                store(b, id, None, Some(one_line(&e.to_string(), 160)));
                continue;
            }
        };
        by_region
            .entry(meta.region)
            .or_default()
            .push((id.clone(), meta.name));
    }
    for (region, queues) in by_region {
        for chunk in queues.chunks(MAX_QUERIES) {
            sweep_chunk(b, region, chunk).await;
        }
    }
}

fn store(b: &SqsBackend, id: &QueueId, point: Option<(f64, i64)>, error: Option<String>) {
    lock(&b.age.entries).insert(
        id.clone(),
        AgeEntry {
            fetched_at: Instant::now(),
            point,
            error,
        },
    );
}

async fn sweep_chunk(b: &SqsBackend, region: usize, chunk: &[(QueueId, String)]) {
    let end = now_ms() / 1000;
    let start = end - WINDOW_SECS;
    let names: Vec<&str> = chunk.iter().map(|(_, n)| n.as_str()).collect();
    let mut latest: HashMap<usize, (f64, i64)> = HashMap::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        pages += 1;
        b.calls().bump(ops::GET_METRIC_DATA);
        b.calls()
            .bump_by(ops::CW_METRICS_BILLED, names.len() as u64);
        let body = cwjson::request_body(&names, start, end, token.as_deref());
        let out = match cwjson::get_metric_data(&b.http, &b.clients(region).cw, &body).await {
            Ok(o) => o,
            Err(e) => {
                let msg = one_line(&e.to_string(), 200);
                for (id, _) in chunk {
                    store(b, id, None, Some(msg.clone()));
                }
                return;
            }
        };
        let results = out
            .get("MetricDataResults")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for r in &results {
            let Some(idx) = r
                .get("Id")
                .and_then(Value::as_str)
                .and_then(|i| i.strip_prefix('q'))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let ts = r.get("Timestamps").and_then(Value::as_array);
            let vs = r.get("Values").and_then(Value::as_array);
            let (Some(ts), Some(vs)) = (ts, vs) else {
                continue;
            };
            for (t, v) in ts.iter().zip(vs) {
                let (Some(t), Some(v)) = (timestamp_ms(t), v.as_f64()) else {
                    continue;
                };
                if v.is_finite() && latest.get(&idx).is_none_or(|(_, old)| t > *old) {
                    latest.insert(idx, (v, t));
                }
            }
        }
        match out.get("NextToken").and_then(Value::as_str) {
            Some(t) if !t.is_empty() && Some(t) != token.as_deref() && pages < 20 => {
                token = Some(t.to_string());
            }
            _ => break,
        }
    }
    for (i, (id, _)) in chunk.iter().enumerate() {
        store(b, id, latest.get(&i).copied(), None);
    }
}

/// JSON 1.0 timestamps are epoch seconds (number); accept RFC 3339 text too.
fn timestamp_ms(v: &Value) -> Option<i64> {
    if let Some(f) = v.as_f64() {
        return Some((f * 1000.0) as i64);
    }
    v.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|d| d.timestamp_millis())
}
