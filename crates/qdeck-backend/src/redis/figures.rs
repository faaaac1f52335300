//! Figures for any number of queues in one pipelined round trip: each library adds the
//! commands for its queues (bullmq/, sidekiq/, rq/, kombu/ figures.rs) and reads its part of
//! the replies; what a library cannot pipeline it reads after (Celery's results, the tasks
//! its workers hold).

use std::collections::HashMap;

use ::redis::Value;

use super::conn::query_with_scripts;
use super::{Flavor, RedisBackend};
use crate::Result;
use qdeck_model::domain::*;

pub fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|f| f as i64),
        Value::SimpleString(s) => s.trim().parse::<f64>().ok().map(|f| f as i64),
        Value::Double(d) => Some(*d as i64),
        _ => None,
    }
}

pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.trim().parse::<f64>().ok(),
        Value::SimpleString(s) => s.trim().parse::<f64>().ok(),
        Value::Double(d) => Some(*d),
        _ => None,
    }
}

pub fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

pub fn as_array(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => &[],
    }
}

pub(super) fn age_from_ms(now: i64, ts_ms: i64) -> Option<f64> {
    (ts_ms > 0).then(|| ((now - ts_ms) as f64 / 1000.0).max(0.0))
}

/// The first error reply among a queue's replies, as its error.
pub(super) fn reply_error<'v>(mut r: impl Iterator<Item = &'v Value>) -> Option<QueueError> {
    r.find_map(|v| match v {
        Value::ServerError(e) => Some(server_error(e)),
        _ => None,
    })
}

pub async fn stats(b: &RedisBackend, queues: &[QueueId]) -> Result<StatsBatch> {
    let mut batch = StatsBatch::default();
    let mut by_library: Vec<(Flavor, Vec<QueueId>)> = Vec::new();
    for id in queues {
        match b.owner(id).await {
            Ok(lib) => match by_library.iter_mut().find(|(f, _)| *f == lib.flavor()) {
                Some((_, ids)) => ids.push(id.clone()),
                None => by_library.push((lib.flavor(), vec![id.clone()])),
            },
            Err(e) => batch.errors.push((id.clone(), e.into())),
        }
    }
    let mut pipe = ::redis::pipe();
    pipe.ignore_errors();
    let mut parts = Vec::new();
    let mut scripts = Vec::new();
    let mut width = 0;
    for (f, ids) in &by_library {
        let lib = b.library(*f);
        let (n, read) = lib.add_figures(ids, &mut pipe);
        parts.push((width..width + n, read));
        width += n;
        scripts.extend(lib.figure_scripts());
    }
    if width > 0 {
        let mut cm = b.conn.get().await?;
        let replies = query_with_scripts(&mut cm, &pipe, &scripts).await?;
        b.calls.bump("pipeline");
        let at_ms = now_ms();
        for (range, read) in parts {
            read(replies.get(range).unwrap_or(&[]), at_ms, &mut batch);
        }
    } else {
        for (_, read) in parts {
            read(&[], now_ms(), &mut batch);
        }
    }
    for (f, ids) in &by_library {
        b.library(*f).figures_after(b, ids, &mut batch).await;
    }
    // In the order asked, whichever library read them.
    let order: HashMap<&QueueId, usize> = queues.iter().enumerate().map(|(i, q)| (q, i)).collect();
    batch.stats.sort_by_key(|st| order.get(&st.id).copied());
    Ok(batch)
}

/// A Redis error reply as one queue's error.
pub(super) fn server_error(e: &::redis::ServerError) -> QueueError {
    let text = qdeck_model::sanitize::clean_short(
        &format!("{} {}", e.code(), e.details().unwrap_or("")),
        200,
    );
    QueueError::new(server_error_kind(e.code()), text)
}

/// The kind of a Redis error reply, by its code (the first word of the reply, which is how
/// the Redis protocol types its errors).
fn server_error_kind(code: &str) -> QueueErrorKind {
    match code {
        "NOPERM" => QueueErrorKind::Permission,
        "NOAUTH" | "WRONGPASS" => QueueErrorKind::Auth,
        "LOADING" | "BUSY" | "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" => {
            QueueErrorKind::Unreachable
        }
        _ => QueueErrorKind::Other,
    }
}
