//! Delete chosen messages by id (a `purge --where` selection, edit-and-resend). SQS deletes
//! only by receipt handle, so this receives, matches MessageId, deletes the matches in
//! batches and gives every other message back at once (ChangeMessageVisibility 0). Every
//! receive adds one to a message's receive count, so a queue with a RedrivePolicy is refused:
//! the pass could dead-letter messages nobody chose.

use std::collections::HashSet;

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message as SqsMessage};

use super::browse::BROWSE_VISIBILITY;
use super::client::map_sdk;
use super::{ops, QueueMeta, SqsBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{DeleteReport, QueueId};

/// Receives in a row that bring no message not seen before, after which the ids still not
/// found are taken as gone (SQS samples its servers, so one empty receive proves little).
const STALE_ROUNDS: u32 = 5;
/// Upper bound on receives in one pass, whatever the queue holds.
const MAX_RECEIVES: u32 = 2000;

pub(crate) async fn delete_ids(
    b: &SqsBackend,
    id: &QueueId,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let meta = b.resolve_full(id).await?;
    if let Some(p) = &meta.redrive {
        return Err(BackendError::Refused(format!(
            "deleting chosen messages from {id} receives every message it passes (receive \
             count +1) and this queue dead-letters after {} receives: messages not chosen \
             could move to the DLQ",
            p.max_receives
        )));
    }
    if let Some(e) = &meta.redrive_error {
        return Err(BackendError::Refused(format!(
            "deleting chosen messages from {id} could dead-letter others and its \
             RedrivePolicy cannot be read ({e})"
        )));
    }
    let mut wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let asked = wanted.len() as u64;
    progress.set_total(Some(asked));
    progress.phase("receiving");
    let mut r = DeleteReport::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut stale = 0u32;
    let mut receives = 0u32;
    while !wanted.is_empty() && stale < STALE_ROUNDS && receives < MAX_RECEIVES {
        if progress.cancelled() {
            r.cancelled = true;
            break;
        }
        receives += 1;
        let batch = b.receive(id, &meta, 10, BROWSE_VISIBILITY, 1).await?;
        b.invalidate(id);
        let mut fresh = 0;
        let mut hits: Vec<SqsMessage> = Vec::new();
        let mut others: Vec<String> = Vec::new();
        for m in batch {
            let mid = m.message_id().unwrap_or_default().to_string();
            if seen.insert(mid.clone()) {
                fresh += 1;
            }
            if wanted.remove(mid.as_str()) {
                hits.push(m);
            } else if let Some(h) = m.receipt_handle() {
                others.push(h.to_string());
            }
        }
        // Give the rest back before anything else can fail.
        if !others.is_empty() {
            b.set_visibility(id, &meta, &others, 0).await;
        }
        if !hits.is_empty() {
            let (deleted, left) = delete_batch(b, id, &meta, &hits).await;
            r.deleted += deleted;
            r.leased += left;
        }
        stale = if fresh == 0 { stale + 1 } else { 0 };
        progress.update(|s| {
            s.done = r.deleted;
            s.failed = r.leased;
        });
    }
    r.missing = wanted.len() as u64;
    if r.cancelled {
        // Ids not reached were not looked for: they are not known to be gone.
        r.missing = 0;
    }
    progress.phase(if r.cancelled { "cancelled" } else { "done" });
    Ok(r)
}

/// DeleteMessageBatch for received messages. Returns (deleted, left in the queue).
async fn delete_batch(
    b: &SqsBackend,
    id: &QueueId,
    meta: &QueueMeta,
    msgs: &[SqsMessage],
) -> (u64, u64) {
    let entries: Vec<DeleteMessageBatchRequestEntry> = msgs
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("d{i}"))
                .receipt_handle(m.receipt_handle()?)
                .build()
                .ok()
        })
        .collect();
    let sent = entries.len() as u64;
    let not_sent = msgs.len() as u64 - sent;
    match b
        .clients(meta.region)
        .sqs
        .delete_message_batch()
        .queue_url(&meta.url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(out) => {
            let ok = out.successful().len() as u64;
            (ok, not_sent + sent.saturating_sub(ok))
        }
        Err(e) => {
            let err = map_sdk(ops::DELETE_BATCH, id.as_str(), &e, b.profile_name()).err;
            tracing::warn!("{err}: {} chosen message(s) left in {id}", msgs.len());
            (0, msgs.len() as u64)
        }
    }
}
