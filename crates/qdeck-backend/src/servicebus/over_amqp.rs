//! The `Backend` operations that go over AMQP when the profile's transport is `amqp`: what
//! they declare, and how `ServiceBus` hands them to `amqp`.

use super::amqp::{self, convert, Amqp};
use super::resubmit::{self, CopyPolicy};
use super::{dlq_parent, mgmt, ServiceBus};
use crate::{Backend, BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::sanitize;

/// Default LockDuration, when the key cannot read the entity's.
const DEFAULT_LOCK_SECS: f64 = 30.0;
/// Messages counted by peek at most (20 peeks of 250); beyond, the count is marked inexact.
const COUNT_BY_PEEK_CAP: u64 = 5_000;

pub fn capabilities() -> Capabilities {
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

impl ServiceBus {
    pub(super) fn amqp(&self) -> Option<&Amqp> {
        self.amqp.as_deref()
    }

    /// The scheduled messages, each under its sequence number (what cancelling takes).
    pub(super) async fn amqp_scheduled(
        &self,
        a: &Amqp,
        queue: &QueueId,
        req: &BrowseRequest,
    ) -> Result<Page> {
        let mut page = amqp::peek::browse_scheduled(a, queue.as_str(), req).await?;
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
    pub(super) async fn amqp_count_by_peek(
        &self,
        a: &Amqp,
        queue: &QueueId,
    ) -> Result<MessageCount> {
        let mut ready = 0u64;
        let mut from = 0i64;
        loop {
            let got =
                amqp::peek::peek_raw(a, queue.as_str(), from, amqp::peek::PEEK_BATCH, None).await?;
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

    pub(super) async fn amqp_redrive(
        &self,
        a: &Amqp,
        req: &RedriveRequest,
        policy: CopyPolicy,
        progress: &OpProgress,
    ) -> Result<RedriveReport> {
        let source = req.source.as_str().to_string();
        let target = resubmit::target_of(req)?;
        let parent = dlq_parent(&source).unwrap_or(source.as_str()).to_string();
        progress.phase("counting");
        // What is in the DLQ now caps the run, when the key may read it.
        let mut max = req.max;
        let mut lock_secs = DEFAULT_LOCK_SECS;
        if let Ok(Some(e)) = mgmt::get_queue(&self.rest, &parent).await {
            if let Some(n) = e.count(super::dlq_count_field(&source)) {
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
            amqp: a,
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
    pub(super) async fn amqp_purge(
        &self,
        a: &Amqp,
        queue: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport> {
        let sessions = match self.describe(queue).await {
            Ok(info) if !info.is_dlq && requires_session(&info) => {
                Some(amqp::sessions::ids(a, queue.as_str()).await?)
            }
            _ => None,
        };
        amqp::purge::purge(a, queue.as_str(), sessions, progress).await
    }

    /// Cancel a scheduled message by its sequence number.
    pub(super) async fn amqp_cancel_scheduled(
        &self,
        a: &Amqp,
        queue: &QueueId,
        id: &str,
    ) -> Result<DeleteReport> {
        let seq: i64 = id.trim().parse().map_err(|_| {
            BackendError::Invalid(format!(
                "{}: a scheduled message is cancelled by its sequence number (as `peek --scheduled` shows it)",
                sanitize::clean(id)
            ))
        })?;
        amqp::scheduled::cancel(a, queue.as_str(), &[seq]).await?;
        Ok(DeleteReport {
            deleted: 1,
            ..Default::default()
        })
    }

    pub(super) async fn amqp_send(
        &self,
        a: &Amqp,
        queue: &QueueId,
        msg: &OutgoingMessage,
    ) -> Result<Option<String>> {
        let m = convert::outgoing(msg)?;
        let id = convert::message_id(&m);
        amqp::send::send_one(a, queue.as_str(), m).await?;
        Ok(id)
    }

    pub(super) async fn amqp_send_many(
        &self,
        a: &Amqp,
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
            let mut link = match amqp::send::Link::open(a, queue.as_str()).await {
                Ok(l) => l,
                Err(e) => return vec![Err(e)],
            };
            let ids: Vec<Option<String>> = out.iter().map(convert::message_id).collect();
            let n = out.len();
            a.bump("amqp.send", n as u64);
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
}

fn requires_session(info: &QueueInfo) -> bool {
    info.settings
        .extra
        .get("requires_session")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}
