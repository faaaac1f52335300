//! The workers view's state.

use qdeck_backend::BackendError;
use qdeck_model::domain::{Consumer, QueueId};

use super::{Cursor, Filter};

#[derive(Debug, Clone, Default)]
pub struct WorkersState {
    pub queue: Option<QueueId>,
    pub list: Vec<Consumer>,
    /// Indices into `list` after the view's own filter and sort.
    pub rows: Vec<usize>,
    pub filter: Filter,
    /// Column of `WORKER_SORT`; `None` keeps the broker's order.
    pub sort: Option<usize>,
    pub sort_desc: bool,
    pub loading: bool,
    pub error: Option<BackendError>,
    pub cursor: Cursor,
    /// When the list last arrived (the view refreshes it every refresh period).
    pub fetched_ms: Option<i64>,
}
