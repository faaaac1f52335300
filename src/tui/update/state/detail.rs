//! The queue detail view's state, with a Kafka group row's partition table.

use qdeck_engine::partitions::{PartitionTable, PartitionWatch};
use qdeck_model::domain::QueueId;

use super::{Model, View};

/// The queue detail view.
#[derive(Debug, Clone)]
pub struct DetailState {
    /// First row of the text when it is taller than the screen.
    pub scroll: usize,
    /// The charts' window: 60, 300 or 600 s.
    pub chart_window_secs: u64,
    /// A Kafka group row's partition table.
    pub partitions: PartitionsState,
}

impl Default for DetailState {
    fn default() -> Self {
        DetailState {
            scroll: 0,
            chart_window_secs: 600,
            partitions: Default::default(),
        }
    }
}

/// A Kafka group row's partition table: asked of the backend on the poll rhythm while the
/// detail is open on such a row, and kept with the offsets of earlier answers so that rates
/// and stuck partitions can be told (qdeck_engine::partitions).
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

impl Model {
    /// The row whose partitions the open detail shows: a Kafka group row (`GROUP@TOPIC`).
    pub fn partition_row(&self) -> Option<QueueId> {
        if self.view() != View::Detail || self.session.broker != "kafka" {
            return None;
        }
        self.focus.clone().filter(|q| q.as_str().contains('@'))
    }
}
