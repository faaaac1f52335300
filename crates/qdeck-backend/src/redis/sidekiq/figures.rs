//! Sidekiq's figures, plain reads: a queue's list length and its oldest payload's
//! enqueued_at, a sorted set's size and lowest score, and the process-wide counters.

use ::redis::{Pipeline, Value};

use super::jobs::sidekiq_time_ms;
use super::{Key, Sidekiq};
use crate::redis::figures::{age_from_ms, as_array, as_f64, as_i64, as_string, reply_error};
use crate::redis::library::{lock, ReadFigures};
use qdeck_model::domain::*;

/// Commands each key adds to the pipeline, in order.
fn width(k: &Key) -> usize {
    match k {
        Key::Queue(_) => 3,
        Key::Dead | Key::Retry => 2,
        Key::Schedule => 1,
    }
}

pub(super) fn add<'a>(
    lib: &'a Sidekiq,
    ids: &[QueueId],
    pipe: &mut Pipeline,
) -> (usize, ReadFigures<'a>) {
    let mut plan = Vec::new();
    for id in ids {
        let key = lib.keys.get(id);
        match &key {
            Some(Key::Queue(q)) => {
                let list = lib.key(&format!("queue:{q}"));
                pipe.llen(&list)
                    .lindex(&list, -1)
                    .sismember(lib.key("queues"), q);
            }
            Some(k @ (Key::Dead | Key::Retry)) => {
                let set = lib.key(k.set().unwrap_or("dead"));
                pipe.zcard(&set).zrange_withscores(&set, 0, 0);
            }
            Some(Key::Schedule) => {
                pipe.zcard(lib.key("schedule"));
            }
            None => {}
        }
        plan.push((id.clone(), key));
    }
    if plan.is_empty() {
        return (0, Box::new(|_: &[Value], _: i64, _: &mut StatsBatch| {}));
    }
    pipe.get(lib.key("stat:processed"))
        .get(lib.key("stat:failed"))
        .zcard(lib.key("dead"));
    let width_all = plan
        .iter()
        .filter_map(|(_, k)| k.as_ref())
        .map(width)
        .sum::<usize>()
        + 3;
    let read = move |replies: &[Value], at_ms: i64, batch: &mut StatsBatch| {
        let totals = Totals::from_tail(replies);
        let mut at = 0;
        for (id, key) in plan {
            let Some(key) = key else {
                batch
                    .errors
                    .push((id, QueueError::not_found("no Sidekiq queue".to_string())));
                continue;
            };
            let w = width(&key);
            let r = replies.get(at..at + w).unwrap_or(&[]);
            at += w;
            match one(lib, &id, &key, r, at_ms, &totals) {
                Ok(st) => batch.stats.push(st),
                Err(e) => batch.errors.push((id, e)),
            }
        }
    };
    (width_all, Box::new(read))
}

/// Sidekiq's process-wide figures, the last three replies.
struct Totals {
    processed: Option<u64>,
    failed: Option<u64>,
    dead_size: Option<u64>,
}

impl Totals {
    fn from_tail(replies: &[Value]) -> Self {
        let tail = replies.len().saturating_sub(3);
        let n = |i: usize| replies.get(tail + i).and_then(as_i64).map(|v| v as u64);
        Totals {
            processed: n(0),
            failed: n(1),
            dead_size: n(2),
        }
    }
}

/// One queue's figures from its replies `r`, or why it has none.
fn one(
    lib: &Sidekiq,
    id: &QueueId,
    key: &Key,
    r: &[Value],
    at_ms: i64,
    totals: &Totals,
) -> std::result::Result<QueueStats, QueueError> {
    if let Some(e) = reply_error(r.iter()) {
        return Err(e);
    }
    let mut st = QueueStats {
        id: id.clone(),
        at_ms,
        ..Default::default()
    };
    let size = r.first().and_then(as_i64).map(|v| v as u64);
    match key {
        Key::Queue(q) => {
            let listed = r.get(2).and_then(as_i64).unwrap_or(0) == 1;
            let depth = r.first().and_then(as_i64).unwrap_or(0);
            if !listed && depth == 0 && !lock(&lib.seen).contains(q) {
                return Err(QueueError::not_found(format!("no Sidekiq queue {q:?}")));
            }
            queue_figures(&mut st, depth, r, totals);
        }
        Key::Dead => {
            st.depth = size;
            st.oldest_age_secs = as_array(r.get(1).unwrap_or(&Value::Nil))
                .get(1)
                .and_then(as_f64)
                .and_then(|s| age_from_ms(at_ms, (s * 1000.0) as i64));
            st.completed_total = totals.processed;
            st.dead_lettered_total = totals.failed;
        }
        Key::Retry => {
            // Retrying jobs are both the set's content (what a redrive moves) and delayed.
            st.depth = size;
            st.delayed = size;
            st.dead_lettered_total = totals.failed;
        }
        Key::Schedule => {
            st.depth = size;
            st.delayed = size;
        }
    }
    Ok(st)
}

/// A Sidekiq queue's figures: its length, the oldest payload's age, the process-wide totals.
fn queue_figures(st: &mut QueueStats, depth: i64, r: &[Value], totals: &Totals) {
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
