//! Which job libraries use this database and their queues, found by key schema: BullMQ by
//! `<prefix>:<queue>:meta` hashes (their `version` field names the library version),
//! Sidekiq by its `queues` set, `processes` set and sorted sets, RQ by its `rq:queues` and
//! `rq:workers` sets (rq/listing.rs), Celery by kombu's `_kombu.binding.*` tables
//! (kombu/listing.rs).

use std::collections::HashMap;

use ::redis::AsyncCommands;

use super::conn::map_err;
use super::{Flavor, RedisBackend, Target};
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// BullMQ queue names found by SCAN, with the version field of each meta hash.
async fn bull_queues(b: &RedisBackend) -> Result<Vec<(String, String)>> {
    let mut cm = b.conn.get().await?;
    let pattern = format!("{}:*:meta", glob_escape(&b.bull_prefix));
    let head = format!("{}:", b.bull_prefix);
    let mut names = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(5000)
            .query_async(&mut cm)
            .await
            .map_err(map_err)?;
        b.calls.bump("SCAN");
        for k in keys {
            // BullMQ refuses ':' in queue names, so the name is what sits between.
            if let Some(name) = k.strip_prefix(&head).and_then(|r| r.strip_suffix(":meta")) {
                if !name.contains(':') {
                    names.push(name.to_string());
                }
            }
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    names.sort();
    names.dedup();
    let mut pipe = ::redis::pipe();
    for n in &names {
        pipe.hget(b.bkey(n, "meta"), "version");
    }
    let versions: Vec<Option<String>> = if names.is_empty() {
        Vec::new()
    } else {
        b.calls.bump("pipeline");
        pipe.query_async(&mut cm).await.map_err(map_err)?
    };
    Ok(names
        .into_iter()
        .zip(versions)
        .map(|(n, v)| (n, v.unwrap_or_default()))
        .collect())
}

fn glob_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

struct SidekiqScan {
    present: bool,
    queues: Vec<String>,
    version: Option<String>,
}

async fn sidekiq_scan(b: &RedisBackend) -> Result<SidekiqScan> {
    let mut cm = b.conn.get().await?;
    let (queues, procs, sets): (Vec<String>, Vec<String>, u64) = ::redis::pipe()
        .smembers(b.skey("queues"))
        .smembers(b.skey("processes"))
        .exists(vec![b.skey("dead"), b.skey("retry"), b.skey("schedule")])
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("pipeline");
    // Sidekiq 7 writes its version into each process's info; 6.x does not.
    let mut version = None;
    if let Some(p) = procs.first() {
        let info: Option<String> = cm.hget(b.skey(p), "info").await.map_err(map_err)?;
        version = info
            .and_then(|i| serde_json::from_str::<serde_json::Value>(&i).ok())
            .and_then(|v| {
                v.get("version")
                    .and_then(|x| x.as_str())
                    .map(str::to_string)
            });
    }
    let mut queues = queues;
    queues.sort();
    Ok(SidekiqScan {
        present: !queues.is_empty() || !procs.is_empty() || sets > 0,
        queues,
        version,
    })
}

pub async fn list(b: &RedisBackend) -> Result<Vec<QueueInfo>> {
    let bull = match b.wants(Flavor::Bullmq) {
        Some(false) => Vec::new(),
        _ => bull_queues(b).await?,
    };
    let sk = match b.wants(Flavor::Sidekiq) {
        Some(false) => None,
        Some(true) => Some(sidekiq_scan(b).await?),
        None => Some(sidekiq_scan(b).await?).filter(|s| s.present),
    };
    let rq = match b.wants(Flavor::Rq) {
        Some(false) => None,
        Some(true) => Some(super::rq::listing::scan(b).await?),
        None => Some(super::rq::listing::scan(b).await?).filter(|s| s.present),
    };
    let celery = match b.wants(Flavor::Celery) {
        Some(false) => None,
        Some(true) => Some(super::kombu::listing::scan(b).await?),
        None => Some(super::kombu::listing::scan(b).await?).filter(|s| !s.queues.is_empty()),
    };
    let present = usize::from(!bull.is_empty())
        + usize::from(sk.is_some())
        + usize::from(rq.is_some())
        + usize::from(celery.is_some());
    let both = present > 1 || b.flavors.as_ref().is_some_and(|f| f.len() > 1);

    let mut found = Found::default();
    let mut versions = HashMap::new();
    for (name, version) in &bull {
        found.bull_queue(name, version);
        if !version.is_empty() {
            versions.insert(name.clone(), version.clone());
        }
    }
    let mut sk_version = None;
    if let Some(sk) = sk {
        found.sidekiq(b, &sk, both);
        sk_version = sk.version;
    }
    let mut rq_version = None;
    if let Some(rq) = rq {
        super::rq::listing::add(b, &mut found, &rq, both);
        rq_version = rq.version;
    }
    if let Some(celery) = &celery {
        super::kombu::listing::add(b, &mut found, celery, both);
    }
    let results = match b.wants(Flavor::Celery) {
        Some(false) => false,
        _ => super::celery_results::present(b).await?,
    };
    if results {
        found.push(super::celery_results::info(), Target::CeleryResults);
    }
    let mut c = b.cache();
    c.rq_version = rq_version;
    c.ids = found.ids;
    c.bull_versions = versions;
    c.sidekiq_version = sk_version;
    c.both = both;
    Ok(found.out)
}

/// The queues listed so far, and what each id stands for in Redis.
#[derive(Default)]
pub(super) struct Found {
    out: Vec<QueueInfo>,
    ids: HashMap<QueueId, Target>,
}

impl Found {
    pub(super) fn push(&mut self, info: QueueInfo, target: Target) {
        self.ids.insert(info.id.clone(), target);
        self.out.push(info);
    }

    /// A BullMQ queue and its failed set, which qdeck shows as its DLQ.
    fn bull_queue(&mut self, name: &str, version: &str) {
        let id = QueueId::new(name.to_string());
        let failed = QueueId::new(format!("{name}/failed"));
        let mut settings = QueueSettings::default();
        let shown = if version.is_empty() {
            "BullMQ (no version field)".to_string()
        } else {
            clean_short(version, 40)
        };
        settings.extra.insert("library".into(), shown.clone());
        let queue = QueueInfo {
            id: id.clone(),
            kind: QueueKind::Standard,
            is_dlq: false,
            dlq: Some(failed.clone()),
            dlq_sources: Vec::new(),
            settings,
        };
        let mut fs = QueueSettings::default();
        fs.extra.insert("library".into(), shown);
        fs.extra.insert(
            "holds".into(),
            "jobs that failed after their attempts".into(),
        );
        let failed = QueueInfo {
            id: failed,
            kind: QueueKind::Standard,
            is_dlq: true,
            dlq: None,
            dlq_sources: vec![id],
            settings: fs,
        };
        self.push(queue, Target::Bull(name.to_string()));
        self.push(failed, Target::BullFailed(name.to_string()));
    }

    /// Sidekiq's queues (every one seen since the backend started, not only those in its
    /// `queues` set now), its morgue as their DLQ, and its retry and scheduled sets.
    fn sidekiq(&mut self, b: &RedisBackend, sk: &SidekiqScan, both: bool) {
        let mut seen = b
            .sk_seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.extend(sk.queues.iter().cloned());
        let mut names: Vec<String> = seen.iter().cloned().collect();
        names.sort();
        drop(seen);
        let dead = b.sk_id("dead", both);
        let lib = match &sk.version {
            Some(v) => format!("Sidekiq {}", clean_short(v, 20)),
            None => "Sidekiq (version not published by its processes)".to_string(),
        };
        for name in &names {
            let mut settings = QueueSettings::default();
            settings.extra.insert("library".into(), lib.clone());
            let queue = QueueInfo {
                id: b.sk_id(name, both),
                kind: QueueKind::Standard,
                is_dlq: false,
                dlq: Some(dead.clone()),
                dlq_sources: Vec::new(),
                settings,
            };
            self.push(queue, Target::SkQueue(name.clone()));
        }
        let mut ds = QueueSettings::default();
        ds.extra.insert("library".into(), lib.clone());
        ds.extra.insert(
            "holds".into(),
            "the morgue: jobs out of retries; each goes back to its own queue".into(),
        );
        if names.is_empty() {
            ds.extra.insert(
                qdeck_model::domain::DLQ_OF.into(),
                "every Sidekiq queue (none seen yet)".into(),
            );
        }
        let morgue = QueueInfo {
            id: dead,
            kind: QueueKind::Standard,
            is_dlq: true,
            dlq: None,
            dlq_sources: names.iter().map(|n| b.sk_id(n, both)).collect(),
            settings: ds,
        };
        self.push(morgue, Target::SkDead);
        for (short, t, holds) in [
            (
                "retry",
                Target::SkRetry,
                "delayed/retrying: jobs waiting for their next attempt",
            ),
            (
                "scheduled",
                Target::SkSchedule,
                "jobs scheduled with perform_in / perform_at",
            ),
        ] {
            let mut s = QueueSettings::default();
            s.extra.insert("library".into(), lib.clone());
            s.extra.insert("holds".into(), holds.into());
            let set = QueueInfo {
                id: b.sk_id(short, both),
                kind: QueueKind::Standard,
                is_dlq: false,
                dlq: None,
                dlq_sources: Vec::new(),
                settings: s,
            };
            self.push(set, t);
        }
    }
}
