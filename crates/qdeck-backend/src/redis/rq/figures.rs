//! RQ queues' figures from read-only script runs (scripts::RQ_FIGURES), each for up to
//! `CHUNK` queues, which the caller pipelines with the other libraries' commands: the list
//! length, the head job's enqueued_at, the sizes of the started, scheduled, deferred and
//! failed registries, and the oldest failed job's ended_at.

use std::collections::HashMap;

use ::redis::Value;

use super::jobs::rq_time_ms;
use super::listing::{queue_key, registry_key, JOB_PREFIX, QUEUES};
use super::{Key, Rq};
use crate::redis::figures::{as_array, as_i64, as_string};
use crate::redis::library::ReadFigures;
use qdeck_model::domain::*;

/// Queues per script run: a run blocks Redis while it reads (about 5 µs a queue).
const CHUNK: usize = 500;

/// Append script runs for `queues` (distinct names) to `pipe`; returns how many commands.
fn add_to(lib: &Rq, pipe: &mut ::redis::Pipeline, queues: &[String]) -> usize {
    let mut n = 0;
    for chunk in queues.chunks(CHUNK) {
        let mut keys = vec![QUEUES.to_string()];
        let mut args = vec![JOB_PREFIX.to_string()];
        for q in chunk {
            keys.push(queue_key(q));
            for kind in ["wip", "scheduled", "deferred", "failed"] {
                keys.push(registry_key(kind, q));
            }
            args.push(queue_key(q));
        }
        lib.scripts.figures.add_to(pipe, &keys, &args);
        n += 1;
    }
    n
}

/// Each queue's reply, by name, from the replies of the runs `add_to` added.
fn by_queue(queues: &[String], replies: &[Value]) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for (chunk, reply) in queues.chunks(CHUNK).zip(replies) {
        for (q, v) in chunk.iter().zip(as_array(reply)) {
            out.insert(q.clone(), v.clone());
        }
        // A whole run that failed (e.g. an ACL refusing a key) fails each of its queues.
        if let Value::ServerError(_) = reply {
            for q in chunk {
                out.insert(q.clone(), reply.clone());
            }
        }
    }
    out
}

fn age(at_ms: i64, stamp: Option<String>) -> Option<f64> {
    let ms = rq_time_ms(&stamp?)?;
    Some(((at_ms - ms) as f64 / 1000.0).max(0.0))
}

/// The figures of `ids`: the script runs for their distinct queues, then each id's figures
/// from its queue's reply.
pub(super) fn add<'a>(
    lib: &'a Rq,
    ids: &[QueueId],
    pipe: &mut ::redis::Pipeline,
) -> (usize, ReadFigures<'a>) {
    let plan: Vec<(QueueId, Option<Key>)> = ids
        .iter()
        .map(|id| (id.clone(), lib.keys.get(id)))
        .collect();
    let mut names: Vec<String> = plan
        .iter()
        .filter_map(|(_, k)| k.as_ref().map(|k| k.name().to_string()))
        .collect();
    names.sort();
    names.dedup();
    let runs = add_to(lib, pipe, &names);
    let read = move |replies: &[Value], at_ms: i64, batch: &mut StatsBatch| {
        let by_name = by_queue(&names, replies);
        for (id, key) in plan {
            let mut st = QueueStats {
                id: id.clone(),
                at_ms,
                ..Default::default()
            };
            let filled = match &key {
                Some(k) => fill(&mut st, k.name(), by_name.get(k.name()), k.failed(), true),
                None => Err(QueueError::not_found("no RQ queue".to_string())),
            };
            match filled {
                Ok(()) => batch.stats.push(st),
                Err(e) => batch.errors.push((id, e)),
            }
        }
    };
    (runs, Box::new(read))
}

/// Fill `st` from the script's reply; `known`: the queue was listed (an unlisted queue with
/// nothing in it is an unknown one).
fn fill(
    st: &mut QueueStats,
    queue: &str,
    reply: Option<&Value>,
    failed: bool,
    known: bool,
) -> Result<(), QueueError> {
    if let Some(Value::ServerError(e)) = reply {
        return Err(crate::redis::figures::server_error(e));
    }
    let v = reply.map_or(&[][..], as_array);
    let n = |k: usize| v.get(k).and_then(as_i64).unwrap_or(0).max(0) as u64;
    let s = |k: usize| v.get(k).and_then(as_string).filter(|t| !t.is_empty());
    let (len, started, scheduled, deferred, fail) = (n(0), n(2), n(3), n(4), n(5));
    let listed = n(7) == 1;
    if !known && !listed && len + started + scheduled + deferred + fail == 0 {
        return Err(QueueError::not_found(format!("no RQ queue {queue:?}")));
    }
    if failed {
        st.depth = Some(fail);
        st.in_flight = Some(0);
        st.delayed = Some(0);
        st.oldest_age_secs = if fail > 0 { age(st.at_ms, s(6)) } else { None };
        if fail > 0 && st.oldest_age_secs.is_none() {
            st.age_note = Some("the first failed job has no ended_at".into());
        }
        return Ok(());
    }
    st.depth = Some(len);
    st.in_flight = Some(started);
    st.delayed = Some(scheduled + deferred);
    st.dlq_depth = Some(fail);
    st.oldest_age_secs = if len > 0 { age(st.at_ms, s(1)) } else { None };
    if len > 0 && st.oldest_age_secs.is_none() {
        st.age_note = Some(format!(
            "the head job {} has no readable enqueued_at",
            qdeck_model::sanitize::clean_short(&s(8).unwrap_or_default(), 60)
        ));
    }
    Ok(())
}
