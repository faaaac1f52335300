//! BullMQ's workers: the connections CLIENT LIST names `<prefix>:<base64 queue>` (or
//! `...:w:<worker name>`), as BullMQ's own Queue#getWorkers finds them.

use base64::Engine;

use super::Bullmq;
use crate::redis::conn::map_err;
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

pub(super) async fn workers(
    lib: &Bullmq,
    b: &RedisBackend,
    id: &QueueId,
    q: &str,
) -> Result<Vec<Consumer>> {
    let mut cm = b.conn.get().await?;
    let list: String = ::redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut cm)
        .await
        .map_err(map_err)?;
    b.calls.bump("CLIENT LIST");
    let base = format!(
        "{}:{}",
        lib.prefix,
        base64::engine::general_purpose::STANDARD.encode(q)
    );
    let named = format!("{base}:w:");
    let mut out = Vec::new();
    for line in list.lines() {
        let field = |k: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let Some(name) = field("name") else { continue };
        if name != base && !name.starts_with(&named) {
            continue;
        }
        let idle = field("idle").and_then(|s| s.parse::<u64>().ok());
        let cmd = field("cmd").unwrap_or("");
        // A worker waiting for jobs sits in a blocking call; anything else is working.
        let state = match idle {
            Some(s) => format!(
                "connected, idle {s}s (last command {})",
                clean_short(cmd, 20)
            ),
            None => "connected".to_string(),
        };
        let last_seen_ms = idle.map(|s| now_ms() - (s as i64) * 1000);
        out.push(Consumer {
            queue: id.clone(),
            tag: clean_short(name.strip_prefix(&named).unwrap_or(name), 100),
            peer: field("addr").map(|a| clean_short(a, 60)),
            prefetch: None,
            ack_mode: AckMode::Manual,
            state,
            // The connection alone is known: idle since its last command, else taking work.
            status: if idle.is_some_and(|s| s > 0) {
                WorkerState::Idle
            } else {
                WorkerState::Active
            },
            status_since_ms: last_seen_ms.filter(|_| idle.is_some_and(|s| s > 0)),
            holding: None,
            processed: None,
            failed: None,
            rate: None,
            last_seen_ms,
        });
    }
    Ok(out)
}
