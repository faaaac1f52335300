//! `Transport` over AMQP (profile `transport = "amqp"`, the default): a true peek, sessions,
//! scheduled and deferred messages. What it declares, and how each operation is handed to the
//! modules beside this one.

use async_trait::async_trait;

use super::{convert, Amqp};
use crate::servicebus::amqp;
use crate::servicebus::copy_policy::{target_of, CopyPolicy};
use crate::servicebus::transport::Transport;
use crate::servicebus::{dlq_count_field, dlq_parent, mgmt, ServiceBus, DELETE_COST};
use crate::{Backend, BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::sanitize;

/// Default LockDuration, when the key cannot read the entity's.
const DEFAULT_LOCK_SECS: f64 = 30.0;
/// Messages counted by peek at most (20 peeks of 250); beyond, the count is marked inexact.
const COUNT_BY_PEEK_CAP: u64 = 5_000;

fn capabilities() -> Capabilities {
    Capabilities {
        browse: BrowseEffect::None,
        redrive: RedriveMode::ClientSide,
        age: AgeSource::Unknown("Service Bus reports no age of oldest message".to_string()),
        consumers: ConsumerListing::Unsupported(
            "Service Bus does not list the receivers of a queue".to_string(),
        ),
        purge_cooldown_secs: None,
        purge_note: Some(
            "Purge receives and deletes messages in batches over AMQP; messages locked by other receivers, deferred and scheduled messages are not purged"
                .to_string(),
        ),
        broker_rates: false,
        notes: vec![
            "Browsing peeks over AMQP (com.microsoft:peek-message): no lock is taken and DeliveryCount does not change; scheduled and deferred messages show with their State".to_string(),
            "Depth is ActiveMessageCount, which includes locked messages: Service Bus does not report in-flight separately".to_string(),
            "Counts need a key with Manage rights".to_string(),
            "Deleting chosen messages receives every message it passes in peek-lock, completes the chosen ones and abandons the others (their DeliveryCount +1); only on dead-letter queues".to_string(),
        ],
    }
}

impl Amqp {
    /// The scheduled messages, each under its sequence number (what cancelling takes).
    async fn peek_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        let mut page = amqp::peek::browse_scheduled(self, queue.as_str(), req).await?;
        for m in &mut page.messages {
            if let Some(seq) = m.seq {
                m.id = seq.to_string();
            }
        }
        page.effect_note = Some(
            "listed by peek: each is shown under its sequence number, which `cancel-scheduled` takes"
                .into(),
        );
        Ok(page)
    }

    /// Count the messages a redrive or purge would take by peeking (scheduled ones are left
    /// out: neither takes them), for a key without the Manage right the management API's
    /// figures need. Exact up to `COUNT_BY_PEEK_CAP`, marked inexact beyond.
    async fn count_by_peek(&self, queue: &QueueId) -> Result<MessageCount> {
        let mut ready = 0u64;
        let mut from = 0i64;
        loop {
            let got =
                amqp::peek::peek_raw(self, queue.as_str(), from, amqp::peek::PEEK_BATCH, None)
                    .await?;
            let Some(last) = got.last().and_then(convert::sequence_number) else {
                return Ok(MessageCount {
                    ready,
                    in_flight: None,
                    exact: true,
                });
            };
            ready += got
                .iter()
                .filter(|m| convert::state_name(m) != Some("Scheduled"))
                .count() as u64;
            if ready >= COUNT_BY_PEEK_CAP {
                return Ok(MessageCount {
                    ready,
                    in_flight: None,
                    exact: false,
                });
            }
            from = last + 1;
        }
    }
}

#[async_trait]
impl Transport for Amqp {
    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    /// A session receiver takes every kind of entity REST refuses.
    fn receive_refusal(&self, _info: &QueueInfo) -> Option<String> {
        None
    }

    /// Peeking needs only Listen, so a key without Manage can still plan a redrive or purge.
    async fn count_unreadable(
        &self,
        queue: &QueueId,
        _forbidden: BackendError,
    ) -> Result<MessageCount> {
        self.count_by_peek(queue).await
    }

    async fn browse(&self, _sb: &ServiceBus, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        amqp::peek::browse(self, queue.as_str(), req, None).await
    }

    async fn sessions(&self, queue: &QueueId) -> Result<Vec<SessionInfo>> {
        amqp::sessions::list(self, queue.as_str()).await
    }

    async fn browse_session(
        &self,
        queue: &QueueId,
        session: &str,
        req: &BrowseRequest,
    ) -> Result<Page> {
        amqp::peek::browse(self, queue.as_str(), req, Some(session)).await
    }

    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing> {
        Some(self)
    }

    async fn redrive(
        &self,
        req: &RedriveRequest,
        policy: CopyPolicy,
        progress: &OpProgress,
    ) -> Result<RedriveReport> {
        let source = req.source.as_str().to_string();
        let target = target_of(req)?;
        let parent = dlq_parent(&source).unwrap_or(source.as_str()).to_string();
        progress.phase("counting");
        // What is in the DLQ now caps the run, when the key may read it.
        let mut max = req.max;
        let mut lock_secs = DEFAULT_LOCK_SECS;
        if let Ok(Some(e)) = mgmt::get_queue(&self.rest, &parent).await {
            if let Some(n) = e.count(dlq_count_field(&source)) {
                max = Some(max.map_or(n, |m| m.min(n)));
            }
            if let Some(s) = e
                .fields
                .get("LockDuration")
                .and_then(|d| mgmt::iso_duration_secs(d))
            {
                lock_secs = s;
            }
        }
        let run = amqp::redrive::Run {
            amqp: self,
            source,
            target,
            max,
            policy,
            lock_secs,
        };
        amqp::redrive::resubmit(run, req, progress).await
    }

    /// Purge; a session-enabled entity session by session (a receiver without a session
    /// filter is refused there).
    async fn purge(
        &self,
        sb: &ServiceBus,
        queue: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport> {
        let sessions = match sb.describe(queue).await {
            Ok(info) if !info.is_dlq && requires_session(&info) => {
                Some(amqp::sessions::ids(self, queue.as_str()).await?)
            }
            _ => None,
        };
        amqp::purge::purge(self, queue.as_str(), sessions, progress).await
    }

    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        let m = convert::outgoing(&msg)?;
        let id = convert::message_id(&m);
        amqp::send::send_one(self, queue.as_str(), m).await?;
        Ok(id)
    }

    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        // Results stop at the first failure, as they do when the link fails: the messages
        // before one that cannot be converted are sent, it and those after it are not.
        let mut out = Vec::with_capacity(msgs.len());
        let mut refused = None;
        for m in &msgs {
            match convert::outgoing(m) {
                Ok(m) => out.push(m),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let mut results: Vec<Result<Option<String>>> = Vec::with_capacity(msgs.len());
        if !out.is_empty() {
            let mut link = match amqp::send::Link::open(self, queue.as_str()).await {
                Ok(l) => l,
                Err(e) => return vec![Err(e)],
            };
            let ids: Vec<Option<String>> = out.iter().map(convert::message_id).collect();
            let n = out.len();
            self.bump("amqp.send", n as u64);
            let sent = link.send_all(out).await;
            link.close().await;
            let complete = sent.len() == n && sent.iter().all(Result::is_ok);
            results.extend(sent.into_iter().zip(ids).map(|(r, id)| r.map(|()| id)));
            if !complete {
                return results;
            }
        }
        results.extend(refused.map(Err));
        results
    }

    /// Deferred messages are taken by sequence number, touching no other message; anything
    /// else only on a dead-letter queue, where the peek-lock it takes does no harm.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        let is_dlq = dlq_parent(queue.as_str()).is_some();
        if is_dlq || amqp::purge::all_deferred(self, queue.as_str(), ids).await? {
            return amqp::purge::delete_ids(self, queue.as_str(), ids, progress).await;
        }
        Err(BackendError::Refused(format!(
            "{queue}: {DELETE_COST}; refused"
        )))
    }
}

fn requires_session(info: &QueueInfo) -> bool {
    info.settings
        .extra
        .get("requires_session")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

#[async_trait]
impl crate::ScheduledListing for Amqp {
    async fn browse_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        self.peek_scheduled(queue, req).await
    }

    /// Cancel a scheduled message by its sequence number.
    async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        _progress: &OpProgress,
    ) -> Result<DeleteReport> {
        let seq: i64 = id.trim().parse().map_err(|_| {
            BackendError::Invalid(format!(
                "{}: a scheduled message is cancelled by its sequence number (as `peek --scheduled` shows it)",
                sanitize::clean(id)
            ))
        })?;
        amqp::scheduled::cancel(self, queue.as_str(), &[seq]).await?;
        Ok(DeleteReport {
            deleted: 1,
            ..Default::default()
        })
    }
}
