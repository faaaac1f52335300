//! Browsing RQ: a queue from its head (the next job a worker takes), a failed registry and
//! the scheduled registry lowest score first. Reads only (LRANGE, ZRANGE, HGETALL,
//! XREVRANGE), so no job, registry or result changes.

use std::collections::HashMap;

use ::redis::aio::ConnectionManager;
use ::redis::Value;

use super::jobs::rq_job;
use super::listing::{queue_key, registry_key, JOB_PREFIX};
use crate::redis::browse::zset_page;
use crate::redis::conn::map_err;
use crate::redis::figures::as_array;
use crate::redis::library::{Due, Paging};
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;

/// Each job's hash and the newest entry of its results stream, in one round trip.
async fn jobs(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    ids: &[String],
) -> Result<Vec<(HashMap<String, Vec<u8>>, Value)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = ::redis::pipe();
    // One odd key (a results key of another type, written by an old RQ) answers with its own
    // error instead of failing the page.
    pipe.ignore_errors();
    for id in ids {
        pipe.hgetall(format!("{JOB_PREFIX}{id}"));
        pipe.cmd("XREVRANGE")
            .arg(format!("rq:results:{id}"))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1);
    }
    b.calls.bump("pipeline");
    let replies: Vec<Value> = pipe.query_async(cm).await.map_err(map_err)?;
    let mut out = Vec::with_capacity(ids.len());
    for pair in replies.chunks(2) {
        let hash = pair.first().map(hash_of).unwrap_or_default();
        out.push((hash, pair.get(1).cloned().unwrap_or(Value::Nil)));
    }
    Ok(out)
}

/// An HGETALL reply as a map (a flat field, value list in RESP2, a map in RESP3).
fn hash_of(v: &Value) -> HashMap<String, Vec<u8>> {
    let bytes = |x: &Value| match x {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    };
    let mut out = HashMap::new();
    let mut put = |k: &Value, x: &Value| {
        if let (Some(k), Some(x)) = (bytes(k), bytes(x)) {
            out.insert(String::from_utf8_lossy(&k).into_owned(), x);
        }
    };
    match v {
        Value::Map(m) => m.iter().for_each(|(k, x)| put(k, x)),
        other => {
            for kv in as_array(other).chunks(2) {
                if let [k, x] = kv {
                    put(k, x);
                }
            }
        }
    }
    out
}

fn ids_of(members: &[(Vec<u8>, Option<f64>)]) -> Vec<String> {
    members
        .iter()
        .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
        .collect()
}

/// A page of a queue (`failed` false) or of its failed registry, `off` jobs from the start.
pub async fn page(b: &RedisBackend, queue: &str, failed: bool, at: Paging) -> Result<Page> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let ids: Vec<String> = if failed {
        ids_of(&zset_page(cm, &registry_key("failed", queue), off, max).await?)
    } else {
        ::redis::cmd("LRANGE")
            .arg(queue_key(queue))
            .arg(off)
            .arg(off + max - 1)
            .query_async(cm)
            .await
            .map_err(map_err)?
    };
    let found = jobs(b, cm, &ids).await?;
    let both = b.both();
    let origin = |name: &str| b.rq.id(name, both, false);
    let origin_of = failed.then_some(&origin as &dyn Fn(&str) -> QueueId);
    let messages = ids
        .iter()
        .zip(found.iter())
        .map(|(id, (h, latest))| rq_job(id, h, latest, origin_of))
        .collect();
    let tag = if failed { "f" } else { "q" };
    Ok(Page {
        messages,
        next: (ids.len() as isize == max).then(|| format!("{tag}:{}", off + max)),
        effect_note: None,
    })
}

/// The scheduled registry (scored by the Unix second each job is due): the jobs with their
/// due time, `(message, due ms)`.
pub async fn scheduled(b: &RedisBackend, queue: &str, at: Paging) -> Result<Due> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let members = zset_page(cm, &registry_key("scheduled", queue), off, max).await?;
    let ids = ids_of(&members);
    let found = jobs(b, cm, &ids).await?;
    Ok(ids
        .iter()
        .zip(found.iter())
        .zip(members.iter())
        .map(|((id, (h, latest)), (_, score))| {
            (
                rq_job(id, h, latest, None),
                score.map(|s| (s * 1000.0) as i64),
            )
        })
        .collect())
}
