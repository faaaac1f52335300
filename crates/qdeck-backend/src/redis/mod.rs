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
mod celery_results;
mod conn;
mod delete;
mod figures;
mod jobs;
mod json_text;
mod kombu;
mod listing;
mod mutate;
mod rq;
mod scheduled;
mod scripts;
mod workers;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, RedisSettings};
use qdeck_model::domain::*;

use conn::{Conn, Lua};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Bullmq,
    Sidekiq,
    Rq,
    Celery,
}

/// What a queue id points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Bull(String),
    BullFailed(String),
    SkQueue(String),
    SkDead,
    SkRetry,
    SkSchedule,
    /// An RQ queue (`rq:queue:<name>`) and its failed job registry (`rq:failed:<name>`).
    Rq(String),
    RqFailed(String),
    /// A Celery queue on kombu's Redis transport: its lists, one per priority step.
    Celery(String),
    /// The FAILURE results of Celery's Redis result backend (`celery-task-meta-*`).
    CeleryResults,
}

#[derive(Default)]
struct Cache {
    ids: HashMap<QueueId, Target>,
    /// BullMQ queue → version field of its meta hash ("bullmq:6.7.0").
    bull_versions: HashMap<String, String>,
    /// Sidekiq version seen in a process heartbeat, when a process says it.
    sidekiq_version: Option<String>,
    /// RQ version a worker hash names, when a worker is registered.
    rq_version: Option<String>,
    /// More than one job library here: Sidekiq and RQ ids carry their library's prefix.
    both: bool,
}

struct Scripts {
    bull_figures: Lua,
    bull_retry: Lua,
    bull_remove: Lua,
    bull_remove_ids: Lua,
    sidekiq_retry: Lua,
    sidekiq_remove: Lua,
    rq_figures: Lua,
    rq_requeue: Lua,
    rq_remove: Lua,
    rq_remove_ids: Lua,
}

pub struct RedisBackend {
    conn: Conn,
    calls: Arc<ApiCalls>,
    flavors: Option<Vec<Flavor>>,
    /// BullMQ key prefix without the colon (`bull`).
    bull_prefix: String,
    /// Sidekiq key prefix: `""` or `namespace:`.
    sk_ns: String,
    scripts: Scripts,
    cache: Mutex<Cache>,
    /// Sidekiq queues this backend has seen: one just cleared (Sidekiq::Queue#clear drops
    /// it from the `queues` set) still answers with depth 0 instead of "unknown".
    sk_seen: Mutex<HashSet<String>>,
    /// The last discovery of Celery workers (remote control), reused while fresh.
    celery_workers:
        tokio::sync::Mutex<Option<(std::time::Instant, crate::celery::workers::WorkerReport)>>,
    /// The last scan of Celery's results (figures reuse it while fresh: a scan reads every
    /// result key).
    results_scan: tokio::sync::Mutex<Option<(std::time::Instant, Arc<celery_results::Scan>)>>,
}

/// A discovery of Celery workers younger than this answers again (figures, consumers and the
/// detail of one refresh share one broadcast).
const WORKERS_FRESH: std::time::Duration = std::time::Duration::from_secs(3);

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
                            return Self::build(settings, None, conn);
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
        Self::build(settings, flavors, conn)
    }

    fn build(
        settings: &RedisSettings,
        flavors: Option<Vec<Flavor>>,
        conn: Conn,
    ) -> Result<RedisBackend> {
        let bull_prefix = settings
            .prefix
            .clone()
            .unwrap_or_else(|| "bull".to_string());
        let sk_ns = match settings.namespace.as_deref() {
            None | Some("") => String::new(),
            Some(n) => format!("{n}:"),
        };
        Ok(RedisBackend {
            conn,
            calls: Arc::new(ApiCalls::default()),
            flavors,
            bull_prefix,
            sk_ns,
            scripts: Scripts {
                bull_figures: Lua::new(scripts::BULL_FIGURES),
                bull_retry: Lua::new(scripts::BULL_RETRY),
                bull_remove: Lua::new(scripts::BULL_REMOVE_BATCH),
                bull_remove_ids: Lua::new(scripts::BULL_REMOVE_IDS),
                sidekiq_retry: Lua::new(scripts::SIDEKIQ_RETRY),
                sidekiq_remove: Lua::new(scripts::SIDEKIQ_REMOVE_JIDS),
                rq_figures: Lua::new(rq::scripts::RQ_FIGURES),
                rq_requeue: Lua::new(rq::scripts::RQ_REQUEUE),
                rq_remove: Lua::new(&rq::scripts::rq_remove_batch()),
                rq_remove_ids: Lua::new(&rq::scripts::rq_remove_ids()),
            },
            cache: Mutex::new(Cache::default()),
            sk_seen: Mutex::new(HashSet::new()),
            celery_workers: tokio::sync::Mutex::new(None),
            results_scan: tokio::sync::Mutex::new(None),
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wants(&self, f: Flavor) -> Option<bool> {
        self.flavors.as_ref().map(|v| v.contains(&f))
    }

    /// `bull:<queue>:<suffix>`
    pub fn bkey(&self, queue: &str, suffix: &str) -> String {
        format!("{}:{}:{}", self.bull_prefix, queue, suffix)
    }

    /// `bull:<queue>:` — job hashes are this plus the job id.
    pub fn bjob_prefix(&self, queue: &str) -> String {
        format!("{}:{}:", self.bull_prefix, queue)
    }

    pub fn skey(&self, key: &str) -> String {
        format!("{}{}", self.sk_ns, key)
    }

    pub fn sk_id(&self, name: &str, both: bool) -> QueueId {
        if both {
            QueueId::new(format!("sidekiq/{name}"))
        } else {
            QueueId::new(name)
        }
    }

    /// An RQ queue's id, and its failed registry's (`<id>/failed`).
    pub fn rq_id(&self, name: &str, both: bool, failed: bool) -> QueueId {
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

    /// A Celery queue's id.
    pub fn celery_id(&self, name: &str, both: bool) -> QueueId {
        QueueId::new(if both {
            format!("celery/{name}")
        } else {
            name.to_string()
        })
    }

    pub fn sk_dead_id(&self) -> QueueId {
        let both = self.cache().both;
        self.sk_id("dead", both)
    }

    /// What an id points at: from the last listing, else after listing again.
    pub async fn resolve(&self, id: &QueueId) -> Result<Target> {
        if let Some(t) = self.cache().ids.get(id) {
            return Ok(t.clone());
        }
        self.list_queues().await?;
        self.cache().ids.get(id).cloned().ok_or_else(|| {
            BackendError::NotFound(format!(
                "no BullMQ, Sidekiq, RQ or Celery queue {:?} at {} db {}",
                qdeck_model::sanitize::clean_short(id.as_str(), 80),
                self.conn.display,
                self.conn.db()
            ))
        })
    }

    /// Why a queue is read-only here (an untested library version), if it is.
    pub fn read_only_reason(&self, t: &Target) -> Option<String> {
        let c = self.cache();
        match t {
            Target::Bull(q) | Target::BullFailed(q) => {
                let v = c.bull_versions.get(q)?;
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
            Target::Rq(_) | Target::RqFailed(_) => {
                let v = c.rq_version.as_ref()?;
                (v.split('.').next() != Some(RQ_TESTED_MAJOR)).then(|| {
                    format!(
                        "read-only: an RQ {} worker runs here, qdeck is tested with RQ {}.x",
                        qdeck_model::sanitize::clean_short(v, 20),
                        RQ_TESTED_MAJOR
                    )
                })
            }
            _ => {
                let v = c.sidekiq_version.as_ref()?;
                (v.split('.').next() != Some(SIDEKIQ_TESTED_MAJOR)).then(|| {
                    format!(
                        "read-only: a Sidekiq {} process runs here, qdeck is tested with Sidekiq {}.x",
                        qdeck_model::sanitize::clean_short(v, 20),
                        SIDEKIQ_TESTED_MAJOR
                    )
                })
            }
        }
    }

    /// Celery's workers from a discovery at most `WORKERS_FRESH` old; one discovery at a
    /// time (callers meanwhile wait for its answer rather than broadcast again).
    pub async fn celery_report(&self) -> Result<crate::celery::workers::WorkerReport> {
        if self.wants(Flavor::Celery) == Some(false) {
            return Err(BackendError::Unsupported(
                "this profile's flavors leave Celery out: its workers are not asked".into(),
            ));
        }
        let mut slot = self.celery_workers.lock().await;
        if let Some((at, r)) = slot.as_ref() {
            if at.elapsed() < WORKERS_FRESH {
                return Ok(r.clone());
            }
        }
        let r = kombu::pidbox::discover(self).await?;
        *slot = Some((std::time::Instant::now(), r.clone()));
        Ok(r)
    }

    /// The last discovery, when it is at most `HELD_FRESH` old (figures never broadcast by
    /// themselves: they stay one round trip).
    pub async fn celery_report_cached(&self) -> Option<crate::celery::workers::WorkerReport> {
        let slot = self.celery_workers.lock().await;
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < crate::celery::workers::HELD_FRESH)
            .map(|(_, r)| r.clone())
    }

    fn refuse_if_read_only(&self, t: &Target) -> Result<()> {
        match self.read_only_reason(t) {
            Some(r) => Err(BackendError::Refused(r)),
            None => Ok(()),
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
        let target = self.cache().ids.get(&queue.id).cloned();
        if let Some(Target::Celery(_)) = &target {
            caps.age = AgeSource::Unknown(
                "kombu and Celery record no send time: the head task's age is known only from an eta that has passed".into(),
            );
        }
        if let Some(Target::CeleryResults) = &target {
            caps.redrive = RedriveMode::Unsupported(celery_results::READ_ONLY.into());
            caps.age = AgeSource::Exact;
            caps.notes.push(format!(
                "{}: the FAILURE results of Celery's Redis result backend (celery-task-meta-*), Celery's failed view where it keeps no DLQ; read-only: {}",
                celery_results::RESULTS_ID,
                celery_results::READ_ONLY
            ));
            return caps;
        }
        if let Some(t) = target {
            if let Some(reason) = self.read_only_reason(&t) {
                caps.redrive = RedriveMode::Unsupported(reason.clone());
                caps.notes.push(reason);
            } else if let Target::Celery(_) = t {
                caps.redrive = RedriveMode::Unsupported(
                    "Celery keeps no dead-letter list on Redis: nothing to redrive".into(),
                );
            } else if matches!(
                t,
                Target::Bull(_) | Target::SkQueue(_) | Target::SkSchedule | Target::Rq(_)
            ) {
                caps.redrive = RedriveMode::Unsupported(
                    "redrive starts from a failed set, the retry set or the dead set".into(),
                );
            }
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        listing::list(self).await
    }

    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        self.resolve(queue).await?;
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
        workers::consumers(self, queue).await
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
        self.celery_report().await
    }

    async fn control(
        &self,
        req: &crate::celery::workers::Request,
    ) -> Result<crate::celery::workers::WorkerReport> {
        let r = kombu::pidbox::control(self, req).await;
        // What the workers hold may have changed: the next look asks again.
        *self.celery_workers.lock().await = None;
        r
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
        let t = self.cache().ids.get(&queue.id).cloned();
        delete::refusal(&queue.id, t.as_ref())
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
