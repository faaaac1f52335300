//! Figures over AMQP alone, for when the management plugin is off or unreachable: a passive
//! `queue.declare` per queue gives the ready count and the consumer count, nothing else.

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::Channel;

use super::conn::amqp_error;
use super::RabbitBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

pub const NOTICE: &str = "management API unavailable: only ready count and consumers (over AMQP)";

pub async fn amqp_stats(b: &RabbitBackend, queues: &[QueueId]) -> Result<StatsBatch> {
    let mut batch = StatsBatch::default();
    let mut ch: Option<(String, Channel)> = None;
    for id in queues {
        let (vhost, name) = b.resolve(id);
        let channel = match &ch {
            Some((v, c)) if *v == vhost && c.status().connected() => c.clone(),
            _ => {
                let c = b.pool.channel(&vhost).await?;
                ch = Some((vhost.clone(), c.clone()));
                c
            }
        };
        b.calls.bump("amqp:queue.declare");
        let r = channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await;
        match r {
            Ok(q) => batch.stats.push(QueueStats {
                id: id.clone(),
                at_ms: now_ms(),
                depth: Some(q.message_count() as u64),
                consumers: Some(q.consumer_count()),
                age_note: Some(NOTICE.to_string()),
                ..Default::default()
            }),
            Err(e) => {
                // A failed passive declare closes the channel: open a new one next time.
                ch = None;
                match amqp_error(&e, &format!("queue '{id}'")) {
                    BackendError::NotFound(_) => batch.errors.push((
                        id.clone(),
                        QueueError::not_found(format!("queue '{id}' not found (deleted?)")),
                    )),
                    other => return Err(other),
                }
            }
        }
    }
    Ok(batch)
}
