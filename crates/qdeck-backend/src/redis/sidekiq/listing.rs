//! Sidekiq's queues, found by its `queues` set, `processes` set and sorted sets; a process's
//! info names the version (Sidekiq 7 writes it, 6.x does not).

use std::collections::HashMap;

use ::redis::AsyncCommands;

use super::{Key, Sidekiq};
use crate::redis::conn::map_err;
use crate::redis::library::{lock, Scanned};
use crate::redis::listing::{entry, Found};
use crate::redis::{Flavor, RedisBackend};
use crate::Result;
use qdeck_model::sanitize::clean_short;

pub(super) struct SidekiqScan {
    present: bool,
    queues: Vec<String>,
    version: Option<String>,
}

pub(super) async fn scan(lib: &Sidekiq, b: &RedisBackend, forced: bool) -> Result<SidekiqScan> {
    let mut cm = b.conn.get().await?;
    let (queues, procs, sets): (Vec<String>, Vec<String>, u64) = ::redis::pipe()
        .smembers(lib.key("queues"))
        .smembers(lib.key("processes"))
        .exists(vec![lib.key("dead"), lib.key("retry"), lib.key("schedule")])
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("pipeline");
    let mut version = None;
    if let Some(p) = procs.first() {
        let info: Option<String> = cm.hget(lib.key(p), "info").await.map_err(map_err)?;
        version = info
            .and_then(|i| serde_json::from_str::<serde_json::Value>(&i).ok())
            .and_then(|v| {
                v.get("version")
                    .and_then(|x| x.as_str())
                    .map(str::to_string)
            });
    }
    let mut queues = queues;
    queues.sort();
    Ok(SidekiqScan {
        present: forced || !queues.is_empty() || !procs.is_empty() || sets > 0,
        queues,
        version,
    })
}

impl Scanned for SidekiqScan {
    fn present(&self) -> bool {
        self.present
    }

    /// Sidekiq's queues (every one seen since the backend started, not only those in its
    /// `queues` set now), its morgue as their DLQ, and its retry and scheduled sets.
    fn add(self: Box<Self>, b: &RedisBackend, found: &mut Found, both: bool) {
        let lib = &b.sidekiq;
        if !self.present {
            *lock(&lib.version) = None;
            return;
        }
        let names: Vec<String> = {
            let mut seen = lock(&lib.seen);
            seen.extend(self.queues.iter().cloned());
            let mut names: Vec<String> = seen.iter().cloned().collect();
            names.sort();
            names
        };
        let dead = lib.id("dead", both);
        let shown = match &self.version {
            Some(v) => format!("Sidekiq {}", clean_short(v, 20)),
            None => "Sidekiq (version not published by its processes)".to_string(),
        };
        let mut keys = HashMap::new();
        for name in &names {
            let mut queue = entry(lib.id(name, both), &shown, None);
            queue.dlq = Some(dead.clone());
            keys.insert(queue.id.clone(), Key::Queue(name.clone()));
            found.push(queue, Flavor::Sidekiq);
        }
        let mut morgue = entry(
            dead,
            &shown,
            Some("the morgue: jobs out of retries; each goes back to its own queue"),
        );
        morgue.is_dlq = true;
        morgue.dlq_sources = names.iter().map(|n| lib.id(n, both)).collect();
        if names.is_empty() {
            morgue.settings.extra.insert(
                qdeck_model::domain::DLQ_OF.into(),
                "every Sidekiq queue (none seen yet)".into(),
            );
        }
        keys.insert(morgue.id.clone(), Key::Dead);
        found.push(morgue, Flavor::Sidekiq);
        for (short, key, holds) in [
            (
                "retry",
                Key::Retry,
                "delayed/retrying: jobs waiting for their next attempt",
            ),
            (
                "scheduled",
                Key::Schedule,
                "jobs scheduled with perform_in / perform_at",
            ),
        ] {
            let set = entry(lib.id(short, both), &shown, Some(holds));
            keys.insert(set.id.clone(), key);
            found.push(set, Flavor::Sidekiq);
        }
        lib.keys.replace(keys);
        *lock(&lib.version) = self.version;
    }
}
