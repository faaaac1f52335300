//! BullMQ's queues, found by SCAN for `<prefix>:*:meta` hashes; the `version` field of each
//! names the library version that wrote it.

use std::collections::HashMap;

use super::{Bullmq, Key};
use crate::redis::conn::map_err;
use crate::redis::library::Scanned;
use crate::redis::listing::{scan_all, with_failed, Found};
use crate::redis::{Flavor, RedisBackend};
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// Queue names with the version field of each meta hash.
pub(super) struct BullScan {
    queues: Vec<(String, String)>,
}

pub(super) async fn scan(lib: &Bullmq, b: &RedisBackend) -> Result<BullScan> {
    let mut cm = b.conn.get().await?;
    let pattern = format!("{}:*:meta", glob_escape(&lib.prefix));
    let head = format!("{}:", lib.prefix);
    let mut names: Vec<String> = scan_all(b, &mut cm, &pattern)
        .await?
        .iter()
        // BullMQ refuses ':' in queue names, so the name is what sits between.
        .filter_map(|k| k.strip_prefix(&head).and_then(|r| r.strip_suffix(":meta")))
        .filter(|name| !name.contains(':'))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    let mut pipe = ::redis::pipe();
    for n in &names {
        pipe.hget(lib.key(n, "meta"), "version");
    }
    let versions: Vec<Option<String>> = if names.is_empty() {
        Vec::new()
    } else {
        b.calls.bump("pipeline");
        pipe.query_async(&mut cm).await.map_err(map_err)?
    };
    Ok(BullScan {
        queues: names
            .into_iter()
            .zip(versions)
            .map(|(n, v)| (n, v.unwrap_or_default()))
            .collect(),
    })
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

impl Scanned for BullScan {
    fn present(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Each queue and its failed set, which qdeck shows as its DLQ.
    fn add(self: Box<Self>, b: &RedisBackend, found: &mut Found, _both: bool) {
        let mut keys = HashMap::new();
        let mut versions = HashMap::new();
        for (name, version) in &self.queues {
            if !version.is_empty() {
                versions.insert(name.clone(), version.clone());
            }
            let id = QueueId::new(name.clone());
            let failed = QueueId::new(format!("{name}/failed"));
            let shown = if version.is_empty() {
                "BullMQ (no version field)".to_string()
            } else {
                clean_short(version, 40)
            };
            keys.insert(id.clone(), Key::Queue(name.clone()));
            keys.insert(failed.clone(), Key::Failed(name.clone()));
            let (queue, failed) =
                with_failed(id, failed, &shown, "jobs that failed after their attempts");
            found.push(queue, Flavor::Bullmq);
            found.push(failed, Flavor::Bullmq);
        }
        b.bullmq.keys.replace(keys);
        *crate::redis::library::lock(&b.bullmq.versions) = versions;
    }
}
