//! BullMQ (Node) on Redis, read and changed through its own key schema: `<prefix>:<queue>:meta`
//! (its `version` field names the library version), the `wait`, `paused`, `prioritized`,
//! `active`, `delayed`, `failed` and `completed` keys of a queue, one hash per job. A queue's
//! id is its name; its failed set is `<name>/failed`, listed as its DLQ.

mod browse;
mod figures;
mod jobs;
mod listing;
mod mutate;
mod scripts;
mod workers;

use std::collections::HashMap;
use std::sync::Mutex;

use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::conn::Lua;
use super::library::{
    lock, Batch, DeletePlan, Due, JobLibrary, Keys, Paging, QueueOrFailed, ReadFigures, Scanned,
};
use super::{Flavor, RedisBackend, BULLMQ_TESTED_MAJOR};
use crate::{OpProgress, Result};
use qdeck_model::domain::*;

/// What a BullMQ queue id stands for.
type Key = QueueOrFailed;

struct Scripts {
    figures: Lua,
    retry: Lua,
    remove: Lua,
    remove_ids: Lua,
}

pub struct Bullmq {
    /// Key prefix without the colon (`bull`).
    prefix: String,
    scripts: Scripts,
    keys: Keys<Key>,
    /// Queue → version field of its meta hash ("bullmq:6.7.0").
    versions: Mutex<HashMap<String, String>>,
}

impl Bullmq {
    pub fn new(prefix: Option<&str>) -> Bullmq {
        Bullmq {
            prefix: prefix.unwrap_or("bull").to_string(),
            scripts: Scripts {
                figures: Lua::new(scripts::BULL_FIGURES),
                retry: Lua::new(scripts::BULL_RETRY),
                remove: Lua::new(scripts::BULL_REMOVE_BATCH),
                remove_ids: Lua::new(scripts::BULL_REMOVE_IDS),
            },
            keys: Keys::new(),
            versions: Mutex::new(HashMap::new()),
        }
    }

    /// `bull:<queue>:<suffix>`
    fn key(&self, queue: &str, suffix: &str) -> String {
        format!("{}:{}:{}", self.prefix, queue, suffix)
    }

    /// `bull:<queue>:` — job hashes are this plus the job id.
    fn job_prefix(&self, queue: &str) -> String {
        format!("{}:{}:", self.prefix, queue)
    }
}

#[async_trait]
impl JobLibrary for Bullmq {
    fn flavor(&self) -> Flavor {
        Flavor::Bullmq
    }

    async fn scan(&self, b: &RedisBackend, _forced: bool) -> Result<Box<dyn Scanned>> {
        Ok(Box::new(listing::scan(self, b).await?))
    }

    fn read_only_reason(&self, id: &QueueId) -> Option<String> {
        let key = self.keys.get(id)?;
        let versions = lock(&self.versions);
        let v = versions.get(key.name())?;
        let num = v.rsplit(':').next().unwrap_or(v);
        let lib = v.split(':').next().unwrap_or("");
        let tested = lib == "bullmq" && num.split('.').next() == Some(BULLMQ_TESTED_MAJOR);
        (!tested).then(|| {
            format!(
                "read-only: this queue was written by {}, qdeck is tested with bullmq {}.x",
                qdeck_model::sanitize::clean_short(v, 40),
                BULLMQ_TESTED_MAJOR
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
        let key = self.keys.need(id)?;
        workers::workers(self, b, id, key.name()).await
    }

    async fn browse(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Page> {
        match self.keys.need(id)? {
            Key::Queue(q) => browse::waiting(self, b, &q, at).await,
            Key::Failed(q) => browse::failed(self, b, &q, at).await,
        }
    }

    async fn scheduled(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Due> {
        let q = self.keys.scheduled_of(id)?;
        browse::delayed(self, b, &q, at).await
    }

    async fn check_redrive(&self, b: &RedisBackend, req: &RedriveRequest) -> Result<()> {
        self.keys.failed_to_own_queue(b, Flavor::Bullmq, req, |q| format!(
            "a failed BullMQ job is retried in its own queue {q:?} (Job#retry); moving it to another queue would change its id and history"
        )).await
    }

    async fn redrive_batch(&self, id: &QueueId, batch: Batch<'_>) -> Result<Value> {
        mutate::retry_batch(self, &self.keys.failed_name(id)?, batch).await
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
            key: self.key(q.name(), "failed"),
            prefix: Some(self.job_prefix(q.name())),
        })
    }
}
