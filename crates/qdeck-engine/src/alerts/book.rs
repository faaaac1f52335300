//! The alert state of every profile for the life of one process, shared by the console and its
//! fleet poller. Each profile has one evaluator at a time: the console evaluates its own
//! profile (its figures are the freshest), the fleet poller every other one. A profile
//! switch only moves that role, so nothing about what fires, since when or what is pending
//! changes with it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::monitor::{self, Health};
use super::rule::Rule;
use super::tracker::{Firing, Tracker, Transition};
use crate::store::Store;

/// Who evaluates a profile's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluator {
    /// The console, on its own profile.
    Console,
    /// The fleet poller (or `watch`/`serve`), on every profile the console does not own.
    Fleet,
}

#[derive(Debug, Default)]
struct Shared {
    tracker: Tracker,
    console: Option<String>,
    /// When each profile's rules were last evaluated (unix ms).
    evaluated_ms: BTreeMap<String, i64>,
}

/// Cheap to clone: every clone is the same book.
#[derive(Clone, Default)]
pub struct AlertBook(Arc<Mutex<Shared>>);

impl std::fmt::Debug for AlertBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("AlertBook")
            .field("console", &s.console)
            .field("evaluated_ms", &s.evaluated_ms)
            .finish_non_exhaustive()
    }
}

/// Two handles are equal when they are the same book.
impl PartialEq for AlertBook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl AlertBook {
    /// A book that starts from `tracker` (a saved state, for `watch`).
    pub fn from_tracker(tracker: Tracker) -> AlertBook {
        AlertBook(Arc::new(Mutex::new(Shared {
            tracker,
            ..Shared::default()
        })))
    }

    /// A panic while the lock was held left a tracker whose every write was whole (no
    /// method keeps it half-updated across a call), so the state is still usable.
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The console's profile from now on; the fleet poller leaves its rules to the console.
    pub fn set_console(&self, profile: &str) {
        self.lock().console = Some(profile.to_string());
    }

    pub fn console(&self) -> Option<String> {
        self.lock().console.clone()
    }

    /// Every rule watching `profile` on its `store`, when `by` is that profile's evaluator;
    /// otherwise nothing is evaluated and nothing changes.
    pub fn evaluate(
        &self,
        by: Evaluator,
        rules: &[Rule],
        profile: &str,
        store: &Store,
        health: Health,
        now_ms: i64,
    ) -> Vec<Transition> {
        let mut s = self.lock();
        let console_owns = s.console.as_deref() == Some(profile);
        if console_owns != (by == Evaluator::Console) {
            return Vec::new();
        }
        s.evaluated_ms.insert(profile.to_string(), now_ms);
        monitor::evaluate(rules, &mut s.tracker, profile, store, health, now_ms)
    }

    /// Reads the tracker under the lock.
    pub fn read<R>(&self, f: impl FnOnce(&Tracker) -> R) -> R {
        f(&self.lock().tracker)
    }

    /// Reads the tracker and when each profile was last evaluated, under one lock: the
    /// alerts view draws from both without copying the tracker.
    pub fn read_with_evaluated<R>(
        &self,
        f: impl FnOnce(&Tracker, &BTreeMap<String, i64>) -> R,
    ) -> R {
        let s = self.lock();
        f(&s.tracker, &s.evaluated_ms)
    }

    /// Drops the state of rules no longer configured.
    pub fn keep_rules(&self, names: &[&str]) {
        self.lock().tracker.keep_rules(names);
    }

    /// What fires on every profile, most severe first, then longest firing first.
    pub fn firing_alerts(&self, rules: &[Rule]) -> Vec<Firing> {
        self.read(|t| t.firing_alerts(rules))
    }

    /// How many rules fire on the console's profile: the header badge's count, read on every
    /// frame, so it counts under the lock without building the firing list.
    pub fn firing_on_console(&self) -> usize {
        let s = self.lock();
        let Some(own) = s.console.as_deref() else {
            return 0;
        };
        s.tracker.firing().filter(|(k, _)| k.profile == own).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::tracker::tests::rule;
    use qdeck_model::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};

    fn store(depth: u64) -> Store {
        let mut s = Store::new(60, 10, 60.0);
        s.set_queues(
            vec![QueueInfo {
                id: QueueId::new("q"),
                ..Default::default()
            }],
            qdeck_model::domain::now_ms(),
        );
        let st = QueueStats {
            id: QueueId::new("q"),
            at_ms: s.epoch_ms() + 1000,
            depth: Some(depth),
            ..Default::default()
        };
        s.apply(
            StatsBatch {
                stats: vec![st],
                errors: vec![],
            },
            qdeck_model::domain::now_ms(),
        );
        s
    }

    /// The fleet counts a rule pending on a profile; the console takes that profile over and
    /// the rule fires at the time the fleet's count would have reached `for`, then the fleet
    /// no longer writes it.
    #[test]
    fn a_profile_has_one_evaluator_and_a_switch_moves_only_that() {
        let book = AlertBook::default();
        let rules = [rule(Some("10s"))];
        let h = Health::default();
        let s = store(5);
        book.set_console("a");
        assert!(book
            .evaluate(Evaluator::Fleet, &rules, "b", &s, h, 1_000)
            .is_empty());
        assert!(
            book.evaluate(Evaluator::Console, &rules, "b", &s, h, 2_000)
                .is_empty(),
            "the console does not evaluate a profile it does not own"
        );
        book.set_console("b");
        assert!(book
            .evaluate(Evaluator::Console, &rules, "b", &s, h, 10_999)
            .is_empty());
        assert_eq!(book.firing_on_console(), 0, "pending is not firing");
        let t = book.evaluate(Evaluator::Console, &rules, "b", &s, h, 11_000);
        assert_eq!(t.len(), 1, "fires 10 s after the fleet saw it hold");
        assert_eq!(t[0].at_ms, 11_000);
        assert!(
            book.evaluate(Evaluator::Fleet, &rules, "b", &store(0), h, 12_000)
                .is_empty(),
            "the fleet no longer writes the console's profile"
        );
        assert_eq!(book.firing_alerts(&rules).len(), 1);
        assert_eq!(book.firing_on_console(), 1);
        book.set_console("a");
        assert_eq!(book.firing_on_console(), 0, "b's alert is not a's");
        book.set_console("b");
        assert_eq!(
            book.read_with_evaluated(|_, e| e.get("b").copied()),
            Some(11_000)
        );
        let other = book.clone();
        assert_eq!(other, book);
        assert_ne!(AlertBook::default(), book);
    }
}
