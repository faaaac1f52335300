//! Redrive (the libraries' retry) and purge. Every batch is one Lua script run, atomic on the
//! server: a crash between batches leaves whole jobs on one side or the other. Progress,
//! cancel and rate are checked between batches; `max` is honoured exactly.

use std::time::Duration;

use super::figures::{as_array, as_i64};
use super::{RedisBackend, Target};
use crate::{Backend, BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

/// Jobs per script run when the request does not say (`window`). A script blocks Redis
/// while it runs; 100 jobs keep that well under a millisecond or two.
pub const DEFAULT_BATCH: u64 = 100;
const PURGE_BATCH: u64 = 1000;

const MODE: &str = "client-side: the library's retry as one atomic Lua script per batch";

fn pair(v: &::redis::Value) -> (u64, u64) {
    let a = as_array(v);
    (
        a.first().and_then(as_i64).unwrap_or(0).max(0) as u64,
        a.get(1).and_then(as_i64).unwrap_or(0).max(0) as u64,
    )
}

/// Check the request against what the source is; returns the source's target.
async fn check(b: &RedisBackend, req: &RedriveRequest) -> Result<Target> {
    if req.max == Some(0) {
        return Err(BackendError::Invalid("max must be at least 1".into()));
    }
    let t = b.resolve(&req.source).await?;
    if t == Target::CeleryResults {
        return Err(super::celery_results::refuse());
    }
    b.refuse_if_read_only(&t)?;
    match (&t, &req.target) {
        (Target::BullFailed(_), RedriveTarget::Origin) => {}
        (Target::BullFailed(q), RedriveTarget::Queue(dst)) => {
            if b.resolve(dst).await? != Target::Bull(q.clone()) {
                return Err(BackendError::Unsupported(format!(
                    "a failed BullMQ job is retried in its own queue {q:?} (Job#retry); moving it to another queue would change its id and history"
                )));
            }
        }
        (Target::RqFailed(_), RedriveTarget::Origin) => {}
        (Target::RqFailed(q), RedriveTarget::Queue(dst)) => {
            if b.resolve(dst).await? != Target::Rq(q.clone()) {
                return Err(BackendError::Unsupported(format!(
                    "RQ requeues a failed job to its origin queue {q:?} (FailedJobRegistry#requeue); choose target origin"
                )));
            }
        }
        (Target::SkDead | Target::SkRetry, RedriveTarget::Origin) => {}
        (Target::SkDead | Target::SkRetry, RedriveTarget::Queue(dst)) => {
            b.resolve(dst).await?;
            return Err(BackendError::Unsupported(
                "Sidekiq retries each job to its own queue (the queue in its payload); choose target origin".into(),
            ));
        }
        _ => {
            return Err(BackendError::Unsupported(format!(
            "{} is not a failed registry, failed, retry or dead set: nothing to redrive from it",
            req.source
        )))
        }
    }
    Ok(t)
}

pub async fn redrive(
    b: &RedisBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let target = check(b, req).await?;
    let mut report = RedriveReport {
        mode: MODE.into(),
        ..Default::default()
    };
    let mut batch = req.window.map_or(DEFAULT_BATCH, |w| w.max(1) as u64);
    if let Some(r) = req.rate {
        // At most one second's worth per script call, so the pace holds from the start.
        batch = r.batch(Duration::from_secs(1), batch as usize) as u64;
    }
    let pace = Limiter::new(req.rate);
    let cancel = progress.cancel_token();
    let mut ids: Option<Vec<String>> = req.only_ids.clone();
    let limit = match (&ids, req.max) {
        (Some(v), Some(m)) => (v.len() as u64).min(m),
        (Some(v), None) => v.len() as u64,
        (None, Some(m)) => m,
        (None, None) => b.count(&req.source).await?.ready,
    };
    progress.set_total(Some(limit));
    progress.phase("retrying");
    let mut cm = b.conn.get().await?;
    while report.moved < limit {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let n = batch.min(limit - report.moved);
        pace.take(n, &cancel).await;
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let chunk: Vec<String> = match &mut ids {
            Some(v) if v.is_empty() => break,
            Some(v) => v.drain(..(n as usize).min(v.len())).collect(),
            None => Vec::new(),
        };
        let explicit = ids.is_some();
        let reply = match &target {
            Target::BullFailed(q) => {
                let keys: Vec<String> = [
                    "failed",
                    "wait",
                    "meta",
                    "active",
                    "marker",
                    "prioritized",
                    "pc",
                    "events",
                ]
                .iter()
                .map(|k| b.bkey(q, k))
                .collect();
                let mut args = vec![b.bjob_prefix(q), n.to_string()];
                args.extend(chunk.iter().cloned());
                b.scripts.bull_retry.run(&mut cm, &keys, &args).await?
            }
            Target::RqFailed(q) => {
                // Unreadable jobs stay at the head of the registry: later batches start
                // after them.
                let skip = if explicit { 0 } else { report.failed };
                super::rq::mutate::requeue_batch(b, &mut cm, q, n, skip, &chunk).await?
            }
            Target::SkDead | Target::SkRetry => {
                let set = if target == Target::SkDead {
                    "dead"
                } else {
                    "retry"
                };
                let keys = vec![b.skey(set), b.skey("queues")];
                let now = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
                let mut args = vec![b.sk_ns.clone(), format!("{now:.6}"), n.to_string()];
                args.extend(chunk.iter().cloned());
                b.scripts.sidekiq_retry.run(&mut cm, &keys, &args).await?
            }
            _ => unreachable_target()?,
        };
        b.calls.bump("redrive batch");
        let (moved, skipped) = pair(&reply);
        report.moved += moved;
        progress.add_done(moved);
        if skipped > 0 {
            report.failed += skipped;
            progress.add_failed(skipped);
            report.errors.push(if explicit {
                format!("{skipped} job(s) not found where expected (already retried or removed)")
            } else {
                format!("{skipped} job(s) could not be read and were left in place")
            });
        }
        // Nothing left to move (or only unreadable jobs): stop rather than spin.
        if moved == 0 && !explicit {
            break;
        }
    }
    Ok(report)
}

fn unreachable_target() -> Result<::redis::Value> {
    Err(BackendError::Unsupported(
        "no redrive from this queue".into(),
    ))
}

pub async fn purge(
    b: &RedisBackend,
    queue: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let t = b.resolve(queue).await?;
    b.refuse_if_read_only(&t)?;
    let mut cm = b.conn.get().await?;
    progress.phase("purging");
    match &t {
        Target::Bull(q) | Target::BullFailed(q) => {
            purge_bull(b, &mut cm, q, matches!(t, Target::BullFailed(_)), progress).await
        }
        Target::Celery(q) => purge_celery(b, &mut cm, q, progress).await,
        Target::CeleryResults => Err(super::celery_results::refuse()),
        Target::Rq(q) | Target::RqFailed(q) => {
            let failed = matches!(t, Target::RqFailed(_));
            super::rq::mutate::purge(b, &mut cm, q, failed, progress).await
        }
        Target::SkQueue(q) => {
            // As Sidekiq::Queue#clear: the list goes and the queue leaves the `queues` set.
            let key = b.skey(&format!("queue:{q}"));
            let (n, _, _): (u64, u64, u64) = ::redis::pipe()
                .atomic()
                .llen(&key)
                .del(&key)
                .srem(b.skey("queues"), q)
                .query_async(&mut cm)
                .await
                .map_err(super::conn::map_err)?;
            progress.add_done(n);
            Ok(PurgeReport {
                purged: Some(n),
                note: Some("queue cleared (Sidekiq::Queue#clear)".into()),
            })
        }
        Target::SkDead | Target::SkRetry | Target::SkSchedule => {
            let key = b.skey(match t {
                Target::SkDead => "dead",
                Target::SkRetry => "retry",
                _ => "schedule",
            });
            let (n, _): (u64, u64) = ::redis::pipe()
                .atomic()
                .zcard(&key)
                .del(&key)
                .query_async(&mut cm)
                .await
                .map_err(super::conn::map_err)?;
            progress.add_done(n);
            Ok(PurgeReport {
                purged: Some(n),
                note: Some("sorted set cleared (as Sidekiq's SortedSet#clear)".into()),
            })
        }
    }
}

/// Drains a BullMQ queue (waiting, paused, prioritized) or cleans its failed set, removing
/// the job hashes with the ids, in batches.
async fn purge_bull(
    b: &RedisBackend,
    cm: &mut ::redis::aio::ConnectionManager,
    q: &str,
    failed: bool,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let mut purged = 0u64;
    let parts: &[(&str, &str)] = if !failed {
        &[
            ("wait", "list"),
            ("paused", "list"),
            ("prioritized", "zset"),
        ]
    } else {
        &[("failed", "zset")]
    };
    for (key, kind) in parts {
        loop {
            if progress.cancelled() {
                return Ok(PurgeReport {
                    purged: Some(purged),
                    note: Some("cancelled".into()),
                });
            }
            let v = b
                .scripts
                .bull_remove
                .run(
                    cm,
                    &[b.bkey(q, key)],
                    &[b.bjob_prefix(q), PURGE_BATCH.to_string(), kind.to_string()],
                )
                .await?;
            b.calls.bump("purge batch");
            let n = as_i64(&v).unwrap_or(0).max(0) as u64;
            purged += n;
            progress.add_done(n);
            if n == 0 {
                break;
            }
        }
    }
    let note = if !failed {
        "drained: waiting and prioritized jobs removed with their job hashes; active and delayed jobs stay"
    } else {
        "failed set cleaned, job hashes removed"
    };
    Ok(PurgeReport {
        purged: Some(purged),
        note: Some(note.into()),
    })
}

async fn purge_celery(
    b: &RedisBackend,
    cm: &mut ::redis::aio::ConnectionManager,
    q: &str,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    // As kombu's `_purge`: every priority list's length and deletion in one
    // transaction, so a task pushed meanwhile is either counted and gone or kept.
    let mut pipe = ::redis::pipe();
    pipe.atomic();
    for key in super::kombu::listing::lists(q) {
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
