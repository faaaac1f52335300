//! The worker side of the local broker: send, receive with a lease, ack, nack, renew and
//! release. Each call is one short `BEGIN IMMEDIATE` transaction.

use std::time::Duration;

use rusqlite::{params, OptionalExtension, Transaction, TransactionBehavior};

use super::{now_ms, KeyPolicy, LocalBackend};
use crate::{BackendError, Result};
use qdeck_model::domain::{OutgoingMessage, Value};

/// A message handed to a worker under a lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Leased {
    pub id: i64,
    /// Proves this lease: `id:receive_count`. A stale receipt (lease expired and the message
    /// was received again) acknowledges nothing.
    pub receipt: String,
    pub key: Option<String>,
    pub body: Vec<u8>,
    pub headers: Vec<(String, Value)>,
    pub receive_count: u32,
    pub enqueued_ms: i64,
}

pub(super) struct QueueRow {
    pub lease_secs: f64,
    pub max_receives: Option<u32>,
    pub dlq: Option<String>,
    pub policy: KeyPolicy,
}

pub(super) fn queue_row(tx: &Transaction<'_>, name: &str) -> rusqlite::Result<Option<QueueRow>> {
    tx.query_row(
        "SELECT lease_secs, max_receives, dlq, key_policy FROM queues WHERE name = ?1",
        [name],
        |r| {
            let policy: String = r.get(3)?;
            Ok(QueueRow {
                lease_secs: r.get(0)?,
                max_receives: r.get(1)?,
                dlq: r.get(2)?,
                policy: policy.parse().unwrap_or_default(),
            })
        },
    )
    .optional()
}

fn parse_receipt(r: &str) -> Result<(i64, i64)> {
    let bad = || BackendError::Invalid(format!("malformed receipt {r:?}"));
    let (a, b) = r.split_once(':').ok_or_else(bad)?;
    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
}

/// The local broker keeps a key and headers, no standard properties: a message that carries
/// some is refused rather than stored without them (copies from other brokers carry them as
/// `x-qdeck-*` headers before they get here).
fn no_properties(msg: &OutgoingMessage) -> Result<()> {
    match msg.properties.first() {
        None => Ok(()),
        Some((k, _)) => Err(BackendError::Invalid(format!(
            "the local broker keeps no message properties (given: {}); send them as headers",
            qdeck_model::sanitize::clean_short(k, 60)
        ))),
    }
}

/// Most messages one `receive` call leases.
pub const MAX_RECEIVE_BATCH: usize = 1000;

/// Dead-letter reason recorded when a message used up its receives.
pub const MAX_RECEIVES_REASON: &str = "max_receives exceeded";

pub(super) fn not_found(queue: &str) -> BackendError {
    BackendError::NotFound(format!("no queue named {queue:?} on the local broker"))
}

/// Move one message to its queue's DLQ inside `tx`, recording where it came from and why.
pub(super) fn dead_letter(
    tx: &Transaction<'_>,
    id: i64,
    queue: &str,
    dlq: &str,
    reason: &str,
    now: i64,
) -> rusqlite::Result<()> {
    // The DLQ may have been deleted since the source was configured: bring it back rather
    // than leave the message in a queue nobody lists.
    tx.execute(
        "INSERT OR IGNORE INTO queues(name, created_ms) VALUES(?1, ?2)",
        params![dlq, now],
    )?;
    tx.execute(
        "INSERT INTO messages(queue, key, body, headers, enqueued_ms, visible_ms, receive_count,
                              dl_reason, dl_origin, dl_ms, dl_count)
         SELECT ?2, key, body, headers, enqueued_ms, ?4, 0, ?3, queue, ?4, receive_count
         FROM messages WHERE id = ?1",
        params![id, dlq, reason, now],
    )?;
    tx.execute("DELETE FROM messages WHERE id = ?1", [id])?;
    tx.execute(
        "UPDATE queues SET dead_lettered_total = dead_lettered_total + 1 WHERE name = ?1",
        [queue],
    )?;
    tx.execute(
        "UPDATE queues SET enqueued_total = enqueued_total + 1 WHERE name = ?1",
        [dlq],
    )?;
    Ok(())
}

fn touch_worker(tx: &Transaction<'_>, worker: &str, queue: &str, now: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO workers(worker, queue, last_seen_ms, win_start_ms) VALUES(?1, ?2, ?3, ?3)
         ON CONFLICT(worker, queue) DO UPDATE SET last_seen_ms = ?3",
        params![worker, queue, now],
    )?;
    Ok(())
}

/// Record completions for a worker; its rate is the count over the last ≥5 s window.
fn worker_done(
    tx: &Transaction<'_>,
    worker: &str,
    queue: &str,
    ok: u64,
    failed: u64,
    now: i64,
) -> rusqlite::Result<()> {
    touch_worker(tx, worker, queue, now)?;
    tx.execute(
        "UPDATE workers SET
            processed = processed + ?3,
            failed = failed + ?4,
            rate = CASE WHEN ?5 - win_start_ms >= 5000
                        THEN (win_count + ?3) * 1000.0 / (?5 - win_start_ms) ELSE rate END,
            win_count = CASE WHEN ?5 - win_start_ms >= 5000 THEN 0 ELSE win_count + ?3 END,
            win_start_ms = CASE WHEN ?5 - win_start_ms >= 5000 THEN ?5 ELSE win_start_ms END
         WHERE worker = ?1 AND queue = ?2",
        params![worker, queue, ok as i64, failed as i64, now],
    )?;
    Ok(())
}

impl LocalBackend {
    fn write_tx<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }

    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<Result<T>>,
    ) -> Result<T> {
        self.write_tx(|tx| f(tx).map_err(|e| self.err(e))?)
    }

    /// Publish one message; returns its id.
    pub fn send_sync(&self, queue: &str, msg: &OutgoingMessage) -> Result<i64> {
        no_properties(msg)?;
        let headers = if msg.headers.is_empty() {
            None
        } else {
            Some(
                serde_json::to_string(&msg.headers)
                    .map_err(|e| BackendError::Other(e.to_string()))?,
            )
        };
        let now = now_ms();
        let visible = now + msg.delay.map_or(0, |d| d.as_millis() as i64);
        self.write(|tx| {
            if queue_row(tx, queue)?.is_none() {
                return Ok(Err(not_found(queue)));
            }
            tx.execute(
                "INSERT INTO messages(queue, key, body, headers, enqueued_ms, visible_ms)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                params![queue, msg.key, msg.body, headers, now, visible],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "UPDATE queues SET enqueued_total = enqueued_total + 1 WHERE name = ?1",
                [queue],
            )?;
            Ok(Ok(id))
        })
    }

    /// Publish many messages in one transaction.
    pub fn send_batch(&self, queue: &str, msgs: &[OutgoingMessage]) -> Result<usize> {
        self.send_ids(queue, msgs).map(|ids| ids.len())
    }

    /// Publish many messages in one transaction; returns their ids in order. All or none.
    pub fn send_ids(&self, queue: &str, msgs: &[OutgoingMessage]) -> Result<Vec<i64>> {
        msgs.iter().try_for_each(no_properties)?;
        let headers = msgs
            .iter()
            .map(|m| {
                (!m.headers.is_empty())
                    .then(|| serde_json::to_string(&m.headers))
                    .transpose()
                    .map_err(|e| BackendError::Other(e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        self.write(|tx| {
            if queue_row(tx, queue)?.is_none() {
                return Ok(Err(not_found(queue)));
            }
            let mut st = tx.prepare_cached(
                "INSERT INTO messages(queue, key, body, headers, enqueued_ms, visible_ms)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut ids = Vec::with_capacity(msgs.len());
            for (m, h) in msgs.iter().zip(&headers) {
                let visible = now + m.delay.map_or(0, |d| d.as_millis() as i64);
                st.execute(params![queue, m.key, m.body, h, now, visible])?;
                ids.push(tx.last_insert_rowid());
            }
            tx.execute(
                "UPDATE queues SET enqueued_total = enqueued_total + ?2 WHERE name = ?1",
                params![queue, msgs.len() as i64],
            )?;
            Ok(Ok(ids))
        })
    }

    /// Lease up to `n` messages to `worker` for the queue's lease time (or `lease`).
    /// Messages whose receive count reached `max_receives` go to the DLQ instead.
    ///
    /// Visible messages are taken oldest-visible first (the `messages_ready` index order), so a
    /// receive costs O(n log N) however deep the backlog is. The key policy filters candidates
    /// in SQL: `exclusive` skips keys with a live lease, `ordered` takes only the lowest id of
    /// each key still in the queue (leased, waiting for a retry or ready), so a later message
    /// waits until the earlier one is acknowledged or dead-lettered.
    pub fn receive(
        &self,
        queue: &str,
        worker: &str,
        n: usize,
        lease: Option<Duration>,
    ) -> Result<Vec<Leased>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let n = n.min(MAX_RECEIVE_BATCH);
        let now = now_ms();
        self.write(|tx| {
            let Some(q) = queue_row(tx, queue)? else {
                return Ok(Err(not_found(queue)));
            };
            let lease_ms = lease
                .map_or((q.lease_secs * 1000.0) as i64, |d| d.as_millis() as i64)
                .max(1);
            touch_worker(tx, worker, queue, now)?;
            let mut out = Vec::with_capacity(n);
            let mut seen_keys = std::collections::HashSet::new();
            // Cursor over (visible_ms, id): each pass continues after the last row looked at.
            let mut after = (i64::MIN, 0i64);
            let sql = match q.policy {
                KeyPolicy::Parallel => {
                    "SELECT id, key, receive_count, visible_ms FROM messages m
                     WHERE queue = ?1 AND visible_ms <= ?2 AND (visible_ms, id) > (?3, ?4)
                     ORDER BY visible_ms, id LIMIT ?5"
                }
                KeyPolicy::Exclusive => {
                    "SELECT id, key, receive_count, visible_ms FROM messages m
                     WHERE queue = ?1 AND visible_ms <= ?2 AND (visible_ms, id) > (?3, ?4)
                       AND (key IS NULL OR NOT EXISTS (
                           SELECT 1 FROM messages p WHERE p.queue = m.queue AND p.key = m.key
                             AND p.leased_by IS NOT NULL AND p.visible_ms > ?2))
                     ORDER BY visible_ms, id LIMIT ?5"
                }
                KeyPolicy::Ordered => {
                    "SELECT id, key, receive_count, visible_ms FROM messages m
                     WHERE queue = ?1 AND visible_ms <= ?2 AND (visible_ms, id) > (?3, ?4)
                       AND (key IS NULL OR NOT EXISTS (
                           SELECT 1 FROM messages p WHERE p.queue = m.queue AND p.key = m.key
                             AND p.id < m.id))
                     ORDER BY visible_ms, id LIMIT ?5"
                }
            };
            // Bounded so a queue full of blocked keys or poison cannot stall a receive.
            'scan: for _ in 0..20 {
                let want = (n - out.len()) as i64 + 16;
                let batch: Vec<(i64, Option<String>, i64, i64)> = {
                    let mut st = tx.prepare_cached(sql)?;
                    let rows = st.query_map(params![queue, now, after.0, after.1, want], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })?;
                    rows.collect::<rusqlite::Result<_>>()?
                };
                let exhausted = (batch.len() as i64) < want;
                for (id, key, count, visible) in batch {
                    after = (visible, id);
                    if let (Some(max), Some(dlq)) = (q.max_receives, q.dlq.as_deref()) {
                        if count >= max as i64 {
                            dead_letter(tx, id, queue, dlq, MAX_RECEIVES_REASON, now)?;
                            continue;
                        }
                    }
                    if q.policy != KeyPolicy::Parallel {
                        if let Some(k) = &key {
                            if !seen_keys.insert(k.clone()) {
                                continue;
                            }
                        }
                    }
                    let leased = tx
                        .prepare_cached(
                            "UPDATE messages SET leased_by = ?2, visible_ms = ?3,
                                 receive_count = receive_count + 1
                             WHERE id = ?1
                             RETURNING key, body, headers, receive_count, enqueued_ms",
                        )?
                        .query_row(params![id, worker, now + lease_ms], |r| {
                            let headers: Option<String> = r.get(2)?;
                            let count: i64 = r.get(3)?;
                            Ok(Leased {
                                id,
                                receipt: format!("{id}:{count}"),
                                key: r.get(0)?,
                                body: r.get(1)?,
                                headers: headers
                                    .and_then(|h| serde_json::from_str(&h).ok())
                                    .unwrap_or_default(),
                                receive_count: count as u32,
                                enqueued_ms: r.get(4)?,
                            })
                        })?;
                    out.push(leased);
                    if out.len() >= n {
                        break 'scan;
                    }
                }
                if exhausted {
                    break;
                }
            }
            Ok(Ok(out))
        })
    }

    /// Acknowledge (delete) leased messages. Returns how many receipts were still valid.
    pub fn ack(&self, queue: &str, worker: &str, receipts: &[String]) -> Result<usize> {
        let parsed = receipts
            .iter()
            .map(|r| parse_receipt(r))
            .collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        self.write(|tx| {
            let mut n = 0usize;
            {
                let mut st = tx.prepare_cached(
                    "DELETE FROM messages WHERE id = ?1 AND receive_count = ?2 AND leased_by = ?3 AND queue = ?4",
                )?;
                for (id, count) in &parsed {
                    n += st.execute(params![id, count, worker, queue])?;
                }
            }
            tx.execute(
                "UPDATE queues SET completed_total = completed_total + ?2 WHERE name = ?1",
                params![queue, n as i64],
            )?;
            worker_done(tx, worker, queue, n as u64, 0, now)?;
            Ok(Ok(n))
        })
    }

    /// Give leased messages back after a failure, visible again after `retry_delay`.
    /// A message that used up its receives goes to the DLQ now.
    pub fn nack(
        &self,
        queue: &str,
        worker: &str,
        receipts: &[String],
        retry_delay: Duration,
    ) -> Result<usize> {
        let parsed = receipts
            .iter()
            .map(|r| parse_receipt(r))
            .collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        self.write(|tx| {
            let Some(q) = queue_row(tx, queue)? else {
                return Ok(Err(not_found(queue)));
            };
            let mut n = 0usize;
            for (id, count) in &parsed {
                let valid: Option<i64> = tx
                    .query_row(
                        "SELECT receive_count FROM messages
                         WHERE id = ?1 AND receive_count = ?2 AND leased_by = ?3 AND queue = ?4",
                        params![id, count, worker, queue],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(rc) = valid else { continue };
                n += 1;
                match (q.max_receives, q.dlq.as_deref()) {
                    (Some(max), Some(dlq)) if rc >= max as i64 => {
                        dead_letter(tx, *id, queue, dlq, MAX_RECEIVES_REASON, now)?;
                    }
                    _ => {
                        tx.execute(
                            "UPDATE messages SET leased_by = NULL, visible_ms = ?2 WHERE id = ?1",
                            params![id, now + retry_delay.as_millis() as i64],
                        )?;
                    }
                }
            }
            worker_done(tx, worker, queue, 0, n as u64, now)?;
            Ok(Ok(n))
        })
    }

    /// Extend leases still held by `worker`.
    pub fn renew(&self, worker: &str, receipts: &[String], lease: Duration) -> Result<usize> {
        let parsed = receipts
            .iter()
            .map(|r| parse_receipt(r))
            .collect::<Result<Vec<_>>>()?;
        let now = now_ms();
        self.write(|tx| {
            let mut n = 0;
            let mut st = tx.prepare_cached(
                "UPDATE messages SET visible_ms = ?4 WHERE id = ?1 AND receive_count = ?2 AND leased_by = ?3",
            )?;
            for (id, count) in &parsed {
                n += st.execute(params![id, count, worker, now + lease.as_millis() as i64])?;
            }
            Ok(Ok(n))
        })
    }

    /// Return every message `worker` holds (visibility 0), as a worker does on shutdown, and
    /// mark it gone.
    pub fn release_worker(&self, worker: &str) -> Result<usize> {
        let now = now_ms();
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE messages SET leased_by = NULL, visible_ms = ?2
                 WHERE leased_by = ?1 AND visible_ms > ?2",
                params![worker, now],
            )?;
            // A worker that stopped cleanly is gone, not "active" for a few more seconds: a
            // console starting right after must not take it for one still running. Its row
            // and counts stay listed (as gone) until the list prunes it.
            tx.execute(
                "UPDATE workers SET last_seen_ms = MIN(last_seen_ms, ?2) WHERE worker = ?1",
                params![worker, now - super::admin::IDLE_MS],
            )?;
            Ok(Ok(n))
        })
    }
}
