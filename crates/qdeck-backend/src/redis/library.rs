//! The job-library trait: what each library on this Redis database (BullMQ, Sidekiq, RQ,
//! Celery on kombu) answers for the queues it owns. Each lives in its own folder with its key
//! names, scripts and JSON shapes; the `Backend` impl finds the library that owns a queue
//! (`RedisBackend::owner`) and asks it. The shared plumbing (paging, batching, pacing,
//! progress) stays in the redis/ root and calls these methods for the library's part.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use ::redis::aio::ConnectionManager;
use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::conn::Lua;
use super::listing::Found;
use super::{Flavor, RedisBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// What one library found in the database. Ids are given only once every library has looked,
/// since they carry a library prefix when several share the database.
pub(super) trait Scanned: Send {
    /// Whether the library counts as present here (for the prefixes).
    fn present(&self) -> bool;
    /// Lists its queues into `found`, and remembers what each id is.
    fn add(self: Box<Self>, b: &RedisBackend, found: &mut Found, both: bool);
}

/// Reads a library's replies from the figures pipeline (its part, in the order it added them).
pub(super) type ReadFigures<'a> = Box<dyn FnOnce(&[Value], i64, &mut StatsBatch) + Send + 'a>;

/// Where chosen jobs are deleted from: a script that removes the ids given (after the
/// optional job-hash prefix) from `key`.
pub(super) struct DeletePlan<'a> {
    pub script: &'a Lua,
    pub key: String,
    pub prefix: Option<String>,
}

/// One redrive batch's reply is `{moved, skipped}`; `skip` is how many unreadable jobs earlier
/// batches left at the head (RQ starts after them).
pub(super) struct Batch<'a> {
    pub cm: &'a mut ConnectionManager,
    pub n: u64,
    pub skip: u64,
    pub ids: &'a [String],
}

/// Where a page starts: the cursor's part (a library's own tag, empty at the start), the
/// offset in it, and how many at most.
pub(super) struct Paging {
    pub part: String,
    pub off: isize,
    pub max: isize,
}

/// Jobs waiting for their time, each with its due time (ms).
pub(super) type Due = Vec<(Message, Option<i64>)>;

#[async_trait]
pub(super) trait JobLibrary: Send + Sync {
    fn flavor(&self) -> Flavor;

    /// Looks for the library's keys; `forced` when the profile names the library.
    async fn scan(&self, b: &RedisBackend, forced: bool) -> Result<Box<dyn Scanned>>;

    /// Why a queue is read-only here (an untested library version), if it is.
    fn read_only_reason(&self, _id: &QueueId) -> Option<String> {
        None
    }

    /// Whether a redrive may start from this queue (a failed, retry or dead set).
    fn redrives_from(&self, _id: &QueueId) -> bool {
        false
    }

    /// The queue's own capabilities, from the backend's.
    fn queue_caps(&self, id: &QueueId, caps: &mut Capabilities) {
        if let Some(reason) = self.read_only_reason(id) {
            caps.redrive = RedriveMode::Unsupported(reason.clone());
            caps.notes.push(reason);
        } else if !self.redrives_from(id) {
            caps.redrive = RedriveMode::Unsupported(
                "redrive starts from a failed set, the retry set or the dead set".into(),
            );
        }
    }

    /// The scripts its figures run (loaded again when Redis has lost them).
    fn figure_scripts(&self) -> Vec<&Lua> {
        Vec::new()
    }

    /// Adds the figures of `ids` to the shared pipeline: how many replies they give, and
    /// what reads them.
    fn add_figures<'a>(&'a self, ids: &[QueueId], pipe: &mut Pipeline) -> (usize, ReadFigures<'a>);

    /// Figures that are not read through the pipeline, after it.
    async fn figures_after(&self, _b: &RedisBackend, _ids: &[QueueId], _batch: &mut StatsBatch) {}

    async fn consumers(&self, b: &RedisBackend, id: &QueueId) -> Result<Vec<Consumer>>;

    async fn browse(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Page>;

    async fn scheduled(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Due>;

    /// Refuses a redrive the library does not do.
    async fn check_redrive(&self, b: &RedisBackend, req: &RedriveRequest) -> Result<()>;

    /// One redrive batch, atomic on the server.
    async fn redrive_batch(&self, id: &QueueId, batch: Batch<'_>) -> Result<Value>;

    async fn purge(&self, b: &RedisBackend, id: &QueueId, p: &OpProgress) -> Result<PurgeReport>;

    /// Why deleting chosen jobs is refused on the queue, when it is.
    fn delete_refusal(&self, id: &QueueId) -> Option<String>;

    fn delete_plan(&self, id: &QueueId) -> Result<DeletePlan<'_>>;
}

/// A lock that a panic elsewhere does not make unusable (what it guards stays consistent:
/// each write replaces a whole value).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A library's own map from queue ids to its keys, replaced at each listing.
pub(super) struct Keys<K>(Mutex<HashMap<QueueId, K>>);

impl<K: Clone> Keys<K> {
    pub fn new() -> Self {
        Keys(Mutex::new(HashMap::new()))
    }

    pub fn get(&self, id: &QueueId) -> Option<K> {
        lock(&self.0).get(id).cloned()
    }

    /// The key of a queue the backend routed here; gone only if a listing meanwhile dropped it.
    pub fn need(&self, id: &QueueId) -> Result<K> {
        self.get(id).ok_or_else(|| {
            BackendError::NotFound(format!(
                "queue {:?} is gone since the last listing",
                qdeck_model::sanitize::clean_short(id.as_str(), 80)
            ))
        })
    }

    pub fn replace(&self, keys: HashMap<QueueId, K>) {
        *lock(&self.0) = keys;
    }
}

/// What a BullMQ or RQ id stands for: a queue, or its failed set or registry (its DLQ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum QueueOrFailed {
    Queue(String),
    Failed(String),
}

impl QueueOrFailed {
    pub fn name(&self) -> &str {
        match self {
            QueueOrFailed::Queue(q) | QueueOrFailed::Failed(q) => q,
        }
    }

    pub fn failed(&self) -> bool {
        matches!(self, QueueOrFailed::Failed(_))
    }
}

impl Keys<QueueOrFailed> {
    /// The failed set a redrive starts from, when the target is its own queue (a library that
    /// retries a job where it came from); `why` names the library's rule otherwise.
    pub async fn failed_to_own_queue(
        &self,
        b: &RedisBackend,
        lib: Flavor,
        req: &RedriveRequest,
        why: impl Fn(&str) -> String + Send,
    ) -> Result<()> {
        let QueueOrFailed::Failed(q) = self.need(&req.source)? else {
            return Err(super::mutate::not_failed(&req.source));
        };
        if let RedriveTarget::Queue(dst) = &req.target {
            let own = b.owner(dst).await?.flavor() == lib
                && self.get(dst) == Some(QueueOrFailed::Queue(q.clone()));
            if !own {
                return Err(BackendError::Unsupported(why(&q)));
            }
        }
        Ok(())
    }

    /// The name of the failed set a batch runs on.
    pub fn failed_name(&self, id: &QueueId) -> Result<String> {
        match self.need(id)? {
            QueueOrFailed::Failed(q) => Ok(q),
            QueueOrFailed::Queue(_) => Err(super::mutate::not_failed(id)),
        }
    }

    /// Whether the id is a failed set (where a redrive starts).
    pub fn is_failed(&self, id: &QueueId) -> bool {
        self.get(id).is_some_and(|k| k.failed())
    }

    /// The queue whose scheduled jobs are listed: a failed set has none.
    pub fn scheduled_of(&self, id: &QueueId) -> Result<String> {
        match self.need(id)? {
            QueueOrFailed::Queue(q) => Ok(q),
            QueueOrFailed::Failed(_) => unsupported(
                "failed and dead jobs are not scheduled: peek --scheduled the queue itself",
            ),
        }
    }

    /// Chosen jobs are deleted from the failed set only.
    pub fn failed_only(&self, id: &QueueId) -> Option<String> {
        match self.get(id)? {
            QueueOrFailed::Queue(_) => Some(super::delete::waiting_refusal(id)),
            QueueOrFailed::Failed(_) => None,
        }
    }
}

/// A refusal of `what` on a queue that does not hold that kind of job.
pub(super) fn unsupported<T>(what: &str) -> Result<T> {
    Err(BackendError::Unsupported(what.into()))
}

/// Removes whole batches with `script` (which answers how many it removed) until none is
/// left or the operation is cancelled: how many, and whether it was cancelled.
pub(super) async fn remove_batches(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    script: &Lua,
    key: &str,
    args: &[String],
    progress: &OpProgress,
) -> Result<(u64, bool)> {
    let mut purged = 0u64;
    loop {
        if progress.cancelled() {
            return Ok((purged, true));
        }
        let v = script.run(cm, &[key.to_string()], args).await?;
        b.calls.bump("purge batch");
        let n = super::figures::as_i64(&v).unwrap_or(0).max(0) as u64;
        purged += n;
        progress.add_done(n);
        if n == 0 {
            return Ok((purged, false));
        }
    }
}

/// A purge's report from `remove_batches`' answer.
pub(super) fn purged(n: u64, cancelled: bool, note: &str) -> PurgeReport {
    PurgeReport {
        purged: Some(n),
        note: Some(if cancelled { "cancelled" } else { note }.into()),
    }
}
