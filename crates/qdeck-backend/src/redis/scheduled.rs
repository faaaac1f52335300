//! Jobs waiting for their time, as each library keeps them: BullMQ's `delayed` set of a
//! queue, Sidekiq's `schedule` set (one for all queues, shown as its own `scheduled` queue)
//! and `retry` set, an RQ queue's scheduled registry (`rq:scheduled:<name>`). Read-only; each
//! job shows when it is due.

use super::library::Paging;
use super::RedisBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

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
    let lib = b.owner(queue).await?;
    let now = now_ms();
    let at = Paging {
        part: String::new(),
        off,
        max,
    };
    let jobs = lib.scheduled(b, queue, at).await?;
    let n = jobs.len();
    let messages = jobs
        .into_iter()
        .map(|(m, due)| with_due(m, due, now))
        .collect();
    b.calls.bump("browse_scheduled");
    Ok(Page {
        messages,
        next: (n as isize == max).then(|| (off + max).to_string()),
        effect_note: None,
    })
}
