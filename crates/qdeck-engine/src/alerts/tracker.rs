//! Each rule's state per queue: pending while `when` holds for less than `for`, then firing
//! until it stops holding. Transitions are what `watch` prints and hooks receive; the state is
//! saved so that a restart does not fire again what was already firing.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::rule::{Rule, Severity};

/// Where one rule stands on one queue (`queue` empty: on the profile itself).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Key {
    pub rule: String,
    pub profile: String,
    pub queue: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Phase {
    /// `when` holds since then, for less than `for`.
    Pending { since_ms: i64 },
    /// Firing since then.
    Firing { since_ms: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Firing,
    Resolved,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Firing => "firing",
            Change::Resolved => "resolved",
        }
    }
}

/// One rule starting or stopping to fire on one queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub change: Change,
    pub rule: String,
    pub profile: String,
    /// Empty for a rule on the profile's health.
    pub queue: String,
    pub severity: Severity,
    /// Unix ms of the transition.
    pub at_ms: i64,
    /// Unix ms the rule started firing (for a resolution: how long it fired).
    pub firing_since_ms: i64,
    pub summary: String,
}

/// A rule's last state on one queue, for the alerts view.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub at_ms: i64,
    pub summary: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tracker {
    /// Serialized as a list: JSON keys must be strings.
    #[serde(with = "as_list")]
    phases: BTreeMap<Key, Phase>,
    /// The last resolution per key (not saved: for the console's "resolved at").
    #[serde(skip)]
    resolved: BTreeMap<Key, Resolved>,
    /// The line each firing rule printed when it started firing (not saved).
    #[serde(skip)]
    summaries: BTreeMap<Key, String>,
}

/// A rule firing on one queue (`key.queue` empty: on the profile), for the on-fire views.
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    pub key: Key,
    pub severity: Severity,
    pub since_ms: i64,
    pub summary: String,
}

impl Tracker {
    /// `when` was evaluated on `key` at `now_ms`; the transition it causes, if any.
    pub fn observe(
        &mut self,
        rule: &Rule,
        key: Key,
        holds: bool,
        now_ms: i64,
        summary: impl FnOnce() -> String,
    ) -> Option<Transition> {
        let due = |since: i64| (now_ms - since) as f64 >= rule.for_secs * 1000.0;
        let before = self.phases.get(&key).copied();
        let (after, change) = match (before, holds) {
            (None, true) if due(now_ms) => (
                Some(Phase::Firing { since_ms: now_ms }),
                Some(Change::Firing),
            ),
            (None, true) => (Some(Phase::Pending { since_ms: now_ms }), None),
            (Some(Phase::Pending { since_ms }), true) if due(since_ms) => (
                Some(Phase::Firing { since_ms: now_ms }),
                Some(Change::Firing),
            ),
            (Some(p), true) => (Some(p), None),
            (Some(Phase::Firing { .. }), false) => (None, Some(Change::Resolved)),
            (_, false) => (None, None),
        };
        match after {
            Some(p) => {
                self.phases.insert(key.clone(), p);
            }
            None => {
                self.phases.remove(&key);
            }
        }
        let change = change?;
        let firing_since_ms = match (change, before) {
            (Change::Resolved, Some(Phase::Firing { since_ms })) => since_ms,
            _ => now_ms,
        };
        let summary = summary();
        if change == Change::Firing {
            self.summaries.insert(key.clone(), summary.clone());
        } else {
            self.summaries.remove(&key);
        }
        if change == Change::Resolved {
            self.resolved.insert(
                key.clone(),
                Resolved {
                    at_ms: now_ms,
                    summary: summary.clone(),
                },
            );
        } else {
            self.resolved.remove(&key);
        }
        Some(Transition {
            change,
            rule: key.rule,
            profile: key.profile,
            queue: key.queue,
            severity: rule.severity,
            at_ms: now_ms,
            firing_since_ms,
            summary,
        })
    }

    /// Keys of `rule` on `profile` that were not evaluated this round (a queue that went
    /// away): they resolve.
    pub fn unseen(&self, rule: &str, profile: &str, seen: &[Key]) -> Vec<Key> {
        self.phases
            .keys()
            .filter(|k| k.rule == rule && k.profile == profile && !seen.contains(k))
            .cloned()
            .collect()
    }

    /// Drops the state of rules no longer configured.
    pub fn keep_rules(&mut self, names: &[&str]) {
        self.phases.retain(|k, _| names.contains(&k.rule.as_str()));
        self.summaries
            .retain(|k, _| names.contains(&k.rule.as_str()));
        self.resolved
            .retain(|k, _| names.contains(&k.rule.as_str()));
    }

    pub fn phases(&self) -> impl Iterator<Item = (&Key, &Phase)> {
        self.phases.iter()
    }

    pub fn resolved(&self) -> impl Iterator<Item = (&Key, &Resolved)> {
        self.resolved.iter()
    }

    /// What fires now, most severe first, then longest firing first.
    pub fn firing_alerts(&self, rules: &[Rule]) -> Vec<Firing> {
        let mut v: Vec<Firing> = self
            .firing()
            .map(|(k, since_ms)| Firing {
                key: k.clone(),
                severity: rules
                    .iter()
                    .find(|r| r.name == k.rule)
                    .map_or(Severity::Warning, |r| r.severity),
                since_ms,
                summary: self.summaries.get(k).cloned().unwrap_or_default(),
            })
            .collect();
        v.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.since_ms.cmp(&b.since_ms))
        });
        v
    }

    pub fn firing(&self) -> impl Iterator<Item = (&Key, i64)> {
        self.phases.iter().filter_map(|(k, p)| match p {
            Phase::Firing { since_ms } => Some((k, *since_ms)),
            Phase::Pending { .. } => None,
        })
    }

    /// The saved state, or an empty one when there is none; an unreadable file is an error
    /// (a restart must not silently fire everything again).
    pub fn load(path: &Path) -> Result<Tracker, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a saved alert state: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Tracker::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// Saves through a temporary file and a rename, so a crash leaves the old state or the new.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

mod as_list {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<Key, Phase>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Key, Phase>, D::Error> {
        let v: Vec<(Key, Phase)> = Vec::deserialize(d)?;
        Ok(v.into_iter().collect())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use qdeck_model::config::alerts::AlertRuleConfig;

    /// `deep`: depth > 0 for `for_`, critical (also the alert book's tests' rule).
    pub(crate) fn rule(for_: Option<&str>) -> Rule {
        Rule::compile(
            &AlertRuleConfig {
                name: "deep".into(),
                queues: None,
                profiles: vec![],
                kinds: vec![],
                when: "depth > 0".into(),
                for_: for_.map(str::to_string),
                severity: Some("critical".into()),
                summary: None,
            },
            0,
        )
        .unwrap()
    }

    fn key() -> Key {
        Key {
            rule: "deep".into(),
            profile: "p".into(),
            queue: "q".into(),
        }
    }

    #[test]
    fn pending_for_the_duration_then_firing_then_resolved_once() {
        let r = rule(Some("60s"));
        let mut t = Tracker::default();
        let s = || "q: depth 3".to_string();
        assert_eq!(t.observe(&r, key(), true, 0, s), None);
        assert_eq!(t.observe(&r, key(), true, 59_999, s), None);
        let fired = t.observe(&r, key(), true, 60_000, s).unwrap();
        assert_eq!(
            (fired.change, fired.at_ms, fired.severity),
            (Change::Firing, 60_000, Severity::Critical)
        );
        assert_eq!(t.observe(&r, key(), true, 90_000, s), None);
        let done = t.observe(&r, key(), false, 120_000, s).unwrap();
        assert_eq!(
            (done.change, done.firing_since_ms),
            (Change::Resolved, 60_000)
        );
        assert_eq!(t.observe(&r, key(), false, 130_000, s), None);
        assert_eq!(t.resolved().count(), 1);
    }

    #[test]
    fn a_blip_shorter_than_for_never_fires() {
        let r = rule(Some("1m"));
        let mut t = Tracker::default();
        let s = String::new;
        assert_eq!(t.observe(&r, key(), true, 0, s), None);
        assert_eq!(t.observe(&r, key(), false, 30_000, s), None);
        assert_eq!(t.observe(&r, key(), true, 40_000, s), None);
        assert_eq!(t.observe(&r, key(), true, 99_999, s), None);
        assert!(t.observe(&r, key(), true, 100_000, s).is_some());
    }

    #[test]
    fn without_for_it_fires_at_once() {
        let r = rule(None);
        let mut t = Tracker::default();
        assert!(t.observe(&r, key(), true, 5, String::new).is_some());
    }

    #[test]
    fn saved_state_does_not_fire_again_after_a_restart() {
        let r = rule(None);
        let mut t = Tracker::default();
        t.observe(&r, key(), true, 5, String::new).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/watch.json");
        t.save(&path).unwrap();
        let mut again = Tracker::load(&path).unwrap();
        assert_eq!(again.observe(&r, key(), true, 10, String::new), None);
        let done = again.observe(&r, key(), false, 20, String::new).unwrap();
        assert_eq!((done.change, done.firing_since_ms), (Change::Resolved, 5));
        std::fs::write(&path, b"{not json").unwrap();
        assert!(Tracker::load(&path)
            .unwrap_err()
            .contains("not a saved alert state"));
        assert!(Tracker::load(&dir.path().join("none.json"))
            .unwrap()
            .firing()
            .next()
            .is_none());
    }
}
