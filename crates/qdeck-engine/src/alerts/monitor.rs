//! What `watch` and `serve` keep of every profile between polls (its queues with their
//! history, its health, what its polls cost) and the rules evaluated on each answer.

use std::collections::BTreeMap;

use super::book::{AlertBook, Evaluator};
use super::figures::Figures;
use super::rule::Rule;
use super::tracker::{Key, Tracker, Transition};
use crate::budget::Budget;
use crate::fleet::Polled;
use crate::multi_poller::{self, Answer};
use crate::store::{QueueEntry, Store};
use qdeck_backend::BackendError;

/// One profile as the last answers left it.
#[derive(Debug)]
pub struct ProfileView {
    /// The broker kind, once its configuration was read.
    pub kind: Option<&'static str>,
    pub store: Store,
    /// Why the last poll failed; the store keeps the last success's figures.
    pub error: Option<String>,
    pub updated_ms: Option<i64>,
    pub refresh_secs: f64,
    /// Seconds the last poll took.
    pub poll_secs: Option<f64>,
    /// Calls made to the broker since `watch`/`serve` started.
    pub calls_total: u64,
    last_calls: Option<u64>,
    pub budget: Option<Budget>,
}

impl ProfileView {
    fn new() -> Self {
        ProfileView {
            kind: None,
            // History over the growth window at 1.25 s a point: fine enough for `for`
            // durations of a few seconds, bounded per queue (240 points).
            store: Store::new(u64::from(super::figures::GROWTH_WINDOW_SECS), 240, 600.0),
            error: None,
            updated_ms: None,
            refresh_secs: multi_poller::DEFAULT_REFRESH_SECS,
            poll_secs: None,
            calls_total: 0,
            last_calls: None,
            budget: None,
        }
    }

    pub fn up(&self) -> bool {
        self.error.is_none() && self.updated_ms.is_some()
    }

    pub fn stale(&self, now_ms: i64) -> bool {
        multi_poller::stale(self.updated_ms, self.refresh_secs, now_ms)
    }

    /// The session's call count grows within a session and starts again at 0 with a new one.
    fn count_calls(&mut self, calls: Option<u64>) {
        if let Some(now) = calls {
            let before = self.last_calls.unwrap_or(0);
            self.calls_total += if now >= before { now - before } else { now };
            self.last_calls = Some(now);
        }
    }

    /// A queue's figures with the profile's health flags.
    pub fn figures(&self, e: &QueueEntry, now_ms: i64) -> Figures {
        let health = Health {
            unreachable: self.error.is_some(),
            stale: self.stale(now_ms),
        };
        figures(e, &self.store, health)
    }
}

pub struct Monitor {
    pub rules: Vec<Rule>,
    /// Where the rules' state lives: the monitor's own, or the console's (the fleet poller's
    /// monitor leaves the console's profile to the console).
    pub book: AlertBook,
    pub profiles: BTreeMap<String, ProfileView>,
}

impl Monitor {
    pub fn new(rules: Vec<Rule>, tracker: Tracker) -> Self {
        Monitor::sharing(rules, AlertBook::from_tracker(tracker))
    }

    /// A monitor writing its rules' state into `book`, shared with a console.
    pub fn sharing(rules: Vec<Rule>, book: AlertBook) -> Self {
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        book.keep_rules(&names);
        Monitor {
            rules,
            book,
            profiles: BTreeMap::new(),
        }
    }

    /// Takes one profile's answer and evaluates the rules on that profile.
    pub fn apply(&mut self, a: Answer<Polled, BackendError>, now_ms: i64) -> Vec<Transition> {
        let view = self
            .profiles
            .entry(a.profile.clone())
            .or_insert_with(ProfileView::new);
        if let Some(s) = &a.settings {
            view.kind = Some(s.kind.as_str());
            view.refresh_secs = s.refresh_secs;
        }
        match a.result {
            Ok((infos, batch)) => {
                view.store.set_queues(infos, now_ms);
                let watched = watched_for_history(&self.rules, &a.profile, &view.store);
                view.store.set_watched(watched);
                view.store.apply(batch, now_ms);
                view.error = None;
            }
            Err(e) => view.error = Some(e.message()),
        }
        view.updated_ms = a.updated_ms;
        view.poll_secs = Some(a.took.as_secs_f64());
        view.count_calls(a.calls);
        if a.budget.is_some() {
            view.budget = a.budget;
        }
        self.evaluate(&a.profile, now_ms)
    }

    /// Every rule on every queue of `profile` it watches.
    pub fn evaluate(&mut self, profile: &str, now_ms: i64) -> Vec<Transition> {
        let Some(view) = self.profiles.get(profile) else {
            return Vec::new();
        };
        let health = Health {
            unreachable: view.error.is_some(),
            stale: view.stale(now_ms),
        };
        self.book.evaluate(
            Evaluator::Fleet,
            &self.rules,
            profile,
            &view.store,
            health,
            now_ms,
        )
    }
}

impl Monitor {
    /// The health rules of every profile, on the clock rather than on an answer: a broker
    /// stays down and figures go stale with time alone, and a refused connection's back-off
    /// can hold the next answer for a minute. Evaluated every second, a health rule fires at
    /// its `for` after the failure was first seen, not at whichever answer comes after that.
    pub fn evaluate_health(&mut self, now_ms: i64) -> Vec<Transition> {
        let health_rules: Vec<Rule> = self
            .rules
            .iter()
            .filter(|r| r.when.only_health())
            .cloned()
            .collect();
        if health_rules.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (profile, view) in &self.profiles {
            let health = Health {
                unreachable: view.error.is_some(),
                stale: view.stale(now_ms),
            };
            out.extend(self.book.evaluate(
                Evaluator::Fleet,
                &health_rules,
                profile,
                &view.store,
                health,
                now_ms,
            ));
        }
        out
    }
}

/// How often the health rules are evaluated between answers.
pub const HEALTH_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// A profile's health, which every queue's figures carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    pub unreachable: bool,
    pub stale: bool,
}

/// Every rule watching `profile` on the queues of its `store`: the console evaluates its own
/// profile's store this way, `watch` and `serve` each profile's.
pub fn evaluate(
    rules: &[Rule],
    tracker: &mut Tracker,
    profile: &str,
    store: &Store,
    health: Health,
    now_ms: i64,
) -> Vec<Transition> {
    let mut out = Vec::new();
    for rule in rules.iter().filter(|r| r.watches_profile(profile)) {
        let key = |queue: &str| Key {
            rule: rule.name.clone(),
            profile: profile.to_string(),
            queue: queue.to_string(),
        };
        if rule.when.only_health() {
            let f = Figures {
                unreachable: health.unreachable,
                stale: health.stale,
                ..Figures::default()
            };
            let holds = rule.when.holds(&f);
            out.extend(tracker.observe(rule, key(""), holds, now_ms, || {
                rule.summary(profile, "", &f)
            }));
            continue;
        }
        let mut seen = Vec::new();
        for e in store.entries() {
            if !rule.watches(profile, &e.info) {
                continue;
            }
            let q = e.info.id.as_str();
            seen.push(key(q));
            // A queue with no figures yet (listed, not measured: the first polls after a
            // profile switch) is unknown, not quiet: what fires or is pending on it stays.
            if e.latest.is_none() || (rule.when.needs_history() && e.history.len() < 2) {
                continue;
            }
            let f = figures(e, store, health);
            let holds = rule.when.holds(&f);
            out.extend(
                tracker.observe(rule, key(q), holds, now_ms, || rule.summary(profile, q, &f)),
            );
        }
        // A queue that went away stops firing (said once).
        for k in tracker.unseen(&rule.name, profile, &seen) {
            let q = k.queue.clone();
            out.extend(
                tracker.observe(rule, k, false, now_ms, || format!("{q}: no longer listed")),
            );
        }
    }
    out
}

/// The queues of `profile` a rule reads rates or growth of: the store keeps their history
/// (it otherwise frees it for queues nobody looks at).
pub fn watched_for_history(
    rules: &[Rule],
    profile: &str,
    store: &Store,
) -> std::collections::HashSet<qdeck_model::domain::QueueId> {
    let reading: Vec<&Rule> = rules.iter().filter(|r| r.when.needs_history()).collect();
    if reading.is_empty() {
        return Default::default();
    }
    store
        .entries()
        .iter()
        .filter(|e| reading.iter().any(|r| r.watches(profile, &e.info)))
        .map(|e| e.info.id.clone())
        .collect()
}

/// A queue's figures with its profile's health flags.
pub fn figures(e: &QueueEntry, store: &Store, health: Health) -> Figures {
    let mut f = Figures::of(e, store.drain_target_secs);
    f.unreachable = health.unreachable;
    f.stale = health.stale;
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi_poller::PollError;

    fn down(profile: &str) -> Answer<Polled, BackendError> {
        Answer {
            profile: profile.into(),
            settings: None,
            result: Err(PollError::Work(BackendError::Unreachable(
                "connection refused".into(),
            ))),
            updated_ms: None,
            budget: None,
            took: std::time::Duration::from_millis(3),
            calls: None,
        }
    }

    /// A refused connection answers once, then backs off: the health rule fires on the clock
    /// at its `for`, not at the next answer a minute later.
    #[test]
    fn a_health_rule_fires_at_its_for_without_another_answer() {
        let cfg = qdeck_model::config::parse_str(
            "[[alerts]]\nname = \"down\"\nwhen = \"unreachable\"\nfor = \"30s\"\n",
        )
        .unwrap();
        let mut m = Monitor::new(crate::alerts::rules(&cfg).unwrap(), Tracker::default());
        let t0 = 1_000_000;
        assert!(m.apply(down("prod"), t0).is_empty(), "pending, not firing");
        assert!(m.evaluate_health(t0 + 29_000).is_empty());
        let fired = m.evaluate_health(t0 + 30_500);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(
            (fired[0].rule.as_str(), fired[0].profile.as_str()),
            ("down", "prod")
        );
        assert!(m.evaluate_health(t0 + 31_500).is_empty(), "once");
    }
}
