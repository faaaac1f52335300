//! Browsing a BullMQ queue (its wait list, then its prioritized jobs), its failed set and its
//! delayed set: reads only (LRANGE, ZRANGE, HGETALL of the job hashes).

use std::collections::HashMap;

use ::redis::aio::ConnectionManager;

use super::jobs::bull_job;
use super::Bullmq;
use crate::redis::browse::{list_page, zset_page};
use crate::redis::conn::map_err;
use crate::redis::library::{Due, Paging};
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;

async fn hashes(
    lib: &Bullmq,
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    queue: &str,
    ids: &[String],
) -> Result<Vec<HashMap<String, Vec<u8>>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = ::redis::pipe();
    for id in ids {
        pipe.hgetall(format!("{}{}", lib.job_prefix(queue), id));
    }
    b.calls.bump("pipeline");
    pipe.query_async(cm).await.map_err(map_err)
}

fn text_ids<T>(members: &[(Vec<u8>, T)]) -> Vec<String> {
    members
        .iter()
        .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
        .collect()
}

/// The wait list first (what workers take next), then prioritized jobs; the cursor's part is
/// `w` or `p`.
pub(super) async fn waiting(lib: &Bullmq, b: &RedisBackend, q: &str, at: Paging) -> Result<Page> {
    let Paging { part, off, max } = at;
    let cm = &mut b.conn.get().await?;
    let mut page = Page::default();
    let mut part = if part.is_empty() {
        "w".to_string()
    } else {
        part
    };
    let mut off = off;
    let mut ids: Vec<String> = Vec::new();
    if part == "w" {
        let got = list_page(cm, &lib.key(q, "wait"), off, max).await?;
        if (got.len() as isize) < max {
            part = "p".into();
            off = 0;
        }
        ids.extend(
            got.into_iter()
                .map(|i| String::from_utf8_lossy(&i).into_owned()),
        );
    }
    if part == "p" {
        let room = max - ids.len() as isize;
        let start = off;
        let more = zset_page(cm, &lib.key(q, "prioritized"), start, room).await?;
        let n = more.len() as isize;
        ids.extend(text_ids(&more));
        page.next = (n == room).then(|| format!("p:{}", start + n));
    } else {
        page.next = Some(format!("w:{}", off + ids.len() as isize));
    }
    let found = hashes(lib, b, cm, q, &ids).await?;
    page.messages = ids
        .iter()
        .zip(found.iter())
        .map(|(id, h)| bull_job(id, h, None))
        .collect();
    Ok(page)
}

/// The failed set, oldest first; each job names its queue as its origin.
pub(super) async fn failed(lib: &Bullmq, b: &RedisBackend, q: &str, at: Paging) -> Result<Page> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let ids = text_ids(&zset_page(cm, &lib.key(q, "failed"), off, max).await?);
    let found = hashes(lib, b, cm, q, &ids).await?;
    let origin = QueueId::new(q.to_string());
    Ok(Page {
        messages: ids
            .iter()
            .zip(found.iter())
            .map(|(id, h)| bull_job(id, h, Some(&origin)))
            .collect(),
        next: (ids.len() as isize == max).then(|| format!("f:{}", off + max)),
        effect_note: None,
    })
}

/// BullMQ ≥ 2 scores a delayed job `due_ms * 0x1000 + counter`; older versions by the due time
/// alone. A score far beyond any epoch millisecond is the former.
fn due_ms(score: f64) -> i64 {
    if score > 1e14 {
        (score / 4096.0).floor() as i64
    } else {
        score as i64
    }
}

/// The delayed set: each job with its due time.
pub(super) async fn delayed(lib: &Bullmq, b: &RedisBackend, q: &str, at: Paging) -> Result<Due> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let members = zset_page(cm, &lib.key(q, "delayed"), off, max).await?;
    let ids = text_ids(&members);
    let found = hashes(lib, b, cm, q, &ids).await?;
    Ok(ids
        .iter()
        .zip(found.iter())
        .zip(members.iter())
        .map(|((id, h), (_, s))| (bull_job(id, h, None), s.map(due_ms)))
        .collect())
}
