//! Sidekiq (Ruby) on Redis, read and changed through its own key schema (with its optional
//! namespace): the `queues` set and `queue:<name>` lists, the sorted sets `dead` (the morgue,
//! the DLQ of every queue), `retry` and `schedule`, the `processes` set with each process's
//! heartbeat. A queue's id is its name; the sets are the queues `dead`, `retry` and
//! `scheduled`. With other libraries in the database the ids carry a `sidekiq/` prefix.

mod browse;
mod figures;
mod jobs;
mod listing;
mod mutate;
mod scripts;
mod workers;

use std::collections::HashSet;
use std::sync::Mutex;

use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::conn::Lua;
use super::library::{
    self, lock, Batch, DeletePlan, Due, JobLibrary, Keys, Paging, ReadFigures, Scanned,
};
use super::{Flavor, RedisBackend, SIDEKIQ_TESTED_MAJOR};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// What a Sidekiq queue id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Queue(String),
    Dead,
    Retry,
    Schedule,
}

impl Key {
    /// The sorted set's key name, for the sets.
    fn set(&self) -> Option<&'static str> {
        match self {
            Key::Queue(_) => None,
            Key::Dead => Some("dead"),
            Key::Retry => Some("retry"),
            Key::Schedule => Some("schedule"),
        }
    }
}

struct Scripts {
    retry: Lua,
    remove: Lua,
}

pub struct Sidekiq {
    /// Key prefix: `""` or `namespace:`.
    ns: String,
    scripts: Scripts,
    keys: Keys<Key>,
    /// The version a process heartbeat says, when one says it.
    version: Mutex<Option<String>>,
    /// Queues this backend has seen: one just cleared (Sidekiq::Queue#clear drops it from the
    /// `queues` set) still answers with depth 0 instead of "unknown".
    seen: Mutex<HashSet<String>>,
}

impl Sidekiq {
    pub fn new(namespace: Option<&str>) -> Sidekiq {
        Sidekiq {
            ns: match namespace {
                None | Some("") => String::new(),
                Some(n) => format!("{n}:"),
            },
            scripts: Scripts {
                retry: Lua::new(scripts::SIDEKIQ_RETRY),
                remove: Lua::new(scripts::SIDEKIQ_REMOVE_JIDS),
            },
            keys: Keys::new(),
            version: Mutex::new(None),
            seen: Mutex::new(HashSet::new()),
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{}", self.ns, key)
    }

    fn id(&self, name: &str, both: bool) -> QueueId {
        if both {
            QueueId::new(format!("sidekiq/{name}"))
        } else {
            QueueId::new(name)
        }
    }
}

#[async_trait]
impl JobLibrary for Sidekiq {
    fn flavor(&self) -> Flavor {
        Flavor::Sidekiq
    }

    async fn scan(&self, b: &RedisBackend, forced: bool) -> Result<Box<dyn Scanned>> {
        Ok(Box::new(listing::scan(self, b, forced).await?))
    }

    fn read_only_reason(&self, id: &QueueId) -> Option<String> {
        self.keys.get(id)?;
        let v = lock(&self.version).clone()?;
        (v.split('.').next() != Some(SIDEKIQ_TESTED_MAJOR)).then(|| {
            format!(
                "read-only: a Sidekiq {} process runs here, qdeck is tested with Sidekiq {}.x",
                qdeck_model::sanitize::clean_short(&v, 20),
                SIDEKIQ_TESTED_MAJOR
            )
        })
    }

    fn redrives_from(&self, id: &QueueId) -> bool {
        matches!(self.keys.get(id), Some(Key::Dead | Key::Retry))
    }

    fn add_figures<'a>(&'a self, ids: &[QueueId], pipe: &mut Pipeline) -> (usize, ReadFigures<'a>) {
        figures::add(self, ids, pipe)
    }

    async fn consumers(&self, b: &RedisBackend, id: &QueueId) -> Result<Vec<Consumer>> {
        match self.keys.need(id)? {
            Key::Queue(q) => workers::processes(self, b, id, Some(&q)).await,
            _ => workers::processes(self, b, id, None).await,
        }
    }

    async fn browse(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Page> {
        browse::page(self, b, &self.keys.need(id)?, at).await
    }

    async fn scheduled(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Due> {
        match self.keys.need(id)? {
            Key::Queue(_) => library::unsupported(
                "Sidekiq keeps the scheduled jobs of every queue in one set: peek the `scheduled` queue",
            ),
            Key::Dead => library::unsupported(
                "failed and dead jobs are not scheduled: peek --scheduled the queue itself",
            ),
            // The retry set is scored by the next retry time, like `schedule` by the due time.
            set @ (Key::Retry | Key::Schedule) => browse::due(self, b, &set, at).await,
        }
    }

    async fn check_redrive(&self, b: &RedisBackend, req: &RedriveRequest) -> Result<()> {
        if !self.redrives_from(&req.source) {
            return Err(super::mutate::not_failed(&req.source));
        }
        if let RedriveTarget::Queue(dst) = &req.target {
            b.owner(dst).await?;
            return Err(BackendError::Unsupported(
                "Sidekiq retries each job to its own queue (the queue in its payload); choose target origin".into(),
            ));
        }
        Ok(())
    }

    async fn redrive_batch(&self, id: &QueueId, batch: Batch<'_>) -> Result<Value> {
        match self.keys.need(id)?.set() {
            Some(set @ ("dead" | "retry")) => mutate::retry_batch(self, set, batch).await,
            _ => Err(super::mutate::not_failed(id)),
        }
    }

    async fn purge(&self, b: &RedisBackend, id: &QueueId, p: &OpProgress) -> Result<PurgeReport> {
        mutate::purge(self, b, &self.keys.need(id)?, p).await
    }

    fn delete_refusal(&self, id: &QueueId) -> Option<String> {
        match self.keys.get(id)? {
            Key::Queue(_) => Some(super::delete::waiting_refusal(id)),
            _ => None,
        }
    }

    fn delete_plan(&self, id: &QueueId) -> Result<DeletePlan<'_>> {
        let set = self.keys.need(id)?.set().unwrap_or("schedule");
        Ok(DeletePlan {
            script: &self.scripts.remove,
            key: self.key(set),
            prefix: None,
        })
    }
}
