//! Redrive. Native move task first (see `movetask`); client-side otherwise:
//! receive 10 → SendMessageBatch → DeleteMessageBatch only for entries whose send succeeded.
//! A message whose copy landed but whose delete failed (stale receipt handle, error) is
//! counted as possibly duplicated — never lost. Messages that failed or were not selected
//! are held invisible during the run and made visible again at the end.
//!
//! Every copy is stamped with message attributes: `x-qdeck-redrive-run` (this run's id),
//! `x-qdeck-redriven` (how many redrives the message has been through) and
//! `x-qdeck-redriven-at` (Unix ms). A copy that dead-letters again while the run goes on comes
//! back with a new message id; the run knows it by its run id, does not move or count it again,
//! and holds it until the end, when it is made visible in the DLQ. With `max` the run moves at
//! most that many (copies tried, failures included): a redrive ends even when every message
//! it moves is rejected and dead-lettered again.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message as SqsMessage, MessageAttributeValue,
    MessageSystemAttributeName, MessageSystemAttributeNameForSends, MessageSystemAttributeValue,
    SendMessageBatchRequestEntry,
};

use super::client::{map_sdk, one_line};
use super::movetask::{self, MoveOutcome};
use super::{lock, ops, QueueMeta, SqsBackend};
use crate::backend::{BackendError, OpProgress, Result};
use crate::domain::*;
use crate::engine::rate::Limiter;

/// Visibility while a batch is being copied (seconds): also how long messages stay hidden
/// in the DLQ after a crash mid-run. `QDECK_SQS_REDRIVE_HOLD_SECS` (10 to 43200) changes it,
/// e.g. for crash trials that check every message afterwards.
const REDRIVE_VISIBILITY: i32 = 120;

fn hold_secs() -> i32 {
    std::env::var("QDECK_SQS_REDRIVE_HOLD_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|s| (10..=43_200).contains(s))
        .unwrap_or(REDRIVE_VISIBILITY)
}
/// SendMessageBatch payload kept under the classic 256 KiB batch limit.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;

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
    } else if req.rate.is_some_and(|r| r.per_sec() < 1.0) {
        // The task's MaxNumberOfMessagesPerSecond is a whole number from 1: it would go faster.
        "a rate below 1 message per second (the move task's least)".to_string()
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

/// Message attributes qdeck stamps on each copy.
pub(crate) const RUN_ATTR: &str = "x-qdeck-redrive-run";
pub(crate) const COUNT_ATTR: &str = "x-qdeck-redriven";
pub(crate) const AT_ATTR: &str = "x-qdeck-redriven-at";
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

/// True when `m` is a copy this run sent that has come back (dead-lettered again).
fn sent_by(m: &SqsMessage, run_id: &str) -> bool {
    m.message_attributes()
        .and_then(|a| a.get(RUN_ATTR))
        .and_then(|v| v.string_value())
        == Some(run_id)
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
    run_id: &str,
    errors: &mut Vec<String>,
    hold: &mut Vec<String>,
) -> Tally {
    let mut t = Tally::default();
    let mut entries = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        match entry_for(m, i, dest.fifo, run_id) {
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

/// Copy loops run at once when no rate is set (each: receive 10 → send batch → delete batch).
const WORKERS: usize = 4;

/// What the copy loops share (locked only between awaits).
#[derive(Default)]
struct State {
    report: RedriveReport,
    seen: HashSet<String>,
    hold: Vec<String>,
    dests: HashSet<QueueId>,
    /// Messages asked for by receives in progress (keeps `max` exact with several loops).
    claimed: u64,
    /// Copies of this run received back from the source (dead-lettered again).
    returned: u64,
    stop: bool,
    fatal: Option<BackendError>,
}

struct Run<'a> {
    b: &'a SqsBackend,
    src: &'a QueueMeta,
    req: &'a RedriveRequest,
    progress: &'a OpProgress,
    wanted: Option<HashSet<String>>,
    per_batch_cap: i32,
    /// Messages expected (source depth at start): past it, only loop 0 goes on, so the
    /// final "is it empty?" receive is made once, not once per loop.
    expected: Option<u64>,
    /// Stamped on every copy (`RUN_ATTR`) so the run knows its own copies when they return.
    run_id: String,
    hold_secs: i32,
    /// Shared by the loops, so the rate holds for the run, not per loop.
    pace: Limiter,
    st: std::sync::Mutex<State>,
}

pub(crate) async fn client_side(
    b: &SqsBackend,
    src: &QueueMeta,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let src_id = &req.source;
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
    let per_batch_cap = req
        .rate
        .map_or(10, |r| r.batch(Duration::from_secs(1), 10) as i32);
    let workers = if req.rate.is_some() || wanted.is_some() {
        1
    } else {
        WORKERS
    };
    let run = Run {
        b,
        src,
        req,
        progress,
        wanted,
        per_batch_cap,
        expected: total,
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        hold_secs: hold_secs(),
        pace: Limiter::new(req.rate),
        st: std::sync::Mutex::new(State {
            report: RedriveReport {
                mode: "client-side".to_string(),
                ..RedriveReport::default()
            },
            ..State::default()
        }),
    };
    futures::future::join_all((0..workers).map(|i| worker(&run, i))).await;
    let st = std::mem::take(&mut *lock(&run.st));
    release(b, src_id, src, &st.hold).await;
    for d in &st.dests {
        b.invalidate(d);
    }
    let mut report = st.report;
    if st.returned > 0 {
        report.errors.push(format!(
            "{} cop(ies) moved by this run dead-lettered again during it; left in {src_id}",
            st.returned
        ));
    }
    if let Some(e) = st.fatal {
        if report.moved == 0 && report.failed == 0 && report.possibly_duplicated == 0 {
            return Err(e);
        }
    }
    report.errors.truncate(50);
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(report)
}

/// One copy loop: claim → receive → copy → delete, until drained, cancelled or at `max`.
async fn worker(run: &Run<'_>, index: usize) {
    let (b, src, req, progress) = (run.b, run.src, run.req, run.progress);
    let src_id = &req.source;
    let mut stale_batches = 0u32;
    loop {
        let n = {
            let mut s = lock(&run.st);
            if s.stop {
                return;
            }
            if progress.cancelled() {
                s.report.cancelled = true;
                s.stop = true;
                return;
            }
            if let Some(w) = &run.wanted {
                if w.iter().all(|id| s.seen.contains(id)) {
                    s.stop = true;
                    return;
                }
            }
            // Failures count toward `max`: the run tries at most that many messages.
            let done = s.report.moved + s.report.possibly_duplicated + s.report.failed;
            let remaining = req.max.map(|m| m.saturating_sub(done + s.claimed));
            if remaining == Some(0) {
                return;
            }
            if index > 0 && run.expected.is_some_and(|e| done + s.claimed >= e) {
                return;
            }
            let n = remaining.map_or(run.per_batch_cap, |r| {
                (r.min(10) as i32).min(run.per_batch_cap)
            });
            s.claimed += n as u64;
            n
        };
        run.pace.take(n as u64, &progress.cancel_token()).await;
        let unclaim = |s: &mut State| s.claimed = s.claimed.saturating_sub(n as u64);
        if progress.cancelled() {
            let mut s = lock(&run.st);
            unclaim(&mut s);
            s.report.cancelled = true;
            s.stop = true;
            return;
        }
        let batch = match b.receive(src_id, src, n, run.hold_secs, 1).await {
            Ok(v) => v,
            Err(e) => {
                let mut s = lock(&run.st);
                unclaim(&mut s);
                s.report.errors.push(e.to_string());
                s.fatal.get_or_insert(e);
                s.stop = true;
                return;
            }
        };
        if batch.is_empty() {
            // Drained (long poll came back empty): every loop stops.
            let mut s = lock(&run.st);
            unclaim(&mut s);
            s.stop = true;
            return;
        }
        // Keep fresh, selected messages; hold the rest invisible until the end.
        let mut take: Vec<&SqsMessage> = Vec::new();
        {
            let mut s = lock(&run.st);
            let mut fresh = 0usize;
            for m in &batch {
                let mid = m.message_id().unwrap_or_default().to_string();
                if sent_by(m, &run.run_id) {
                    // Our own copy, dead-lettered again: not moved twice, not counted.
                    s.returned += 1;
                    s.hold.extend(m.receipt_handle().map(str::to_string));
                    continue;
                }
                let new = s.seen.insert(mid.clone());
                fresh += usize::from(new);
                let selected = run.wanted.as_ref().is_none_or(|w| w.contains(&mid));
                if new && selected {
                    take.push(m);
                } else {
                    s.hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
            // Only messages seen before (held ones whose visibility ran out on a long run):
            // they are held again; stop only if that keeps happening.
            if fresh == 0 {
                stale_batches += 1;
                unclaim(&mut s);
                if stale_batches >= 3 {
                    s.stop = true;
                    return;
                }
                continue;
            }
            stale_batches = 0;
        }
        // Group by destination, keeping receive order inside each group.
        let mut errors: Vec<String> = Vec::new();
        let mut hold: Vec<String> = Vec::new();
        let mut failed = 0u64;
        let mut groups: Vec<(QueueId, QueueMeta, Vec<&SqsMessage>)> = Vec::new();
        for m in take {
            match destination(b, src, req, m).await {
                Ok((d, meta)) => match groups.iter_mut().find(|(g, _, _)| *g == d) {
                    Some((_, _, v)) => v.push(m),
                    None => groups.push((d, meta, vec![m])),
                },
                Err(e) => {
                    failed += 1;
                    errors.push(one_line(&e, 200));
                    hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
        }
        let mut total = Tally {
            failed,
            ..Tally::default()
        };
        for (d, dest, msgs) in &groups {
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
                    (d, dest),
                    &msgs[start..end],
                    &run.run_id,
                    &mut errors,
                    &mut hold,
                )
                .await;
                progress.update(|s| {
                    s.done += t.moved + t.dup;
                    s.failed += t.failed;
                });
                total.moved += t.moved;
                total.failed += t.failed;
                total.dup += t.dup;
                start = end;
            }
        }
        if failed > 0 {
            progress.add_failed(failed);
        }
        let mut s = lock(&run.st);
        unclaim(&mut s);
        s.report.moved += total.moved;
        s.report.failed += total.failed;
        s.report.possibly_duplicated += total.dup;
        s.report.errors.append(&mut errors);
        s.hold.append(&mut hold);
        s.dests.extend(groups.into_iter().map(|(d, _, _)| d));
    }
}

/// Make held messages visible again (failed copies, unselected messages).
async fn release(b: &SqsBackend, id: &QueueId, meta: &QueueMeta, hold: &[String]) {
    if !hold.is_empty() {
        let _ = b.set_visibility(id, meta, hold, 0).await;
    }
}
