//! Celery's queues on kombu's Redis transport: listing by kombu's binding tables, figures,
//! browse, the message envelope, remote control through the pidbox, and the failed results of
//! Celery's Redis result backend. A queue's id is its name (with other libraries in the
//! database, a `celery/` prefix); the results are the read-only queue `celery-results/failed`.
//! Celery keeps no dead-letter list on Redis: nothing here is redriven or deleted by choice.

pub mod browse;
pub mod envelope;
pub mod figures;
pub mod listing;
pub mod pidbox;
pub mod results;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::{Pipeline, Value};
use async_trait::async_trait;

use super::library::{
    self, Batch, DeletePlan, Due, JobLibrary, Keys, Paging, ReadFigures, Scanned,
};
use super::{Flavor, RedisBackend, CELERY_NO_CHOSEN};
use crate::celery::workers::{Request, WorkerReport, HELD_FRESH};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// A discovery of Celery workers younger than this answers again (figures, consumers and the
/// detail of one refresh share one broadcast).
const WORKERS_FRESH: Duration = Duration::from_secs(3);

/// What a Celery id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A queue: its lists, one per priority step.
    Queue(String),
    /// The FAILURE results of Celery's Redis result backend (`celery-task-meta-*`).
    Results,
}

pub struct Kombu {
    keys: Keys<Key>,
    /// The last discovery of Celery workers (remote control), reused while fresh.
    workers: tokio::sync::Mutex<Option<(Instant, WorkerReport)>>,
    /// The last scan of Celery's results (figures reuse it while fresh: a scan reads every
    /// result key).
    results_scan: tokio::sync::Mutex<Option<(Instant, Arc<results::Scan>)>>,
}

impl Kombu {
    pub fn new() -> Kombu {
        Kombu {
            keys: Keys::new(),
            workers: tokio::sync::Mutex::new(None),
            results_scan: tokio::sync::Mutex::new(None),
        }
    }

    fn id(&self, name: &str, both: bool) -> QueueId {
        QueueId::new(if both {
            format!("celery/{name}")
        } else {
            name.to_string()
        })
    }

    /// Celery's workers from a discovery at most `WORKERS_FRESH` old; one discovery at a
    /// time (callers meanwhile wait for its answer rather than broadcast again).
    pub async fn report(&self, b: &RedisBackend) -> Result<WorkerReport> {
        if b.wants(Flavor::Celery) == Some(false) {
            return Err(BackendError::Unsupported(
                "this profile's flavors leave Celery out: its workers are not asked".into(),
            ));
        }
        let mut slot = self.workers.lock().await;
        if let Some((at, r)) = slot.as_ref() {
            if at.elapsed() < WORKERS_FRESH {
                return Ok(r.clone());
            }
        }
        let r = pidbox::discover(b).await?;
        *slot = Some((Instant::now(), r.clone()));
        Ok(r)
    }

    /// The last discovery, when it is at most `HELD_FRESH` old (figures never broadcast by
    /// themselves: they stay one round trip).
    async fn report_cached(&self) -> Option<WorkerReport> {
        let slot = self.workers.lock().await;
        slot.as_ref()
            .filter(|(at, _)| at.elapsed() < HELD_FRESH)
            .map(|(_, r)| r.clone())
    }

    /// Sends one command to the workers.
    pub async fn control(&self, b: &RedisBackend, req: &Request) -> Result<WorkerReport> {
        let r = pidbox::control(b, req).await;
        // What the workers hold may have changed: the next look asks again.
        *self.workers.lock().await = None;
        r
    }

    /// Tasks Celery workers run that they acknowledged when they started are gone from
    /// `unacked`: they are added to the in-flight figure from the workers' own answers to a
    /// recent discovery (the figures themselves never broadcast). Without one the figure
    /// stays the broker's.
    async fn add_held_by_workers(&self, ids: &[QueueId], batch: &mut StatsBatch) {
        let queues: Vec<(&QueueId, String)> = ids
            .iter()
            .filter_map(|id| match self.keys.get(id) {
                Some(Key::Queue(q)) => Some((id, q)),
                _ => None,
            })
            .collect();
        if queues.is_empty() {
            return;
        }
        let Some(report) = self.report_cached().await else {
            return;
        };
        for st in &mut batch.stats {
            if let Some((_, q)) = queues.iter().find(|(id, _)| **id == st.id) {
                let held = report.acked_held(q);
                if held > 0 {
                    st.in_flight = Some(st.in_flight.unwrap_or(0) + held);
                }
            }
        }
    }
}

#[async_trait]
impl JobLibrary for Kombu {
    fn flavor(&self) -> Flavor {
        Flavor::Celery
    }

    async fn scan(&self, b: &RedisBackend, forced: bool) -> Result<Box<dyn Scanned>> {
        Ok(Box::new(listing::scan(b, forced).await?))
    }

    fn queue_caps(&self, id: &QueueId, caps: &mut Capabilities) {
        match self.keys.get(id) {
            Some(Key::Queue(_)) => {
                caps.age = AgeSource::Unknown(
                    "kombu and Celery record no send time: the head task's age is known only from an eta that has passed".into(),
                );
                caps.redrive = RedriveMode::Unsupported(
                    "Celery keeps no dead-letter list on Redis: nothing to redrive".into(),
                );
            }
            Some(Key::Results) => {
                caps.redrive = RedriveMode::Unsupported(results::READ_ONLY.into());
                caps.age = AgeSource::Exact;
                caps.notes.push(format!(
                    "{}: the FAILURE results of Celery's Redis result backend (celery-task-meta-*), Celery's failed view where it keeps no DLQ; read-only: {}",
                    results::RESULTS_ID,
                    results::READ_ONLY
                ));
            }
            None => {}
        }
    }

    fn add_figures<'a>(&'a self, ids: &[QueueId], pipe: &mut Pipeline) -> (usize, ReadFigures<'a>) {
        figures::add(self, ids, pipe)
    }

    async fn figures_after(&self, b: &RedisBackend, ids: &[QueueId], batch: &mut StatsBatch) {
        // A result backend has no figures to pipeline: its results are scanned.
        for id in ids {
            if self.keys.get(id) == Some(Key::Results) {
                match results::figures(b, id).await {
                    Ok(st) => batch.stats.push(st),
                    Err(e) => batch.errors.push((id.clone(), e.into())),
                }
            }
        }
        self.add_held_by_workers(ids, batch).await;
    }

    async fn consumers(&self, b: &RedisBackend, id: &QueueId) -> Result<Vec<Consumer>> {
        match self.keys.need(id)? {
            Key::Queue(q) => Ok(self.report(b).await?.consumers(id, &q)),
            // Results are read by no worker.
            Key::Results => Ok(Vec::new()),
        }
    }

    async fn browse(&self, b: &RedisBackend, id: &QueueId, at: Paging) -> Result<Page> {
        let Paging { part, off, max } = at;
        match self.keys.need(id)? {
            Key::Queue(q) => {
                let step = part
                    .strip_prefix('c')
                    .and_then(|s| s.parse::<usize>().ok())
                    .unwrap_or(0);
                browse::page(&mut b.conn.get().await?, &q, step, off, max).await
            }
            Key::Results => results::page(b, off.max(0) as usize, max.max(1) as usize).await,
        }
    }

    async fn scheduled(&self, _b: &RedisBackend, id: &QueueId, _at: Paging) -> Result<Due> {
        match self.keys.need(id)? {
            Key::Queue(_) => library::unsupported(
                "Celery keeps eta and countdown tasks in the queue itself (the worker holds them until due): peek shows each task's eta",
            ),
            Key::Results => Err(results::refuse()),
        }
    }

    async fn check_redrive(&self, _b: &RedisBackend, req: &RedriveRequest) -> Result<()> {
        match self.keys.need(&req.source)? {
            Key::Results => Err(results::refuse()),
            Key::Queue(_) => Err(super::mutate::not_failed(&req.source)),
        }
    }

    async fn redrive_batch(&self, id: &QueueId, _batch: Batch<'_>) -> Result<Value> {
        Err(super::mutate::not_failed(id))
    }

    async fn purge(&self, b: &RedisBackend, id: &QueueId, p: &OpProgress) -> Result<PurgeReport> {
        match self.keys.need(id)? {
            Key::Queue(q) => purge(b, &q, p).await,
            Key::Results => Err(results::refuse()),
        }
    }

    fn delete_refusal(&self, id: &QueueId) -> Option<String> {
        Some(match self.keys.get(id)? {
            Key::Queue(_) => format!("{id}: {CELERY_NO_CHOSEN}"),
            Key::Results => format!("{id}: {}", results::READ_ONLY),
        })
    }

    fn delete_plan(&self, id: &QueueId) -> Result<DeletePlan<'_>> {
        Err(BackendError::Refused(format!("{id}: {CELERY_NO_CHOSEN}")))
    }
}

/// Empties every priority list of a queue, as kombu's `_purge`.
async fn purge(b: &RedisBackend, q: &str, progress: &OpProgress) -> Result<PurgeReport> {
    let cm = &mut b.conn.get().await?;
    // Every priority list's length and deletion in one transaction, so a task pushed
    // meanwhile is either counted and gone or kept.
    let mut pipe = ::redis::pipe();
    pipe.atomic();
    for key in listing::lists(q) {
        pipe.llen(&key).del(&key);
    }
    let replies: Vec<u64> = pipe.query_async(cm).await.map_err(super::conn::map_err)?;
    b.calls.bump("purge");
    let n: u64 = replies.iter().step_by(2).sum();
    progress.add_done(n);
    Ok(PurgeReport {
        purged: Some(n),
        note: Some(
            "every priority list emptied (as kombu's _purge); tasks workers hold in unacked stay"
                .into(),
        ),
    })
}
