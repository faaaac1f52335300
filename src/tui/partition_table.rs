//! The detail view's partition table for a Kafka group row: asked of the backend on the poll
//! rhythm while the detail is open on such a row, and kept with the offsets of earlier
//! answers so that rates and stuck partitions can be told (qdeck_engine::partitions).

use qdeck_backend::BackendError;
use qdeck_engine::partitions::{PartitionTable, PartitionWatch};
use qdeck_model::domain::{PartitionFigures, QueueId};

use super::state::{State, View};
use super::Effect;

#[derive(Debug, Clone, Default)]
pub struct PartitionsState {
    /// The row the table is for; another row starts a fresh watch.
    pub queue: Option<QueueId>,
    pub watch: PartitionWatch,
    pub table: Option<PartitionTable>,
    /// Why the last ask failed (one sanitised line).
    pub error: Option<String>,
    pub loading: bool,
    pub fetched_ms: Option<i64>,
}

/// The row whose partitions the open detail shows: a Kafka group row (`GROUP@TOPIC`).
pub fn shown_row(st: &State) -> Option<QueueId> {
    if st.view() != View::Detail || st.session.broker != "kafka" {
        return None;
    }
    st.focus.clone().filter(|q| q.as_str().contains('@'))
}

/// On the clock: ask again once a refresh period has passed since the last answer.
pub fn tick(st: &mut State, now: i64, fx: &mut Vec<Effect>) {
    let Some(q) = shown_row(st) else {
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
pub fn loaded(st: &mut State, queue: QueueId, result: Result<Vec<PartitionFigures>, BackendError>) {
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
