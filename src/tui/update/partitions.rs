//! The detail view's partition table for a Kafka group row: asked again on the poll rhythm,
//! and each answer folded into the watch of earlier offsets.

use qdeck_backend::BackendError;
use qdeck_model::domain::{PartitionFigures, QueueId};

use super::state::{Model, PartitionsState};
use super::Effect;

/// On the clock: ask again once a refresh period has passed since the last answer.
pub(super) fn tick(st: &mut Model, now: i64, fx: &mut Vec<Effect>) {
    let Some(q) = st.partition_row() else {
        return;
    };
    let p = &mut st.detail.partitions;
    if p.queue.as_ref() != Some(&q) {
        *p = PartitionsState {
            queue: Some(q.clone()),
            ..Default::default()
        };
    }
    let due = p
        .fetched_ms
        .is_none_or(|t| (now - t) as f64 >= st.session.refresh_secs * 1000.0);
    if due && !p.loading {
        p.loading = true;
        fx.push(Effect::Partitions(q));
    }
}

/// The backend's answer for `queue`, read at `now` (ms).
pub(super) fn loaded(
    st: &mut Model,
    queue: QueueId,
    result: Result<Vec<PartitionFigures>, BackendError>,
) {
    let now = st.now_ms;
    let p = &mut st.detail.partitions;
    if p.queue.as_ref() != Some(&queue) {
        return; // the user moved on; a late answer for another row is dropped
    }
    p.loading = false;
    p.fetched_ms = Some(now);
    match result {
        Ok(figures) => {
            p.table = Some(p.watch.observe(now as f64 / 1000.0, &figures));
            p.error = None;
        }
        Err(e) => p.error = Some(qdeck_model::sanitize::clean_short(&e.to_string(), 160)),
    }
    st.dirty = true;
}
