//! The pure update: `update(&mut Model, Action) -> Vec<Effect>`. No I/O here; effects are
//! carried out by the event loop (or inspected by tests).
//!
//! This file only routes actions; the submodules hold the logic, split by what the user is
//! interacting with, so a change to one kind of input stays in one small file.

mod clock;
mod commands;
mod dialogs;
mod input;
mod keys;
mod lists;
mod messages;
mod navigate;
mod ops;
mod partitions;
mod prompt;
mod queues;
mod reasons;
mod selection;
pub mod state;

use crossterm::event::{KeyEvent, KeyEventKind};

use self::state::*;
use qdeck_backend::{BackendError, ProgressState};
use qdeck_engine::edit::{Edited, EditorOutcome};
use qdeck_engine::gate::Mutation;
use qdeck_engine::poller::PollEvent;
use qdeck_model::config::Access;
use qdeck_model::domain::{Consumer, Message, Page, QueueId, RedriveRequest};
use qdeck_model::sanitize;

#[derive(Debug, Clone)]
pub enum Action {
    Key(KeyEvent),
    Resize(u16, u16),
    /// 1 s clock (unix ms).
    Tick(i64),
    Poll(PollEvent),
    Page {
        queue: QueueId,
        append: bool,
        result: Result<Page, BackendError>,
    },
    /// A page of the queue's scheduled (delayed) messages (`L`).
    ScheduledPage {
        queue: QueueId,
        append: bool,
        result: Result<Page, BackendError>,
    },
    Consumers {
        queue: QueueId,
        result: Result<Vec<Consumer>, BackendError>,
    },
    /// A Kafka group row's partitions, for the detail's table.
    Partitions {
        queue: QueueId,
        result: Result<Vec<qdeck_model::domain::PartitionFigures>, BackendError>,
    },
    OpProgress(ProgressState),
    /// Summary of a finished operation.
    OpDone(OpSummary),
    DemoWorkers(usize),
    /// Result of a save or copy.
    Notice(Result<String, String>),
    /// What the broker (or the backend's abilities) refused, typed: shown as one redacted line.
    Failed(BackendError),
    /// The editor closed on a message of `queue`.
    Edited {
        queue: QueueId,
        original: Box<Message>,
        result: Result<EditorOutcome, String>,
    },
    /// The editor closed on a message of `queue` with a header block that does not parse:
    /// `why`, and the text as the user left it (offered for another edit).
    EditUnreadable {
        queue: QueueId,
        original: Box<Message>,
        text: String,
        why: String,
    },
    /// Groups so far of the reasons scan of `queue`.
    ReasonsProgress {
        queue: QueueId,
        groups: Vec<qdeck_engine::triage::Group>,
        scanned: u64,
        total: Option<u64>,
    },
    ReasonsDone {
        queue: QueueId,
        result: Result<qdeck_engine::triage::ReasonsReport, BackendError>,
    },
    /// The plan of the redrive dialog's request, or why it is refused.
    RedrivePlanned {
        req: RedriveRequest,
        result: Result<HeldPlan, BackendError>,
    },
    /// The plan of the purge dialog, or why it is refused.
    PurgePlanned {
        queue: QueueId,
        result: Result<HeldPlan, BackendError>,
    },
    /// The plan of the offset reset dialog, or why it is refused.
    ResetPlanned {
        queue: QueueId,
        result: Result<HeldPlan, BackendError>,
    },
    /// The plan for cancelling one scheduled message, or why not.
    CancelPlanned {
        queue: QueueId,
        id: String,
        result: Result<HeldPlan, BackendError>,
    },
    /// The plan for deleting chosen messages, or why it is refused.
    DeletePlanned {
        queue: QueueId,
        ids: Vec<String>,
        result: Result<HeldPlan, BackendError>,
    },
    /// The checked copy (`moving`: move), or why it cannot go ahead.
    TransferPlanned {
        moving: bool,
        result: Result<Box<TransferAsk>, BackendError>,
    },
    /// An edited copy was sent (or not): its one line and verdict; the browser reloads
    /// `queue`.
    Resent {
        queue: QueueId,
        done: OpSummary,
    },
    /// Profile names re-read from the configuration file, and the profile to switch to.
    Profiles {
        names: Result<Vec<String>, String>,
        then: Option<String>,
    },
    /// A fleet poller's row for one profile.
    Fleet(qdeck_engine::fleet::FleetRow),
    /// The executor started polling these profiles for the fleet view.
    FleetStarted(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Browse {
        queue: QueueId,
        cursor: Option<String>,
        force: bool,
        /// The scheduled (delayed) messages instead of the queue's own.
        scheduled: bool,
    },
    Consumers(QueueId),
    /// Read a Kafka group row's partitions (the detail's table).
    Partitions(QueueId),
    /// Plan this redrive for the dialog (nothing changes).
    PlanRedrive(RedriveRequest),
    /// Plan purging this queue for the dialog: the broker's count, not the poller's.
    PlanPurge(QueueId),
    /// Plan moving a Kafka group row's committed offsets for the dialog.
    PlanReset(QueueId, qdeck_model::domain::ResetTo),
    /// Plan cancelling one scheduled message, then ask.
    PlanCancel {
        queue: QueueId,
        id: String,
    },
    /// Plan deleting these messages (the backend's refusal or its note on the others), then
    /// ask.
    PlanDelete {
        queue: QueueId,
        ids: Vec<String>,
    },
    /// The user confirmed a dialog: run the plan it showed, as it is (purge, redrive,
    /// delete, cancel-scheduled).
    RunPlan(HeldPlan),
    /// Check a copy/move of these messages (`:copy` / `:move`), then ask.
    PlanTransfer {
        source: QueueId,
        messages: Vec<Message>,
        to: QueueId,
        to_profile: Option<String>,
        moving: bool,
    },
    /// The user confirmed the copy/move.
    Transfer(Box<TransferAsk>),
    CancelOp,
    /// Queues on screen: polled first and often.
    Visible(Vec<QueueId>),
    Refresh,
    /// Copy text to the clipboard (OSC 52).
    Copy(String),
    /// An alert started firing: ring the bell and/or send this desktop notification.
    Notify {
        bell: bool,
        desktop: Option<String>,
    },
    /// Save messages as JSON lines.
    Save {
        queue: QueueId,
        messages: Vec<Message>,
    },
    AddWorker,
    RemoveWorker,
    /// Open another profile of the same configuration.
    SwitchProfile(String),
    /// Re-read the profile names from the file (then switch to the named one, if any).
    ReadProfiles(Option<String>),
    /// Scan a DLQ and group it by failure signature.
    Reasons(QueueId),
    CancelReasons,
    /// The messages of one reasons group, as a page for the message browser.
    BrowseGroup {
        queue: QueueId,
        signature: String,
        origin: Option<String>,
    },
    /// Suspend the console and open this message in the user's editor.
    Edit {
        queue: QueueId,
        message: Box<Message>,
    },
    /// Send the edited copy to `target`, then delete the original.
    Resend {
        source: QueueId,
        original: Box<Message>,
        edited: Box<Edited>,
        target: QueueId,
    },
    /// The tier refused an action: the gate writes the audit line.
    Refused {
        action: Mutation,
        queue: QueueId,
        why: String,
    },
    /// Start polling every profile for the fleet view (`:fleet`); its alert rules are
    /// evaluated into the console's book.
    StartFleet(qdeck_engine::alerts::AlertBook),
    /// Open the editor again on `draft`, the text of an edit that did not parse.
    EditAgain {
        queue: QueueId,
        message: Box<Message>,
        draft: String,
    },
    /// Write the `:` prompt's history, kept across runs.
    SaveHistory(Vec<String>),
}

/// The one door through which the console's state changes.
pub fn update(st: &mut State, action: Action) -> Vec<Effect> {
    reduce(&mut st.model, action)
}

fn reduce(st: &mut Model, action: Action) -> Vec<Effect> {
    let mut fx = Vec::new();
    match action {
        Action::Key(k) => {
            if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat {
                keys::key(st, k, &mut fx);
            }
            st.dirty = true;
        }
        Action::Resize(w, h) => {
            st.size = (w, h);
            st.dirty = true;
        }
        Action::Tick(now) => clock::tick(st, now, &mut fx),
        Action::Poll(ev) => queues::poll(st, ev, &mut fx),
        Action::Page {
            queue,
            append,
            result,
        } => messages::page_loaded(st, queue, append, result, false),
        Action::ScheduledPage {
            queue,
            append,
            result,
        } => messages::page_loaded(st, queue, append, result, true),
        Action::Consumers { queue, result } => lists::workers_loaded(st, queue, result),
        Action::Partitions { queue, result } => {
            partitions::loaded(st, queue, result);
        }
        Action::OpProgress(p) => ops::progress(st, p),
        Action::OpDone(r) => {
            // Quitting after the operation: nothing more is asked of the broker.
            if ops::done(st, r, &mut fx) {
                return fx;
            }
        }
        Action::DemoWorkers(n) => {
            st.demo_workers = Some(n);
            st.dirty = true;
        }
        Action::Profiles { names, then } => commands::profiles_read(st, names, then, &mut fx),
        Action::Fleet(row) => {
            let all = st.alerts.every_firing_row();
            if let Some(f) = &mut st.fleet {
                f.apply(row);
                f.set_alerts(&st.session.profile, all);
                st.dirty = true;
            }
            follow_fire(st);
        }
        Action::FleetStarted(names) => commands::fleet_started(st, &names),
        Action::Failed(e) => status(st, Level::Error, error_line(&e)),
        Action::Notice(r) => match r {
            Ok(t) => status(st, Level::Info, t),
            Err(e) => status(st, Level::Error, e),
        },
        Action::Edited {
            queue,
            original,
            result,
        } => {
            dialogs::edited(st, queue, original, result);
            // The editor had the terminal: the screen is drawn again whole.
            st.dirty = true;
        }
        Action::EditUnreadable {
            queue,
            original,
            text,
            why,
        } => {
            dialogs::edit_unreadable(st, queue, original, text, why);
            st.dirty = true;
        }
        Action::ReasonsProgress {
            queue,
            groups,
            scanned,
            total,
        } => reasons::progress(st, queue, groups, scanned, total),
        Action::ReasonsDone { queue, result } => reasons::done(st, queue, result),
        Action::RedrivePlanned { req, result } => dialogs::redrive_planned(st, req, result),
        Action::PurgePlanned { queue, result } => dialogs::purge_planned(st, queue, result),
        Action::ResetPlanned { queue, result } => dialogs::reset_planned(st, queue, result),
        Action::CancelPlanned { queue, id, result } => {
            dialogs::open_cancel(st, queue, id, result);
        }
        Action::DeletePlanned { queue, ids, result } => {
            dialogs::open_delete(st, queue, ids, result);
        }
        Action::TransferPlanned { moving, result } => dialogs::open_transfer(st, moving, result),
        Action::Resent { queue, done } => ops::resent(st, queue, done, &mut fx),
    }
    fx.extend(queues::visible(st));
    fx
}

/// The session of `:profile NAME` opened: `fresh` is its state, which takes over this one's
/// look, size and fleet view.
pub fn switched(st: &mut State, fresh: State) {
    let st = &mut st.model;
    let mut fresh = fresh.model;
    fresh.theme = st.theme.clone();
    fresh.size = st.size;
    // With the fleet view open, the new profile's queue table sits on it (Esc returns); an
    // on-fire row that asked for one of this profile's queues lands on that queue's detail,
    // over the on-fire view.
    fresh.fleet = st.fleet.take();
    // One alert book for the process: what fires or is pending on the new profile goes on
    // from where the fleet poller left it, and the profile left is the fleet's to evaluate.
    fresh.alerts.book = st.alerts.book.clone();
    fresh.alerts.book.set_console(&fresh.session.profile);
    // The session's operations stay in `:ops` across switches: a result line's "(:ops)" hint
    // must still lead somewhere after the user moved to another profile.
    fresh.ops_log = std::mem::take(&mut st.ops_log);
    fresh.ops_log.scroll = 0;
    // The history of each profile outlives the switch: the one left is kept, the one
    // returned to resumes where it was (the poller fills the time away as a gap).
    let mut kept = std::mem::take(&mut st.kept_stores);
    let left = std::mem::replace(&mut st.store, qdeck_engine::store::Store::new(1, 1, 1.0));
    kept.insert(st.session.profile.clone(), left);
    if let Some(back) = kept.remove(&fresh.session.profile) {
        fresh.store = back;
        fresh.queues.rows_dirty = true;
    }
    fresh.kept_stores = kept;
    let landing = fresh
        .fleet
        .as_mut()
        .and_then(|f| f.landing.take())
        .filter(|(p, _)| *p == fresh.session.profile);
    if let Some((_, q)) = landing {
        fresh.stack = vec![View::Fleet, View::Fire, View::Detail];
        fresh.focus = Some(q);
    } else if fresh.fleet.is_some() {
        fresh.stack = vec![View::Fleet, View::Queues];
    }
    *st = fresh;
    if st.queues.rows_dirty {
        queues::rebuild_rows(st);
    }
    let msg = format!("profile {} ({})", st.session.profile, st.session.broker);
    status(st, Level::Info, msg);
}

/// The on-fire list changed: its cursor follows its row; a row that left while the user
/// looks at the list is named, since the cursor now rests on another one.
pub(super) fn follow_fire(st: &mut Model) {
    let page = st.page_rows();
    let now = st.now_ms;
    let Some(left) = st.fleet.as_mut().and_then(|f| f.follow_fire(now, page)) else {
        return;
    };
    left_the_list(st, View::Fire, &left.label(), "on-fire list");
}

/// The row under a list's cursor left it (the list re-sorted without it): the cursor keeps
/// its position, and while the user looks at that list a flash names the row that left.
pub(super) fn left_the_list(st: &mut Model, view: View, row: &str, list: &str) {
    if st.view() == view {
        let msg = format!(
            "{} left the {list}; the cursor stays where it was",
            sanitize::clean(row)
        );
        status(st, Level::Info, msg);
    }
}

/// The queue table's rows built again from the store: what a poll or a sort does to them, for
/// the render bench to time alone.
pub fn rebuild_rows(st: &mut State) {
    let _ = queues::rebuild_rows(&mut st.model);
}

/// The frame is on the screen: nothing waits to be drawn until the state changes again.
pub fn drawn(st: &mut State) {
    st.model.dirty = false;
}

/// How long a flash stays: info, then warnings and errors.
pub const FLASH_INFO_MS: i64 = 4_000;
pub const FLASH_WARN_MS: i64 = 8_000;

/// The tier forbids `what`: say so in a flash and have the gate audit the refusal.
pub(super) fn refuse(
    st: &mut Model,
    what: &str,
    needs: Access,
    action: Option<Mutation>,
    fx: &mut Vec<Effect>,
) {
    let why = format!(
        "{what} needs access = \"{}\"; profile {:?} has \"{}\"",
        needs.as_str(),
        st.session.profile,
        st.session.access.as_str()
    );
    // A refusal is the action's result: kept in `:ops` with the CLI's exit code (5).
    set_result(st, what, &OpSummary::refused(why.clone()));
    if let Some(action) = action {
        fx.push(Effect::Refused {
            action,
            queue: st
                .context_queue()
                .cloned()
                .unwrap_or_else(|| QueueId::new("*")),
            why,
        });
    }
}

/// A line that stays in the status bar until replaced or dismissed (`x`): what the console
/// opened on, when it is not what a newcomer expects (no demo, and why).
pub fn notice(st: &mut State, text: impl Into<String>) {
    let st = &mut st.model;
    status(st, Level::Info, text);
    if let Some(s) = &mut st.status {
        s.sticky = true;
    }
}

/// A flash in the status line (the app's own warnings at start, tests).
pub fn set_status(st: &mut State, level: Level, text: impl Into<String>) {
    status(&mut st.model, level, text);
}

pub(super) fn status(st: &mut Model, level: Level, text: impl Into<String>) {
    st.status = Some(Status {
        text: sanitize::clean(&text.into()).into_owned(),
        level,
        at_ms: st.now_ms,
        sticky: false,
    });
    st.dirty = true;
}

/// An operation ended: its summary stays on screen until replaced or dismissed (`x`), and
/// goes into the session's operations log (`:ops`) in full.
pub(super) fn set_result(st: &mut Model, label: &str, summary: &OpSummary) {
    st.status = Some(Status {
        text: sanitize::clean(&summary.text).into_owned(),
        level: summary.level(),
        at_ms: st.now_ms,
        sticky: true,
    });
    st.ops_log.push(LoggedOp {
        profile: st.session.profile.clone(),
        label: label.to_string(),
        earlier: false,
        ended_ms: st.now_ms,
        summary: summary.clone(),
    });
    st.dirty = true;
}

/// Opening the view already on top must not stack a copy that Back would then have to pop.
pub(super) fn push(st: &mut Model, v: View) {
    if st.view() != v {
        st.stack.push(v);
    }
}
