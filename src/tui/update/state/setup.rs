//! What a session brings to a fresh console state: the profile's settings, the user's files
//! and the backend's per-queue answer. The state is built from it whole, so the app never
//! writes a field of a state it has made.

use super::{CapsOf, Model, OpsLog, SessionInfo, State};
use crate::tui::keymap::KeyMap;
use crate::tui::theme::Theme;

/// The settings a console starts with; `Setup::new` gives the defaults `State::new` uses.
pub struct Setup {
    pub session: SessionInfo,
    pub keymap: KeyMap,
    pub theme: Theme,
    /// What this broker can do with each queue (`Backend::capabilities_for`).
    pub caps_of: Option<CapsOf>,
    /// The `:` prompt's history from earlier runs, oldest first.
    pub history: Vec<String>,
    /// The user's theme files, completed by `:theme` beside the built-in names.
    pub theme_files: Vec<String>,
    pub demo_workers: Option<usize>,
    pub alert_rules: Vec<qdeck_engine::alerts::Rule>,
    pub notify: qdeck_model::config::alerts::NotifyConfig,
    /// `:ops` opens on the recent past from the audit log.
    pub ops_log: OpsLog,
}

impl Setup {
    pub fn new(profile: &str, broker: &str) -> Setup {
        Setup {
            session: SessionInfo::new(profile, broker),
            keymap: KeyMap::default(),
            theme: Theme::dark(),
            caps_of: None,
            history: Vec::new(),
            theme_files: Vec::new(),
            demo_workers: None,
            alert_rules: Vec::new(),
            notify: Default::default(),
            ops_log: OpsLog::default(),
        }
    }
}

impl State {
    /// A console on `store` whose broker can do `caps`, set up as `setup` says.
    pub fn with(
        store: qdeck_engine::store::Store,
        caps: qdeck_model::domain::Capabilities,
        setup: Setup,
    ) -> State {
        let mut m = Model::new(store, caps, &setup.session.profile, &setup.session.broker);
        m.session = setup.session;
        m.keymap = setup.keymap;
        m.theme = setup.theme;
        m.caps_of = setup.caps_of;
        m.prompt.history = setup.history;
        m.prompt.themes.extend(setup.theme_files);
        m.demo_workers = setup.demo_workers;
        m.alerts.rules = setup.alert_rules;
        m.alerts.notify = setup.notify;
        m.ops_log = setup.ops_log;
        State { model: m }
    }
}
