//! RQ (Python) on Redis, read and changed through its own key schema (`rq:queue:`, `rq:job:`,
//! registries): listing, figures, browse, workers, requeue and purge, one concern a file. A
//! queue's id is its name and its failed job registry's `<name>/failed`; with other libraries
//! in the database the ids carry an `rq/` prefix.

pub mod browse;
pub mod figures;
pub mod jobs;
pub mod listing;
pub mod mutate;
pub mod scripts;
pub mod workers;

use std::sync::Mutex;

use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::conn::Lua;
use super::library::{
    lock, Batch, DeletePlan, Due, JobLibrary, Keys, Paging, QueueOrFailed, ReadFigures, Scanned,
};
use super::{Flavor, RedisBackend, RQ_TESTED_MAJOR};
use crate::{OpProgress, Result};
use qdeck_model::domain::*;

/// What an RQ queue id stands for: a queue (`rq:queue:<name>`) or its failed job registry
/// (`rq:failed:<name>`).
type Key = QueueOrFailed;

struct Scripts {
    figures: Lua,
    requeue: Lua,
    remove: Lua,
    remove_ids: Lua,
}

pub struct Rq {
    scripts: Scripts,
    keys: Keys<Key>,
    /// The RQ version a worker hash names, when a worker is registered.
    version: Mutex<Option<String>>,
}

impl Rq {
    pub fn new() -> Rq {
        Rq {
            scripts: Scripts {
                figures: Lua::new(scripts::RQ_FIGURES),
                requeue: Lua::new(scripts::RQ_REQUEUE),
                remove: Lua::new(&scripts::rq_remove_batch()),
                remove_ids: Lua::new(&scripts::rq_remove_ids()),
            },
            keys: Keys::new(),
            version: Mutex::new(None),
        }
    }

    /// A queue's id, and its failed registry's (`<id>/failed`).
    fn id(&self, name: &str, both: bool, failed: bool) -> QueueId {
        let base = if both {
            format!("rq/{name}")
        } else {
            name.to_string()
        };
        QueueId::new(if failed {
            format!("{base}/failed")
        } else {
            base
        })
    }
}

#[async_trait]
impl JobLibrary for Rq {
    fn flavor(&self) -> Flavor {
        Flavor::Rq
    }

    async fn scan(&self, b: &RedisBackend, forced: bool) -> Result<Box<dyn Scanned>> {
        Ok(Box::new(listing::scan(b, forced).await?))
    }

    fn read_only_reason(&self, id: &QueueId) -> Option<String> {
        self.keys.get(id)?;
        let v = lock(&self.version).clone()?;
        (v.split('.').next() != Some(RQ_TESTED_MAJOR)).then(|| {
            format!(
                "read-only: an RQ {} worker runs here, qdeck is tested with RQ {}.x",
                qdeck_model::sanitize::clean_short(&v, 20),
                RQ_TESTED_MAJOR
            )
        })
    }

    fn redrives_from(&self, id: &QueueId) -> bool {
        self.keys.is_failed(id)
    }

    fn figure_scripts(&self) -> Vec<&Lua> {
        vec![&self.scripts.figures]
    }

    fn add_figures<'a>(&'a self, ids: &[QueueId], pipe: &mut Pipeline) -> (usize, ReadFigures<'a>) {
        figures::add(self, ids, pipe)
    }

    async fn consumers(&self, b: &RedisBackend, id: &QueueId) -> Result<Vec<Consumer>> {
        workers::workers(b, id, self.keys.need(id)?.name()).await
    }

    async fn browse(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Page> {
        let key = self.keys.need(id)?;
        browse::page(b, key.name(), key.failed(), at).await
    }

    async fn scheduled(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Due> {
        let q = self.keys.scheduled_of(id)?;
        browse::scheduled(b, &q, at).await
    }

    async fn check_redrive(&self, b: &RedisBackend, req: &RedriveRequest) -> Result<()> {
        self.keys.failed_to_own_queue(b, Flavor::Rq, req, |q| format!(
            "RQ requeues a failed job to its origin queue {q:?} (FailedJobRegistry#requeue); choose target origin"
        )).await
    }

    async fn redrive_batch(&self, id: &QueueId, batch: Batch<'_>) -> Result<Value> {
        mutate::requeue_batch(self, &self.keys.failed_name(id)?, batch).await
    }

    async fn purge(&self, b: &RedisBackend, id: &QueueId, p: &OpProgress) -> Result<PurgeReport> {
        let key = self.keys.need(id)?;
        mutate::purge(self, b, key.name(), key.failed(), p).await
    }

    fn delete_refusal(&self, id: &QueueId) -> Option<String> {
        self.keys.failed_only(id)
    }

    fn delete_plan(&self, id: &QueueId) -> Result<DeletePlan<'_>> {
        let q = self.keys.need(id)?;
        Ok(DeletePlan {
            script: &self.scripts.remove_ids,
            key: listing::registry_key("failed", q.name()),
            prefix: Some(listing::JOB_PREFIX.to_string()),
        })
    }
}
