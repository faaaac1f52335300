//! Jobs waiting for their time: BullMQ's `delayed` set of a queue and Sidekiq's `schedule` set
//! (one for all queues, shown as its own `scheduled` queue) and `retry` set, and an RQ
//! queue's scheduled registry (`rq:scheduled:<name>`). Read-only ZRANGE + HGETALL.

use super::browse::{bull_hashes, zset_page};
use super::jobs::{bull_job, sidekiq_job};
use super::{RedisBackend, Target};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// BullMQ ≥ 2 scores a delayed job `due_ms * 0x1000 + counter`; older versions by the due time
/// alone. A score far beyond any epoch millisecond is the former.
fn bull_due_ms(score: f64) -> i64 {
    if score > 1e14 {
        (score / 4096.0).floor() as i64
    } else {
        score as i64
    }
}

fn with_due(mut m: Message, due_ms: Option<i64>, now: i64) -> Message {
    if let Some(due) = due_ms {
        let at = ms_to_datetime(due)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
        let secs = ((due - now).max(0) + 999) / 1000;
        m.meta
            .insert(0, ("due-in".to_string(), Value::String(format!("{secs}s"))));
        m.meta.insert(0, ("due-at".to_string(), Value::String(at)));
    }
    m
}

pub async fn browse_scheduled(
    b: &RedisBackend,
    queue: &QueueId,
    req: &BrowseRequest,
) -> Result<Page> {
    let off: isize = match &req.cursor {
        None => 0,
        Some(c) => c
            .parse()
            .map_err(|_| BackendError::Invalid(format!("bad browse cursor {c:?}")))?,
    };
    let max = req.max.clamp(1, 1000) as isize;
    let target = b.resolve(queue).await?;
    let mut cm = b.conn.get().await?;
    let now = now_ms();
    let (messages, n) = match target {
        Target::Bull(q) => {
            let members = zset_page(&mut cm, &b.bkey(&q, "delayed"), off, max).await?;
            let ids: Vec<String> = members
                .iter()
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect();
            let hashes = bull_hashes(b, &mut cm, &q, &ids).await?;
            let msgs = ids
                .iter()
                .zip(hashes.iter())
                .zip(members.iter())
                .map(|((id, h), (_, s))| with_due(bull_job(id, h, None), s.map(bull_due_ms), now))
                .collect::<Vec<_>>();
            (msgs, members.len())
        }
        // The retry set is scored by the next retry time, like `schedule` by the due time.
        Target::SkSchedule | Target::SkRetry => {
            let key = if matches!(target, Target::SkRetry) {
                "retry"
            } else {
                "schedule"
            };
            let members = zset_page(&mut cm, &b.skey(key), off, max).await?;
            let msgs = members
                .iter()
                .map(|(m, s)| {
                    let due = s.map(|secs| (secs * 1000.0) as i64);
                    with_due(sidekiq_job(m, *s, None), due, now)
                })
                .collect::<Vec<_>>();
            (msgs, members.len())
        }
        Target::Rq(q) => {
            let jobs = super::rq::browse::scheduled(b, &mut cm, &q, off, max).await?;
            let n = jobs.len();
            let msgs = jobs
                .into_iter()
                .map(|(m, due)| with_due(m, due, now))
                .collect::<Vec<_>>();
            (msgs, n)
        }
        Target::SkQueue(_) => {
            return Err(BackendError::Unsupported(
                "Sidekiq keeps the scheduled jobs of every queue in one set: peek the `scheduled` queue"
                    .into(),
            ))
        }
        Target::CeleryResults => return Err(super::celery_results::refuse()),
        Target::Celery(_) => {
            return Err(BackendError::Unsupported(
                "Celery keeps eta and countdown tasks in the queue itself (the worker holds them until due): peek shows each task's eta"
                    .into(),
            ))
        }
        Target::BullFailed(_) | Target::SkDead | Target::RqFailed(_) => {
            return Err(BackendError::Unsupported(
                "failed and dead jobs are not scheduled: peek --scheduled the queue itself"
                    .into(),
            ))
        }
    };
    b.calls.bump("browse_scheduled");
    Ok(Page {
        messages,
        next: (n as isize == max).then(|| (off + max).to_string()),
        effect_note: None,
    })
}
