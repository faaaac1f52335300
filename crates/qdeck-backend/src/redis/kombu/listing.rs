//! Celery's queues on kombu's Redis transport (kombu 5.x, `kombu/transport/redis.py`), found
//! by the binding tables kombu writes when a queue is declared: the set
//! `_kombu.binding.<exchange>` holds `routing_key SEP pattern SEP queue` for each bound queue,
//! SEP being `\x06\x16`. Each queue is a list named after it, plus one list per priority step
//! (`<queue>\x06\x163`, `…6`, `…9`); messages being worked on sit in the `unacked` hash and
//! the `unacked_index` sorted set until acked or restored.

use std::collections::{BTreeSet, HashMap};

use super::Key;
use crate::redis::conn::map_err;
use crate::redis::library::Scanned;
use crate::redis::listing::{entry, scan_all, Found};
use crate::redis::{Flavor, RedisBackend};
use crate::Result;

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
    present: bool,
    queues: Vec<String>,
    /// Whether Celery's result backend keeps results here (results.rs).
    results: bool,
}

pub async fn scan(b: &RedisBackend, forced: bool) -> Result<KombuScan> {
    let mut cm = b.conn.get().await?;
    let tables = scan_all(b, &mut cm, &format!("{BINDING_PREFIX}*")).await?;
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
        present: forced || !queues.is_empty(),
        queues: queues.into_iter().collect(),
        results: super::results::present(b).await?,
    })
}

impl Scanned for KombuScan {
    fn present(&self) -> bool {
        self.present
    }

    /// Each Celery queue (Celery keeps no dead-letter list on Redis: none is linked), and the
    /// failed results when the result backend is here.
    fn add(self: Box<Self>, b: &RedisBackend, found: &mut Found, both: bool) {
        let lib = &b.kombu;
        let mut keys = HashMap::new();
        let queues = if self.present { &self.queues[..] } else { &[] };
        for name in queues {
            let mut info = entry(
                lib.id(name, both),
                "Celery (kombu Redis transport)",
                Some("task messages, one list per priority step (0, 3, 6, 9); eta/countdown tasks wait in the list and in the worker"),
            );
            // The app's own `visibility_timeout` lives in its config, not in Redis.
            info.settings.extra.insert(
                "visibility timeout".into(),
                "kombu's default is 1 h; the app's transport options may set another".into(),
            );
            keys.insert(info.id.clone(), Key::Queue(name.clone()));
            found.push(info, Flavor::Celery);
        }
        if self.results {
            let info = super::results::info();
            keys.insert(info.id.clone(), Key::Results);
            found.push(info, Flavor::Celery);
        }
        lib.keys.replace(keys);
    }
}
