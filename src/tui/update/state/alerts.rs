//! The alerts view's state: the `[[alerts]]` rules and the process's alert book, which the
//! console writes for its own profile and the fleet poller for every other one.

use qdeck_model::domain::QueueId;

/// The `[[alerts]]` rules, evaluated on this profile's figures after every poll.
#[derive(Debug, Clone, Default)]
pub struct AlertsState {
    pub rules: Vec<qdeck_engine::alerts::Rule>,
    /// Shared with the fleet poller and with the state of every profile switched to, for
    /// the life of the process.
    pub book: qdeck_engine::alerts::AlertBook,
    pub notify: qdeck_model::config::alerts::NotifyConfig,
    /// First line of the alerts view.
    pub scroll: usize,
}

impl AlertsState {
    /// A new book whose console profile is `profile`.
    pub fn for_console(profile: &str) -> AlertsState {
        let s = AlertsState::default();
        s.book.set_console(profile);
        s
    }

    /// Rules firing now on the console's profile, counted per queue.
    pub fn firing(&self) -> usize {
        self.book.firing_on_console()
    }

    /// What fires on the console's profile now, most severe first, then oldest first.
    pub fn firing_rows(&self) -> Vec<FiringAlert> {
        let own = self.book.console();
        let mut v = self.every_firing_row();
        v.retain(|f| Some(&f.profile) == own.as_ref());
        v
    }

    /// What fires on every profile this process has evaluated.
    pub fn every_firing_row(&self) -> Vec<FiringAlert> {
        self.book
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
