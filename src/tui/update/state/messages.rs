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

/// What the view on top narrows its queue to: the user sees less than the queue, so an
/// action taking "what is shown" and one taking the whole queue must each say which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Narrowing {
    /// The reasons view: one group is under the cursor, every group is listed.
    ReasonGroups,
    /// The single-message view: the message open.
    OneMessage,
    /// The list with messages marked.
    Marked,
    /// The list narrowed to a reason group, a search, or both (nothing marked).
    Listed {
        group: Option<String>,
        search: Option<String>,
    },
}

impl Narrowing {
    /// The view's narrowing, as a dialog that takes more than it says so.
    pub fn of(view: super::View, msgs: &MsgState) -> Option<Narrowing> {
        use super::View;
        match view {
            View::Reasons => Some(Narrowing::ReasonGroups),
            View::Message => Some(Narrowing::OneMessage),
            View::Messages if !msgs.marked.is_empty() => Some(Narrowing::Marked),
            View::Messages => {
                let group = msgs.group.clone();
                let search = (!msgs.search.text.is_empty()).then(|| msgs.search.text.clone());
                (group.is_some() || search.is_some()).then_some(Narrowing::Listed { group, search })
            }
            _ => None,
        }
    }

    /// What the user is looking at, in words ("the messages marked").
    pub fn seen(&self) -> &'static str {
        match self {
            Narrowing::ReasonGroups => "the reason group under the cursor",
            Narrowing::OneMessage => "the message open",
            Narrowing::Marked => "the messages marked",
            Narrowing::Listed {
                group: Some(_),
                search: Some(_),
            } => "the reason group and search this list shows",
            Narrowing::Listed { group: Some(_), .. } => "the reason group this list shows",
            Narrowing::Listed { .. } => "the search this list shows",
        }
    }
}
