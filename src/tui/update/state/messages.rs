//! The message browser's and the open message's state.

use std::collections::BTreeSet;

use qdeck_backend::BackendError;
use qdeck_model::domain::{Message, QueueId};
use qdeck_model::sanitize::BodyKind;

use super::{Cursor, Filter};

#[derive(Debug, Clone, Default)]
pub struct MsgState {
    pub queue: Option<QueueId>,
    pub messages: Vec<Message>,
    /// Indices into `messages` after the search.
    pub rows: Vec<usize>,
    pub next: Option<String>,
    pub loading: bool,
    pub error: Option<BackendError>,
    pub effect_note: Option<String>,
    pub cursor: Cursor,
    /// Selected message ids (for redrive / save).
    pub marked: BTreeSet<String>,
    pub search: Filter,
    /// Column of `MSG_SORT` the rows are sorted by; `None` keeps the broker's order.
    pub sort: Option<usize>,
    pub sort_desc: bool,
    /// Row where `v` started a range selection.
    pub range_from: Option<usize>,
    /// The next browse should pass `force`.
    pub forced: bool,
    /// Drilled in from the reasons view: only this group's messages are shown.
    pub group: Option<String>,
    /// The group's origin queue (part of its key beside the signature), so that a reload
    /// after an operation reads the same group again, not the whole DLQ.
    pub group_origin: Option<String>,
    /// The queue's scheduled (delayed) messages, not its own (`L`).
    pub scheduled: bool,
}

/// Sortable columns of the message browser, in digit order (1 = ID).
pub const MSG_SORT: [&str; 6] = ["id", "enqueued", "rcv", "reason", "origin", "size"];
/// Sortable columns of the workers view, in digit order.
pub const WORKER_SORT: [&str; 7] = ["worker", "state", "hold", "done", "failed", "rate", "seen"];

#[derive(Debug, Clone, Default)]
pub struct BodyState {
    /// The open message itself, as it was read when it was opened. Headers, body and any
    /// action taken from this view all come from this one copy: the browser's page may be
    /// reloaded underneath (an operation changed the queue), and an index into it would then
    /// point at another message.
    pub msg: Option<Message>,
    pub kind: Option<BodyKind>,
    pub lines: Vec<String>,
    pub scroll: usize,
}
