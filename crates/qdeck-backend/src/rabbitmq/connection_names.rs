//! The names clients give their connections (`connection_name` in the client properties,
//! shown as `user_provided_name` by the management API): `uxw-orders-worker-1` says who a
//! consumer is where its tag (`amq.ctag-…`) does not. A connection's name never changes, so
//! each is read once and kept; only connections not seen before cost a listing.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use super::consumers::ConsumerRow;
use super::mgmt::Mgmt;

#[derive(Debug, Deserialize)]
struct ConnectionRow {
    name: String,
    #[serde(default)]
    user_provided_name: Option<String>,
}

/// Connection → the name its client gave it (`None`: it gave none), for the process's life.
#[derive(Debug, Default)]
pub struct ConnectionNames(std::sync::Mutex<HashMap<String, Option<String>>>);

impl ConnectionNames {
    /// The given names of the connections `rows` consume on, reading the vhost's connections
    /// only when one of them is new. A failed listing leaves the names unknown (consumers
    /// are still listed, by their tags).
    pub async fn of(
        &self,
        mgmt: &Mgmt,
        vhost_path: &str,
        rows: &[ConsumerRow],
    ) -> HashMap<String, String> {
        let wanted: HashSet<String> = rows.iter().filter_map(connection_of).collect();
        let missing = {
            let known = self.lock();
            wanted.iter().any(|c| !known.contains_key(c))
        };
        if missing {
            let path = format!("{vhost_path}/connections?columns=name,user_provided_name");
            if let Ok(listed) = mgmt.get::<Vec<ConnectionRow>>(&path).await {
                let mut known = self.lock();
                for c in listed {
                    known.insert(c.name, c.user_provided_name.filter(|n| !n.is_empty()));
                }
            }
        }
        let known = self.lock();
        wanted
            .into_iter()
            .filter_map(|c| {
                let name = known.get(&c).cloned().flatten()?;
                Some((c, name))
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<String>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The connection a consumer's channel belongs to.
pub fn connection_of(r: &ConsumerRow) -> Option<String> {
    r.channel_details
        .as_ref()?
        .get("connection_name")?
        .as_str()
        .map(str::to_string)
}
