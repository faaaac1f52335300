//! The confirmation dialogs' state: what is asked and the plan that runs on confirm.

use qdeck_model::domain::{QueueId, RedriveTarget};
use qdeck_model::rate::Rate;

/// The console's rate choices, checked when qdeck is compiled.
pub const RATES: [Option<Rate>; 6] = [
    None,
    Some(Rate::fixed(1.0)),
    Some(Rate::fixed(10.0)),
    Some(Rate::fixed(50.0)),
    Some(Rate::fixed(100.0)),
    Some(Rate::fixed(500.0)),
];

/// Where a dialog's plan stands: the dialog asks for it when it opens (and again when its
/// target changes), shows the plan's own question (`Planned::question`, the CLI's prompt),
/// and on confirm runs that very plan: what is confirmed is what runs.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanShown {
    /// Asked for; `y` waits for the broker's answer.
    Planning,
    Ready(HeldPlan),
    /// Why it cannot run; `y` does nothing.
    Refused(String),
}

impl PlanShown {
    pub fn held(&self) -> Option<&HeldPlan> {
        match self {
            PlanShown::Ready(p) => Some(p),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum DialogKind {
    /// Purge a queue, on the plan the engine made when the dialog opened (its count is the
    /// broker's, not the poller's last figure).
    Purge { queue: QueueId, plan: PlanShown },
    /// Move a Kafka group's committed offsets (`:reset`), on the plan the engine made when
    /// the dialog opened: per partition the offset now → the new one, the lag before → after.
    ResetOffsets {
        queue: QueueId,
        to: qdeck_model::domain::ResetTo,
        plan: PlanShown,
    },
    Redrive {
        source: QueueId,
        targets: Vec<RedriveTarget>,
        target: usize,
        rate: usize,
        only_ids: Option<Vec<String>>,
        count: Option<u64>,
        /// What the user looked at when the redrive takes more or less than it (a reason
        /// group's list, a search, the reasons view over every group), said in the dialog.
        scope: Option<String>,
        /// The plan for the target shown, made by the same code as the CLI's prompt.
        plan: PlanShown,
    },
    /// Browsing has a side effect on this broker: say it first.
    Browse { queue: QueueId, note: String },
    /// Delete exactly these messages, on the plan the CLI makes too (its note says what the
    /// deletion does to the queue's other messages on this broker).
    Delete {
        queue: QueueId,
        ids: Vec<String>,
        plan: HeldPlan,
    },
    /// Cancel one scheduled message, on its plan.
    CancelScheduled {
        queue: QueueId,
        id: String,
        plan: HeldPlan,
    },
    /// Copy or move chosen messages, checked by the app and waiting for the user.
    Transfer(Box<TransferAsk>),
    /// q / Ctrl-C while an operation runs: cancel it and quit?
    Quit,
    /// An edited message is back from the editor: where to send it. Always typed: the user
    /// types the target queue's name.
    Edit {
        source: QueueId,
        original: Box<qdeck_model::domain::Message>,
        edited: Box<qdeck_engine::edit::Edited>,
        /// The origin first, then the other queues of the profile.
        targets: Vec<QueueId>,
        target: usize,
    },
    /// The edited file's header block does not parse: open it again as the user left it,
    /// or drop the edit.
    EditUnreadable {
        source: QueueId,
        original: Box<qdeck_model::domain::Message>,
        text: String,
        why: String,
    },
}

/// A copy or move of chosen messages (`:copy` / `:move`), checked before it is asked: the
/// target exists, a move's source can delete them, SQS gets text bodies; what the copies'
/// headers become and what the deletion does to the others.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferAsk {
    pub source: QueueId,
    pub messages: Vec<qdeck_model::domain::Message>,
    pub to: QueueId,
    /// Another profile of the configuration; `None`: this one.
    pub to_profile: Option<String>,
    pub moving: bool,
    /// Both ends as `profile/queue (kind)`.
    pub from_label: String,
    pub to_label: String,
    /// One line per header that does not arrive under its own name.
    pub header_lines: Vec<String>,
    pub delete_note: Option<String>,
    /// The queue name a protected profile types to confirm.
    pub typed: Option<QueueId>,
    /// The plan this dialog shows, run as it is on confirm (`None`: planned again then).
    pub plan: Option<HeldPlan>,
}

/// A plan carried from the dialog that shows it to the run that executes it. Plans hold gates
/// and broker answers, which do not compare, so a held plan is equal only to itself (a clone
/// of the same `Arc`): two plans made apart are two plans, even when their sentences read the
/// same (the messages or a gate may differ where the text does not show it).
#[derive(Debug, Clone)]
pub struct HeldPlan(pub std::sync::Arc<qdeck_engine::ops::Planned>);

impl HeldPlan {
    pub fn new(planned: qdeck_engine::ops::Planned) -> Self {
        Self(std::sync::Arc::new(planned))
    }

    pub fn planned(&self) -> &qdeck_engine::ops::Planned {
        &self.0
    }

    /// The plan itself, for the run (a copy when the dialog still holds it too).
    pub fn into_planned(self) -> qdeck_engine::ops::Planned {
        std::sync::Arc::unwrap_or_clone(self.0)
    }
}

impl PartialEq for HeldPlan {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dialog {
    pub kind: DialogKind,
    /// What the user typed (protected profiles type the queue name).
    pub typed: String,
    pub needs_name: bool,
    /// The Confirm button has the focus; Cancel has it when the dialog opens, so Enter (the
    /// key people press to open things) never confirms by accident.
    pub confirm_focused: bool,
    /// First row of the dialog's text shown when it does not fit (the key legend never
    /// scrolls).
    pub scroll: usize,
}

impl Dialog {
    pub fn new(kind: DialogKind, needs_name: bool) -> Dialog {
        Dialog {
            kind,
            typed: String::new(),
            needs_name,
            confirm_focused: false,
            scroll: 0,
        }
    }
    pub fn queue(&self) -> Option<&QueueId> {
        match &self.kind {
            DialogKind::Purge { queue, .. }
            | DialogKind::ResetOffsets { queue, .. }
            | DialogKind::Browse { queue, .. }
            | DialogKind::Delete { queue, .. }
            | DialogKind::CancelScheduled { queue, .. } => Some(queue),
            DialogKind::Redrive { source, .. } | DialogKind::EditUnreadable { source, .. } => {
                Some(source)
            }
            DialogKind::Edit {
                targets, target, ..
            } => targets.get(*target),
            DialogKind::Transfer(t) => t.typed.as_ref(),
            DialogKind::Quit => None,
        }
    }
    pub fn ready(&self) -> bool {
        !self.needs_name || self.queue().is_some_and(|q| self.typed == q.as_str())
    }
    /// Purge, delete and redrive change the broker; they confirm with `y` or the typed name
    /// only.
    pub fn destructive(&self) -> bool {
        matches!(
            self.kind,
            DialogKind::Purge { .. }
                | DialogKind::ResetOffsets { .. }
                | DialogKind::Redrive { .. }
                | DialogKind::Edit { .. }
                | DialogKind::Delete { .. }
                | DialogKind::CancelScheduled { .. }
                | DialogKind::Transfer(_)
        )
    }
}
