//! Redrive. Native move task first (see `movetask`); client-side otherwise:
//! receive 10 → SendMessageBatch → DeleteMessageBatch only for entries whose send succeeded.
//! A message whose copy landed but whose delete failed (stale receipt handle, error) is
//! counted as possibly duplicated — never lost. Messages that failed or were not selected
//! are held invisible during the run and made visible again at the end.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message as SqsMessage, MessageSystemAttributeName,
    MessageSystemAttributeNameForSends, MessageSystemAttributeValue, SendMessageBatchRequestEntry,
};

use super::client::{map_sdk, one_line};
use super::movetask::{self, MoveOutcome};
use super::{lock, ops, QueueMeta, SqsBackend};
use crate::backend::{BackendError, OpProgress, Result};
use crate::domain::*;

/// Visibility while a batch is being copied (seconds).
const REDRIVE_VISIBILITY: i32 = 120;
/// SendMessageBatch payload kept under the classic 256 KiB batch limit.
const BATCH_BYTES: usize = 256 * 1024;

pub(crate) async fn redrive(
    b: &SqsBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let mut src = b.resolve_full(&req.source).await?;
    if req.target == RedriveTarget::Origin {
        src.sources = b.dlq_sources(&req.source).await.unwrap_or_default();
    }
    if progress.cancelled() {
        return Ok(RedriveReport {
            mode: "none (cancelled before start)".to_string(),
            cancelled: true,
            ..RedriveReport::default()
        });
    }
    if let RedriveTarget::Queue(t) = &req.target {
        if *t == req.source {
            return Err(BackendError::Invalid(
                "redrive target is the source queue".to_string(),
            ));
        }
    }
    let why_client = if req.only_ids.is_some() {
        "selected messages".to_string()
    } else if req.max.is_some() {
        "a count limit (the move task moves everything)".to_string()
    } else {
        match movetask::run(b, &src, req, progress).await? {
            MoveOutcome::Done(r) => return Ok(r),
            MoveOutcome::NotSupported(why) => why,
        }
    };
    let res = client_side(b, &src, req, progress).await;
    b.invalidate(&req.source);
    let mut report = res?;
    report.mode = format!("client-side ({why_client})");
    Ok(report)
}

/// Where one message goes.
async fn destination(
    b: &SqsBackend,
    src: &QueueMeta,
    req: &RedriveRequest,
    m: &SqsMessage,
) -> std::result::Result<(QueueId, QueueMeta), String> {
    let id = match &req.target {
        RedriveTarget::Queue(q) => q.clone(),
        RedriveTarget::Origin => {
            let from_attr = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::DeadLetterQueueSourceArn))
                .and_then(|arn| b.id_for_arn(arn));
            match (from_attr, src.sources.as_slice()) {
                (Some(q), _) => q,
                (None, [only]) => only.clone(),
                (None, []) => {
                    return Err("origin unknown: no DeadLetterQueueSourceArn and no queue \
                                dead-letters into this one; choose a target queue"
                        .to_string())
                }
                (None, _) => {
                    return Err(
                        "origin unknown: several queues dead-letter into this one and \
                                the message has no DeadLetterQueueSourceArn; choose a target"
                            .to_string(),
                    )
                }
            }
        }
    };
    b.resolve(&id)
        .await
        .map(|meta| (id, meta))
        .map_err(|e| e.to_string())
}

fn entry_for(
    m: &SqsMessage,
    i: usize,
    dest_fifo: bool,
) -> std::result::Result<SendMessageBatchRequestEntry, String> {
    let mut e = SendMessageBatchRequestEntry::builder()
        .id(format!("m{i}"))
        .message_body(m.body().unwrap_or_default())
        .set_message_attributes(m.message_attributes().cloned());
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

fn approx_size(m: &SqsMessage) -> usize {
    let attrs: usize = m
        .message_attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    k.len()
                        + v.data_type().len()
                        + v.string_value().map(str::len).unwrap_or(0)
                        + v.binary_value().map(|b| b.as_ref().len()).unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0);
    m.body().map(str::len).unwrap_or(0) + attrs
}

/// Outcome counters of one batch.
#[derive(Default)]
struct Tally {
    moved: u64,
    failed: u64,
    dup: u64,
}

/// Copy `msgs` to `dest`, then delete from the source the ones whose copy the broker
/// confirmed. Failed copies are returned as receipt handles to release later.
async fn copy_then_delete(
    b: &SqsBackend,
    (src_id, src): (&QueueId, &QueueMeta),
    (dest_id, dest): (&QueueId, &QueueMeta),
    msgs: &[&SqsMessage],
    errors: &mut Vec<String>,
    hold: &mut Vec<String>,
) -> Tally {
    let mut t = Tally::default();
    let mut entries = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        match entry_for(m, i, dest.fifo) {
            Ok(e) => entries.push(e),
            Err(e) => {
                t.failed += 1;
                errors.push(one_line(
                    &format!("message {}: {e}", m.message_id().unwrap_or("?")),
                    200,
                ));
                hold.extend(m.receipt_handle().map(str::to_string));
            }
        }
    }
    if entries.is_empty() {
        return t;
    }
    b.calls().bump(ops::SEND_BATCH);
    let sent = b
        .clients(dest.region)
        .sqs
        .send_message_batch()
        .queue_url(&dest.url)
        .set_entries(Some(entries.clone()))
        .send()
        .await;
    let ok_idx: Vec<usize> = match sent {
        Ok(out) => {
            for f in out.failed() {
                t.failed += 1;
                errors.push(one_line(
                    &format!(
                        "copy to {dest_id} failed: {}: {}",
                        f.code(),
                        f.message().unwrap_or("")
                    ),
                    200,
                ));
                if let Some(m) = idx_of(f.id()).and_then(|i| msgs.get(i)) {
                    hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
            out.successful()
                .iter()
                .filter_map(|s| idx_of(s.id()))
                .filter(|i| *i < msgs.len())
                .collect()
        }
        Err(e) => {
            let err = map_sdk(ops::SEND_BATCH, dest_id.as_str(), &e, b.profile_name()).err;
            t.failed += entries.len() as u64;
            errors.push(format!("{err} (originals kept)"));
            for e in &entries {
                if let Some(m) = idx_of(e.id()).and_then(|i| msgs.get(i)) {
                    hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
            return t;
        }
    };
    if ok_idx.is_empty() {
        return t;
    }
    // Only now, with every copy confirmed, delete the originals.
    let dels: Vec<DeleteMessageBatchRequestEntry> = ok_idx
        .iter()
        .filter_map(|i| {
            let h = msgs.get(*i)?.receipt_handle()?;
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("m{i}"))
                .receipt_handle(h)
                .build()
                .ok()
        })
        .collect();
    t.dup += (ok_idx.len() - dels.len()) as u64;
    b.calls().bump(ops::DELETE_BATCH);
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
            t.moved += out.successful().len() as u64;
            for f in out.failed() {
                t.dup += 1;
                let stale = f.code().contains("ReceiptHandle");
                errors.push(one_line(
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
            t.dup += dels.len().saturating_sub(answered) as u64;
        }
        Err(e) => {
            t.dup += dels.len() as u64;
            errors.push(format!(
                "{} (copies exist; originals may be delivered twice)",
                map_sdk(ops::DELETE_BATCH, src_id.as_str(), &e, b.profile_name()).err
            ));
        }
    }
    t
}

fn idx_of(entry_id: &str) -> Option<usize> {
    entry_id.strip_prefix('m').and_then(|n| n.parse().ok())
}

async fn pace(started: Instant, done: u64, rate: Option<f64>, progress: &OpProgress) {
    let Some(r) = rate.filter(|r| *r > 0.0) else {
        return;
    };
    let due = Duration::from_secs_f64(done as f64 / r);
    let el = started.elapsed();
    if due > el {
        let token = progress.cancel_token();
        tokio::select! {
            _ = tokio::time::sleep(due - el) => {}
            _ = token.cancelled() => {}
        }
    }
}

pub(crate) async fn client_side(
    b: &SqsBackend,
    src: &QueueMeta,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let src_id = &req.source;
    let mut report = RedriveReport {
        mode: "client-side".to_string(),
        ..RedriveReport::default()
    };
    // Total from the last figures we read (no extra call when stats ran before).
    let recent_depth = lock(&b.recent).get(src_id).and_then(|r| {
        r.attrs
            .get("ApproximateNumberOfMessages")
            .and_then(|v| v.parse::<u64>().ok())
    });
    let depth = match recent_depth {
        Some(d) => Some(d),
        None => b.fetch_attrs(src_id, src).await.ok().and_then(|a| {
            a.get("ApproximateNumberOfMessages")
                .and_then(|v| v.parse::<u64>().ok())
        }),
    };
    let wanted: Option<HashSet<String>> =
        req.only_ids.as_ref().map(|v| v.iter().cloned().collect());
    let total = match (&wanted, req.max, depth) {
        (Some(w), m, _) => Some(m.map_or(w.len() as u64, |m| m.min(w.len() as u64))),
        (None, Some(m), Some(d)) => Some(m.min(d)),
        (None, Some(m), None) => Some(m),
        (None, None, d) => d,
    };
    progress.set_total(total);
    progress.phase("copying");
    let per_batch_cap = match req.rate {
        Some(r) if r > 0.0 && r < 10.0 => (r.ceil() as i32).max(1),
        _ => 10,
    };
    let started = Instant::now();
    let mut seen: HashSet<String> = HashSet::new();
    let mut hold: Vec<String> = Vec::new();
    let mut dests: HashMap<QueueId, QueueMeta> = HashMap::new();
    loop {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let done = report.moved + report.possibly_duplicated;
        let remaining = req.max.map(|m| m.saturating_sub(done));
        if remaining == Some(0) {
            break;
        }
        if let Some(w) = &wanted {
            if w.iter().all(|id| seen.contains(id)) {
                break;
            }
        }
        pace(started, done, req.rate, progress).await;
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let n = remaining.map_or(per_batch_cap, |r| (r.min(10) as i32).min(per_batch_cap));
        let batch = match b.receive(src_id, src, n, REDRIVE_VISIBILITY, 1).await {
            Ok(v) => v,
            Err(e) => {
                report.errors.push(e.to_string());
                if report.moved == 0 && report.failed == 0 && report.possibly_duplicated == 0 {
                    release(b, src_id, src, &hold).await;
                    return Err(e);
                }
                break;
            }
        };
        if batch.is_empty() {
            break;
        }
        // Keep fresh, selected messages; hold the rest invisible until the end.
        let mut take: Vec<&SqsMessage> = Vec::new();
        let mut fresh = 0usize;
        for m in &batch {
            let mid = m.message_id().unwrap_or_default().to_string();
            let new = seen.insert(mid.clone());
            fresh += usize::from(new);
            let selected = wanted.as_ref().is_none_or(|w| w.contains(&mid));
            if new && selected {
                take.push(m);
            } else {
                hold.extend(m.receipt_handle().map(str::to_string));
            }
        }
        if fresh == 0 {
            break;
        }
        // Group by destination, keeping receive order inside each group.
        let mut groups: Vec<(QueueId, Vec<&SqsMessage>)> = Vec::new();
        for m in take {
            match destination(b, src, req, m).await {
                Ok((d, meta)) => {
                    dests.entry(d.clone()).or_insert(meta);
                    match groups.iter_mut().find(|(g, _)| *g == d) {
                        Some((_, v)) => v.push(m),
                        None => groups.push((d, vec![m])),
                    }
                }
                Err(e) => {
                    report.failed += 1;
                    progress.add_failed(1);
                    report.errors.push(one_line(&e, 200));
                    hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
        }
        for (d, msgs) in groups {
            let Some(dest) = dests.get(&d).cloned() else {
                continue;
            };
            // Split by payload size.
            let mut start = 0;
            while start < msgs.len() {
                let mut end = start;
                let mut bytes = 0;
                while end < msgs.len()
                    && (end == start || bytes + approx_size(msgs[end]) <= BATCH_BYTES)
                {
                    bytes += approx_size(msgs[end]);
                    end += 1;
                }
                let t = copy_then_delete(
                    b,
                    (src_id, src),
                    (&d, &dest),
                    &msgs[start..end],
                    &mut report.errors,
                    &mut hold,
                )
                .await;
                report.moved += t.moved;
                report.failed += t.failed;
                report.possibly_duplicated += t.dup;
                progress.update(|s| {
                    s.done += t.moved + t.dup;
                    s.failed += t.failed;
                });
                start = end;
            }
        }
    }
    release(b, src_id, src, &hold).await;
    for d in dests.keys() {
        b.invalidate(d);
    }
    report.errors.truncate(50);
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(report)
}

/// Make held messages visible again (failed copies, unselected messages).
async fn release(b: &SqsBackend, id: &QueueId, meta: &QueueMeta, hold: &[String]) {
    if !hold.is_empty() {
        let _ = b.set_visibility(id, meta, hold, 0).await;
    }
}
