//! Redis job queues: BullMQ, Sidekiq and RQ, read and changed through their own key schemas
//! and with their own semantics (see docs in each file and shared/brokers.md).
//!
//! Queue ids: a BullMQ queue is its name and its failed set is `<name>/failed`; a Sidekiq
//! queue is its name, its sorted sets are `dead` (the morgue, the DLQ of every queue),
//! `retry` and `scheduled`. An RQ queue is its name and its failed job registry
//! `<name>/failed`. A Celery queue (kombu's Redis transport) is its name. When several
//! libraries share the database, Sidekiq ids carry a `sidekiq/` prefix, RQ ids an `rq/` prefix
//! and Celery ids a `celery/` prefix so they never collide.

mod browse;
mod bullmq;
mod conn;
mod delete;
mod figures;
mod jobs;
mod json_text;
mod kombu;
mod library;
mod listing;
mod mutate;
mod rq;
mod scheduled;
mod sidekiq;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, RedisSettings};
use qdeck_model::domain::*;

use conn::Conn;
use library::JobLibrary;

pub async fn connect(
    profile: &Profile,
    settings: &RedisSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RedisBackend::new(
        &profile.name,
        settings,
        secrets,
    )?))
}

/// BullMQ major versions whose key schema and scripts qdeck was tested against.
pub const BULLMQ_TESTED_MAJOR: &str = "6";
/// Sidekiq major versions tested (6.4, Debian's ruby-sidekiq).
pub const SIDEKIQ_TESTED_MAJOR: &str = "6";
/// RQ major version tested (2.x, from PyPI); a worker hash names the version it runs.
pub const RQ_TESTED_MAJOR: &str = "2";

/// Why chosen Celery tasks on Redis cannot be deleted or redriven.
pub const CELERY_NO_CHOSEN: &str = "Celery on Redis: chosen tasks are not deleted or moved from kombu's lists (a worker may pop them meanwhile); only purge of the whole queue, as `celery purge`, is supported";

/// A job library this backend reads; also the routing key of a queue: which library owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    Bullmq,
    Sidekiq,
    Rq,
    Celery,
}

#[derive(Default)]
struct Cache {
    /// Which library owns each queue listed.
    owners: HashMap<QueueId, Flavor>,
    /// More than one job library here: Sidekiq, RQ and Celery ids carry their library's prefix.
    both: bool,
}

pub struct RedisBackend {
    conn: Conn,
    calls: Arc<ApiCalls>,
    flavors: Option<Vec<Flavor>>,
    cache: Mutex<Cache>,
    bullmq: bullmq::Bullmq,
    sidekiq: sidekiq::Sidekiq,
    rq: rq::Rq,
    kombu: kombu::Kombu,
}

impl RedisBackend {
    pub fn new(
        profile_name: &str,
        settings: &RedisSettings,
        secrets: &dyn SecretSource,
    ) -> Result<RedisBackend> {
        let flavors = match &settings.flavors {
            None => None,
            Some(list) => {
                let mut out = Vec::new();
                for f in list {
                    match f.to_ascii_lowercase().as_str() {
                        "bullmq" => out.push(Flavor::Bullmq),
                        "sidekiq" => out.push(Flavor::Sidekiq),
                        "rq" => out.push(Flavor::Rq),
                        "celery" => out.push(Flavor::Celery),
                        "detect" => {
                            let conn = Conn::from_settings(profile_name, settings, secrets)?;
                            return Ok(Self::build(settings, None, conn));
                        }
                        other => {
                            return Err(BackendError::Invalid(format!(
                                "flavors: unknown job library {:?} (bullmq, sidekiq, rq, celery or detect)",
                                qdeck_model::sanitize::clean_short(other, 40)
                            )))
                        }
                    }
                }
                Some(out)
            }
        };
        let conn = Conn::from_settings(profile_name, settings, secrets)?;
        Ok(Self::build(settings, flavors, conn))
    }

    fn build(settings: &RedisSettings, flavors: Option<Vec<Flavor>>, conn: Conn) -> RedisBackend {
        RedisBackend {
            conn,
            calls: Arc::new(ApiCalls::default()),
            flavors,
            cache: Mutex::new(Cache::default()),
            bullmq: bullmq::Bullmq::new(settings.prefix.as_deref()),
            sidekiq: sidekiq::Sidekiq::new(settings.namespace.as_deref()),
            rq: rq::Rq::new(),
            kombu: kombu::Kombu::new(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wants(&self, f: Flavor) -> Option<bool> {
        self.flavors.as_ref().map(|v| v.contains(&f))
    }

    /// Whether several libraries share the database (their ids then carry a prefix).
    fn both(&self) -> bool {
        self.cache().both
    }

    fn library(&self, f: Flavor) -> &dyn JobLibrary {
        match f {
            Flavor::Bullmq => &self.bullmq,
            Flavor::Sidekiq => &self.sidekiq,
            Flavor::Rq => &self.rq,
            Flavor::Celery => &self.kombu,
        }
    }

    /// Every library, in the order their queues are listed.
    fn libraries(&self) -> [&dyn JobLibrary; 4] {
        [&self.bullmq, &self.sidekiq, &self.rq, &self.kombu]
    }

    /// The library that owns a queue, as of the last listing.
    fn owner_listed(&self, id: &QueueId) -> Option<&dyn JobLibrary> {
        let f = *self.cache().owners.get(id)?;
        Some(self.library(f))
    }

    /// The library that owns a queue: from the last listing, else after listing again.
    async fn owner(&self, id: &QueueId) -> Result<&dyn JobLibrary> {
        if let Some(lib) = self.owner_listed(id) {
            return Ok(lib);
        }
        self.list_queues().await?;
        self.owner_listed(id).ok_or_else(|| {
            BackendError::NotFound(format!(
                "no BullMQ, Sidekiq, RQ or Celery queue {:?} at {} db {}",
                qdeck_model::sanitize::clean_short(id.as_str(), 80),
                self.conn.display,
                self.conn.db()
            ))
        })
    }

    /// The owner of a queue that may be changed: refused when its library version is untested.
    async fn owner_to_change(&self, id: &QueueId) -> Result<&dyn JobLibrary> {
        let lib = self.owner(id).await?;
        match lib.read_only_reason(id) {
            Some(r) => Err(BackendError::Refused(r)),
            None => Ok(lib),
        }
    }
}

#[async_trait]
impl Backend for RedisBackend {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Redis
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::None,
            redrive: RedriveMode::ClientSide,
            age: AgeSource::Exact,
            consumers: ConsumerListing::Listed,
            purge_cooldown_secs: None,
            purge_note: Some(
                "BullMQ: drain removes waiting and prioritized jobs with their job hashes (active and delayed jobs stay); on <queue>/failed it cleans the failed set. Sidekiq: clears the queue list or the sorted set. RQ: empties the queue or its failed registry, job hashes and results with them. Celery: empties every priority list of the queue (kombu's _purge); tasks in unacked stay".into(),
            ),
            broker_rates: false,
            notes: vec![
                "browse reads lists, sorted sets and job hashes only: nothing changes".into(),
                "redrive is the library's own retry (BullMQ Job#retry, Sidekiq DeadSet#retry, RQ FailedJobRegistry#requeue) run by qdeck as one atomic Lua script per batch: a job is never in both places nor in neither".into(),
                "payloads that are not JSON (e.g. pickled RQ jobs) are never decoded or unpickled: a pickled RQ job shows its description and its size".into(),
                "RQ keeps no per-queue processed or failed counter: rates come from depth changes; each worker's own counts are on the workers view".into(),
                "Celery (kombu's Redis transport): depth is the sum of the queue's priority lists, in flight the `unacked` entries routed to it (those with an eta still to come are delayed: a worker holds them until due), plus the tasks workers run that were acknowledged when they started when the workers were asked in the last 10 s (workers view, consumers); kombu records no send time, so age of oldest is known only from an eta; purge empties every priority list at once as kombu's `_purge` (messages workers hold in `unacked` stay); chosen tasks are not deleted or moved".into(),
                "Celery's failed tasks on Redis: Celery keeps no dead-letter queue here; where the result backend is this Redis database, its FAILURE results are the read-only queue celery-results/failed (traceback, reasons by task and exception); nothing there can be resent".into(),
                "Celery workers are asked through Celery's own remote control (the pidbox mailbox, as `celery inspect` and Flower do): one broadcast of the read-only commands stats, active, reserved, scheduled and active_queues, answered within 1.5 s; a worker that does not answer is listed with a note".into(),
            ],
        }
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut caps = self.capabilities();
        if let Some(lib) = self.owner_listed(&queue.id) {
            lib.queue_caps(&queue.id, &mut caps);
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        listing::list(self).await
    }

    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        self.owner(queue).await?;
        crate::find_listed(self, queue).await
    }

    /// Exact: the figures are the lengths of the job library's own keys.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        crate::count_from_stats(self, queue, true).await
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        figures::stats(self, queues).await
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        self.owner(queue).await?.consumers(self, queue).await
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing> {
        Some(self)
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        mutate::redrive(self, req, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        mutate::purge(self, queue, progress).await
    }

    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }

    fn celery_remote(&self) -> Option<&dyn crate::CeleryRemote> {
        Some(self)
    }
}

#[async_trait]
impl crate::CeleryRemote for RedisBackend {
    async fn workers(&self) -> Result<crate::celery::workers::WorkerReport> {
        self.kombu.report(self).await
    }

    async fn control(
        &self,
        req: &crate::celery::workers::Request,
    ) -> Result<crate::celery::workers::WorkerReport> {
        self.kombu.control(self, req).await
    }
}

#[async_trait]
impl crate::ScheduledListing for RedisBackend {
    async fn browse_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        scheduled::browse_scheduled(self, queue, req).await
    }

    async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        crate::cancel_by_delete(self, queue, id, progress).await
    }
}

#[async_trait]
impl DeleteById for RedisBackend {
    fn delete_refusal(&self, queue: &QueueInfo) -> Option<String> {
        self.owner_listed(&queue.id)?.delete_refusal(&queue.id)
    }

    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        delete::delete_ids(self, queue, ids, progress).await
    }
}
