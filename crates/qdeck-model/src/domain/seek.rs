//! Seeking a subscription back to a time (Pub/Sub replay): what the plan says becomes
//! unacknowledged and acknowledged, and what the run did.

use serde::{Deserialize, Serialize};

use super::QueueId;

/// A seek of one subscription to `to_ms`, as planned: the confirmation shows `effects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeekPlan {
    pub queue: QueueId,
    /// Unix time in milliseconds the subscription is sought to.
    pub to_ms: i64,
    /// What becomes unacknowledged, what becomes acknowledged, and how far back the broker
    /// keeps messages, in words: the confirmation, the dry run and the audit line say these.
    pub effects: Vec<String>,
}

/// What a seek did. The broker does not say how many messages it brought back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeekReport {
    pub to_ms: i64,
    pub note: Option<String>,
}
