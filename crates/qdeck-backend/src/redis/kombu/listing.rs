//! Celery's queues on kombu's Redis transport (kombu 5.x, `kombu/transport/redis.py`), found
//! by the binding tables kombu writes when a queue is declared: the set
//! `_kombu.binding.<exchange>` holds `routing_key SEP pattern SEP queue` for each bound queue,
//! SEP being `\x06\x16`. Each queue is a list named after it, plus one list per priority step
//! (`<queue>\x06\x163`, `…6`, `…9`); messages being worked on sit in the `unacked` hash and
//! the `unacked_index` sorted set until acked or restored.

use std::collections::BTreeSet;

use crate::redis::conn::map_err;
use crate::redis::listing::Found;
use crate::redis::{RedisBackend, Target};
use crate::Result;
use qdeck_model::domain::*;

/// kombu's separator inside binding members and priority list names.
pub const SEP: &str = "\x06\x16";
pub const BINDING_PREFIX: &str = "_kombu.binding.";
pub const UNACKED: &str = "unacked";
pub const UNACKED_INDEX: &str = "unacked_index";
/// kombu's default priority steps; the list of step 0 is the queue's own name.
pub const PRIORITY_STEPS: [u8; 4] = [0, 3, 6, 9];
/// kombu's default visibility timeout (transport option `visibility_timeout`), seconds.
pub const VISIBILITY_TIMEOUT_SECS: f64 = 3600.0;

/// The lists of a queue in the order kombu's `_get` pops them (step 0 first).
pub fn lists(queue: &str) -> Vec<String> {
    PRIORITY_STEPS
        .iter()
        .map(|p| {
            if *p == 0 {
                queue.to_string()
            } else {
                format!("{queue}{SEP}{p}")
            }
        })
        .collect()
}

/// Exchanges and queues Celery uses for events and remote control, not for tasks: fanout
/// over pub/sub, so no list holds their messages.
fn is_control(exchange: &str, queue: &str) -> bool {
    exchange == "celeryev"
        || exchange.ends_with("pidbox")
        || queue.starts_with("celeryev.")
        || queue.ends_with(".pidbox")
}

pub struct KombuScan {
    pub queues: Vec<String>,
}

pub async fn scan(b: &RedisBackend) -> Result<KombuScan> {
    let mut cm = b.conn.get().await?;
    let mut tables = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{BINDING_PREFIX}*"))
            .arg("COUNT")
            .arg(5000)
            .query_async(&mut cm)
            .await
            .map_err(map_err)?;
        b.calls.bump("SCAN");
        tables.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let mut queues = BTreeSet::new();
    if !tables.is_empty() {
        let mut pipe = ::redis::pipe();
        for t in &tables {
            pipe.smembers(t);
        }
        b.calls.bump("pipeline");
        let members: Vec<Vec<String>> = pipe.query_async(&mut cm).await.map_err(map_err)?;
        for (table, ms) in tables.iter().zip(members) {
            let exchange = table.strip_prefix(BINDING_PREFIX).unwrap_or(table);
            for m in ms {
                let queue = m.rsplit(SEP).next().unwrap_or("");
                if !queue.is_empty() && !is_control(exchange, queue) {
                    queues.insert(queue.to_string());
                }
            }
        }
    }
    Ok(KombuScan {
        queues: queues.into_iter().collect(),
    })
}

/// Each Celery queue. Celery keeps no dead-letter list on Redis: none is linked.
pub fn add(b: &RedisBackend, found: &mut Found, scan: &KombuScan, both: bool) {
    for name in &scan.queues {
        let mut settings = QueueSettings::default();
        // The app's own `visibility_timeout` lives in its config, not in Redis.
        settings.extra.insert(
            "visibility timeout".into(),
            "kombu's default is 1 h; the app's transport options may set another".into(),
        );
        settings
            .extra
            .insert("library".into(), "Celery (kombu Redis transport)".into());
        settings.extra.insert(
            "holds".into(),
            "task messages, one list per priority step (0, 3, 6, 9); eta/countdown tasks wait in the list and in the worker".into(),
        );
        let info = QueueInfo {
            id: b.celery_id(name, both),
            kind: QueueKind::Standard,
            is_dlq: false,
            dlq: None,
            dlq_sources: Vec::new(),
            settings,
        };
        found.push(info, Target::Celery(name.clone()));
    }
}
