//! Who consumes: what the JetStream API says about a consumer's clients. A pull consumer shows
//! its waiting pull requests and the messages it waits for acks on; a push consumer whether
//! a subscription is bound to its deliver subject. Neither names the clients: their
//! identities (address, name, language) are on the server's monitoring port (`/connz`), read
//! when the profile sets `monitor_url`, for push consumers (one row per subscribed client).

use super::model::{rfc3339_ms, ConsumerInfo};
use super::{figures, NatsBackend, Target};
use crate::Result;
use qdeck_model::domain::*;

pub const IDENTITY_NOTE: &str = "JetStream does not name a consumer's clients: their addresses and names are only on the server's monitoring port (/connz; set monitor_url to read it for push consumers)";

pub async fn consumers(b: &NatsBackend, queue: &QueueId) -> Result<Vec<Consumer>> {
    let list = match Target::parse(queue) {
        Target::Stream(s) => {
            b.stream(&s).await?;
            figures::consumers_of(b, &s).await?
        }
        Target::Consumer(s, c) => vec![b.consumer(&s, &c).await?],
    };
    let conns = match &b.monitor {
        Some(m) if list.iter().any(ConsumerInfo::is_push) => m.connections(&b.calls).await?,
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for c in &list {
        let base = row(c);
        let subject = c.config.deliver_subject.as_deref().unwrap_or("");
        let clients: Vec<_> = conns
            .iter()
            .filter(|k| c.is_push() && k.subscribes_to(subject))
            .collect();
        if clients.is_empty() {
            out.push(base);
        } else {
            out.extend(clients.into_iter().map(|k| Consumer {
                peer: Some(k.label()),
                ..base.clone()
            }));
        }
    }
    Ok(out)
}

fn row(c: &ConsumerInfo) -> Consumer {
    let last = c.delivered.last_active.as_deref().and_then(rfc3339_ms);
    let (tag, status, state) = if c.is_push() {
        let subj = c.config.deliver_subject.clone().unwrap_or_default();
        if c.push_bound {
            (
                format!("push → {subj}"),
                WorkerState::Active,
                "bound".to_string(),
            )
        } else {
            (
                format!("push → {subj}"),
                WorkerState::Gone,
                "no subscription bound".to_string(),
            )
        }
    } else if c.num_waiting > 0 {
        (
            "pull".to_string(),
            WorkerState::Waiting,
            format!("{} pull request(s) waiting", c.num_waiting),
        )
    } else if c.num_ack_pending > 0 {
        (
            "pull".to_string(),
            WorkerState::Busy,
            format!("{} unacked", c.num_ack_pending),
        )
    } else {
        (
            "pull".to_string(),
            WorkerState::Idle,
            "no pull waiting".to_string(),
        )
    };
    Consumer {
        queue: figures::consumer_id(&c.stream_name, &c.name),
        tag,
        peer: Some(IDENTITY_NOTE.to_string()),
        prefetch: u32::try_from(c.config.max_ack_pending).ok(),
        ack_mode: if c.config.ack_policy == "none" {
            AckMode::Auto
        } else {
            AckMode::Manual
        },
        state,
        status,
        status_since_ms: last,
        holding: Some(c.num_ack_pending),
        processed: None,
        failed: None,
        rate: None,
        last_seen_ms: last,
    }
}
