//! Client-side resubmit of dead-lettered messages: peek-lock from the DLQ, send a copy (body,
//! content type, MessageId, CorrelationId, Label, SessionId, ReplyTo, To, PartitionKey, custom
//! properties) to the target, and complete the DLQ message only after the send succeeded.
//! A failed send unlocks nothing until the end: the message is held locked so the loop moves on,
//! then unlocked. A lost lock after a good send is reported as possibly duplicated (the
//! original stays in the DLQ; the copy is in the target). Three requests per message.
//!
//! Bounded: at most `req.max`, at most the DLQ's count at the start, and never a message
//! newer than the start. Copies that dead-letter again come back with new, higher sequence
//! numbers (as does anything dead-lettered since): the first copy of a moved message seen in
//! the DLQ sets a sequence-number watermark, and nothing at or above it is moved.
//!
//! On a target with duplicate detection, a copy keeping the original MessageId is accepted and
//! then dropped inside the detection window, and completing the original would lose it: such
//! copies get a new MessageId and carry the original in `ORIGINAL_ID_PROPERTY`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::join_all;

use super::runtime::{self, Outgoing, Received};
use crate::servicebus::copy_policy::{target_of, CopyPolicy, ORIGINAL_ID_PROPERTY};
use crate::servicebus::http::Rest;
use crate::servicebus::{dlq_count_field, dlq_parent, mgmt};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

const WORKERS: usize = 16;
/// Empty receives in a row (across workers) after which the DLQ counts as drained.
const EMPTY_STOP: u32 = 3;
/// Transient failures in a row after which the run stops.
const ERR_STOP: u32 = 5;
const MAX_ERRORS_KEPT: usize = 20;
#[derive(Default)]
struct State {
    report: RedriveReport,
    claimed: u64,
    empty_streak: u32,
    err_streak: u32,
    stop: bool,
    fatal: Option<BackendError>,
    /// Messages kept locked until the end (not selected, or their send failed).
    held: Vec<Received>,
    held_seqs: HashSet<String>,
    /// Messages being copied right now, by key.
    in_progress: HashSet<String>,
    remaining_ids: Option<HashSet<String>>,
    /// Identity (original MessageId) of each moved message → its sequence number.
    moved: HashMap<String, i64>,
    /// Lowest sequence number of a copy of ours seen back in the DLQ.
    watermark: Option<i64>,
    /// Messages left because they are at or above the watermark.
    past_watermark: u64,
}

impl State {
    fn error(&mut self, e: String) {
        if self.report.errors.len() < MAX_ERRORS_KEPT {
            self.report.errors.push(e);
        }
    }

    /// A receive that brought nothing to move; enough in a row and the DLQ counts as drained.
    fn note_empty(&mut self) {
        self.empty_streak += 1;
        if self.empty_streak >= EMPTY_STOP {
            self.stop = true;
        }
    }

    /// True for a copy of ours back in the DLQ, or anything after one: neither was there at
    /// the start. The first such copy sets the watermark.
    fn is_past_watermark(&mut self, msg: &Received) -> bool {
        let seq_n = msg.sequence_number();
        let ours = match (identity(msg), seq_n) {
            (Some(id), Some(n)) => self.moved.get(&id).is_some_and(|orig| n > *orig),
            _ => false,
        };
        if ours {
            if let Some(n) = seq_n {
                self.watermark = Some(self.watermark.map_or(n, |w| w.min(n)));
            }
        }
        ours || matches!((self.watermark, seq_n), (Some(w), Some(n)) if n >= w)
    }

    /// Whether the message is one asked for (every message is, without a selection); a
    /// selected one is struck off the list.
    fn select(&mut self, msg: &Received) -> bool {
        // Browse shows MessageId, or the sequence number when there is none.
        let seq = msg.sequence_number().map(|n| n.to_string());
        match &mut self.remaining_ids {
            None => true,
            Some(r) => {
                let by_id = msg.message_id().is_some_and(|id| r.remove(&id));
                by_id || seq.is_some_and(|n| r.remove(&n))
            }
        }
    }
}

struct Ctx {
    rest: Arc<Rest>,
    source: String,
    target: String,
    max: Option<u64>,
    new_ids: bool,
    pace: Limiter,
    st: Mutex<State>,
    progress: OpProgress,
}

impl Ctx {
    fn state(&self) -> MutexGuard<'_, State> {
        self.st
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn key_of(m: &Received) -> String {
    m.sequence_number()
        .map(|s| format!("seq:{s}"))
        .or_else(|| m.lock_path.clone())
        .or_else(|| m.message_id())
        .unwrap_or_default()
}

/// The same message across copies: the MessageId it had before any copy got a new one.
fn identity(m: &Received) -> Option<String> {
    m.custom
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(ORIGINAL_ID_PROPERTY))
        .map(|(_, v)| super::browse::unquote(v))
        .or_else(|| m.message_id())
}

pub async fn resubmit(
    rest: Arc<Rest>,
    req: &RedriveRequest,
    policy: CopyPolicy,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let source = req.source.as_str().to_string();
    let target = target_of(req)?;
    let parent = dlq_parent(&source).unwrap_or(source.as_str()).to_string();
    progress.phase("counting");
    // What is in the DLQ now caps the run, when the key may read it (a Listen key goes
    // without; the watermark still stops it at copies coming back).
    let mut max = req.max;
    if let Ok(Some(e)) = mgmt::get_queue(&rest, &parent).await {
        if let Some(n) = e.count(dlq_count_field(&source)) {
            max = Some(max.map_or(n, |m| m.min(n)));
        }
    }
    let total = match (&req.only_ids, max) {
        (Some(ids), Some(m)) => Some(m.min(ids.len() as u64)),
        (Some(ids), None) => Some(ids.len() as u64),
        (None, m) => m,
    };
    progress.set_total(total);
    progress.phase("resubmitting");
    let mode = if policy.new_ids {
        "client-side (peek-lock, send copy with a new MessageId, complete)"
    } else {
        "client-side (peek-lock, send copy, complete)"
    };
    let ctx = Arc::new(Ctx {
        rest,
        source,
        target,
        max,
        new_ids: policy.new_ids,
        pace: Limiter::new(req.rate),
        st: Mutex::new(State {
            report: RedriveReport {
                mode: mode.into(),
                errors: policy.notes.iter().map(|n| format!("note: {n}")).collect(),
                ..Default::default()
            },
            remaining_ids: req.only_ids.as_ref().map(|v| v.iter().cloned().collect()),
            ..Default::default()
        }),
        progress: progress.clone(),
    });
    // A slow rate needs fewer workers than slots in flight: each waits for its own slot.
    let workers = req
        .rate
        .map_or(WORKERS, |r| r.batch(Duration::from_secs(1), WORKERS));
    let handles: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(worker(ctx.clone())))
        .collect();
    for h in handles {
        if h.await.is_err() {
            let mut st = ctx.state();
            st.error("a resubmit worker stopped unexpectedly".into());
        }
    }
    finish(&ctx, progress).await
}

/// After the workers: unlock what was held, say what was left and why, and the report (or
/// the error that stopped a run that moved nothing).
async fn finish(ctx: &Ctx, progress: &OpProgress) -> Result<RedriveReport> {
    progress.phase("unlocking held messages");
    let held = {
        let mut st = ctx.state();
        std::mem::take(&mut st.held)
    };
    let results = join_all(held.iter().map(|m| runtime::unlock(&ctx.rest, m))).await;
    let lost = results.iter().filter(|r| r.is_err()).count();
    let mut st = ctx.state();
    if lost > 0 {
        st.error(format!(
            "{lost} held message(s) could not be unlocked; they stay in the DLQ, locked until LockDuration passes"
        ));
    }
    if let (Some(w), n) = (st.watermark, st.past_watermark) {
        st.error(format!(
            "stopped at messages dead-lettered after the start (sequence number {w} and up, {n} seen): copies that dead-lettered again and newer dead letters stay in the DLQ"
        ));
    }
    let missing = st
        .remaining_ids
        .as_ref()
        .map_or(0, std::collections::HashSet::len);
    if missing > 0 && !progress.cancelled() {
        st.error(format!(
            "{missing} selected message(s) were not found in the DLQ (gone, locked by another receiver, or past what one lock duration could reach)"
        ));
    }
    st.report.cancelled = progress.cancelled();
    progress.phase("done");
    let report = std::mem::take(&mut st.report);
    if let Some(e) = st.fatal.take() {
        if report.moved == 0 && report.possibly_duplicated == 0 {
            return Err(e);
        }
    }
    Ok(report)
}

fn should_stop(ctx: &Ctx) -> bool {
    let st = ctx.state();
    st.stop || ctx.progress.cancelled()
}

async fn wait_rate(ctx: &Ctx) {
    ctx.pace.take(1, &ctx.progress.cancel_token()).await;
}

async fn worker(ctx: Arc<Ctx>) {
    loop {
        if should_stop(&ctx) {
            return;
        }
        if !claim(&ctx) {
            return;
        }
        wait_rate(&ctx).await;
        if should_stop(&ctx) {
            release(&ctx);
            return;
        }
        let got = runtime::peek_lock(&ctx.rest, &ctx.source, 1).await;
        let msg = match got {
            Ok(Some(m)) => m,
            Ok(None) => {
                let mut st = ctx.state();
                st.claimed = st.claimed.saturating_sub(1);
                st.note_empty();
                continue;
            }
            Err(e) => {
                release(&ctx);
                if !note_failure(&ctx, e, None) {
                    return;
                }
                continue;
            }
        };
        let Some((msg, key)) = admit(&ctx, msg) else {
            continue;
        };
        if !resubmit_one(&ctx, msg, key).await {
            return;
        }
    }
}

/// Claim one message for this worker; false when the run has claimed all it may.
fn claim(ctx: &Ctx) -> bool {
    let mut st = ctx.state();
    if let Some(m) = ctx.max {
        if st.claimed >= m {
            return false; // others may still be finishing their claimed messages
        }
    }
    if st
        .remaining_ids
        .as_ref()
        .is_some_and(std::collections::HashSet::is_empty)
    {
        return false;
    }
    st.claimed += 1;
    true
}

/// Decide whether a locked message is to be copied: `Some` with its key (marked in progress),
/// or `None` when it is held until the end instead.
fn admit(ctx: &Ctx, msg: Received) -> Option<(Received, String)> {
    // Already held (its lock expired and it came round again), or not selected.
    let key = key_of(&msg);
    let mut st = ctx.state();
    // In progress elsewhere means the other worker's lock was lost: do not copy twice.
    if st.held_seqs.contains(&key) || st.in_progress.contains(&key) {
        st.claimed = st.claimed.saturating_sub(1);
        st.note_empty();
        st.held.push(msg);
        return None;
    }
    if st.is_past_watermark(&msg) {
        st.claimed = st.claimed.saturating_sub(1);
        st.past_watermark += 1;
        st.note_empty();
        st.held_seqs.insert(key);
        st.held.push(msg);
        return None;
    }
    st.empty_streak = 0;
    if !st.select(&msg) {
        st.claimed = st.claimed.saturating_sub(1);
        st.held_seqs.insert(key);
        st.held.push(msg);
        return None;
    }
    st.in_progress.insert(key.clone());
    // Known before the copy exists: a copy that dead-letters at once must be
    // recognised even while this worker is still completing its original.
    if let (Some(id), Some(n)) = (identity(&msg), msg.sequence_number()) {
        st.moved.insert(id, n);
    }
    Some((msg, key))
}

/// The copy sent to the target: stamped, and with a new MessageId when the policy says so.
fn copy_for(ctx: &Ctx, msg: &Received) -> Outgoing {
    let mut copy = Outgoing::copy_of(msg);
    super::stamp::stamp_redrive(&mut copy, chrono::Utc::now().timestamp_millis());
    if ctx.new_ids {
        let had = copy
            .custom
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(ORIGINAL_ID_PROPERTY));
        if let (false, Some(id)) = (had, msg.message_id()) {
            copy.custom.push((
                ORIGINAL_ID_PROPERTY.to_string(),
                serde_json::Value::String(id).to_string(),
            ));
        }
        copy.props.insert(
            "MessageId".into(),
            serde_json::Value::String(uuid::Uuid::new_v4().to_string()),
        );
    }
    copy
}

/// Send the copy, then (only if the send succeeded) complete the original. False when the run
/// should stop.
async fn resubmit_one(ctx: &Ctx, msg: Received, key: String) -> bool {
    let copy = copy_for(ctx, &msg);
    let sent = runtime::send(&ctx.rest, &ctx.target, &copy).await;
    let outcome = match sent {
        Ok(()) => Some(runtime::complete(&ctx.rest, &msg).await),
        Err(_) => None,
    };
    {
        let mut st = ctx.state();
        if !matches!(outcome, Some(Ok(()))) {
            // Not completed: if it comes round again, do not copy it a second time.
            st.held_seqs.insert(key.clone());
        }
        st.in_progress.remove(&key);
    }
    match sent {
        Ok(()) => match outcome.unwrap_or(Ok(())) {
            Ok(()) => {
                let mut st = ctx.state();
                st.report.moved += 1;
                st.err_streak = 0;
                drop(st);
                ctx.progress.add_done(1);
            }
            Err(e) => {
                let mut st = ctx.state();
                st.report.possibly_duplicated += 1;
                // Lock lost: if the message comes round again, do not copy it twice.
                st.held_seqs.insert(key_of(&msg));
                let id = msg.message_id().unwrap_or_default();
                st.error(format!(
                    "message {id}: copied to {} but not removed from the DLQ ({e}); it may be resubmitted twice",
                    ctx.target
                ));
                drop(st);
                ctx.progress.add_failed(1);
            }
        },
        Err(e) => {
            if let Some(id) = identity(&msg) {
                let mut st = ctx.state();
                st.moved.remove(&id);
            }
            return note_failure(ctx, e, Some(msg));
        }
    }
    true
}

fn release(ctx: &Ctx) {
    let mut st = ctx.state();
    st.claimed = st.claimed.saturating_sub(1);
}

/// Record a failure; the message (if any) is held locked until the end so the loop moves on.
/// Returns false when the run should stop.
fn note_failure(ctx: &Ctx, e: BackendError, msg: Option<Received>) -> bool {
    let mut st = ctx.state();
    let fatal = matches!(
        e,
        BackendError::NotFound(_)
            | BackendError::Auth(_)
            | BackendError::Forbidden { .. }
            | BackendError::Unsupported(_)
    );
    if let Some(m) = msg {
        st.report.failed += 1;
        let id = m.message_id().unwrap_or_default();
        st.error(format!(
            "message {id}: not resubmitted, left in the DLQ: {e}"
        ));
        let key = key_of(&m);
        st.held_seqs.insert(key);
        st.held.push(m);
        ctx.progress.add_failed(1);
    } else {
        st.error(e.to_string());
    }
    st.err_streak += 1;
    if fatal || st.err_streak >= ERR_STOP {
        st.stop = true;
        if st.fatal.is_none() {
            st.fatal = Some(e);
        }
        return false;
    }
    true
}
