//! One batch of a client-side redrive: SendMessageBatch to the destination, then
//! DeleteMessageBatch of exactly the originals whose copy the broker confirmed. A copy that
//! landed but whose original could not be deleted is counted as possibly duplicated; a copy
//! that failed leaves its original held, to be made visible at the end of the run.

use std::collections::HashMap;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message as SqsMessage, MessageAttributeValue,
    MessageSystemAttributeName, MessageSystemAttributeNameForSends, MessageSystemAttributeValue,
    SendMessageBatchRequestEntry,
};

use super::client::{map_sdk, one_line};
use super::redrive::{AT_ATTR, COUNT_ATTR, RUN_ATTR};
use super::{ops, QueueMeta, SqsBackend};
use qdeck_model::domain::*;

/// SQS allows at most 10 message attributes per message.
const MAX_ATTRS: usize = 10;

fn string_attr(v: &str) -> Option<MessageAttributeValue> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(v)
        .build()
        .ok()
}

/// The message's attributes with this run's stamps: the run id first (it is what ends a run),
/// then the count and time while the 10-attribute limit leaves room.
fn stamped(m: &SqsMessage, run_id: &str) -> HashMap<String, MessageAttributeValue> {
    let mut attrs: HashMap<String, MessageAttributeValue> =
        m.message_attributes().cloned().unwrap_or_default();
    let before = attrs
        .get(COUNT_ATTR)
        .and_then(|v| v.string_value())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    for k in [RUN_ATTR, COUNT_ATTR, AT_ATTR] {
        attrs.remove(k);
    }
    let stamps = [
        (RUN_ATTR, run_id.to_string()),
        (COUNT_ATTR, (before + 1).to_string()),
        (AT_ATTR, now_ms().to_string()),
    ];
    for (k, v) in stamps {
        if attrs.len() >= MAX_ATTRS {
            break;
        }
        if let Some(v) = string_attr(&v) {
            attrs.insert(k.to_string(), v);
        }
    }
    attrs
}

fn entry_for(
    m: &SqsMessage,
    i: usize,
    dest_fifo: bool,
    run_id: &str,
) -> std::result::Result<SendMessageBatchRequestEntry, String> {
    let mut e = SendMessageBatchRequestEntry::builder()
        .id(format!("m{i}"))
        .message_body(m.body().unwrap_or_default())
        .set_message_attributes(Some(stamped(m, run_id)));
    let sys = |k: MessageSystemAttributeName| m.attributes().and_then(|a| a.get(&k)).cloned();
    if let Some(trace) = sys(MessageSystemAttributeName::AwsTraceHeader) {
        if let Ok(v) = MessageSystemAttributeValue::builder()
            .data_type("String")
            .string_value(trace)
            .build()
        {
            e = e.message_system_attributes(MessageSystemAttributeNameForSends::AwsTraceHeader, v);
        }
    }
    if dest_fifo {
        let group = sys(MessageSystemAttributeName::MessageGroupId)
            .unwrap_or_else(|| "qdeck-redrive".to_string());
        // The source message id is stable across receives, so a retried copy of the same
        // message deduplicates within SQS's 5-minute window instead of doubling.
        let dedup = m
            .message_id()
            .map(str::to_string)
            .or_else(|| sys(MessageSystemAttributeName::MessageDeduplicationId))
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        e = e.message_group_id(group).message_deduplication_id(dedup);
    }
    e.build().map_err(|e| e.to_string())
}

/// Bytes a message adds to a SendMessageBatch payload (body and attributes).
pub(super) fn approx_size(m: &SqsMessage) -> usize {
    let attrs: usize = m.message_attributes().map_or(0, |a| {
        a.iter()
            .map(|(k, v)| {
                k.len()
                    + v.data_type().len()
                    + v.string_value().map_or(0, str::len)
                    + v.binary_value().map_or(0, |b| b.as_ref().len())
            })
            .sum()
    });
    m.body().map_or(0, str::len) + attrs
}

/// Outcome counters of one batch.
#[derive(Default)]
pub(super) struct Tally {
    pub moved: u64,
    pub failed: u64,
    pub dup: u64,
}

fn idx_of(entry_id: &str) -> Option<usize> {
    entry_id.strip_prefix('m').and_then(|n| n.parse().ok())
}

/// Copy `msgs` to `dest`, then delete from the source the ones whose copy the broker
/// confirmed. Failed copies are returned as receipt handles to release later.
pub(super) async fn copy_then_delete(
    b: &SqsBackend,
    src: (&QueueId, &QueueMeta),
    (dest_id, dest): (&QueueId, &QueueMeta),
    msgs: &[&SqsMessage],
    run_id: &str,
    errors: &mut Vec<String>,
    hold: &mut Vec<String>,
) -> Tally {
    let mut batch = Batch {
        msgs,
        t: Tally::default(),
        errors,
        hold,
    };
    let entries = batch.entries(dest.fifo, run_id);
    if entries.is_empty() {
        return batch.t;
    }
    let copied = batch.copy(b, (dest_id, dest), entries).await;
    if copied.is_empty() {
        return batch.t;
    }
    // Only now, with every copy confirmed, delete the originals.
    batch.delete_originals(b, src, &copied).await;
    batch.t
}

/// One batch on its way: the messages, and what has become of them so far.
struct Batch<'a> {
    msgs: &'a [&'a SqsMessage],
    t: Tally,
    errors: &'a mut Vec<String>,
    hold: &'a mut Vec<String>,
}

impl Batch<'_> {
    /// Hold the original behind a SendMessageBatch entry id.
    fn hold_entry(&mut self, entry_id: &str) {
        if let Some(m) = idx_of(entry_id).and_then(|i| self.msgs.get(i)) {
            self.hold.extend(m.receipt_handle().map(str::to_string));
        }
    }

    /// The send entries; a message that cannot make one fails here and is held.
    fn entries(&mut self, dest_fifo: bool, run_id: &str) -> Vec<SendMessageBatchRequestEntry> {
        let mut entries = Vec::with_capacity(self.msgs.len());
        for (i, m) in self.msgs.iter().enumerate() {
            match entry_for(m, i, dest_fifo, run_id) {
                Ok(e) => entries.push(e),
                Err(e) => {
                    self.t.failed += 1;
                    self.errors.push(one_line(
                        &format!("message {}: {e}", m.message_id().unwrap_or("?")),
                        200,
                    ));
                    self.hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
        }
        entries
    }

    /// SendMessageBatch; the indices (into `msgs`) of the copies the broker confirmed.
    async fn copy(
        &mut self,
        b: &SqsBackend,
        (dest_id, dest): (&QueueId, &QueueMeta),
        entries: Vec<SendMessageBatchRequestEntry>,
    ) -> Vec<usize> {
        let sent = b
            .clients(dest.region)
            .sqs
            .send_message_batch()
            .queue_url(&dest.url)
            .set_entries(Some(entries.clone()))
            .send()
            .await;
        match sent {
            Ok(out) => {
                for f in out.failed() {
                    self.t.failed += 1;
                    self.errors.push(one_line(
                        &format!(
                            "copy to {dest_id} failed: {}: {}",
                            f.code(),
                            f.message().unwrap_or("")
                        ),
                        200,
                    ));
                    self.hold_entry(f.id());
                }
                out.successful()
                    .iter()
                    .filter_map(|s| idx_of(s.id()))
                    .filter(|i| *i < self.msgs.len())
                    .collect()
            }
            Err(e) => {
                let err = map_sdk(ops::SEND_BATCH, dest_id.as_str(), &e, b.profile_name()).err;
                self.t.failed += entries.len() as u64;
                self.errors.push(format!("{err} (originals kept)"));
                for e in &entries {
                    self.hold_entry(e.id());
                }
                Vec::new()
            }
        }
    }

    /// DeleteMessageBatch of the originals whose copy was confirmed: each is moved when the
    /// broker confirms the delete, else possibly duplicated.
    async fn delete_originals(
        &mut self,
        b: &SqsBackend,
        (src_id, src): (&QueueId, &QueueMeta),
        copied: &[usize],
    ) {
        let dels: Vec<DeleteMessageBatchRequestEntry> = copied
            .iter()
            .filter_map(|i| {
                let h = self.msgs.get(*i)?.receipt_handle()?;
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(h)
                    .build()
                    .ok()
            })
            .collect();
        self.t.dup += (copied.len() - dels.len()) as u64;
        match b
            .clients(src.region)
            .sqs
            .delete_message_batch()
            .queue_url(&src.url)
            .set_entries(Some(dels.clone()))
            .send()
            .await
        {
            Ok(out) => {
                self.t.moved += out.successful().len() as u64;
                for f in out.failed() {
                    self.t.dup += 1;
                    let stale = f.code().contains("ReceiptHandle");
                    self.errors.push(one_line(
                        &format!(
                            "copied but original not deleted ({}{}): it may be delivered twice",
                            f.code(),
                            if stale { ", receipt handle stale" } else { "" }
                        ),
                        200,
                    ));
                }
                // Entries the broker reported neither way: not confirmed deleted.
                let answered = out.successful().len() + out.failed().len();
                self.t.dup += dels.len().saturating_sub(answered) as u64;
            }
            Err(e) => {
                self.t.dup += dels.len() as u64;
                self.errors.push(format!(
                    "{} (copies exist; originals may be delivered twice)",
                    map_sdk(ops::DELETE_BATCH, src_id.as_str(), &e, b.profile_name()).err
                ));
            }
        }
    }
}
