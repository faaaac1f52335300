//! The console's state: everything the views draw from, one file per view.
//!
//! Written only by `update`, and the compiler holds it: `State` gives `&Model` to anyone
//! (`Deref`) and `&mut Model` to no one outside `crate::tui::update` (its field is
//! `pub(in crate::tui::update)`, and there is no `DerefMut`). The app feeds what its effects
//! bring back as `Action`s, and sets a new session up through `update::setup`.

mod alerts;
mod cursor;
mod detail;
mod dialog;
mod filter;
mod fleet;
mod help;
mod messages;
mod ops;
mod prompt;
mod queues;
mod reasons;
mod session;
mod setup;
mod view;
mod workers;

pub use alerts::*;
pub use cursor::*;
pub use detail::*;
pub use dialog::*;
pub use filter::*;
pub use fleet::*;
pub use help::*;
pub use messages::*;
pub use ops::*;
pub use prompt::*;
pub use queues::*;
pub use reasons::*;
pub use session::*;
pub use setup::Setup;
pub use view::*;
pub use workers::*;

use qdeck_backend::BackendError;
use qdeck_engine::store::Store;
use qdeck_model::domain::{Capabilities, QueueId};

use crate::tui::keymap::KeyMap;
use crate::tui::theme::Theme;

impl Model {
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

/// What the console shows, read-only outside `update`: the views, the app and tests read
/// every field through `Deref`, and there is no `DerefMut`; the one field that gives `&mut`
/// is visible to `crate::tui::update` alone. A write from anywhere else does not compile.
pub struct State {
    pub(in crate::tui::update) model: Model,
}

impl std::ops::Deref for State {
    type Target = Model;
    fn deref(&self) -> &Model {
        &self.model
    }
}

/// Every view's state, one file each in this folder. Its fields are public to read; only
/// `update` holds a `&mut Model` (through `State::model`) to write them.
pub struct Model {
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

impl Model {
    /// What the broker can do with queue `q`, re-read from its current listing: the
    /// backend's per-queue answer where the app gave one, else the broker-wide capabilities.
    pub fn caps_for(&self, q: &QueueId) -> Capabilities {
        match (&self.caps_of, self.store.get(q)) {
            (Some(f), Some(e)) => f(&e.info),
            _ => self.caps.clone(),
        }
    }

    fn new(store: Store, caps: Capabilities, profile: &str, broker: &str) -> Model {
        Model {
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
            alerts: AlertsState::for_console(profile),
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

impl State {
    /// A console with the default settings (`Setup::new`); `State::with` takes others.
    pub fn new(store: Store, caps: Capabilities, profile: &str, broker: &str) -> State {
        State::with(store, caps, Setup::new(profile, broker))
    }
}
