//! Send: SendMessage for one message, SendMessageBatch for several (ten entries and
//! `BATCH_BYTES` a call), so an import or a copy of 10,000 messages makes 1,000 billed calls
//! instead of 10,000. SQS answers each entry on its own: one refused entry does not stop
//! the others of its call.

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::attributes::to_attribute;

use super::client::map_sdk;
use super::redrive::BATCH_BYTES;
use super::{ops, QueueMeta, SqsBackend};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Most entries SendMessageBatch takes.
const BATCH_ENTRIES: usize = 10;

fn text_body(body: Vec<u8>) -> Result<String> {
    String::from_utf8(body).map_err(|_| {
        BackendError::Invalid("SQS message bodies are text: this body is not valid UTF-8".into())
    })
}

/// FIFO queues need a group (the message's `MessageGroupId`, else its ordering key, else
/// "default") and a deduplication id (the message's own, as `qdeck send -P` gives it, else
/// fresh; the paths that send a browsed message again take its id out first, see
/// `HeaderRules::drop_identity`). A standard queue takes the delay instead (at most 15
/// min).
fn group_and_dedup(meta: &QueueMeta, msg: &OutgoingMessage) -> Option<(String, String)> {
    meta.fifo.then(|| {
        let prop = |name: &str| {
            msg.properties
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.text())
        };
        let group = prop("MessageGroupId")
            .or_else(|| msg.key.clone())
            .unwrap_or_else(|| "default".to_string());
        let dedup =
            prop("MessageDeduplicationId").unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        (group, dedup)
    })
}

fn delay_secs(msg: &OutgoingMessage) -> Option<i32> {
    msg.delay
        .map(|d| i32::try_from(d.as_secs().min(900)).unwrap_or(900))
}

pub(crate) async fn send(
    b: &SqsBackend,
    id: &QueueId,
    msg: OutgoingMessage,
) -> Result<Option<String>> {
    let meta = b.resolve(id).await?;
    let mut req = b
        .clients(meta.region)
        .sqs
        .send_message()
        .queue_url(&meta.url);
    if let Some((group, dedup)) = group_and_dedup(&meta, &msg) {
        req = req.message_group_id(group).message_deduplication_id(dedup);
    } else if let Some(d) = delay_secs(&msg) {
        req = req.delay_seconds(d);
    }
    for (k, v) in &msg.headers {
        req = req.message_attributes(k, to_attribute(k, v)?.0);
    }
    req = req.message_body(text_body(msg.body)?);
    b.invalidate(id);
    let out = req
        .send()
        .await
        .map_err(|e| map_sdk(ops::SEND, id.as_str(), &e, b.profile_name()).err)?;
    Ok(out.message_id().map(str::to_string))
}

/// One entry of a batch, with the bytes it adds to the call.
fn entry(
    meta: &QueueMeta,
    i: usize,
    msg: OutgoingMessage,
) -> Result<(SendMessageBatchRequestEntry, usize)> {
    let mut e = SendMessageBatchRequestEntry::builder().id(format!("m{i}"));
    if let Some((group, dedup)) = group_and_dedup(meta, &msg) {
        e = e.message_group_id(group).message_deduplication_id(dedup);
    } else if let Some(d) = delay_secs(&msg) {
        e = e.delay_seconds(d);
    }
    let mut size = 0;
    for (k, v) in &msg.headers {
        let (a, n) = to_attribute(k, v)?;
        size += n;
        e = e.message_attributes(k, a);
    }
    let body = text_body(msg.body)?;
    size += body.len();
    let e = e
        .message_body(body)
        .build()
        .map_err(|e| BackendError::Invalid(e.to_string()))?;
    Ok((e, size))
}

pub(crate) async fn send_many(
    b: &SqsBackend,
    id: &QueueId,
    msgs: Vec<OutgoingMessage>,
) -> Vec<Result<Option<String>>> {
    if msgs.is_empty() {
        return Vec::new();
    }
    let meta = match b.resolve(id).await {
        Ok(m) => m,
        Err(e) => return vec![Err(e)],
    };
    let n = msgs.len();
    let mut out: Vec<Option<Result<Option<String>>>> = (0..n).map(|_| None).collect();
    // Calls of at most ten entries and `BATCH_BYTES`; an entry SQS would refuse anyway (a
    // binary body) is answered here and not sent.
    let mut calls: Vec<Vec<SendMessageBatchRequestEntry>> = Vec::new();
    let mut cur: Vec<SendMessageBatchRequestEntry> = Vec::new();
    let mut bytes = 0;
    for (i, m) in msgs.into_iter().enumerate() {
        match entry(&meta, i, m) {
            Ok((e, size)) => {
                if !cur.is_empty() && (cur.len() == BATCH_ENTRIES || bytes + size > BATCH_BYTES) {
                    calls.push(std::mem::take(&mut cur));
                    bytes = 0;
                }
                bytes += size;
                cur.push(e);
            }
            Err(e) => out[i] = Some(Err(e)),
        }
    }
    calls.push(cur);
    b.invalidate(id);
    for entries in calls.into_iter().filter(|c| !c.is_empty()) {
        let idx: Vec<usize> = entries.iter().filter_map(|e| index(e.id())).collect();
        let sent = b
            .clients(meta.region)
            .sqs
            .send_message_batch()
            .queue_url(&meta.url)
            .set_entries(Some(entries))
            .send()
            .await;
        match sent {
            Ok(reply) => {
                for s in reply.successful() {
                    if let Some(slot) = index(s.id()).and_then(|i| out.get_mut(i)) {
                        *slot = Some(Ok(Some(s.message_id().to_string())));
                    }
                }
                for f in reply.failed() {
                    if let Some(slot) = index(f.id()).and_then(|i| out.get_mut(i)) {
                        *slot = Some(Err(BackendError::Refused(format!(
                            "SQS refused the message: {}: {}",
                            f.code(),
                            f.message().unwrap_or("")
                        ))));
                    }
                }
                // An entry the reply does not mention was not confirmed.
                for i in idx {
                    out[i].get_or_insert_with(|| {
                        Err(BackendError::Other(
                            "SQS's reply does not say whether this message was sent".into(),
                        ))
                    });
                }
            }
            Err(e) => {
                // The whole call failed (queue gone, no right, throttled): the same would
                // happen to the rest.
                let err = map_sdk(ops::SEND_BATCH, id.as_str(), &e, b.profile_name()).err;
                if let Some(&first) = idx.first() {
                    out[first] = Some(Err(err));
                    out.truncate(first + 1);
                }
                break;
            }
        }
    }
    // Answers up to the first message not tried.
    out.into_iter().map_while(|r| r).collect()
}

fn index(entry_id: &str) -> Option<usize> {
    entry_id.strip_prefix('m').and_then(|n| n.parse().ok())
}
