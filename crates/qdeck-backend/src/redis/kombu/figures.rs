//! Figures of Celery queues on kombu's Redis transport, read in the stats pipeline: per queue
//! the length of each priority list and the message each would give next (its right end:
//! kombu LPUSHes and RPOPs), and once for all queues the `unacked` hash (messages workers
//! hold, `[message, exchange, routing_key]` by delivery tag) and how many of them are older
//! than the visibility timeout in `unacked_index`.

use std::collections::HashMap;

use ::redis::Value;

use super::envelope;
use super::listing::{lists, UNACKED, UNACKED_INDEX, VISIBILITY_TIMEOUT_SECS};
use super::{Key, Kombu};
use crate::redis::figures::{as_array, as_i64, as_string, reply_error};
use crate::redis::library::ReadFigures;
use qdeck_model::domain::*;

/// Commands `add_queue` adds per queue.
const WIDTH: usize = 8;
/// Commands `add_shared` adds once.
const SHARED: usize = 2;

/// The figures of the Celery queues among `ids` (the results queue's are read after the
/// pipeline, `Kombu::figures_after`): each queue's lists, then the shared `unacked` reads.
pub(super) fn add<'a>(
    lib: &'a Kombu,
    ids: &[QueueId],
    pipe: &mut ::redis::Pipeline,
) -> (usize, ReadFigures<'a>) {
    let mut plan = Vec::new();
    for id in ids {
        match lib.keys.get(id) {
            Some(Key::Queue(q)) => {
                add_queue(pipe, &q);
                plan.push((id.clone(), Some(q)));
            }
            Some(Key::Results) => {}
            None => plan.push((id.clone(), None)),
        }
    }
    let queues = plan.iter().filter(|(_, q)| q.is_some()).count();
    if queues == 0 {
        let read = move |_: &[Value], _: i64, batch: &mut StatsBatch| {
            for (id, _) in plan {
                batch.errors.push((id, gone()));
            }
        };
        return (0, Box::new(read));
    }
    add_shared(pipe, now_ms());
    let read = move |replies: &[Value], at_ms: i64, batch: &mut StatsBatch| {
        let at = queues * WIDTH;
        let unacked = Unacked::from_replies(replies.get(at..at + SHARED).unwrap_or(&[]), at_ms);
        let mut i = 0;
        for (id, q) in plan {
            let Some(q) = q else {
                batch.errors.push((id, gone()));
                continue;
            };
            let r = replies.get(i..i + WIDTH).unwrap_or(&[]);
            i += WIDTH;
            if let Some(e) = reply_error(r.iter()) {
                batch.errors.push((id, e));
                continue;
            }
            let mut st = QueueStats {
                id,
                at_ms,
                ..Default::default()
            };
            fill(&mut st, &q, r, &unacked);
            batch.stats.push(st);
        }
    };
    (queues * WIDTH + SHARED, Box::new(read))
}

fn gone() -> QueueError {
    QueueError::not_found("no Celery queue".to_string())
}

fn add_queue(pipe: &mut ::redis::Pipeline, queue: &str) {
    let keys = lists(queue);
    for k in &keys {
        pipe.llen(k);
    }
    for k in &keys {
        pipe.lindex(k, -1);
    }
}

fn add_shared(pipe: &mut ::redis::Pipeline, now_ms: i64) {
    pipe.hvals(UNACKED);
    let ceiling = now_ms as f64 / 1000.0 - VISIBILITY_TIMEOUT_SECS;
    pipe.zcount(UNACKED_INDEX, "-inf", ceiling);
}

/// What the shared replies say: messages held per routing key (those whose eta is still to
/// come apart: a worker holds them until due), and past the timeout.
#[derive(Default)]
struct Unacked {
    pub by_key: HashMap<String, u64>,
    pub eta_by_key: HashMap<String, u64>,
    pub unreadable: u64,
    pub overdue: u64,
}

impl Unacked {
    fn from_replies(r: &[Value], now_ms: i64) -> Unacked {
        let mut u = Unacked::default();
        for v in r.first().map_or(&[][..], as_array) {
            let entry =
                as_string(v).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
            let Some(k) = entry
                .as_ref()
                .and_then(|j| j.get(2).and_then(|k| k.as_str()).map(str::to_string))
            else {
                u.unreadable += 1;
                continue;
            };
            let eta = entry
                .as_ref()
                .and_then(|j| j.get(0))
                .and_then(|m| m.get("headers"))
                .and_then(|h| h.get("eta"))
                .and_then(serde_json::Value::as_str)
                .and_then(crate::celery::iso_ms);
            match eta {
                Some(ms) if ms > now_ms => *u.eta_by_key.entry(k).or_default() += 1,
                _ => *u.by_key.entry(k).or_default() += 1,
            }
        }
        u.overdue = r.get(1).and_then(as_i64).unwrap_or(0).max(0) as u64;
        u
    }
}

/// One queue's figures from its `WIDTH` replies.
fn fill(st: &mut QueueStats, queue: &str, r: &[Value], unacked: &Unacked) {
    let lens: Vec<u64> = (0..4)
        .map(|i| r.get(i).and_then(as_i64).unwrap_or(0).max(0) as u64)
        .collect();
    st.depth = Some(lens.iter().sum());
    // kombu routes a task by routing key; with Celery's default direct exchanges the routing
    // key is the queue's name.
    st.in_flight = Some(unacked.by_key.get(queue).copied().unwrap_or(0));
    // eta/countdown tasks a worker took and holds until due; any still in the list count in
    // depth (finding them would read the whole list).
    st.delayed = Some(unacked.eta_by_key.get(queue).copied().unwrap_or(0));
    st.dlq_depth = None;
    let mut notes = Vec::new();
    if unacked.overdue > 0 {
        notes.push(format!(
            "{} unacked message(s) (all queues) held past kombu's default visibility timeout of 1 h: kombu will restore them to their queues",
            unacked.overdue
        ));
    }
    if unacked.unreadable > 0 {
        notes.push(format!(
            "{} unacked entries could not be read to tell their queue",
            unacked.unreadable
        ));
    }
    let head = lens
        .iter()
        .position(|n| *n > 0)
        .and_then(|i| r.get(4 + i))
        .and_then(|v| match v {
            Value::BulkString(b) => Some(envelope::message(b, queue, 0)),
            _ => None,
        });
    st.oldest_age_secs = None;
    if let Some(m) = head {
        let eta = crate::celery::decode(&m).and_then(|t| t.eta_ms());
        match eta {
            Some(ms) if ms <= st.at_ms => {
                st.oldest_age_secs = Some((st.at_ms - ms) as f64 / 1000.0);
                notes.push("age of the head task counts from its eta".into());
            }
            Some(_) => notes.push(
                "the head task has an eta still to come: age unknown until then".into(),
            ),
            None => notes.push(
                "Celery and kombu record no send time on a task without an eta: age of oldest unknown"
                    .into(),
            ),
        }
    }
    if !notes.is_empty() {
        st.age_note = Some(notes.join("; "));
    }
}
