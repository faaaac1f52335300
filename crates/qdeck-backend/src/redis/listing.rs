//! Which job libraries use this database and their queues. Each library looks for its own
//! keys (bullmq/, sidekiq/, rq/, kombu/ listing.rs); once all have looked, each lists its
//! queues, with a library prefix on the ids when several share the database.

use std::collections::HashMap;

use ::redis::aio::ConnectionManager;

use super::conn::map_err;
use super::{Flavor, RedisBackend};
use crate::Result;
use qdeck_model::domain::*;

pub async fn list(b: &RedisBackend) -> Result<Vec<QueueInfo>> {
    let mut scans = Vec::new();
    for lib in b.libraries() {
        let forced = match b.wants(lib.flavor()) {
            Some(false) => continue,
            Some(true) => true,
            None => false,
        };
        scans.push(lib.scan(b, forced).await?);
    }
    let present = scans.iter().filter(|s| s.present()).count();
    let both = present > 1 || b.flavors.as_ref().is_some_and(|f| f.len() > 1);
    let mut found = Found::default();
    for s in scans {
        s.add(b, &mut found, both);
    }
    let mut c = b.cache();
    c.owners = found.owners;
    c.both = both;
    Ok(found.out)
}

/// The queues listed so far, and which library owns each.
#[derive(Default)]
pub(super) struct Found {
    out: Vec<QueueInfo>,
    owners: HashMap<QueueId, Flavor>,
}

impl Found {
    pub(super) fn push(&mut self, info: QueueInfo, owner: Flavor) {
        self.owners.insert(info.id.clone(), owner);
        self.out.push(info);
    }
}

/// One SCAN step from `cursor`: the next cursor and the keys matching `pattern`.
pub(super) async fn scan_step(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    cursor: u64,
    pattern: &str,
    count: usize,
) -> Result<(u64, Vec<String>)> {
    let step = ::redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count)
        .query_async(cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("SCAN");
    Ok(step)
}

/// Every key matching `pattern`, SCAN page after page.
pub(super) async fn scan_all(
    b: &RedisBackend,
    cm: &mut ConnectionManager,
    pattern: &str,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys) = scan_step(b, cm, cursor, pattern, 5000).await?;
        out.extend(keys);
        cursor = next;
        if cursor == 0 {
            return Ok(out);
        }
    }
}

/// A listing entry: a queue of `library` holding `holds` (when said), `dlq` its DLQ.
pub(super) fn entry(id: QueueId, library: &str, holds: Option<&str>) -> QueueInfo {
    let mut settings = QueueSettings::default();
    settings.extra.insert("library".into(), library.to_string());
    if let Some(h) = holds {
        settings.extra.insert("holds".into(), h.to_string());
    }
    QueueInfo {
        id,
        kind: QueueKind::Standard,
        is_dlq: false,
        dlq: None,
        dlq_sources: Vec::new(),
        settings,
    }
}

/// A queue and its failed set or registry, listed as its DLQ.
pub(super) fn with_failed(
    id: QueueId,
    failed: QueueId,
    library: &str,
    holds: &str,
) -> (QueueInfo, QueueInfo) {
    let mut queue = entry(id.clone(), library, None);
    queue.dlq = Some(failed.clone());
    let mut dlq = entry(failed, library, Some(holds));
    dlq.is_dlq = true;
    dlq.dlq_sources = vec![id];
    (queue, dlq)
}
