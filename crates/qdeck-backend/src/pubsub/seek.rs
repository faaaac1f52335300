//! Replay: seek a subscription to a past time. Every message published after it that the
//! topic still keeps becomes unacknowledged and is delivered again; every one published
//! before it is acknowledged. Pub/Sub says neither how many nor which.

use chrono::DateTime;

use super::names::Target;
use super::PubsubBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

fn time_text(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms).map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339())
}

fn days(d: Option<&super::proto::Duration>) -> String {
    match d {
        Some(d) if d.seconds > 0 => super::figures::age_words(d.seconds * 1000),
        // Pub/Sub's default retention of a subscription's messages.
        _ => "7 days (the default)".to_string(),
    }
}

pub async fn plan(b: &PubsubBackend, queue: &QueueId, to_ms: i64) -> Result<SeekPlan> {
    let t = Target::parse(queue)?;
    if let Target::Topic { .. } = t {
        return Err(BackendError::Unsupported(format!(
            "{queue} is a topic: replay seeks one of its subscriptions"
        )));
    }
    let now = now_ms();
    if to_ms > now {
        return Err(BackendError::Invalid(format!(
            "{} is in the future: replay seeks back; to acknowledge everything up to now, purge",
            time_text(to_ms)
        )));
    }
    let sub = b.get_subscription(&t.path()).await?;
    let when = time_text(to_ms);
    let topic = super::names::topic_id(&sub.topic).map_or(sub.topic.clone(), |q| q.0);
    let retention = days(sub.message_retention_duration.as_ref());
    let acked_back = if sub.retain_acked_messages {
        format!("acknowledged ones too: {queue} retains acknowledged messages (for {retention})")
    } else {
        format!("only those not yet acknowledged: {queue} does not retain acknowledged messages (retain_acked_messages is off), so those cannot come back")
    };
    Ok(SeekPlan {
        queue: queue.clone(),
        to_ms,
        effects: vec![
            format!("messages published to {topic} since {when} become unacknowledged on {queue} and are delivered to its subscribers again ({acked_back})"),
            format!("messages published before {when} are acknowledged on {queue}: any of them not yet processed are not delivered again"),
            "Pub/Sub does not say how many: the count is unknown".to_string(),
            format!("only {queue} moves; the topic's other subscriptions keep their place"),
        ],
    })
}

pub async fn seek(b: &PubsubBackend, plan: &SeekPlan) -> Result<SeekReport> {
    let t = Target::parse(&plan.queue)?;
    b.seek_to(&t.path(), plan.to_ms).await?;
    Ok(SeekReport {
        to_ms: plan.to_ms,
        note: Some(format!(
            "sought to {}: messages published since are delivered again (Pub/Sub does not say how many)",
            time_text(plan.to_ms)
        )),
    })
}
