//! The alerts view's state: this profile's `[[alerts]]` rules and what fires on it.

use qdeck_model::domain::QueueId;

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
