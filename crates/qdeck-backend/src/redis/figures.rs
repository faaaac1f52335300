//! Figures for any number of queues in one pipelined round trip: one read-only EVALSHA per
//! BullMQ queue (counts, paused flag, oldest waiting job's timestamp), plain reads for
//! Sidekiq (list lengths and the oldest payload's enqueued_at, sorted set sizes, counters),
//! one read-only EVALSHA per RQ queue (rq/figures.rs).

use ::redis::Value;

use super::conn::query_with_scripts;
use super::{RedisBackend, Target};
use crate::Result;
use qdeck_model::domain::*;

pub fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|f| f as i64),
        Value::SimpleString(s) => s.trim().parse::<f64>().ok().map(|f| f as i64),
        Value::Double(d) => Some(*d as i64),
        _ => None,
    }
}

pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.trim().parse::<f64>().ok(),
        Value::SimpleString(s) => s.trim().parse::<f64>().ok(),
        Value::Double(d) => Some(*d),
        _ => None,
    }
}

pub fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

pub fn as_array(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => &[],
    }
}

fn age_from_ms(now: i64, ts_ms: i64) -> Option<f64> {
    (ts_ms > 0).then(|| ((now - ts_ms) as f64 / 1000.0).max(0.0))
}

/// enqueued_at of a Sidekiq payload, in ms (Sidekiq 6 writes float seconds, 7.x integer ms).
pub fn sidekiq_time_ms(v: &serde_json::Value) -> Option<i64> {
    let f = v.as_f64()?;
    Some(if f > 1e11 {
        f as i64
    } else {
        (f * 1000.0) as i64
    })
}

enum Slot {
    Bull { queue: String, failed: bool },
    SkQueue(String),
    SkDead,
    SkRetry,
    SkSchedule,
    Rq { queue: String, failed: bool },
    Celery(String),
}

/// Commands each slot adds to the pipeline, in order.
fn width(s: &Slot) -> usize {
    match s {
        Slot::Bull { .. } => 1,
        // Every RQ queue is read by batch runs after the slots' commands (rq/figures.rs).
        Slot::Rq { .. } => 0,
        Slot::SkQueue(_) => 3,
        Slot::SkDead | Slot::SkRetry => 2,
        Slot::SkSchedule => 1,
        Slot::Celery(_) => super::kombu::figures::WIDTH,
    }
}

pub async fn stats(b: &RedisBackend, queues: &[QueueId]) -> Result<StatsBatch> {
    let mut batch = StatsBatch::default();
    let slots = slots_for(b, queues, &mut batch.errors).await;
    for id in queues {
        if matches!(b.cache().ids.get(id), Some(Target::CeleryResults)) {
            match super::celery_results::figures(b, id).await {
                Ok(st) => batch.stats.push(st),
                Err(e) => batch.errors.push((id.clone(), e.into())),
            }
        }
    }
    if slots.is_empty() {
        return Ok(batch);
    }
    let any_sidekiq = slots
        .iter()
        .any(|(_, s)| !matches!(s, Slot::Bull { .. } | Slot::Rq { .. } | Slot::Celery(_)));
    let any_celery = slots.iter().any(|(_, s)| matches!(s, Slot::Celery(_)));
    let mut rq_names: Vec<String> = slots
        .iter()
        .filter_map(|(_, s)| match s {
            Slot::Rq { queue, .. } => Some(queue.clone()),
            _ => None,
        })
        .collect();
    rq_names.sort();
    rq_names.dedup();
    let (pipe, rq_runs) = pipeline(b, &slots, &rq_names, any_sidekiq, any_celery);
    let mut cm = b.conn.get().await?;
    let replies = query_with_scripts(
        &mut cm,
        &pipe,
        &[&b.scripts.bull_figures, &b.scripts.rq_figures],
    )
    .await?;
    b.calls.bump("pipeline");
    let at_ms = now_ms();
    let totals = if any_sidekiq {
        SidekiqTotals::from_tail(&replies)
    } else {
        SidekiqTotals::default()
    };
    let rq_at: usize = slots.iter().map(|(_, s)| width(s)).sum();
    let rq = super::rq::figures::by_queue(
        &rq_names,
        replies
            .get(rq_at..(rq_at + rq_runs).min(replies.len()))
            .unwrap_or(&[]),
    );
    let unacked = if any_celery {
        let at = rq_at + rq_runs;
        super::kombu::figures::Unacked::from_replies(
            replies
                .get(at..(at + super::kombu::figures::SHARED).min(replies.len()))
                .unwrap_or(&[]),
            at_ms,
        )
    } else {
        super::kombu::figures::Unacked::default()
    };
    let shared = Shared {
        totals: &totals,
        rq: &rq,
        unacked: &unacked,
    };
    let celery: Vec<(QueueId, String)> = slots
        .iter()
        .filter_map(|(id, s)| match s {
            Slot::Celery(q) => Some((id.clone(), q.clone())),
            _ => None,
        })
        .collect();
    let mut i = 0;
    for (id, slot) in slots {
        let r = &replies[i..(i + width(&slot)).min(replies.len())];
        i += width(&slot);
        match figures(b, &id, slot, r, at_ms, &shared) {
            Ok(st) => batch.stats.push(st),
            Err(e) => batch.errors.push((id, e)),
        }
    }
    if !celery.is_empty() {
        add_held_by_workers(b, &mut batch, &celery).await;
    }
    Ok(batch)
}

/// Tasks Celery workers run that they acknowledged when they started are gone from
/// `unacked`: they are added to the in-flight figure from the workers' own answers to a
/// recent discovery (the figures themselves never broadcast). Without one the figure stays
/// the broker's.
async fn add_held_by_workers(
    b: &RedisBackend,
    batch: &mut StatsBatch,
    celery: &[(QueueId, String)],
) {
    let Some(report) = b.celery_report_cached().await else {
        return;
    };
    for st in &mut batch.stats {
        if let Some((_, q)) = celery.iter().find(|(id, _)| *id == st.id) {
            let held = report.acked_held(q);
            if held > 0 {
                st.in_flight = Some(st.in_flight.unwrap_or(0) + held);
            }
        }
    }
}

/// What each queue is in Redis; the ones that cannot be resolved go to `errors`.
async fn slots_for(
    b: &RedisBackend,
    queues: &[QueueId],
    errors: &mut Vec<(QueueId, QueueError)>,
) -> Vec<(QueueId, Slot)> {
    let mut slots: Vec<(QueueId, Slot)> = Vec::new();
    for id in queues {
        match b.resolve(id).await {
            Ok(Target::Bull(q)) => slots.push((
                id.clone(),
                Slot::Bull {
                    queue: q,
                    failed: false,
                },
            )),
            Ok(Target::BullFailed(q)) => slots.push((
                id.clone(),
                Slot::Bull {
                    queue: q,
                    failed: true,
                },
            )),
            Ok(Target::SkQueue(q)) => slots.push((id.clone(), Slot::SkQueue(q))),
            Ok(Target::SkDead) => slots.push((id.clone(), Slot::SkDead)),
            Ok(Target::SkRetry) => slots.push((id.clone(), Slot::SkRetry)),
            Ok(Target::SkSchedule) => slots.push((id.clone(), Slot::SkSchedule)),
            Ok(Target::Rq(q)) => slots.push((
                id.clone(),
                Slot::Rq {
                    queue: q,
                    failed: false,
                },
            )),
            Ok(Target::RqFailed(q)) => slots.push((
                id.clone(),
                Slot::Rq {
                    queue: q,
                    failed: true,
                },
            )),
            Ok(Target::Celery(q)) => slots.push((id.clone(), Slot::Celery(q))),
            // Scanned apart (celery_results): a result backend has no figures to pipeline.
            Ok(Target::CeleryResults) => {}
            Err(e) => errors.push((id.clone(), e.into())),
        }
    }
    slots
}

/// The commands of every slot (`width` each, in order), then the RQ queues' batch runs (their
/// count is returned), then the Celery queues' shared reads (kombu::figures::SHARED), then
/// Sidekiq's process-wide counters when any slot is Sidekiq's.
fn pipeline(
    b: &RedisBackend,
    slots: &[(QueueId, Slot)],
    rq_names: &[String],
    any_sidekiq: bool,
    any_celery: bool,
) -> (::redis::Pipeline, usize) {
    let mut pipe = ::redis::pipe();
    pipe.ignore_errors();
    for (_, s) in slots {
        match s {
            Slot::Bull { queue, .. } => {
                let keys: Vec<String> = [
                    "wait",
                    "paused",
                    "prioritized",
                    "active",
                    "delayed",
                    "failed",
                    "completed",
                    "meta",
                    "metrics:completed",
                ]
                .iter()
                .map(|k| b.bkey(queue, k))
                .collect();
                b.scripts
                    .bull_figures
                    .add_to(&mut pipe, &keys, &[b.bjob_prefix(queue)]);
            }
            Slot::SkQueue(q) => {
                let key = b.skey(&format!("queue:{q}"));
                pipe.llen(&key)
                    .lindex(&key, -1)
                    .sismember(b.skey("queues"), q);
            }
            Slot::SkDead => {
                pipe.zcard(b.skey("dead"))
                    .zrange_withscores(b.skey("dead"), 0, 0);
            }
            Slot::SkRetry => {
                pipe.zcard(b.skey("retry"))
                    .zrange_withscores(b.skey("retry"), 0, 0);
            }
            Slot::SkSchedule => {
                pipe.zcard(b.skey("schedule"));
            }
            Slot::Rq { .. } => {}
            Slot::Celery(q) => super::kombu::figures::add_queue(&mut pipe, q),
        }
    }
    let rq_runs = super::rq::figures::add_to(b, &mut pipe, rq_names);
    if any_celery {
        super::kombu::figures::add_shared(&mut pipe, now_ms());
    }
    if any_sidekiq {
        pipe.get(b.skey("stat:processed"))
            .get(b.skey("stat:failed"))
            .zcard(b.skey("dead"));
    }
    (pipe, rq_runs)
}

/// Sidekiq's process-wide figures, the last three replies of the pipeline.
#[derive(Default)]
struct SidekiqTotals {
    processed: Option<u64>,
    failed: Option<u64>,
    dead_size: Option<u64>,
}

impl SidekiqTotals {
    fn from_tail(replies: &[Value]) -> Self {
        let tail = replies.len().saturating_sub(3);
        SidekiqTotals {
            processed: replies.get(tail).and_then(as_i64).map(|v| v as u64),
            failed: replies.get(tail + 1).and_then(as_i64).map(|v| v as u64),
            dead_size: replies.get(tail + 2).and_then(as_i64).map(|v| v as u64),
        }
    }
}

/// What the pipeline read once for all queues.
struct Shared<'a> {
    totals: &'a SidekiqTotals,
    rq: &'a std::collections::HashMap<String, Value>,
    unacked: &'a super::kombu::figures::Unacked,
}

/// One queue's figures from its replies `r`, or why it has none.
fn figures(
    b: &RedisBackend,
    id: &QueueId,
    slot: Slot,
    r: &[Value],
    at_ms: i64,
    shared: &Shared<'_>,
) -> std::result::Result<QueueStats, QueueError> {
    let (totals, rq) = (shared.totals, shared.rq);
    if let Some(Value::ServerError(e)) = r.iter().find(|v| matches!(v, Value::ServerError(_))) {
        return Err(server_error(e));
    }
    let mut st = QueueStats {
        id: id.clone(),
        at_ms,
        ..Default::default()
    };
    match slot {
        Slot::Bull { queue, failed } => {
            let v = r.first().map_or(&[][..], as_array);
            let n = |k: usize| v.get(k).and_then(as_i64).unwrap_or(0);
            if n(0) == 0 && !b.cache().ids.contains_key(id) {
                return Err(QueueError::not_found(format!("no BullMQ queue {queue:?}")));
            }
            if failed {
                bull_failed_figures(&mut st, n);
            } else {
                bull_figures(&mut st, n);
            }
        }
        Slot::SkQueue(q) => {
            let listed = r.get(2).and_then(as_i64).unwrap_or(0) == 1;
            let depth = r.first().and_then(as_i64).unwrap_or(0);
            let seen = b
                .sk_seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&q);
            if !listed && depth == 0 && !seen {
                return Err(QueueError::not_found(format!("no Sidekiq queue {q:?}")));
            }
            sidekiq_queue_figures(&mut st, depth, r, totals);
        }
        Slot::SkDead => {
            st.depth = r.first().and_then(as_i64).map(|v| v as u64);
            st.oldest_age_secs = as_array(r.get(1).unwrap_or(&Value::Nil))
                .get(1)
                .and_then(as_f64)
                .and_then(|s| age_from_ms(at_ms, (s * 1000.0) as i64));
            st.completed_total = totals.processed;
            st.dead_lettered_total = totals.failed;
        }
        Slot::SkRetry => {
            // Retrying jobs are both the set's content (what a redrive moves) and delayed.
            st.depth = r.first().and_then(as_i64).map(|v| v as u64);
            st.delayed = st.depth;
            st.dead_lettered_total = totals.failed;
        }
        Slot::SkSchedule => {
            st.depth = r.first().and_then(as_i64).map(|v| v as u64);
            st.delayed = st.depth;
        }
        Slot::Rq { queue, failed } => {
            let known = b.cache().ids.contains_key(id);
            super::rq::figures::fill(&mut st, &queue, rq.get(&queue), failed, known)?;
        }
        Slot::Celery(q) => super::kombu::figures::fill(&mut st, &q, r, shared.unacked),
    }
    Ok(st)
}

/// A BullMQ queue's figures from the script's reply (`n(k)`: its k-th number).
fn bull_figures(st: &mut QueueStats, n: impl Fn(usize) -> i64) {
    let (wait, paused, prio, active, delayed, fail, completed) =
        (n(1), n(2), n(3), n(4), n(5), n(6), n(7));
    let metrics = n(8);
    let is_paused = n(9) == 1;
    st.depth = Some((wait + paused + prio) as u64);
    st.in_flight = Some(active as u64);
    st.delayed = Some(delayed as u64);
    st.dlq_depth = Some(fail as u64);
    st.oldest_age_secs = age_from_ms(st.at_ms, n(11));
    st.completed_total = Some(if metrics >= 0 { metrics } else { completed } as u64);
    st.dead_lettered_total = None;
    if is_paused {
        st.age_note = Some("queue is paused: workers take no job".into());
    } else if wait + paused == 0 && prio > 0 {
        st.age_note =
            Some("age covers the wait list only (prioritized jobs are ordered by priority)".into());
    }
    if metrics < 0 {
        // Completed jobs trimmed by removeOnComplete make this count shrink.
        st.age_note.get_or_insert_with(|| {
            "completed count is the completed set's size (metrics are off)".into()
        });
    }
}

/// The figures of a BullMQ queue's failed set (its DLQ), from the same reply.
fn bull_failed_figures(st: &mut QueueStats, n: impl Fn(usize) -> i64) {
    let fail = n(6);
    st.depth = Some(fail as u64);
    st.in_flight = Some(0);
    st.delayed = Some(0);
    st.oldest_age_secs = if fail > 0 {
        age_from_ms(st.at_ms, n(12))
    } else {
        None
    };
    if fail > 0 && st.oldest_age_secs.is_none() {
        st.age_note = Some("oldest failed job has no finish time".into());
    }
}

/// A Sidekiq queue's figures: its length, the oldest payload's age, the process-wide totals.
fn sidekiq_queue_figures(st: &mut QueueStats, depth: i64, r: &[Value], totals: &SidekiqTotals) {
    st.depth = Some(depth as u64);
    st.in_flight = None;
    st.dlq_depth = totals.dead_size;
    st.completed_total = totals.processed;
    st.dead_lettered_total = totals.failed;
    st.oldest_age_secs = r
        .get(1)
        .and_then(as_string)
        .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
        .and_then(|j| j.get("enqueued_at").and_then(sidekiq_time_ms))
        .and_then(|ms| age_from_ms(st.at_ms, ms));
    if depth == 0 {
        st.oldest_age_secs = None;
    }
    st.age_note =
        Some("DLQ depth, processed and failed counters are Sidekiq's process-wide figures".into());
}

/// A Redis error reply as one queue's error.
pub(super) fn server_error(e: &::redis::ServerError) -> QueueError {
    let text = qdeck_model::sanitize::clean_short(
        &format!("{} {}", e.code(), e.details().unwrap_or("")),
        200,
    );
    QueueError::new(server_error_kind(e.code()), text)
}

/// The kind of a Redis error reply, by its code (the first word of the reply, which is how
/// the Redis protocol types its errors).
fn server_error_kind(code: &str) -> QueueErrorKind {
    match code {
        "NOPERM" => QueueErrorKind::Permission,
        "NOAUTH" | "WRONGPASS" => QueueErrorKind::Auth,
        "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" => {
            QueueErrorKind::Unreachable
        }
        _ => QueueErrorKind::Other,
    }
}
