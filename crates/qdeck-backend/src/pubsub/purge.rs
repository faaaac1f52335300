//! Purge = seek the subscription to now: every message published before that instant is
//! acknowledged on this subscription (the topic's other subscriptions keep theirs).

use super::names::Target;
use super::PubsubBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

pub const NOTE: &str = "purge seeks the subscription to now: every message published before it is acknowledged, on this subscription only (its topic's other subscriptions keep theirs); messages published during the seek may survive it";

pub async fn purge(b: &PubsubBackend, queue: &QueueId) -> Result<PurgeReport> {
    let t = Target::parse(queue)?;
    if let Target::Topic { .. } = t {
        return Err(BackendError::Unsupported(format!(
            "{queue} is a topic: it holds no messages; purge its subscriptions"
        )));
    }
    let path = t.path();
    b.get_subscription(&path).await?;
    let at = now_ms();
    b.seek_to(&path, at).await?;
    let when = ms_to_datetime(at).map_or_else(String::new, |t| t.to_rfc3339());
    Ok(PurgeReport {
        // Pub/Sub does not say how many a seek acknowledged.
        purged: None,
        note: Some(format!(
            "sought to {when}: everything published before it is acknowledged (Pub/Sub does not say how many)"
        )),
    })
}
