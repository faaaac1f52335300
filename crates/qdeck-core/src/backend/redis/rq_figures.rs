//! An RQ queue's figures from one read-only script run (rq_scripts::RQ_FIGURES), which the
//! caller pipelines with every other queue's: the list length, the head job's enqueued_at,
//! the sizes of the started, scheduled, deferred and failed registries, and the oldest failed
//! job's ended_at.

use ::redis::Value;

use super::figures::{as_array, as_i64, as_string};
use super::rq_jobs::rq_time_ms;
use super::rq_listing::{queue_key, registry_key, JOB_PREFIX, QUEUES};
use super::RedisBackend;
use crate::domain::*;

/// Append the queue's script run to `pipe` (one command).
pub fn add_to(b: &RedisBackend, pipe: &mut ::redis::Pipeline, queue: &str) {
    let keys = vec![
        queue_key(queue),
        registry_key("wip", queue),
        registry_key("scheduled", queue),
        registry_key("deferred", queue),
        registry_key("failed", queue),
        QUEUES.to_string(),
    ];
    b.scripts
        .rq_figures
        .add_to(pipe, &keys, &[JOB_PREFIX.to_string(), queue_key(queue)]);
}

fn age(at_ms: i64, stamp: Option<String>) -> Option<f64> {
    let ms = rq_time_ms(&stamp?)?;
    Some(((at_ms - ms) as f64 / 1000.0).max(0.0))
}

/// Fill `st` from the script's reply; `known`: the queue was listed (an unlisted queue with
/// nothing in it is an unknown one).
pub fn fill(
    st: &mut QueueStats,
    queue: &str,
    reply: Option<&Value>,
    failed: bool,
    known: bool,
) -> Result<(), String> {
    let v = reply.map_or(&[][..], as_array);
    let n = |k: usize| v.get(k).and_then(as_i64).unwrap_or(0).max(0) as u64;
    let s = |k: usize| v.get(k).and_then(as_string).filter(|t| !t.is_empty());
    let (len, started, scheduled, deferred, fail) = (n(0), n(2), n(3), n(4), n(5));
    let listed = n(7) == 1;
    if !known && !listed && len + started + scheduled + deferred + fail == 0 {
        return Err(format!("no RQ queue {queue:?}"));
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
            crate::sanitize::clean_short(&s(8).unwrap_or_default(), 60)
        ));
    }
    Ok(())
}
