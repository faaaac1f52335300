//! A BullMQ queue's figures: one read-only script run per queue (counts, paused flag, the
//! oldest waiting job's timestamp, the oldest failed job's finish time).

use ::redis::{Pipeline, Value};

use super::{Bullmq, Key};
use crate::redis::figures::{age_from_ms, as_array, as_i64, reply_error};
use crate::redis::library::ReadFigures;
use qdeck_model::domain::*;

pub(super) fn add<'a>(
    lib: &'a Bullmq,
    ids: &[QueueId],
    pipe: &mut Pipeline,
) -> (usize, ReadFigures<'a>) {
    let mut plan = Vec::new();
    for id in ids {
        let key = lib.keys.get(id);
        if let Some(k) = &key {
            let q = k.name();
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
            .map(|s| lib.key(q, s))
            .collect();
            lib.scripts
                .figures
                .add_to(pipe, &keys, &[lib.job_prefix(q)]);
        }
        plan.push((id.clone(), key));
    }
    let width = plan.iter().filter(|(_, k)| k.is_some()).count();
    let read = move |replies: &[Value], at_ms: i64, batch: &mut StatsBatch| {
        let mut r = replies.iter();
        for (id, key) in plan {
            let Some(key) = key else {
                batch
                    .errors
                    .push((id, QueueError::not_found("no BullMQ queue".to_string())));
                continue;
            };
            match one(&id, &key, r.next(), at_ms) {
                Ok(st) => batch.stats.push(st),
                Err(e) => batch.errors.push((id, e)),
            }
        }
    };
    (width, Box::new(read))
}

fn one(
    id: &QueueId,
    key: &Key,
    reply: Option<&Value>,
    at_ms: i64,
) -> std::result::Result<QueueStats, QueueError> {
    if let Some(e) = reply_error(reply.into_iter()) {
        return Err(e);
    }
    let mut st = QueueStats {
        id: id.clone(),
        at_ms,
        ..Default::default()
    };
    let v = reply.map_or(&[][..], as_array);
    let n = |k: usize| v.get(k).and_then(as_i64).unwrap_or(0);
    match key {
        Key::Queue(_) => queue_figures(&mut st, n),
        Key::Failed(_) => failed_figures(&mut st, n),
    }
    Ok(st)
}

/// A BullMQ queue's figures from the script's reply (`n(k)`: its k-th number).
fn queue_figures(st: &mut QueueStats, n: impl Fn(usize) -> i64) {
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
fn failed_figures(st: &mut QueueStats, n: impl Fn(usize) -> i64) {
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
