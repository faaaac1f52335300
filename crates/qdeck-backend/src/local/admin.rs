//! Queue management and figures for the local broker.

use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::{params, OptionalExtension};

use super::worker::{not_found, queue_row};
use super::{now_ms, LocalBackend, QueueOptions};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Queue names are shown in terminals and used in files: keep them printable and short.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 200 {
        return Err(BackendError::Invalid(
            "queue names must be 1 to 200 characters".to_string(),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(BackendError::Invalid(
            "queue names must not contain control characters".to_string(),
        ));
    }
    Ok(())
}

impl LocalBackend {
    /// Create a queue (and its DLQ when named and missing). Re-creating updates the settings.
    pub fn create_queue(&self, name: &str, opts: &QueueOptions) -> Result<()> {
        validate_name(name)?;
        if opts.max_receives.is_some() && opts.dlq.is_none() {
            return Err(BackendError::Invalid(
                "max_receives needs a dead-letter queue (--dlq)".to_string(),
            ));
        }
        if opts.max_receives == Some(0) {
            return Err(BackendError::Invalid(
                "max_receives must be at least 1".to_string(),
            ));
        }
        if let Some(d) = &opts.dlq {
            validate_name(d)?;
            if d == name {
                return Err(BackendError::Invalid(
                    "a queue cannot be its own DLQ".to_string(),
                ));
            }
        }
        let now = now_ms();
        self.write(|tx| {
            if let Some(d) = &opts.dlq {
                tx.execute(
                    "INSERT OR IGNORE INTO queues(name, created_ms) VALUES(?1, ?2)",
                    params![d, now],
                )?;
            }
            tx.execute(
                "INSERT INTO queues(name, lease_secs, max_receives, dlq, key_policy, created_ms)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(name) DO UPDATE SET lease_secs = ?2, max_receives = ?3, dlq = ?4, key_policy = ?5",
                params![
                    name,
                    opts.lease.as_secs_f64(),
                    opts.max_receives,
                    opts.dlq,
                    opts.key_policy.as_str(),
                    now
                ],
            )?;
            Ok(Ok(()))
        })
    }

    /// Delete a queue and its messages.
    pub fn delete_queue(&self, name: &str) -> Result<()> {
        self.write(|tx| {
            let n = tx.execute("DELETE FROM queues WHERE name = ?1", [name])?;
            if n == 0 {
                return Ok(Err(not_found(name)));
            }
            tx.execute("DELETE FROM messages WHERE queue = ?1", [name])?;
            tx.execute("DELETE FROM workers WHERE queue = ?1", [name])?;
            Ok(Ok(()))
        })
    }

    pub fn queue_exists(&self, name: &str) -> Result<bool> {
        let conn = self.lock();
        conn.query_row("SELECT COUNT(*) FROM queues WHERE name = ?1", [name], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n > 0)
        .map_err(|e| self.err(e))
    }

    pub(super) fn list_queues_sync(&self) -> Result<Vec<QueueInfo>> {
        let conn = self.lock();
        let mut st = conn
            .prepare_cached(
                "SELECT name, lease_secs, max_receives, dlq, key_policy FROM queues ORDER BY name",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, f64>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        let mut sources: HashMap<String, Vec<QueueId>> = HashMap::new();
        for (name, _, _, dlq, _) in &rows {
            if let Some(d) = dlq {
                sources
                    .entry(d.clone())
                    .or_default()
                    .push(QueueId::new(name));
            }
        }
        Ok(rows
            .into_iter()
            .map(|(name, lease, max, dlq, policy)| {
                let dlq_sources = sources.remove(&name).unwrap_or_default();
                queue_info(QueueId::new(name), (lease, max, dlq, policy), dlq_sources)
            })
            .collect())
    }

    /// One queue's settings and the queues that dead-letter into it, without listing all.
    pub(super) fn describe_sync(&self, queue: &QueueId) -> Result<QueueInfo> {
        let conn = self.lock();
        let map_err = |e| self.err(e);
        let row = conn
            .query_row(
                "SELECT lease_secs, max_receives, dlq, key_policy FROM queues WHERE name = ?1",
                [queue.as_str()],
                |r| {
                    Ok((
                        r.get::<_, f64>(0)?,
                        r.get::<_, Option<u32>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                },
            )
            .optional()
            .map_err(map_err)?;
        let Some((lease, max, dlq, policy)) = row else {
            return Err(not_found(queue.as_str()));
        };
        let dlq_sources: Vec<QueueId> = conn
            .prepare_cached("SELECT name FROM queues WHERE dlq = ?1 ORDER BY name")
            .map_err(map_err)?
            .query_map([queue.as_str()], |r| r.get::<_, String>(0))
            .map_err(map_err)?
            .map(|n| n.map(QueueId::new))
            .collect::<rusqlite::Result<_>>()
            .map_err(map_err)?;
        Ok(queue_info(
            queue.clone(),
            (lease, max, dlq, policy),
            dlq_sources,
        ))
    }

    /// Figures for `queues` (all queues when empty) from one grouped scan.
    pub(super) fn stats_sync(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let now = now_ms();
        let conn = self.lock();
        let meta = self.queue_rows(&conn, queues)?;
        let counts = self.message_counts(&conn, queues, now)?;
        let consumers = self.live_consumers(&conn, now)?;
        Ok(stats_batch(queues, &meta, &counts, &consumers, now))
    }

    /// The `queues` rows of `queues` (all when empty); a name without a row is left out.
    fn queue_rows(&self, conn: &rusqlite::Connection, queues: &[QueueId]) -> Result<Vec<Meta>> {
        let map_err = |e| self.err(e);
        let row = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Meta> {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        };
        // The console asks for the rows on screen and a sweep chunk: look those up by name
        // rather than reading every queue (100,000 rows) for each small batch.
        Ok(if !queues.is_empty() && queues.len() <= BY_NAME_MAX {
            let mut q = conn
                .prepare_cached(
                    "SELECT name, dlq, enqueued_total, completed_total, dead_lettered_total
                     FROM queues WHERE name = ?1",
                )
                .map_err(map_err)?;
            let mut v = Vec::with_capacity(queues.len());
            for id in queues {
                if let Some(m) = q
                    .query_row([id.as_str()], row)
                    .optional()
                    .map_err(map_err)?
                {
                    v.push(m);
                }
            }
            v
        } else {
            conn.prepare_cached(
                "SELECT name, dlq, enqueued_total, completed_total, dead_lettered_total FROM queues",
            )
            .map_err(map_err)?
            .query_map([], row)
            .map_err(map_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(map_err)?
        })
    }

    /// Each non-empty queue's message counts at `now`, with the age of its oldest message
    /// for the queues asked for (all when `queues` is empty; DLQs need their counts only).
    fn message_counts(
        &self,
        conn: &rusqlite::Connection,
        queues: &[QueueId],
        now: i64,
    ) -> Result<HashMap<String, Counts>> {
        let map_err = |e| self.err(e);
        // Index-only counts, so a poll costs little even with a deep queue: visible and
        // not-visible from `messages_ready`, leased among the not-visible from the partial
        // `messages_lease` index, age of oldest from `messages_age` per non-empty queue.
        let visible: Vec<(String, u64, u64)> = conn
            .prepare_cached(
                "SELECT queue, SUM(visible_ms <= ?1), SUM(visible_ms > ?1)
                 FROM messages GROUP BY queue",
            )
            .map_err(map_err)?
            .query_map([now], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                ))
            })
            .map_err(map_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(map_err)?;
        let leased: HashMap<String, u64> = conn
            .prepare_cached(
                "SELECT queue, COUNT(*) FROM messages INDEXED BY messages_lease
                 WHERE leased_by IS NOT NULL AND visible_ms > ?1 GROUP BY queue",
            )
            .map_err(map_err)?
            .query_map([now], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .map_err(map_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(map_err)?;
        let mut oldest_st = conn
            .prepare_cached("SELECT MIN(enqueued_ms) FROM messages WHERE queue = ?1")
            .map_err(map_err)?;
        let mut counts: HashMap<String, Counts> = HashMap::new();
        let asked: Option<HashSet<&str>> = (!queues.is_empty()).then(|| {
            queues
                .iter()
                .map(qdeck_model::domain::QueueId::as_str)
                .collect()
        });
        for (queue, ready, hidden) in visible {
            let inflight = leased.get(&queue).copied().unwrap_or(0).min(hidden);
            let oldest: Option<i64> = if asked.as_ref().is_none_or(|a| a.contains(queue.as_str())) {
                oldest_st
                    .query_row([&queue], |r| r.get(0))
                    .map_err(map_err)?
            } else {
                None
            };
            counts.insert(queue, (ready, inflight, hidden - inflight, oldest));
        }
        Ok(counts)
    }

    /// Live consumers per queue at `now`.
    fn live_consumers(
        &self,
        conn: &rusqlite::Connection,
        now: i64,
    ) -> Result<HashMap<String, u32>> {
        let map_err = |e| self.err(e);
        conn.prepare_cached(
            // A consumer polled in the last 5 s or still holds a live lease: a crashed
            // worker drops out once its lease expires, so per-worker rates stay honest.
            "SELECT w.queue, COUNT(*) FROM workers w
             WHERE w.last_seen_ms > ?1
                OR EXISTS (SELECT 1 FROM messages m WHERE m.leased_by = w.worker
                           AND m.queue = w.queue AND m.visible_ms > ?2)
             GROUP BY w.queue",
        )
        .map_err(map_err)?
        .query_map([now - 5_000, now], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as u32))
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)
    }

    /// NotFound unless `name` is a queue, on a connection the caller already holds.
    pub(super) fn require_queue(&self, conn: &rusqlite::Connection, name: &str) -> Result<()> {
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM queues WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(not_found(name));
        }
        Ok(())
    }

    /// Workers that held leases on `queue` recently, with their counts and rate.
    pub(super) fn consumers_sync(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        let now = now_ms();
        let conn = self.lock();
        let map_err = |e| self.err(e);
        self.require_queue(&conn, queue.as_str())?;
        let mut st = conn
            .prepare_cached(
                "SELECT w.worker, w.processed, w.failed, w.last_seen_ms, w.rate,
                        (SELECT COUNT(*) FROM messages m WHERE m.leased_by = w.worker
                            AND m.queue = w.queue AND m.visible_ms > ?2),
                        (SELECT COUNT(*) FROM messages m WHERE m.leased_by = w.worker
                            AND m.queue = w.queue AND m.visible_ms <= ?2)
                 FROM workers w WHERE w.queue = ?1 AND (w.last_seen_ms > ?3
                    OR EXISTS (SELECT 1 FROM messages m WHERE m.leased_by = w.worker
                        AND m.queue = w.queue AND m.visible_ms > ?2))
                 ORDER BY w.worker",
            )
            .map_err(map_err)?;
        let rows = st
            .query_map(params![queue.as_str(), now, now - GONE_KEEP_MS], |r| {
                let last: i64 = r.get(3)?;
                let holding: i64 = r.get(5)?;
                let expired: i64 = r.get(6)?;
                let quiet = (now - last).max(0);
                let (status, state) = worker_state(quiet, holding, expired);
                let rate: Option<f64> = r.get(4)?;
                Ok(Consumer {
                    queue: queue.clone(),
                    tag: r.get(0)?,
                    peer: None,
                    prefetch: None,
                    ack_mode: AckMode::Manual,
                    state,
                    status,
                    // Idle and gone count from the last time it was seen.
                    status_since_ms: matches!(status, WorkerState::Idle | WorkerState::Gone)
                        .then_some(last),
                    holding: Some(holding as u64),
                    processed: Some(r.get::<_, i64>(1)? as u64),
                    failed: Some(r.get::<_, i64>(2)? as u64),
                    rate: rate.map(|x| decayed_rate(x, quiet)),
                    last_seen_ms: Some(last),
                })
            })
            .map_err(map_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map_err)?;
        Ok(rows)
    }
    pub fn purge_sync(&self, queue: &str) -> Result<u64> {
        self.write(|tx| {
            if queue_row(tx, queue)?.is_none() {
                return Ok(Err(not_found(queue)));
            }
            let n = tx.execute("DELETE FROM messages WHERE queue = ?1", [queue])?;
            Ok(Ok(n as u64))
        })
    }
}

/// One row of `queues`: name, DLQ, enqueued, completed and dead-lettered totals.
type Meta = (String, Option<String>, i64, i64, i64);
/// A queue's messages: ready, in flight (leased), delayed, and when the oldest was enqueued.
type Counts = (u64, u64, u64, Option<i64>);

/// The figures of the queues asked for (all when `queues` is empty), and an error for each
/// name asked for that is no queue.
fn stats_batch(
    queues: &[QueueId],
    meta: &[Meta],
    counts: &HashMap<String, Counts>,
    consumers: &HashMap<String, u32>,
    now: i64,
) -> StatsBatch {
    let wanted: Option<HashSet<&str>> = (!queues.is_empty()).then(|| {
        queues
            .iter()
            .map(qdeck_model::domain::QueueId::as_str)
            .collect()
    });
    let mut batch = StatsBatch::default();
    let known: HashSet<&str> = meta.iter().map(|m| m.0.as_str()).collect();
    for q in queues {
        if !known.contains(q.as_str()) {
            batch.errors.push((
                q.clone(),
                QueueError::not_found(format!("no queue named {:?}", q.as_str())),
            ));
        }
    }
    for (name, dlq, enq, done, dead) in meta {
        if let Some(w) = &wanted {
            if !w.contains(name.as_str()) {
                continue;
            }
        }
        let (ready, inflight, delayed, oldest) =
            counts.get(name).copied().unwrap_or((0, 0, 0, None));
        let dlq_depth = dlq
            .as_ref()
            .map(|d| counts.get(d).map_or(0, |c| c.0 + c.1 + c.2));
        batch.stats.push(QueueStats {
            id: QueueId::new(name),
            at_ms: now,
            depth: Some(ready),
            in_flight: Some(inflight),
            delayed: Some(delayed),
            dlq_depth,
            oldest_age_secs: Some(oldest.map_or(0.0, |o| ((now - o).max(0)) as f64 / 1000.0)),
            age_note: None,
            consumers: Some(consumers.get(name).copied().unwrap_or(0)),
            enqueued_total: Some(*enq as u64),
            completed_total: Some(*done as u64),
            dead_lettered_total: Some(*dead as u64),
            in_rate: None,
            out_rate: None,
            lost: None,
            retained: None,
            retained_age_secs: None,
            sampled: None,
            forwarded: None,
        });
    }
    batch
}

/// Workers not seen for this long are dropped from the list, unless they still hold a live
/// lease: a crashed worker whose leases expired is history after two minutes (its lost
/// leases count in the queue's redeliveries, not as a row above the live workers).
pub const GONE_KEEP_MS: i64 = 120_000;
/// Seen within this long: active; within `IDLE_MS`: idle; after: gone.
/// Up to this many queues asked for, their settings are read by name, not by a full scan.
const BY_NAME_MAX: usize = 1_000;
const ACTIVE_MS: i64 = 5_000;
pub(super) const IDLE_MS: i64 = 60_000;

/// The worker's state as the local broker can tell it: a lease that expired without an ack
/// means the worker crashed or lost its lease.
fn worker_state(quiet_ms: i64, holding: i64, expired: i64) -> (WorkerState, String) {
    if expired > 0 {
        (WorkerState::LeaseLost, format!("lease lost ×{expired}"))
    } else if holding > 0 {
        (WorkerState::Busy, "busy".to_string())
    } else if quiet_ms < ACTIVE_MS {
        (WorkerState::Active, "active".to_string())
    } else if quiet_ms < IDLE_MS {
        (WorkerState::Idle, format!("idle {}s", quiet_ms / 1000))
    } else {
        (WorkerState::Gone, format!("gone {}m", quiet_ms / 60_000))
    }
}

/// The stored rate is the worker's rate when it was last seen; a quiet worker's recent rate
/// falls as the quiet time grows (its last work spread over the time since), and is 0 once
/// it is gone.
fn decayed_rate(rate: f64, quiet_ms: i64) -> f64 {
    if quiet_ms < ACTIVE_MS {
        rate
    } else if quiet_ms >= IDLE_MS {
        0.0
    } else {
        rate * ACTIVE_MS as f64 / quiet_ms as f64
    }
}

/// A local queue as the listing and `describe` give it, from its row (lease seconds, max
/// receives, DLQ, key policy) and the queues that dead-letter into it.
fn queue_info(
    id: QueueId,
    (lease, max, dlq, policy): (f64, Option<u32>, Option<String>, String),
    dlq_sources: Vec<QueueId>,
) -> QueueInfo {
    QueueInfo {
        id,
        kind: QueueKind::Standard,
        is_dlq: !dlq_sources.is_empty(),
        dlq: dlq.map(QueueId::new),
        dlq_sources,
        settings: QueueSettings {
            lease_secs: Some(lease),
            max_receives: max,
            retention_secs: None,
            key_policy: Some(policy),
            extra: BTreeMap::new(),
        },
    }
}

#[cfg(test)]
mod worker_tests {
    use super::*;

    #[test]
    fn states_tell_the_dead_from_the_quiet() {
        let text = |q, h, e| worker_state(q, h, e).1;
        assert_eq!(text(1_000, 0, 0), "active");
        assert_eq!(text(20_000, 1, 0), "busy");
        assert_eq!(text(20_000, 0, 0), "idle 20s");
        assert_eq!(text(120_000, 0, 0), "gone 2m");
        assert_eq!(text(120_000, 0, 1), "lease lost ×1");
        assert_eq!(worker_state(120_000, 0, 0).0, WorkerState::Gone);
        assert_eq!(worker_state(120_000, 0, 1).0, WorkerState::LeaseLost);
        assert_eq!(worker_state(20_000, 0, 0).0, WorkerState::Idle);
    }

    #[test]
    fn quiet_rates_decay_to_zero() {
        assert_eq!(decayed_rate(4.0, 1_000), 4.0);
        assert!((decayed_rate(4.0, 20_000) - 1.0).abs() < 1e-9);
        assert_eq!(decayed_rate(4.0, 583_000), 0.0);
    }
}

#[cfg(test)]
mod pruning_tests {
    use super::*;
    use crate::local::LocalBackend;
    use qdeck_model::domain::OutgoingMessage;
    use std::time::Duration;

    /// A worker that crashed holding a lease: listed (lease lost) while its crash is recent,
    /// gone from the list once it is older than `GONE_KEEP_MS`, even though the expired lease
    /// still names it; a worker holding a live lease stays however quiet it is.
    #[test]
    fn a_crashed_workers_row_is_pruned_after_the_keep_time() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::open(&dir.path().join("q.db")).unwrap();
        b.create_queue("q", &QueueOptions::default()).unwrap();
        for body in ["a", "b"] {
            let m = OutgoingMessage {
                body: body.as_bytes().to_vec(),
                ..Default::default()
            };
            b.send_sync("q", &m).unwrap();
        }
        b.receive("q", "crashed", 1, Some(Duration::from_secs(60)))
            .unwrap();
        b.receive("q", "slow", 1, Some(Duration::from_secs(3_600)))
            .unwrap();
        let q = QueueId::new("q");
        let names = |b: &LocalBackend| -> Vec<String> {
            b.consumers_sync(&q)
                .unwrap()
                .into_iter()
                .map(|c| c.tag)
                .collect()
        };
        // The crash: its lease expired a minute ago, last seen a minute ago.
        let ago = |ms: i64| now_ms() - ms;
        let age = |b: &LocalBackend, last_seen: i64, visible: i64| {
            let conn = b.lock();
            conn.execute(
                "UPDATE messages SET visible_ms = ?1 WHERE leased_by = 'crashed'",
                [visible],
            )
            .unwrap();
            conn.execute(
                "UPDATE workers SET last_seen_ms = ?1 WHERE worker IN ('crashed', 'slow')",
                [last_seen],
            )
            .unwrap();
        };
        age(&b, ago(60_000), ago(60_000));
        let listed = b.consumers_sync(&q).unwrap();
        let crashed = listed.iter().find(|c| c.tag == "crashed").unwrap();
        assert_eq!(crashed.status, WorkerState::LeaseLost);
        // Older than the keep time: pruned; the one with a live lease stays.
        age(&b, ago(GONE_KEEP_MS + 60_000), ago(GONE_KEEP_MS + 60_000));
        assert_eq!(names(&b), vec!["slow".to_string()]);
    }
}
