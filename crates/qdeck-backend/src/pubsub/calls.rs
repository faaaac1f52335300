//! The Subscriber and Publisher calls qdeck makes on one subscription or topic.

use std::time::Duration;

use super::proto::*;
use super::PubsubBackend;
use crate::{BackendError, Result};

/// Ack ids per Acknowledge / ModifyAckDeadline request (well under the 512 KB request limit).
const ACK_CHUNK: usize = 500;

impl PubsubBackend {
    pub(super) async fn get_subscription(&self, path: &str) -> Result<Subscription> {
        self.conn
            .unary(
                "Subscriber",
                "GetSubscription",
                GetRequest {
                    name: path.to_string(),
                },
                None,
            )
            .await
            .map_err(|e| match e {
                BackendError::NotFound(_) => BackendError::NotFound(format!(
                    "no subscription {}",
                    super::names::sub_id(path).map_or_else(|| path.to_string(), |q| q.0)
                )),
                other => other,
            })
    }

    pub(super) async fn get_topic(&self, path: &str) -> Result<Topic> {
        self.conn
            .unary(
                "Publisher",
                "GetTopic",
                GetRequest {
                    name: path.to_string(),
                },
                None,
            )
            .await
            .map_err(|e| match e {
                BackendError::NotFound(_) => BackendError::NotFound(format!(
                    "no topic {}",
                    super::names::topic_id(path).map_or_else(|| path.to_string(), |q| q.0)
                )),
                other => other,
            })
    }

    /// Up to `max` messages. The call waits (at most `wait`) for messages to arrive; a
    /// subscription with none answers empty after the wait (the fake: 0.5 s).
    pub(super) async fn pull(
        &self,
        sub: &str,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<ReceivedMessage>> {
        let r: std::result::Result<PullResponse, tonic::Status> = self
            .conn
            .unary_or_status(
                "Subscriber",
                "Pull",
                PullRequest {
                    subscription: sub.to_string(),
                    return_immediately: false,
                    max_messages: i32::try_from(max.clamp(1, 1000)).unwrap_or(1000),
                },
                Some(wait),
            )
            .await?;
        match r {
            Ok(r) => Ok(r.received_messages),
            // Nothing arrived within the wait: an empty answer, not a failure. The server says
            // so with DEADLINE_EXCEEDED; where the client's own timer fires first, tonic hands
            // back its `TimeoutExpired` as the status's source.
            Err(s) if s.code() == tonic::Code::DeadlineExceeded || timer_fired(&s) => {
                Ok(Vec::new())
            }
            Err(s) => Err(self.conn.status("Pull", &s)),
        }
    }

    pub(super) async fn modify_ack_deadline(
        &self,
        sub: &str,
        ack_ids: &[String],
        secs: i32,
    ) -> Result<()> {
        for chunk in ack_ids.chunks(ACK_CHUNK) {
            let _: Empty = self
                .conn
                .unary(
                    "Subscriber",
                    "ModifyAckDeadline",
                    ModifyAckDeadlineRequest {
                        subscription: sub.to_string(),
                        ack_deadline_seconds: secs,
                        ack_ids: chunk.to_vec(),
                    },
                    None,
                )
                .await?;
        }
        Ok(())
    }

    pub(super) async fn acknowledge(&self, sub: &str, ack_ids: &[String]) -> Result<()> {
        for chunk in ack_ids.chunks(ACK_CHUNK) {
            let _: Empty = self
                .conn
                .unary(
                    "Subscriber",
                    "Acknowledge",
                    AcknowledgeRequest {
                        subscription: sub.to_string(),
                        ack_ids: chunk.to_vec(),
                    },
                    None,
                )
                .await?;
        }
        Ok(())
    }

    /// Publish `messages` to `topic` in one request; the ids the service assigned, one each.
    pub(super) async fn publish(
        &self,
        topic: &str,
        messages: Vec<PubsubMessage>,
    ) -> Result<Vec<String>> {
        let n = messages.len();
        let r: PublishResponse = self
            .conn
            .unary(
                "Publisher",
                "Publish",
                PublishRequest {
                    topic: topic.to_string(),
                    messages,
                },
                None,
            )
            .await?;
        if r.message_ids.len() != n {
            return Err(BackendError::Protocol(format!(
                "Publish of {n} messages confirmed {}",
                r.message_ids.len()
            )));
        }
        Ok(r.message_ids)
    }

    pub(super) async fn seek_to(&self, sub: &str, ms: i64) -> Result<()> {
        let _: Empty = self
            .conn
            .unary(
                "Subscriber",
                "Seek",
                SeekRequest {
                    subscription: sub.to_string(),
                    time: Some(Timestamp::from_ms(ms)),
                },
                None,
            )
            .await?;
        Ok(())
    }
}

/// Whether tonic's own deadline timer ended the call.
fn timer_fired(s: &tonic::Status) -> bool {
    let mut src = std::error::Error::source(s);
    while let Some(e) = src {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        src = e.source();
    }
    false
}
