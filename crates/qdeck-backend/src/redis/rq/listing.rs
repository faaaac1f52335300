//! RQ's queues, found by its key schema: the `rq:queues` set names each queue's list
//! (`rq:queue:<name>`), `rq:workers` each worker's hash, whose `version` field says which RQ
//! runs here. Each queue is listed with its failed job registry as its DLQ.

use crate::redis::conn::map_err;
use crate::redis::listing::Found;
use crate::redis::{RedisBackend, Target};
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// RQ's fixed key names (rq 2.x; RQ has no prefix setting).
pub const QUEUES: &str = "rq:queues";
pub const QUEUE_PREFIX: &str = "rq:queue:";
pub const JOB_PREFIX: &str = "rq:job:";
pub const WORKERS: &str = "rq:workers";
pub const WORKER_PREFIX: &str = "rq:worker:";

pub fn queue_key(name: &str) -> String {
    format!("{QUEUE_PREFIX}{name}")
}

/// A registry of a queue: `wip` (started), `failed`, `scheduled`, `deferred`, `finished`.
pub fn registry_key(kind: &str, name: &str) -> String {
    format!("rq:{kind}:{name}")
}

pub struct RqScan {
    pub present: bool,
    pub queues: Vec<String>,
    pub version: Option<String>,
}

pub async fn scan(b: &RedisBackend) -> Result<RqScan> {
    let mut cm = b.conn.get().await?;
    let (queues, workers): (Vec<String>, Vec<String>) = ::redis::pipe()
        .smembers(QUEUES)
        .smembers(WORKERS)
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("pipeline");
    let version = match workers.first() {
        Some(w) => ::redis::cmd("HGET")
            .arg(w)
            .arg("version")
            .query_async::<Option<String>>(&mut cm)
            .await
            .map_err(map_err)?,
        None => None,
    };
    let mut names: Vec<String> = queues
        .iter()
        .filter_map(|k| k.strip_prefix(QUEUE_PREFIX))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    Ok(RqScan {
        present: !queues.is_empty() || !workers.is_empty(),
        queues: names,
        version,
    })
}

/// Each queue and its failed job registry.
pub fn add(b: &RedisBackend, found: &mut Found, rq: &RqScan, both: bool) {
    let lib = match &rq.version {
        Some(v) => format!("RQ {}", clean_short(v, 20)),
        None => "RQ (no worker registered to tell its version)".to_string(),
    };
    for name in &rq.queues {
        let id = b.rq_id(name, both, false);
        let failed = b.rq_id(name, both, true);
        let mut settings = QueueSettings::default();
        settings.extra.insert("library".into(), lib.clone());
        let queue = QueueInfo {
            id: id.clone(),
            kind: QueueKind::Standard,
            is_dlq: false,
            dlq: Some(failed.clone()),
            dlq_sources: Vec::new(),
            settings,
        };
        let mut fs = QueueSettings::default();
        fs.extra.insert("library".into(), lib.clone());
        fs.extra.insert(
            "holds".into(),
            "the failed job registry: a redrive requeues each job to its origin queue".into(),
        );
        let failed = QueueInfo {
            id: failed,
            kind: QueueKind::Standard,
            is_dlq: true,
            dlq: None,
            dlq_sources: vec![id],
            settings: fs,
        };
        found.push(queue, Target::Rq(name.clone()));
        found.push(failed, Target::RqFailed(name.clone()));
    }
}
