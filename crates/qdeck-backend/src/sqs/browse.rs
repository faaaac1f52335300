//! Browse (SQS has no peek: receive with a short visibility timeout, then
//! ChangeMessageVisibility 0), send, and the receive/visibility helpers redrive shares.

use std::collections::HashSet;

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message as SqsMessage, MessageAttributeValue,
    MessageSystemAttributeName,
};

use super::attributes;
use super::client::map_sdk;
use super::{ops, QueueMeta, SqsBackend};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Visibility timeout while a browsed page is held (seconds). If qdeck dies mid-browse the
/// messages come back on their own after this.
pub(crate) const BROWSE_VISIBILITY: i32 = 30;
/// Largest page a browse returns.
pub(crate) const MAX_PAGE: usize = 100;

impl SqsBackend {
    /// ReceiveMessage with all system and message attributes.
    pub(crate) async fn receive(
        &self,
        id: &QueueId,
        meta: &QueueMeta,
        max: i32,
        visibility: i32,
        wait: i32,
    ) -> Result<Vec<SqsMessage>> {
        let out = self
            .clients(meta.region)
            .sqs
            .receive_message()
            .queue_url(&meta.url)
            .max_number_of_messages(max.clamp(1, 10))
            .visibility_timeout(visibility)
            .wait_time_seconds(wait)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| map_sdk(ops::RECEIVE, id.as_str(), &e, self.profile_name()).err)?;
        Ok(out.messages().to_vec())
    }

    /// Set the visibility of these receipt handles (batches of 10). Returns how many failed.
    pub(crate) async fn set_visibility(
        &self,
        id: &QueueId,
        meta: &QueueMeta,
        handles: &[String],
        secs: i32,
    ) -> (u64, Vec<String>) {
        let mut failed = 0u64;
        let mut errors = Vec::new();
        for chunk in handles.chunks(10) {
            let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(format!("v{i}"))
                        .receipt_handle(h)
                        .visibility_timeout(secs)
                        .build()
                        .ok()
                })
                .collect();
            match self
                .clients(meta.region)
                .sqs
                .change_message_visibility_batch()
                .queue_url(&meta.url)
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(out) => {
                    for f in out.failed() {
                        failed += 1;
                        errors.push(format!("{}: {}", f.code(), f.message().unwrap_or("")));
                    }
                }
                Err(e) => {
                    failed += chunk.len() as u64;
                    errors.push(
                        map_sdk(ops::CHANGE_VIS_BATCH, id.as_str(), &e, self.profile_name())
                            .err
                            .to_string(),
                    );
                }
            }
        }
        (failed, errors)
    }
}

fn sys(m: &SqsMessage, k: MessageSystemAttributeName) -> Option<&str> {
    m.attributes().and_then(|a| a.get(&k)).map(String::as_str)
}

fn ts_display(ms: &str) -> String {
    match ms.trim().parse::<i64>().ok().and_then(ms_to_datetime) {
        Some(d) => format!("{ms} ({})", d.format("%Y-%m-%dT%H:%M:%S%.3fZ")),
        None => ms.to_string(),
    }
}

/// A received SQS message as a domain message: the settable system attributes (group and
/// deduplication id) as properties, the other system attributes as metadata, and the message
/// attributes as typed headers.
pub(crate) fn to_message(b: &SqsBackend, m: &SqsMessage, sources: &[QueueId]) -> Message {
    let mut properties = Vec::new();
    let mut meta = Vec::new();
    if let Some(a) = m.attributes() {
        let mut sys: Vec<(&str, &String)> = a.iter().map(|(k, v)| (k.as_str(), v)).collect();
        sys.sort();
        for (k, v) in sys {
            if crate::headers::rules_of(BrokerKind::Sqs)
                .properties
                .contains(&k)
            {
                properties.push((k.to_string(), Value::str(v.as_str())));
            } else if k.ends_with("Timestamp") {
                meta.push((k.to_string(), Value::String(ts_display(v))));
            } else {
                meta.push((k.to_string(), Value::str(v.as_str())));
            }
        }
    }
    let mut headers = Vec::new();
    if let Some(ma) = m.message_attributes() {
        let mut attrs: Vec<(&String, &MessageAttributeValue)> = ma.iter().collect();
        attrs.sort_by(|x, y| x.0.cmp(y.0));
        for (k, v) in attrs {
            headers.push((k.clone(), attributes::to_value(v)));
        }
    }
    let src_arn = sys(m, MessageSystemAttributeName::DeadLetterQueueSourceArn);
    let dead_letter = match src_arn {
        Some(arn) => Some(DeadLetterInfo {
            reason: Some("maxReceiveCount exceeded".to_string()),
            description: Some(format!("DeadLetterQueueSourceArn {arn}")),
            origin: b.id_for_arn(arn),
            ..DeadLetterInfo::default()
        }),
        None if sources.len() == 1 => Some(DeadLetterInfo {
            reason: None,
            description: Some(
                "origin inferred: the only queue whose RedrivePolicy targets this one".to_string(),
            ),
            origin: sources.first().cloned(),
            ..DeadLetterInfo::default()
        }),
        None => None,
    };
    Message {
        id: m.message_id().unwrap_or_default().to_string(),
        seq: sys(m, MessageSystemAttributeName::SequenceNumber).and_then(|s| s.parse::<i64>().ok()),
        enqueued_ms: sys(m, MessageSystemAttributeName::SentTimestamp)
            .and_then(|s| s.parse::<i64>().ok()),
        receive_count: sys(m, MessageSystemAttributeName::ApproximateReceiveCount)
            .and_then(|s| s.parse::<u64>().ok()),
        key: sys(m, MessageSystemAttributeName::MessageGroupId).map(str::to_string),
        properties,
        headers,
        meta,
        body: m.body().unwrap_or_default().as_bytes().to_vec(),
        body_null: false,
        dead_letter,
    }
}

pub(crate) async fn browse(b: &SqsBackend, id: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let meta = b.resolve_full(id).await?;
    if !req.force {
        if let Some(p) = &meta.redrive {
            return Err(BackendError::RefusedUnlessForced(format!(
                "browsing {id} receives each message once (receive count +1) and this queue \
                 dead-letters after {} receives: a message already received {} time(s) would \
                 lose its last attempt or move to the DLQ; SQS cannot show receive counts \
                 without receiving, so use force to browse anyway",
                p.max_receives,
                p.max_receives.saturating_sub(1)
            )));
        }
        if let Some(e) = &meta.redrive_error {
            return Err(BackendError::RefusedUnlessForced(format!(
                "browsing {id} could dead-letter messages and its RedrivePolicy cannot be read \
                 ({e}); use force to browse anyway"
            )));
        }
    }
    let want = req.max.clamp(1, MAX_PAGE);
    let mut got: Vec<SqsMessage> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut error: Option<BackendError> = None;
    while got.len() < want {
        let n = (want - got.len()).min(10) as i32;
        match b.receive(id, &meta, n, BROWSE_VISIBILITY, 1).await {
            Ok(batch) if batch.is_empty() => break,
            Ok(batch) => {
                let mut fresh = 0;
                for m in batch {
                    let mid = m.message_id().unwrap_or_default().to_string();
                    if seen.insert(mid) {
                        fresh += 1;
                    }
                    got.push(m);
                }
                if fresh == 0 {
                    break;
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // Give every received message back, even if a later receive failed.
    let handles: Vec<String> = got
        .iter()
        .filter_map(|m| m.receipt_handle().map(str::to_string))
        .collect();
    let (vis_failed, _) = b.set_visibility(id, &meta, &handles, 0).await;
    if got.is_empty() {
        if let Some(e) = error {
            return Err(e);
        }
    }
    b.invalidate(id);
    // Origin of dead letters: known sources (one cached call when not listed yet).
    let sources = b.dlq_sources(id).await.unwrap_or_default();
    let mut by_id: HashSet<String> = HashSet::new();
    let messages: Vec<Message> = got
        .iter()
        .filter(|m| by_id.insert(m.message_id().unwrap_or_default().to_string()))
        .map(|m| to_message(b, m, &sources))
        .collect();
    let mut note = format!(
        "received {} message(s): receive count +1 each, made visible again; SQS has no \
         cursor, so a page is a sample of the queue",
        messages.len()
    );
    if vis_failed > 0 {
        note.push_str(&format!(
            "; {vis_failed} stay hidden until their {BROWSE_VISIBILITY} s visibility runs out"
        ));
    }
    if let Some(p) = &meta.redrive {
        let at_limit = messages
            .iter()
            .filter(|m| {
                m.receive_count
                    .is_some_and(|c| c >= u64::from(p.max_receives))
            })
            .count();
        if at_limit > 0 {
            note.push_str(&format!(
                "; {at_limit} now at maxReceiveCount {}: their next receive dead-letters them",
                p.max_receives
            ));
        }
    }
    if let Some(e) = error {
        note.push_str(&format!("; stopped early: {e}"));
    }
    Ok(Page {
        messages,
        next: None,
        effect_note: Some(note),
    })
}
