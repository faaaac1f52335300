//! The fleet and on-fire views' state: one row per profile, and the worst of them all.

use qdeck_model::domain::QueueId;

use super::{Cursor, Filter, FiringAlert};

/// One summary row per profile, in configuration order.
#[derive(Debug, Clone, Default)]
pub struct FleetState {
    pub rows: Vec<qdeck_engine::fleet::FleetRow>,
    pub cursor: Cursor,
    pub fire_cursor: Cursor,
    /// The row the user put the on-fire cursor on (moved onto or opened), by identity: the
    /// list re-sorts as figures arrive, and the cursor follows that row rather than its
    /// position (`follow_fire`). Until the user chooses one the cursor stays where it is, on
    /// the top row at first: what ranks in above comes under it, the most urgent first.
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

    /// What fires across the fleet, from the alert book (`all`, most severe first): the
    /// console's profile and the profiles this fleet polls (a profile dropped from the
    /// configuration since leaves the list).
    pub fn set_alerts(&mut self, own_profile: &str, mut all: Vec<FiringAlert>) {
        all.retain(|a| {
            a.profile == own_profile || self.rows.iter().any(|r| r.profile == a.profile)
        });
        self.alerts = all;
    }

    /// Put the on-fire cursor back on the row the user chose, found by identity, after the
    /// list changed. When that row has left the list the cursor keeps its position, the row
    /// that left is returned so the user can be told, and nothing is followed until the user
    /// chooses again.
    pub fn follow_fire(&mut self, now_ms: i64, page: usize) -> Option<FireKey> {
        let keys: Vec<FireKey> = self.fire_rows(now_ms).iter().map(FireRow::key).collect();
        let mut left = None;
        if let Some(k) = &self.fire_sel {
            match keys.iter().position(|x| x == k) {
                Some(p) => self.fire_cursor.sel = p,
                None => left = self.fire_sel.take(),
            }
        }
        self.fire_cursor.clamp(keys.len(), page);
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
