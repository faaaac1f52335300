//! A queue's consumers where Celery workers consume it: each AMQP consumer whose connection
//! also consumes a worker's mailbox (`<hostname>.celery.pidbox`) is that worker, shown as
//! Celery's remote control describes it (pool, prefetch, tasks held) with its channel kept
//! as the peer. Other consumers stay plain AMQP consumers; a worker that names the queue
//! among its `active_queues` but whose consumer was not matched is added.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::consumers::{to_consumer, ChannelRow, ConsumerRow};
use crate::celery::workers::{host_of_mailbox, WorkerReport};
use qdeck_model::domain::*;

fn connection_of(r: &ConsumerRow) -> Option<&str> {
    r.channel_details
        .as_ref()
        .and_then(|c| c.get("connection_name"))
        .and_then(Value::as_str)
}

/// The hostname of the Celery worker behind each AMQP connection, from its mailbox consumer.
pub fn workers_by_connection(rows: &[ConsumerRow]) -> HashMap<String, String> {
    rows.iter()
        .filter_map(|r| {
            let host = host_of_mailbox(&r.queue.name)?;
            Some((connection_of(r)?.to_string(), host.to_string()))
        })
        .collect()
}

/// The consumers of queue `name` (id `id`) in `rows`, Celery workers described by `report`.
pub fn merge(
    id: &QueueId,
    name: &str,
    vhost: &str,
    rows: &[ConsumerRow],
    channels: &[ChannelRow],
    report: &WorkerReport,
) -> Vec<Consumer> {
    let by_conn = workers_by_connection(rows);
    let mut shown: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.queue.name == name && (r.queue.vhost.is_empty() || r.queue.vhost == vhost))
    {
        let amqp = to_consumer(id, r, channels, None);
        let worker = connection_of(r)
            .and_then(|c| by_conn.get(c))
            .and_then(|h| report.workers.iter().find(|w| &w.hostname == h));
        match worker {
            Some(w) => {
                shown.insert(w.hostname.as_str());
                let mut c = w.consumer(id, name, report.at_ms);
                c.peer = match (amqp.peer, &c.peer) {
                    (Some(ch), Some(detail)) => Some(format!("{detail} · channel {ch}")),
                    (ch, detail) => ch.or_else(|| detail.clone()),
                };
                if !w.answered {
                    c.prefetch = amqp.prefetch;
                    c.holding = amqp.holding;
                }
                out.push(c);
            }
            None => out.push(amqp),
        }
    }
    for w in &report.workers {
        if w.answered && w.consumes(name) && !shown.contains(w.hostname.as_str()) {
            out.push(w.consumer(id, name, report.at_ms));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::celery::workers::CeleryWorker;

    fn row(queue: &str, conn: &str, tag: &str) -> ConsumerRow {
        serde_json::from_value(serde_json::json!({
            "consumer_tag": tag,
            "queue": {"name": queue, "vhost": "/"},
            "channel_details": {"name": format!("{conn} (1)"), "connection_name": conn},
            "ack_required": true,
            "prefetch_count": 8,
            "active": true,
        }))
        .unwrap()
    }

    #[test]
    fn a_consumer_on_a_workers_connection_is_that_worker() {
        let rows = vec![
            row("w1@h.celery.pidbox", "c1", "p1"),
            row("tasks", "c1", "t1"),
            row("tasks", "c9", "other"),
        ];
        let report = WorkerReport {
            workers: vec![
                CeleryWorker {
                    hostname: "w1@h".into(),
                    answered: true,
                    pid: Some(7),
                    queues: vec!["tasks".into()],
                    ..Default::default()
                },
                CeleryWorker {
                    hostname: "w2@h".into(),
                    answered: true,
                    queues: vec!["tasks".into()],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let c = merge(&QueueId::new("tasks"), "tasks", "/", &rows, &[], &report);
        let tags: Vec<&str> = c.iter().map(|c| c.tag.as_str()).collect();
        assert_eq!(tags, ["w1@h", "other", "w2@h"]);
        assert!(
            c[0].peer.as_deref().unwrap().contains("pid 7"),
            "{:?}",
            c[0].peer
        );
    }
}
