//! UI state: everything the views draw from. Changed only by `update`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use regex::Regex;

use super::keymap::KeyMap;
use super::theme::Theme;
use qdeck_backend::{BackendError, ProgressState};
use qdeck_engine::ops::Verdict;
use qdeck_engine::store::Store;
use qdeck_model::domain::{Capabilities, Consumer, Message, QueueId, RedriveTarget};
use qdeck_model::rate::Rate;
use qdeck_model::sanitize::BodyKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// One row per profile (`:fleet`, `qdeck --fleet`); under the queue table when open.
    Fleet,
    /// Every profile's most severe queues in one table (`:fire`, `f` on the fleet).
    Fire,
    Queues,
    Detail,
    Messages,
    Message,
    Workers,
    Help,
    /// A DLQ grouped by failure signature.
    Reasons,
    /// This session's operations with their full summaries (`:ops`).
    Ops,
    /// Each alert rule's state on this profile (`:alerts`).
    Alerts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortCol {
    Name,
    Depth,
    InFlight,
    Delayed,
    Age,
    Dlq,
    InRate,
    OutRate,
    Eta,
}

impl SortCol {
    pub const ALL: [SortCol; 9] = [
        SortCol::Name,
        SortCol::Depth,
        SortCol::InFlight,
        SortCol::Delayed,
        SortCol::Age,
        SortCol::Dlq,
        SortCol::InRate,
        SortCol::OutRate,
        SortCol::Eta,
    ];
    pub fn name(self) -> &'static str {
        match self {
            SortCol::Name => "name",
            SortCol::Depth => "depth",
            SortCol::InFlight => "inflight",
            SortCol::Delayed => "delayed",
            SortCol::Age => "age",
            SortCol::Dlq => "dlq",
            SortCol::InRate => "in",
            SortCol::OutRate => "out",
            SortCol::Eta => "eta",
        }
    }
    pub fn parse(s: &str) -> Option<SortCol> {
        SortCol::ALL.into_iter().find(|c| c.name() == s)
    }
    pub fn next(self) -> SortCol {
        let i = SortCol::ALL.iter().position(|c| *c == self).unwrap_or(0);
        SortCol::ALL[(i + 1) % SortCol::ALL.len()]
    }
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub text: String,
    pub invert: bool,
    pub re: Option<Regex>,
    /// The text was not a valid regex; matched literally.
    pub literal: bool,
}

impl Filter {
    pub fn new(text: &str) -> Filter {
        let (invert, pat) = match text.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, text),
        };
        if pat.is_empty() {
            return Filter::default();
        }
        // Smart case, as in vim and less: a pattern with a capital letter matches case,
        // so `/NaN` finds the literal NaN and not every `tenant`.
        let flags = if pat.chars().any(char::is_uppercase) {
            ""
        } else {
            "(?i)"
        };
        let (re, literal) = match Regex::new(&format!("{flags}{pat}")) {
            Ok(r) => (Some(r), false),
            Err(_) => (
                Regex::new(&format!("{flags}{}", regex::escape(pat))).ok(),
                true,
            ),
        };
        Filter {
            text: text.to_string(),
            invert,
            re,
            literal,
        }
    }
    pub fn is_active(&self) -> bool {
        self.re.is_some()
    }
    pub fn matches(&self, s: &str) -> bool {
        match &self.re {
            Some(r) => r.is_match(s) != self.invert,
            None => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Filter,
    /// The workers view's own filter.
    WorkerFilter,
    /// The on-fire view's own filter (matches `profile/queue`).
    FireFilter,
    Command,
    Search,
}

#[derive(Debug, Clone)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
}

/// Commands kept in the `:` prompt's history (the oldest go first).
pub const HISTORY_MAX: usize = 500;

/// The `:` prompt's memory: the commands run before (oldest first, kept across runs by the
/// app), where ↑/↓ stand in them, and the Tab completion under way.
#[derive(Debug, Clone, Default)]
pub struct PromptState {
    pub history: Vec<String>,
    /// The history entry ↑/↓ show; `None`: the line being typed.
    pub browsing: Option<usize>,
    /// What was typed before ↑, given back by ↓ past the newest entry.
    pub draft: String,
    pub completion: Option<Completion>,
    /// Theme names `:theme` completes (the built-in ones, and the user's files the app found).
    pub themes: Vec<String>,
}

/// Tab completion of the prompt's last word: the text before that word, the candidates, and
/// the one shown. Repeated Tab cycles; any other key keeps the text and ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub stem: String,
    pub candidates: Vec<String>,
    pub index: usize,
}

/// A list with a selection and a scroll offset.
#[derive(Debug, Clone, Default)]
pub struct Cursor {
    pub sel: usize,
    pub offset: usize,
}

impl Cursor {
    /// Where a table `height` cells tall (its header row included) shows `len` rows with this
    /// cursor: the cursor clamped to its page, and the first and one-past-last rows drawn. The
    /// views draw with it and the poller's visible set is taken with it, so the rows drawn are
    /// the rows polled first.
    pub fn placed(&self, len: usize, height: usize) -> (Cursor, usize, usize) {
        let page = height.saturating_sub(1).max(1);
        let mut c = self.clone();
        c.clamp(len, page);
        let from = c.offset.min(len);
        (c, from, (from + page).min(len))
    }

    /// Keep `sel` within `len` and visible in a window of `page` rows.
    pub fn clamp(&mut self, len: usize, page: usize) {
        let page = page.max(1);
        if len == 0 {
            self.sel = 0;
            self.offset = 0;
            return;
        }
        self.sel = self.sel.min(len - 1);
        if self.sel < self.offset {
            self.offset = self.sel;
        }
        if self.sel >= self.offset + page {
            self.offset = self.sel + 1 - page;
        }
        self.offset = self.offset.min(len.saturating_sub(page));
    }
    pub fn move_by(&mut self, delta: isize, len: usize, page: usize) {
        let s = self.sel as isize + delta;
        self.sel = s.clamp(0, len.saturating_sub(1) as isize) as usize;
        self.clamp(len, page);
    }
}

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
    Redrive {
        source: QueueId,
        targets: Vec<RedriveTarget>,
        target: usize,
        rate: usize,
        only_ids: Option<Vec<String>>,
        count: Option<u64>,
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
                | DialogKind::Redrive { .. }
                | DialogKind::Edit { .. }
                | DialogKind::Delete { .. }
                | DialogKind::CancelScheduled { .. }
                | DialogKind::Transfer(_)
        )
    }
}

/// How an operation ended: its one-line summary, its verdict and the exit code quitting
/// after it gives (the CLI's for the same outcome).
#[derive(Debug, Clone, PartialEq)]
pub struct OpSummary {
    pub text: String,
    pub verdict: Verdict,
    pub exit_code: u8,
}

impl OpSummary {
    pub fn new(text: impl Into<String>, verdict: Verdict) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict,
            exit_code: qdeck_engine::exit::of_verdict(verdict),
        }
    }
    /// An action the profile's tier refuses, with the CLI's exit code for a refusal.
    pub fn refused(text: impl Into<String>) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict: Verdict::Failed,
            exit_code: qdeck_engine::exit::REFUSED,
        }
    }
    pub fn of(outcome: &qdeck_engine::ops::Outcome, text: impl Into<String>) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict: outcome.verdict(),
            exit_code: qdeck_engine::exit::of_outcome(outcome),
        }
    }
    pub fn ok(&self) -> bool {
        self.verdict == Verdict::Ok
    }
    /// The status line's level: anything short of `Ok` is shown as an error, so a partial
    /// result never reads as done.
    pub fn level(&self) -> Level {
        if self.ok() {
            Level::Info
        } else {
            Level::Error
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpState {
    pub label: String,
    pub progress: ProgressState,
    pub started_ms: i64,
    pub cancelling: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub text: String,
    pub level: Level,
    pub at_ms: i64,
    /// An operation's result: it stays until replaced or dismissed, where a flash expires.
    pub sticky: bool,
}

/// This session's operations across every profile it switched to, newest last (`:ops`).
#[derive(Debug, Clone, Default)]
pub struct OpsLog {
    pub entries: Vec<LoggedOp>,
    /// First row shown.
    pub scroll: usize,
}

/// One finished operation: what ran, on which profile, when it ended, and its full summary.
#[derive(Debug, Clone)]
pub struct LoggedOp {
    /// The profile it ran on: the log outlives profile switches, so each entry names its own.
    pub profile: String,
    pub label: String,
    /// Read from the audit log at start: done before this console (by it, the CLI or
    /// someone else), shown as the recent past.
    pub earlier: bool,
    pub ended_ms: i64,
    pub summary: OpSummary,
}

impl LoggedOp {
    fn from_audit(e: qdeck_engine::audit::AuditEntry) -> LoggedOp {
        let verdict = match e.result.as_str() {
            "ok" => Verdict::Ok,
            "partial" => Verdict::Partial,
            "cancelled" => Verdict::Cancelled,
            _ => Verdict::Failed,
        };
        let counts = match &e.counts {
            serde_json::Value::Object(m) if !m.is_empty() => format!(" {}", e.counts),
            _ => String::new(),
        };
        let error = e
            .error
            .as_deref()
            .map(|x| format!(" — {x}"))
            .unwrap_or_default();
        let text = format!(
            "{} {} by {}: {}{counts}{error}",
            e.action, e.queue, e.user, e.result
        );
        let summary = if e.result == "refused" {
            OpSummary::refused(text)
        } else {
            OpSummary::new(text, verdict)
        };
        LoggedOp {
            ended_ms: chrono::DateTime::parse_from_rfc3339(&e.time)
                .map_or(0, |d| d.timestamp_millis()),
            profile: e.profile,
            label: String::new(),
            earlier: true,
            summary,
        }
    }
}

impl OpsLog {
    /// Kept per session; a long night of single-message redrives stays well under this.
    pub const MAX: usize = 500;

    /// The recent past from the audit log, as the console starts: the same record the CLI
    /// and every other qdeck writes, so `:ops` is one store, not a second one.
    pub fn from_audit(entries: Vec<qdeck_engine::audit::AuditEntry>) -> OpsLog {
        let mut log = OpsLog::default();
        for e in entries {
            log.push(LoggedOp::from_audit(e));
        }
        log
    }

    /// Entries of this session (the rest came from the audit log at start).
    pub fn this_session(&self) -> usize {
        self.entries.iter().filter(|e| !e.earlier).count()
    }

    pub fn push(&mut self, op: LoggedOp) {
        if self.entries.len() >= Self::MAX {
            self.entries.remove(0);
        }
        self.entries.push(op);
    }
}

impl State {
    /// No action that changes the broker (tier `stats` or `browse`).
    pub fn read_only(&self) -> bool {
        self.session.access < qdeck_model::config::Access::Redrive
    }

    /// Whether the tier allows a command that needs `needs`.
    pub fn allows(&self, needs: qdeck_model::config::Access) -> bool {
        self.session.access >= needs
    }
}

/// The backend's capabilities for one queue (`Backend::capabilities_for`).
pub type CapsOf =
    std::sync::Arc<dyn Fn(&qdeck_model::domain::QueueInfo) -> Capabilities + Send + Sync>;

pub struct State {
    pub store: Store,
    /// The figures of the profiles the console was on before, kept for the process's life:
    /// coming back to one resumes its history, so its trend, rates and `stuck?` do not
    /// start over (`update::switched`).
    pub kept_stores: std::collections::HashMap<String, Store>,
    /// The broker-wide capabilities; `caps_for` gives one queue's.
    pub caps: Capabilities,
    /// Set by the app from its backend: what this broker can do with each queue (a RabbitMQ
    /// stream cannot be browsed, a quorum queue counts browses toward its delivery limit).
    pub caps_of: Option<CapsOf>,
    pub keymap: KeyMap,
    pub theme: Theme,
    /// The profile and its settings.
    pub session: SessionInfo,
    /// What the poller last said about itself.
    pub poll: PollStatus,
    /// Workers of the in-process demo, when it runs.
    pub demo_workers: Option<usize>,
    pub stack: Vec<View>,
    /// The queue table.
    pub queues: QueueList,
    pub input: Option<Input>,
    pub prompt: PromptState,
    /// Queue of the detail and workers views.
    pub focus: Option<QueueId>,
    pub msgs: MsgState,
    pub body: BodyState,
    pub workers: WorkersState,
    pub reasons: ReasonsState,
    pub dialog: Option<Dialog>,
    pub help: HelpState,
    pub ops_log: OpsLog,
    pub alerts: AlertsState,
    pub detail: DetailState,
    /// Ctrl-W: show every column whatever the width.
    pub wide: bool,
    pub op: Option<OpState>,
    pub status: Option<Status>,
    pub now_ms: i64,
    /// Terminal size, for paging.
    pub size: (u16, u16),
    pub dirty: bool,
    /// Whether and how the console quits.
    pub exit: ExitState,
    /// The fleet view's rows, once `:fleet` (or `--fleet`) started it.
    pub fleet: Option<FleetState>,
}

/// The profile the console runs on and its settings: set when the session opens, and only
/// `profiles` changes after (`:profile` re-reads them).
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub profile: String,
    /// Every profile `:profile NAME` can switch to.
    pub profiles: Vec<String>,
    pub broker: String,
    /// The profile's permission tier, as the gate enforces it.
    pub access: qdeck_model::config::Access,
    pub protected: bool,
    pub refresh_secs: f64,
    /// The profile's `max_calls_per_minute` (after defaults); `None` for no limit.
    pub call_budget: Option<u32>,
    /// Where "save" writes (state dir); None in tests means the executor picks.
    pub export_dir: Option<PathBuf>,
    pub theme_dir: Option<PathBuf>,
    /// Where a message's failure text is read (the profile's `reason_headers` first): the
    /// message view's `why` line and the DLQ list's REASON.
    pub reasons: qdeck_engine::triage::SignatureConfig,
}

impl SessionInfo {
    pub fn new(profile: &str, broker: &str) -> SessionInfo {
        SessionInfo {
            profile: profile.to_string(),
            profiles: vec![profile.to_string()],
            broker: broker.to_string(),
            access: qdeck_model::config::Access::Full,
            protected: false,
            refresh_secs: 2.0,
            call_budget: None,
            export_dir: None,
            theme_dir: None,
            reasons: qdeck_engine::triage::SignatureConfig::default(),
        }
    }
}

/// Quitting: now, or once the running operation's summary arrives.
#[derive(Debug, Clone, Default)]
pub struct ExitState {
    /// The event loop stops after this batch.
    pub quit: bool,
    /// The user asked to quit while an operation ran: quit when its summary arrives.
    pub after_op: bool,
    /// Summary of the operation the console quit after, for the restored terminal.
    pub summary: Option<OpSummary>,
}

/// The poller's own state, for the header and the status line.
#[derive(Debug, Clone, Default)]
pub struct PollStatus {
    pub api_rate: Option<qdeck_engine::budget::Budget>,
    pub busy: bool,
    /// The queue list arrived at least once.
    pub listed: bool,
}

/// The queue table: which queues it shows, in what order, and where the cursor is.
#[derive(Debug, Clone)]
pub struct QueueList {
    /// Indices into `store.entries()`, filtered and sorted.
    pub rows: Vec<usize>,
    /// The rows wait for a rebuild (figures arrived since the last sort).
    pub rows_dirty: bool,
    /// Rows of the last sort on a figure whose cell shows none (`—`, sorted last); said in
    /// the title, so a partial sort over a large broker is not taken for the whole truth.
    pub sort_unknown: usize,
    /// Of those, the rows not polled yet: the title says "yet" only when they all are.
    pub sort_unpolled: usize,
    pub cursor: Cursor,
    pub sort: SortCol,
    pub sort_desc: bool,
    pub filter: Filter,
}

impl Default for QueueList {
    fn default() -> Self {
        QueueList {
            rows: Vec::new(),
            rows_dirty: true,
            sort_unknown: 0,
            sort_unpolled: 0,
            cursor: Cursor::default(),
            sort: SortCol::Name,
            sort_desc: false,
            filter: Filter::default(),
        }
    }
}

/// The queue detail view.
#[derive(Debug, Clone)]
pub struct DetailState {
    /// First row of the text when it is taller than the screen.
    pub scroll: usize,
    /// The charts' window: 60, 300 or 600 s.
    pub chart_window_secs: u64,
    /// A Kafka group row's partition table.
    pub partitions: super::partition_table::PartitionsState,
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

/// The help view.
#[derive(Debug, Clone, Default)]
pub struct HelpState {
    /// First row shown.
    pub scroll: usize,
}

/// The `[[alerts]]` rules, evaluated on this profile's figures after every poll.
#[derive(Debug, Clone, Default)]
pub struct AlertsState {
    pub rules: Vec<qdeck_engine::alerts::Rule>,
    pub tracker: qdeck_engine::alerts::Tracker,
    pub notify: qdeck_model::config::alerts::NotifyConfig,
    /// First line of the alerts view.
    pub scroll: usize,
}

impl AlertsState {
    /// Rules firing now, counted per queue.
    pub fn firing(&self) -> usize {
        self.tracker.firing().count()
    }

    /// What fires on this profile now, most severe first, then oldest first.
    pub fn firing_rows(&self) -> Vec<FiringAlert> {
        self.tracker
            .firing_alerts(&self.rules)
            .into_iter()
            .map(FiringAlert::from)
            .collect()
    }
}

impl From<qdeck_engine::alerts::Firing> for FiringAlert {
    fn from(f: qdeck_engine::alerts::Firing) -> Self {
        FiringAlert {
            queue: (!f.key.queue.is_empty()).then(|| QueueId::new(&f.key.queue)),
            profile: f.key.profile,
            rule: f.key.rule,
            severity: f.severity,
            since_ms: f.since_ms,
            summary: f.summary,
        }
    }
}

/// An alert rule firing on a queue (or on the profile itself), for the on-fire view.
#[derive(Debug, Clone, PartialEq)]
pub struct FiringAlert {
    pub profile: String,
    pub rule: String,
    pub queue: Option<QueueId>,
    pub severity: qdeck_engine::alerts::Severity,
    pub since_ms: i64,
    pub summary: String,
}

/// One summary row per profile, in configuration order.
#[derive(Debug, Clone, Default)]
pub struct FleetState {
    pub rows: Vec<qdeck_engine::fleet::FleetRow>,
    pub cursor: Cursor,
    pub fire_cursor: Cursor,
    /// The row under the on-fire cursor, by identity: the list re-sorts as figures arrive,
    /// and the cursor follows its row rather than its position (`follow_fire`).
    pub fire_sel: Option<FireKey>,
    pub fire_filter: Filter,
    /// The queue an on-fire row asked to open once its profile's session is up (Enter on
    /// another profile's row): the switch lands on exactly that queue.
    pub landing: Option<(String, QueueId)>,
    /// Alert rules firing on the console's profile: they rank first in the on-fire view.
    pub alerts: Vec<FiringAlert>,
}

/// One row of the on-fire view: a profile whose broker does not answer (these rank first),
/// or a profile and one of its queues.
#[derive(Debug, Clone, PartialEq)]
pub enum FireRow<'a> {
    Alert(&'a FiringAlert),
    Broker {
        profile: &'a str,
        problem: qdeck_engine::fleet::BrokerProblem,
    },
    Queue {
        profile: &'a str,
        entry: &'a qdeck_engine::fleet::FireEntry,
    },
}

/// What an on-fire row is, apart from where it ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireKey {
    Alert {
        profile: String,
        rule: String,
        queue: Option<QueueId>,
    },
    Broker(String),
    Queue {
        profile: String,
        queue: QueueId,
    },
}

impl FireKey {
    /// The row as a flash names it.
    pub fn label(&self) -> String {
        match self {
            FireKey::Alert {
                profile,
                rule,
                queue: Some(q),
            } => format!("alert {rule} on {profile}/{q}"),
            FireKey::Alert { profile, rule, .. } => format!("alert {rule} on {profile}"),
            FireKey::Broker(p) => format!("broker of {p}"),
            FireKey::Queue { profile, queue } => format!("{profile}/{queue}"),
        }
    }
}

impl FireRow<'_> {
    pub fn key(&self) -> FireKey {
        match self {
            FireRow::Alert(a) => FireKey::Alert {
                profile: a.profile.clone(),
                rule: a.rule.clone(),
                queue: a.queue.clone(),
            },
            FireRow::Broker { profile, .. } => FireKey::Broker((*profile).to_string()),
            FireRow::Queue { profile, entry } => FireKey::Queue {
                profile: (*profile).to_string(),
                queue: entry.queue.clone(),
            },
        }
    }

    pub fn profile(&self) -> &str {
        match self {
            FireRow::Alert(a) => &a.profile,
            FireRow::Broker { profile, .. } | FireRow::Queue { profile, .. } => profile,
        }
    }

    pub fn queue(&self) -> Option<&QueueId> {
        match self {
            FireRow::Alert(a) => a.queue.as_ref(),
            FireRow::Broker { .. } => None,
            FireRow::Queue { entry, .. } => Some(&entry.queue),
        }
    }
}

impl FleetState {
    pub fn new(profiles: &[String]) -> FleetState {
        FleetState {
            rows: profiles
                .iter()
                .map(|p| qdeck_engine::fleet::FleetRow {
                    profile: p.clone(),
                    refresh_secs: 5.0,
                    ..Default::default()
                })
                .collect(),
            cursor: Cursor::default(),
            fire_cursor: Cursor::default(),
            fire_sel: None,
            fire_filter: Filter::default(),
            landing: None,
            alerts: Vec::new(),
        }
    }

    /// The on-fire table through the filter: first every profile whose broker does not
    /// answer (in configuration order), then every profile's kept queues, worst first.
    /// Built per frame: at most `FIRE_ROWS` per profile, so a sort of a few thousand rows.
    pub fn fire_rows(&self, now_ms: i64) -> Vec<FireRow<'_>> {
        let shown = |name: &str| !self.fire_filter.is_active() || self.fire_filter.matches(name);
        let mut v: Vec<FireRow<'_>> = self
            .alerts
            .iter()
            .filter(|a| {
                let q = a.queue.as_ref().map_or("", QueueId::as_str);
                shown(&format!("{}/{q} {}", a.profile, a.rule))
            })
            .map(FireRow::Alert)
            .collect();
        v.extend(self.rows.iter().filter_map(|r| {
            let problem = r.broker_problem(now_ms)?;
            shown(&r.profile).then_some(FireRow::Broker {
                profile: r.profile.as_str(),
                problem,
            })
        }));
        let mut queues: Vec<(&str, &qdeck_engine::fleet::FireEntry)> = self
            .rows
            .iter()
            .flat_map(|r| r.fire.iter().map(move |e| (r.profile.as_str(), e)))
            .filter(|(p, e)| shown(&format!("{p}/{}", e.queue.as_str())))
            .collect();
        queues.sort_by(|a, b| {
            b.1.severity
                .total_cmp(&a.1.severity)
                .then(b.1.depth.cmp(&a.1.depth))
                .then(a.0.cmp(b.0))
                .then(a.1.queue.as_str().cmp(b.1.queue.as_str()))
        });
        v.extend(
            queues
                .into_iter()
                .map(|(profile, entry)| FireRow::Queue { profile, entry }),
        );
        v
    }

    /// What fires across the fleet: `own` (the console's profile, evaluated on its own
    /// polls) and every other profile's, from its fleet row.
    pub fn set_alerts(&mut self, own_profile: &str, own: Vec<FiringAlert>) {
        let mut all = own;
        for r in self.rows.iter().filter(|r| r.profile != own_profile) {
            all.extend(r.alerts.iter().cloned().map(FiringAlert::from));
        }
        all.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.since_ms.cmp(&b.since_ms))
        });
        self.alerts = all;
    }

    /// Put the on-fire cursor back on its row, found by identity, after the list changed.
    /// When that row has left the list the cursor keeps its position (the row now there is
    /// the new selection) and the row that left is returned, so the user can be told.
    pub fn follow_fire(&mut self, now_ms: i64, page: usize) -> Option<FireKey> {
        let keys: Vec<FireKey> = self.fire_rows(now_ms).iter().map(FireRow::key).collect();
        let mut left = None;
        if let Some(k) = self.fire_sel.take() {
            match keys.iter().position(|x| *x == k) {
                Some(p) => self.fire_cursor.sel = p,
                None => left = Some(k),
            }
        }
        self.fire_cursor.clamp(keys.len(), page);
        self.fire_sel = keys.get(self.fire_cursor.sel).cloned();
        left
    }

    /// The cursor moved by hand: the row now under it is the one to follow.
    pub fn fire_selected_now(&mut self, now_ms: i64) {
        self.fire_sel = self
            .fire_rows(now_ms)
            .get(self.fire_cursor.sel)
            .map(FireRow::key);
    }

    /// A poll's row replaces the profile's previous one.
    pub fn apply(&mut self, row: qdeck_engine::fleet::FleetRow) {
        match self.rows.iter_mut().find(|r| r.profile == row.profile) {
            Some(r) => *r = row,
            None => self.rows.push(row),
        }
    }

    pub fn selected(&self) -> Option<&str> {
        self.rows.get(self.cursor.sel).map(|r| r.profile.as_str())
    }
}

impl State {
    /// What the broker can do with queue `q`, re-read from its current listing: the
    /// backend's per-queue answer where the app gave one, else the broker-wide capabilities.
    pub fn caps_for(&self, q: &QueueId) -> Capabilities {
        match (&self.caps_of, self.store.get(q)) {
            (Some(f), Some(e)) => f(&e.info),
            _ => self.caps.clone(),
        }
    }

    pub fn new(store: Store, caps: Capabilities, profile: &str, broker: &str) -> State {
        State {
            store,
            kept_stores: std::collections::HashMap::new(),
            caps,
            caps_of: None,
            keymap: KeyMap::default(),
            theme: Theme::dark(),
            session: SessionInfo::new(profile, broker),
            poll: PollStatus::default(),
            demo_workers: None,
            stack: vec![View::Queues],
            queues: QueueList::default(),
            input: None,
            prompt: PromptState {
                themes: Theme::builtin_names()
                    .into_iter()
                    .map(String::from)
                    .collect(),
                ..Default::default()
            },
            focus: None,
            msgs: MsgState::default(),
            body: BodyState::default(),
            workers: WorkersState::default(),
            reasons: ReasonsState::default(),
            dialog: None,
            help: HelpState::default(),
            ops_log: OpsLog::default(),
            alerts: AlertsState::default(),
            detail: DetailState::default(),
            wide: false,
            op: None,
            status: None,
            now_ms: qdeck_model::domain::now_ms(),
            size: (80, 24),
            dirty: true,
            exit: ExitState::default(),
            fleet: None,
        }
    }

    pub fn view(&self) -> View {
        self.stack.last().copied().unwrap_or(View::Queues)
    }

    /// Rows of a full-height table in the current terminal (header, status and borders off).
    pub fn page_rows(&self) -> usize {
        (self.size.1 as usize).saturating_sub(6).max(1)
    }

    /// The queue selected in the table.
    pub fn selected_queue(&self) -> Option<&QueueId> {
        let i = *self.queues.rows.get(self.queues.cursor.sel)?;
        self.store.entries().get(i).map(|e| &e.info.id)
    }

    /// Alert rules firing: across the fleet while it is polled, else on this profile.
    pub fn alerts_firing(&self) -> usize {
        match &self.fleet {
            Some(f) => f.alerts.len(),
            None => self.alerts.firing(),
        }
    }

    /// Queue the current view is about (detail/workers focus, message queue, or table row).
    pub fn context_queue(&self) -> Option<&QueueId> {
        match self.view() {
            View::Messages | View::Message => self.msgs.queue.as_ref(),
            View::Detail | View::Workers => self.focus.as_ref(),
            View::Reasons => self.reasons.queue.as_ref(),
            _ => self.selected_queue(),
        }
    }

    /// Stale after missing two refreshes (plus slack), or while the backend fails.
    pub fn is_stale(&self, updated_ms: Option<i64>) -> bool {
        if self.store.backend_error.is_some() {
            return true;
        }
        match updated_ms {
            Some(t) => {
                (self.now_ms - t) as f64 > (self.session.refresh_secs * 2.5 * 1000.0).max(5000.0)
            }
            None => false,
        }
    }
}

/// An error as the console shows it: one line, redacted (errors promise no secrets; this
/// holds even where one slips through a broker's message).
pub fn error_line(e: &BackendError) -> String {
    qdeck_model::config::redact::redact(&e.to_string())
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
