//! Workers from `/api/consumers`: tag, channel and peer, prefetch (0 = unlimited, flagged),
//! ack mode (auto-ack flagged), activity.

use serde::Deserialize;
use serde_json::Value;

use qdeck_model::domain::*;

#[derive(Debug, Clone, Deserialize)]
pub struct ConsumerQueue {
    pub name: String,
    #[serde(default)]
    pub vhost: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConsumerRow {
    #[serde(default)]
    pub consumer_tag: String,
    pub queue: ConsumerQueue,
    #[serde(default)]
    pub channel_details: Option<Value>,
    #[serde(default)]
    pub ack_required: Option<bool>,
    #[serde(default)]
    pub prefetch_count: Option<u64>,
    #[serde(default)]
    pub exclusive: Option<bool>,
    #[serde(default)]
    pub active: Option<bool>,
    #[serde(default)]
    pub activity_status: Option<String>,
}

/// A channel's unacknowledged count: a consumer's holding when it is alone on its channel.
#[derive(Debug, Clone, Deserialize)]
pub struct ChannelRow {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub messages_unacknowledged: Option<u64>,
    #[serde(default)]
    pub consumer_count: Option<u64>,
}

/// One consumer; `given` is the name its client gave the connection, which leads its tag
/// (the tag alone is `amq.ctag-…`, which says nothing about who consumes).
pub fn to_consumer(
    id: &QueueId,
    r: &ConsumerRow,
    channels: &[ChannelRow],
    given: Option<&str>,
) -> Consumer {
    let ch = r.channel_details.as_ref();
    let s = |k: &str| {
        ch.and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let peer = match (
        s("name"),
        s("peer_host"),
        ch.and_then(|c| c.get("peer_port")).and_then(Value::as_u64),
    ) {
        (Some(name), Some(h), Some(p)) => Some(format!("{name} (peer {h}:{p})")),
        (Some(name), _, _) => Some(name),
        (None, Some(h), Some(p)) => Some(format!("{h}:{p}")),
        _ => None,
    };
    let ack_mode = match r.ack_required {
        Some(true) => AckMode::Manual,
        Some(false) => AckMode::Auto,
        None => AckMode::Unknown,
    };
    let status = match (r.activity_status.as_deref(), r.active) {
        (Some("up" | "single_active"), _) | (None, Some(true)) => WorkerState::Active,
        (Some("waiting" | "suspended"), _) | (None, Some(false)) => WorkerState::Waiting,
        _ => WorkerState::Unknown,
    };
    let mut state = match (&r.activity_status, r.active) {
        (Some(a), _) => a.clone(),
        (None, Some(true)) => "up".into(),
        (None, Some(false)) => "inactive".into(),
        (None, None) => "unknown".into(),
    };
    if r.exclusive == Some(true) {
        state.push_str(", exclusive");
    }
    if r.prefetch_count == Some(0) && ack_mode == AckMode::Manual {
        state.push_str(", prefetch unlimited (0): may hoard messages");
    }
    if ack_mode == AckMode::Auto {
        state.push_str(", auto-ack: in-flight work is lost if it crashes");
    }
    Consumer {
        queue: id.clone(),
        tag: match given {
            Some(n) => format!("{n} · {}", r.consumer_tag),
            None => r.consumer_tag.clone(),
        },
        peer,
        prefetch: r.prefetch_count.map(|p| p.min(u32::MAX as u64) as u32),
        ack_mode,
        state,
        status,
        status_since_ms: None,
        holding: s("name").and_then(|n| {
            channels
                .iter()
                .find(|c| c.name == n && c.consumer_count == Some(1))
                .and_then(|c| c.messages_unacknowledged)
        }),
        processed: None,
        failed: None,
        rate: None,
        last_seen_ms: None,
    }
}
