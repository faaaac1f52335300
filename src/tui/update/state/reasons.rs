//! The reasons view's state: a DLQ grouped by failure signature, filled while it scans.

use qdeck_backend::BackendError;
use qdeck_model::domain::QueueId;

use super::Cursor;

/// The reasons view: groups arrive while the scan runs.
#[derive(Debug, Clone, Default)]
pub struct ReasonsState {
    pub queue: Option<QueueId>,
    /// What the scanned queue is to the one `F` was pressed on: `(the DLQ of orders)`, or
    /// `(its own messages: no DLQ)`; the CLI's `reasons` says the same.
    pub scope: Option<String>,
    pub groups: Vec<qdeck_engine::triage::Group>,
    pub scanning: bool,
    pub scanned: u64,
    pub total: Option<u64>,
    /// How much of the queue the groups cover, once the scan stopped ("grouped 5,000 of …").
    pub note: Option<String>,
    pub error: Option<BackendError>,
    pub cursor: Cursor,
}
