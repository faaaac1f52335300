//! The profile the console runs on, the poller's own state, and quitting.

use std::path::PathBuf;

use super::OpSummary;

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
    /// The backend deletes one message by id (its `deleter` facet): `D` and `e` need it.
    pub deletes_by_id: bool,
    /// The backend sends a message (its `sender` facet): `e` sends the edited copy.
    pub sends: bool,
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
            deletes_by_id: true,
            sends: true,
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
