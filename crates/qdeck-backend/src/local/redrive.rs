//! Redrive on the local broker: copy and delete in one transaction per batch, so a crash
//! can neither lose nor duplicate a message. Rate-limited and cancellable between batches.
//!
//! A run moves only messages that were in the DLQ when it started: ids are taken from one
//! sequence, so the highest id present at the start is a watermark, and a message that comes
//! back (a consumer rejects it again and it dead-letters) gets a new, higher id and is left
//! for the next run. Without this a redrive of poison messages never ends.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::params;

use super::worker::{not_found, queue_row};
use super::{now_ms, LocalBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

const BATCH: usize = 500;

/// The one queue whose DLQ is `dlq`, if exactly one names it.
fn single_source(conn: &rusqlite::Connection, dlq: &str) -> rusqlite::Result<Option<String>> {
    let mut st = conn.prepare_cached("SELECT name FROM queues WHERE dlq = ?1 LIMIT 2")?;
    let names = st
        .query_map([dlq], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(match names.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    })
}

struct BatchOutcome {
    moved: u64,
    failed: u64,
    errors: Vec<String>,
    /// Highest id looked at; the next batch starts after it.
    last_id: Option<i64>,
}

impl LocalBackend {
    /// Count what a redrive would move (for `--dry-run` and the confirm dialog), after
    /// checking that it can run: the source exists, the target exists and is not the source,
    /// and with target `Origin` the messages have somewhere to go.
    pub fn redrive_plan(&self, req: &RedriveRequest) -> Result<u64> {
        if req.max == Some(0) {
            return Err(BackendError::Invalid("max must be at least 1".to_string()));
        }
        let source = req.source.as_str();
        let conn = self.lock();
        let map_err = |e| self.err(e);
        let exists = |name: &str| -> Result<bool> {
            conn.query_row("SELECT COUNT(*) FROM queues WHERE name = ?1", [name], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n > 0)
            .map_err(map_err)
        };
        if !exists(source)? {
            return Err(not_found(source));
        }
        let (total, no_origin): (i64, i64) = conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(dl_origin IS NULL), 0) FROM messages WHERE queue = ?1",
                [source],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(map_err)?;
        match &req.target {
            RedriveTarget::Queue(t) => {
                if t.as_str() == source {
                    return Err(BackendError::Invalid(format!(
                        "cannot redrive {source:?} into itself"
                    )));
                }
                if !exists(t.as_str())? {
                    return Err(not_found(t.as_str()));
                }
            }
            RedriveTarget::Origin => {
                let fallback = single_source(&conn, source).map_err(map_err)?;
                if total > 0 && no_origin == total && fallback.is_none() {
                    return Err(BackendError::Invalid(format!(
                        "{source:?} records no origin queue for its messages and is no queue's DLQ; give a target queue (--to QUEUE)"
                    )));
                }
            }
        }
        let n = match &req.only_ids {
            Some(ids) => (ids.len() as u64).min(total as u64),
            None => total as u64,
        };
        Ok(match req.max {
            Some(m) => n.min(m),
            None => n,
        })
    }

    /// Highest message id in `queue` now (0 when empty): the run's watermark.
    fn redrive_watermark(&self, queue: &str) -> Result<i64> {
        let conn = self.lock();
        conn.query_row(
            "SELECT COALESCE(MAX(id), 0) FROM messages WHERE queue = ?1",
            [queue],
            |r| r.get(0),
        )
        .map_err(|e| self.err(e))
    }

    fn redrive_batch(
        &self,
        req: &RedriveRequest,
        (after, upto): (i64, i64),
        limit: usize,
    ) -> Result<BatchOutcome> {
        let now = now_ms();
        let source = req.source.as_str();
        self.write(|tx| {
            if queue_row(tx, source)?.is_none() {
                return Ok(Err(not_found(source)));
            }
            // Messages put straight into a DLQ carry no origin: send them to the one queue
            // that names this DLQ, when there is exactly one.
            let fallback = single_source(tx, source)?;
            let rows: Vec<(i64, Option<String>, Option<String>, bool)> = {
                let mut st = tx.prepare_cached(
                    "SELECT id, dl_origin, leased_by, visible_ms > ?3 FROM messages
                     WHERE queue = ?1 AND id > ?2 AND id <= ?5 ORDER BY id LIMIT ?4",
                )?;
                let r = st.query_map(params![source, after, now, limit as i64, upto], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?;
                r.collect::<rusqlite::Result<_>>()?
            };
            let mut out = BatchOutcome {
                moved: 0,
                failed: 0,
                errors: Vec::new(),
                last_id: rows.last().map(|r| r.0),
            };
            // A set, not a scan of the list per row: a filtered redrive passes thousands of ids.
            let only: Option<std::collections::HashSet<&str>> = req
                .only_ids
                .as_ref()
                .map(|ids| ids.iter().map(String::as_str).collect());
            for (id, origin, leased_by, lease_live) in rows {
                if let Some(ids) = &only {
                    if !ids.contains(id.to_string().as_str()) {
                        continue;
                    }
                }
                if leased_by.is_some() && lease_live {
                    out.failed += 1;
                    out.errors
                        .push(format!("message {id} is leased by a worker; left in place"));
                    continue;
                }
                let target = match &req.target {
                    RedriveTarget::Queue(q) => q.as_str().to_string(),
                    RedriveTarget::Origin => match origin.or_else(|| fallback.clone()) {
                        Some(o) if o == source => {
                            out.failed += 1;
                            out.errors
                                .push(format!("message {id}: origin is {source:?} itself"));
                            continue;
                        }
                        Some(o) => o,
                        None => {
                            out.failed += 1;
                            out.errors.push(format!(
                                "message {id} has no recorded origin; give a target queue"
                            ));
                            continue;
                        }
                    },
                };
                if queue_row(tx, &target)?.is_none() {
                    out.failed += 1;
                    out.errors.push(format!(
                        "message {id}: target queue {target:?} does not exist"
                    ));
                    continue;
                }
                let headers: Option<String> =
                    tx.query_row("SELECT headers FROM messages WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })?;
                tx.execute(
                    "INSERT INTO messages(queue, key, body, headers, enqueued_ms, visible_ms)
                     SELECT ?2, key, body, ?4, ?3, ?3 FROM messages WHERE id = ?1",
                    params![id, target, now, stamp(headers.as_deref(), now)],
                )?;
                tx.execute("DELETE FROM messages WHERE id = ?1", [id])?;
                tx.execute(
                    "UPDATE queues SET enqueued_total = enqueued_total + 1 WHERE name = ?1",
                    [&target],
                )?;
                out.moved += 1;
            }
            Ok(Ok(out))
        })
    }
}

/// The copy's headers with the redrive stamp: `x-qdeck-redriven` counts the redrives the
/// message has been through and `x-qdeck-redriven-at` says when (Unix ms), so a message that
/// comes back to the DLQ shows that the fix did not work (the reasons view marks it).
fn stamp(headers: Option<&str>, now: i64) -> String {
    // Typed headers: a copy keeps every other header's type.
    let mut h: Vec<(String, qdeck_model::domain::Value)> = headers
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default();
    let before = h
        .iter()
        .find(|(k, _)| k == REDRIVEN)
        .and_then(|(_, v)| v.as_i64())
        .unwrap_or(0);
    h.retain(|(k, _)| k != REDRIVEN && k != REDRIVEN_AT);
    h.push((
        REDRIVEN.to_string(),
        qdeck_model::domain::Value::String((before + 1).to_string()),
    ));
    h.push((
        REDRIVEN_AT.to_string(),
        qdeck_model::domain::Value::String(now.to_string()),
    ));
    serde_json::to_string(&h).unwrap_or_else(|_| "[]".to_string())
}

const REDRIVEN: &str = "x-qdeck-redriven";
const REDRIVEN_AT: &str = "x-qdeck-redriven-at";

pub(super) async fn run(
    b: Arc<LocalBackend>,
    req: RedriveRequest,
    progress: OpProgress,
) -> Result<RedriveReport> {
    let (total, upto) = {
        let (b, r) = (b.clone(), req.clone());
        tokio::task::spawn_blocking(move || {
            // Watermark first: whatever arrives after it is neither counted nor moved.
            let upto = b.redrive_watermark(r.source.as_str())?;
            let total = b.redrive_plan(&r)?;
            Ok::<_, BackendError>((total, upto))
        })
        .await
        .map_err(|e| BackendError::Other(e.to_string()))??
    };
    progress.set_total(Some(match &req.only_ids {
        Some(ids) => (ids.len() as u64).min(total),
        None => total,
    }));
    progress.phase("moving");
    let mut report = RedriveReport {
        mode: "client-side (copy and delete in one transaction)".to_string(),
        ..Default::default()
    };
    let pace = Limiter::new(req.rate);
    let cancel = progress.cancel_token();
    let mut after = 0i64;
    loop {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let remaining = req.max.map(|m| m.saturating_sub(report.moved));
        if remaining == Some(0) {
            break;
        }
        // With a rate, batches of at most one second's worth, so the pace holds from the
        // first batch.
        let mut limit = req
            .rate
            .map_or(BATCH, |r| r.batch(Duration::from_secs(1), BATCH));
        if let Some(rem) = remaining {
            limit = limit.min(rem as usize);
        }
        pace.take(limit as u64, &cancel).await;
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let out = {
            let (b, r) = (b.clone(), req.clone());
            tokio::task::spawn_blocking(move || b.redrive_batch(&r, (after, upto), limit))
                .await
                .map_err(|e| BackendError::Other(e.to_string()))??
        };
        report.moved += out.moved;
        report.failed += out.failed;
        if report.errors.len() < 20 {
            report.errors.extend(out.errors.into_iter().take(20));
        }
        progress.update(|s| {
            s.done = report.moved;
            s.failed = report.failed;
        });
        match out.last_id {
            Some(id) => after = id,
            None => break,
        }
    }
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::stamp;

    #[test]
    fn stamp_counts_redrives_and_keeps_other_headers() {
        let once = stamp(Some(r#"[["trace","abc"],["n",{"$i32":7}]]"#), 1000);
        assert!(once.contains(r#"["n",{"$i32":7}]"#), "{once}");
        let once = stamp(Some(r#"[["trace","abc"]]"#), 1000);
        let h: Vec<(String, String)> = serde_json::from_str(&once).unwrap();
        assert!(h.contains(&("trace".into(), "abc".into())));
        assert!(h.contains(&("x-qdeck-redriven".into(), "1".into())));
        let twice: Vec<(String, String)> = serde_json::from_str(&stamp(Some(&once), 2000)).unwrap();
        assert!(twice.contains(&("x-qdeck-redriven".into(), "2".into())));
        assert!(twice.contains(&("x-qdeck-redriven-at".into(), "2000".into())));
        assert_eq!(twice.len(), 3);
        assert_eq!(
            stamp(None, 5),
            r#"[["x-qdeck-redriven","1"],["x-qdeck-redriven-at","5"]]"#
        );
    }
}
