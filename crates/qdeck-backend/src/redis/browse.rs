//! Browse: reads only (LRANGE, ZRANGE, HGETALL), so nothing about a job changes. Oldest
//! first; the cursor is an offset from the oldest end, prefixed by the part being read (each
//! library names its parts). The pages of lists and sorted sets every library reads are here.

use ::redis::Value;

use super::conn::map_err;
use super::figures::{as_array, as_f64};
use super::library::Paging;
use super::RedisBackend;
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

pub async fn browse(b: &RedisBackend, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let lib = b.owner(queue).await?;
    let max = req.max.clamp(1, 1000) as isize;
    let (part, off) = parse_cursor(&req.cursor)?;
    let page = lib.browse(b, queue, Paging { part, off, max }).await?;
    b.calls.bump("browse");
    Ok(page)
}
