//! Browse: reads only (LRANGE, ZRANGE, HGETALL), so nothing about a job changes. Oldest
//! first; the cursor is an offset from the oldest end, prefixed by the part being read.

use std::collections::HashMap;

use ::redis::Value;

use super::conn::map_err;
use super::figures::{as_array, as_f64};
use super::jobs::{bull_job, sidekiq_job};
use super::{RedisBackend, Target};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

fn parse_cursor(c: &Option<String>) -> Result<(String, isize)> {
    let Some(c) = c else {
        return Ok((String::new(), 0));
    };
    let (part, off) = c.split_once(':').unwrap_or(("", c.as_str()));
    let off = off
        .parse::<isize>()
        .map_err(|_| BackendError::Invalid(format!("bad browse cursor {c:?}")))?;
    Ok((part.to_string(), off.max(0)))
}

fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// Ids from a list, oldest (right end) first.
pub(super) async fn list_page(
    cm: &mut ::redis::aio::ConnectionManager,
    key: &str,
    off: isize,
    max: isize,
) -> Result<Vec<Vec<u8>>> {
    let v: Value = ::redis::cmd("LRANGE")
        .arg(key)
        .arg(-(off + max))
        .arg(-(off + 1))
        .query_async(cm)
        .await
        .map_err(map_err)?;
    let mut out: Vec<Vec<u8>> = as_array(&v).iter().filter_map(bytes).collect();
    out.reverse();
    Ok(out)
}

/// Members (and scores) of a sorted set, lowest score first.
pub(super) async fn zset_page(
    cm: &mut ::redis::aio::ConnectionManager,
    key: &str,
    off: isize,
    max: isize,
) -> Result<Vec<(Vec<u8>, Option<f64>)>> {
    let v: Value = ::redis::cmd("ZRANGE")
        .arg(key)
        .arg(off)
        .arg(off + max - 1)
        .arg("WITHSCORES")
        .query_async(cm)
        .await
        .map_err(map_err)?;
    let a = as_array(&v);
    let mut out = Vec::new();
    // RESP2 gives a flat member, score list; RESP3 pairs.
    if a.iter().all(|x| matches!(x, Value::Array(_))) {
        for p in a {
            let p = as_array(p);
            if let Some(m) = p.first().and_then(bytes) {
                out.push((m, p.get(1).and_then(as_f64)));
            }
        }
    } else {
        for p in a.chunks(2) {
            if let Some(m) = p.first().and_then(bytes) {
                out.push((m, p.get(1).and_then(as_f64)));
            }
        }
    }
    Ok(out)
}

pub(super) async fn bull_hashes(
    b: &RedisBackend,
    cm: &mut ::redis::aio::ConnectionManager,
    queue: &str,
    ids: &[String],
) -> Result<Vec<HashMap<String, Vec<u8>>>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = ::redis::pipe();
    for id in ids {
        pipe.hgetall(format!("{}{}", b.bjob_prefix(queue), id));
    }
    b.calls.bump("pipeline");
    pipe.query_async(cm).await.map_err(map_err)
}

pub async fn browse(b: &RedisBackend, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let target = b.resolve(queue).await?;
    let max = req.max.clamp(1, 1000) as isize;
    let (part, off) = parse_cursor(&req.cursor)?;
    let mut cm = b.conn.get().await?;
    let mut page = Page::default();
    match target {
        Target::Bull(q) => {
            // The wait list first (what workers take next), then prioritized jobs.
            let mut part = if part.is_empty() {
                "w".to_string()
            } else {
                part
            };
            let mut off = off;
            let ids: Vec<String> = if part == "w" {
                let ids = list_page(&mut cm, &b.bkey(&q, "wait"), off, max).await?;
                if (ids.len() as isize) < max {
                    part = "p".into();
                    off = 0;
                }
                ids.into_iter()
                    .map(|i| String::from_utf8_lossy(&i).into_owned())
                    .collect()
            } else {
                Vec::new()
            };
            let mut ids = ids;
            if part == "p" {
                let room = max - ids.len() as isize;
                let start = off;
                let more = zset_page(&mut cm, &b.bkey(&q, "prioritized"), start, room).await?;
                let n = more.len() as isize;
                ids.extend(
                    more.into_iter()
                        .map(|(m, _)| String::from_utf8_lossy(&m).into_owned()),
                );
                page.next = (n == room).then(|| format!("p:{}", start + n));
            } else {
                page.next = Some(format!("w:{}", off + ids.len() as isize));
            }
            let hashes = bull_hashes(b, &mut cm, &q, &ids).await?;
            page.messages = ids
                .iter()
                .zip(hashes.iter())
                .map(|(id, h)| bull_job(id, h, None))
                .collect();
        }
        Target::BullFailed(q) => {
            let members = zset_page(&mut cm, &b.bkey(&q, "failed"), off, max).await?;
            let ids: Vec<String> = members
                .iter()
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect();
            let hashes = bull_hashes(b, &mut cm, &q, &ids).await?;
            let origin = QueueId::new(q.clone());
            page.messages = ids
                .iter()
                .zip(hashes.iter())
                .map(|(id, h)| bull_job(id, h, Some(&origin)))
                .collect();
            page.next = (ids.len() as isize == max).then(|| format!("f:{}", off + max));
        }
        Target::Rq(q) => {
            page = super::rq::browse::page(b, &mut cm, &q, false, off, max).await?;
        }
        Target::RqFailed(q) => {
            page = super::rq::browse::page(b, &mut cm, &q, true, off, max).await?;
        }
        Target::CeleryResults => {
            page = super::celery_results::page(b, off.max(0) as usize, max.max(1) as usize).await?;
        }
        Target::Celery(q) => {
            let step = part
                .strip_prefix('c')
                .and_then(|s| s.parse::<usize>().ok())
                .unwrap_or(0);
            page = super::kombu::browse::page(&mut cm, &q, step, off, max).await?;
        }
        Target::SkQueue(q) => {
            let items = list_page(&mut cm, &b.skey(&format!("queue:{q}")), off, max).await?;
            page.next = (items.len() as isize == max).then(|| format!("q:{}", off + max));
            page.messages = items.iter().map(|p| sidekiq_job(p, None, None)).collect();
        }
        Target::SkDead | Target::SkRetry | Target::SkSchedule => {
            let key = match target {
                Target::SkDead => "dead",
                Target::SkRetry => "retry",
                _ => "schedule",
            };
            let both = b.cache().both;
            let origin = |name: &str| b.sk_id(name, both);
            let members = zset_page(&mut cm, &b.skey(key), off, max).await?;
            page.next = (members.len() as isize == max).then(|| format!("z:{}", off + max));
            let dead = !matches!(target, Target::SkSchedule);
            page.messages = members
                .iter()
                .map(|(m, s)| {
                    sidekiq_job(
                        m,
                        *s,
                        if dead {
                            Some(&origin as &dyn Fn(&str) -> QueueId)
                        } else {
                            None
                        },
                    )
                })
                .collect();
        }
    }
    b.calls.bump("browse");
    Ok(page)
}
