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

use ::redis::aio::ConnectionManager;
use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::conn::Lua;
use super::library::{self, Batch, DeletePlan, JobLibrary, Keys, ReadFigures, Scanned};
use super::{Flavor, RedisBackend, BULLMQ_TESTED_MAJOR};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// What a BullMQ queue id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Queue(String),
    Failed(String),
}

impl Key {
    fn name(&self) -> &str {
        match self {
            Key::Queue(q) | Key::Failed(q) => q,
        }
    }
}

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

    fn versions(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let versions = self.versions();
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
        matches!(self.keys.get(id), Some(Key::Failed(_)))
    }

    fn figure_scripts(&self) -> Vec<&Lua> {
        vec![&self.scripts.figures]
    }

    fn add_figures<'a>(
        &'a self,
        b: &'a RedisBackend,
        ids: &[QueueId],
        pipe: &mut Pipeline,
    ) -> (usize, ReadFigures<'a>) {
        figures::add(self, b, ids, pipe)
    }

    async fn consumers(&self, b: &RedisBackend, id: &QueueId) -> Result<Vec<Consumer>> {
        let key = self.keys.need(id)?;
        workers::workers(self, b, id, key.name()).await
    }

    async fn browse(
        &self,
        b: &RedisBackend,
        cm: &mut ConnectionManager,
        id: &QueueId,
        at: (String, isize),
        max: isize,
    ) -> Result<Page> {
        match self.keys.need(id)? {
            Key::Queue(q) => browse::waiting(self, b, cm, &q, at, max).await,
            Key::Failed(q) => browse::failed(self, b, cm, &q, at.1, max).await,
        }
    }

    async fn scheduled(
        &self,
        b: &RedisBackend,
        cm: &mut ConnectionManager,
        id: &QueueId,
        off: isize,
        max: isize,
    ) -> Result<Vec<(Message, Option<i64>)>> {
        match self.keys.need(id)? {
            Key::Queue(q) => browse::delayed(self, b, cm, &q, off, max).await,
            Key::Failed(_) => library::unsupported(
                "failed and dead jobs are not scheduled: peek --scheduled the queue itself",
            ),
        }
    }

    async fn check_redrive(&self, b: &RedisBackend, req: &RedriveRequest) -> Result<()> {
        let Key::Failed(q) = self.keys.need(&req.source)? else {
            return Err(super::mutate::not_failed(&req.source));
        };
        if let RedriveTarget::Queue(dst) = &req.target {
            let same = b.owner(dst).await?.flavor() == Flavor::Bullmq
                && self.keys.get(dst) == Some(Key::Queue(q.clone()));
            if !same {
                return Err(BackendError::Unsupported(format!(
                    "a failed BullMQ job is retried in its own queue {q:?} (Job#retry); moving it to another queue would change its id and history"
                )));
            }
        }
        Ok(())
    }

    async fn redrive_batch(
        &self,
        _b: &RedisBackend,
        cm: &mut ConnectionManager,
        id: &QueueId,
        batch: Batch<'_>,
    ) -> Result<Value> {
        let Key::Failed(q) = self.keys.need(id)? else {
            return Err(super::mutate::not_failed(id));
        };
        mutate::retry_batch(self, cm, &q, batch).await
    }

    async fn purge(
        &self,
        b: &RedisBackend,
        cm: &mut ConnectionManager,
        id: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport> {
        let key = self.keys.need(id)?;
        let failed = matches!(key, Key::Failed(_));
        mutate::purge(self, b, cm, key.name(), failed, progress).await
    }

    fn delete_refusal(&self, id: &QueueId) -> Option<String> {
        match self.keys.get(id)? {
            Key::Queue(_) => Some(super::delete::waiting_refusal(id)),
            Key::Failed(_) => None,
        }
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
