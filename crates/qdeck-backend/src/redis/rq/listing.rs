//! RQ's queues, found by its key schema: the `rq:queues` set names each queue's list
//! (`rq:queue:<name>`), `rq:workers` each worker's hash, whose `version` field says which RQ
//! runs here. Each queue is listed with its failed job registry as its DLQ.

use std::collections::HashMap;

use super::Key;
use crate::redis::conn::map_err;
use crate::redis::library::{lock, Scanned};
use crate::redis::listing::{with_failed, Found};
use crate::redis::{Flavor, RedisBackend};
use crate::Result;
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
    present: bool,
    queues: Vec<String>,
    version: Option<String>,
}

pub async fn scan(b: &RedisBackend, forced: bool) -> Result<RqScan> {
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
        present: forced || !queues.is_empty() || !workers.is_empty(),
        queues: names,
        version,
    })
}

impl Scanned for RqScan {
    fn present(&self) -> bool {
        self.present
    }

    /// Each queue and its failed job registry.
    fn add(self: Box<Self>, b: &RedisBackend, found: &mut Found, both: bool) {
        let lib = &b.rq;
        if !self.present {
            *lock(&lib.version) = None;
            return;
        }
        let shown = match &self.version {
            Some(v) => format!("RQ {}", clean_short(v, 20)),
            None => "RQ (no worker registered to tell its version)".to_string(),
        };
        let mut keys = HashMap::new();
        for name in &self.queues {
            let id = lib.id(name, both, false);
            let failed = lib.id(name, both, true);
            keys.insert(id.clone(), Key::Queue(name.clone()));
            keys.insert(failed.clone(), Key::Failed(name.clone()));
            let (queue, failed) = with_failed(
                id,
                failed,
                &shown,
                "the failed job registry: a redrive requeues each job to its origin queue",
            );
            found.push(queue, Flavor::Rq);
            found.push(failed, Flavor::Rq);
        }
        lib.keys.replace(keys);
        *lock(&lib.version) = self.version;
    }
}
