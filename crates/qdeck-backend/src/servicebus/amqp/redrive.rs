//! Resubmit over AMQP: receive a batch from the dead-letter queue in peek-lock, send the copies
//! on one link with many transfers in flight, and complete each original only after the
//! broker accepted its copy. A failed send leaves the original locked until the end of the run
//! and then abandons it (it stays in the DLQ); a completion that fails after a good send is
//! reported as possibly duplicated. While the run works, `lock_keeper` renews the held locks
//! every half lock duration and keeps the CBS tokens fresh, so a batch whose sends outlast the
//! lock (a slow broker, a low rate) or the token keeps both; a cancel hands no more copies over
//! and abandons whatever is held. A crash at any point leaves each message in the DLQ, in the
//! target, or (between send and complete) in both.
//!
//! Originals are completed by lock token on `$management` (`update-disposition`), one request
//! per batch: the broker answers it, so a completion that did not happen (a lock lost, the
//! receive link gone) is known and reported. A disposition on the receive link gets no answer
//! from fe2o3, and one sent after the broker detached the link is silently lost (the same
//! gap Microsoft's uamqp had). Service Bus takes `update-disposition` for messages received
//! on a link: Microsoft's Java client first settled everything that way, and its JS and Go
//! clients fall back to it when the receive link is gone. Where the receive link fails, a new
//! one carries on; the locks of what the old one received outlive it.
//!
//! Bounded like the REST resubmit: at most `max` (the DLQ's count at the start, capped by
//! `req.max`), and never a copy of ours that dead-lettered again, nor anything after it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use fe2o3_amqp::types::messaging::MessageId;
use fe2o3_amqp::types::primitives::SimpleValue;

use super::super::copy_policy::{CopyPolicy, ORIGINAL_ID_PROPERTY};
use super::convert::{self, AmqpMessage};
use super::lock_keeper::{Keep, LockSet};
use super::receive::{settle_by_token, LockReceiver, Locked};
use super::send;
use super::{Amqp, Mode};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{RedriveReport, RedriveRequest};
use qdeck_model::rate::Limiter;

/// Messages received (and locked) at once.
const BATCH: usize = 100;
const FIRST_WAIT: Duration = Duration::from_secs(2);
const NEXT_WAIT: Duration = Duration::from_millis(20);
const MAX_ERRORS_KEPT: usize = 20;
/// New receive links tried in a row after the broker detached one.
const MAX_REOPENS: u32 = 3;
const COUNT: &str = "x-qdeck-redriven";
const AT: &str = "x-qdeck-redriven-at";

pub struct Run<'a> {
    pub amqp: &'a Amqp,
    pub source: String,
    pub target: String,
    pub max: Option<u64>,
    pub policy: CopyPolicy,
    /// The source's lock duration (LockDuration), for renewal.
    pub lock_secs: f64,
}

#[derive(Default)]
struct State {
    report: RedriveReport,
    claimed: u64,
    held: Vec<Locked>,
    remaining_ids: Option<HashSet<String>>,
    /// Identity → sequence number of every message copied in this run.
    moved: HashMap<String, i64>,
    past_watermark: u64,
    stop: bool,
    /// Receive links reopened since the last batch that brought messages.
    reopens: u32,
}

impl State {
    fn error(&mut self, e: String) {
        if self.report.errors.len() < MAX_ERRORS_KEPT {
            self.report.errors.push(e);
        }
    }
}

/// The same message across copies: the MessageId before any copy got a new one.
fn identity(m: &AmqpMessage) -> Option<String> {
    m.application_properties
        .as_ref()
        .and_then(|a| a.0.get(ORIGINAL_ID_PROPERTY))
        .and_then(|v| match v {
            SimpleValue::String(s) => Some(s.clone()),
            _ => None,
        })
        .or_else(|| convert::message_id(m))
}

/// A copy of ours back in the DLQ (same identity, later sequence number).
fn is_copy_back(st: &State, m: &AmqpMessage) -> bool {
    match (identity(m), convert::sequence_number(m)) {
        (Some(id), Some(n)) => st.moved.get(&id).is_some_and(|orig| n > *orig),
        _ => false,
    }
}

fn selected(st: &mut State, m: &AmqpMessage) -> bool {
    let Some(r) = st.remaining_ids.as_mut() else {
        return true;
    };
    let by_id = convert::message_id(m).is_some_and(|id| r.remove(&id));
    by_id
        || convert::sequence_number(m)
            .map(|n| n.to_string())
            .is_some_and(|n| r.remove(&n))
}

/// The copy: the original's bare message, stamped, with a new MessageId where the target's
/// duplicate detection would drop one keeping the old.
fn copy_for(m: &AmqpMessage, new_ids: bool) -> AmqpMessage {
    let mut copy = convert::copy_of(m);
    let app = &mut copy
        .application_properties
        .get_or_insert_with(Default::default)
        .0;
    let before = match app.get(COUNT) {
        Some(SimpleValue::Long(n)) => *n,
        Some(SimpleValue::Int(n)) => i64::from(*n),
        Some(SimpleValue::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    };
    app.insert(COUNT.into(), SimpleValue::Long(before + 1));
    app.insert(
        AT.into(),
        SimpleValue::Long(chrono::Utc::now().timestamp_millis()),
    );
    if new_ids {
        if let (false, Some(id)) = (
            app.contains_key(ORIGINAL_ID_PROPERTY),
            convert::message_id(m),
        ) {
            app.insert(ORIGINAL_ID_PROPERTY.into(), SimpleValue::String(id));
        }
        copy.properties
            .get_or_insert_with(Default::default)
            .message_id = Some(MessageId::String(uuid::Uuid::new_v4().to_string()));
    }
    copy
}

pub async fn resubmit(
    run: Run<'_>,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let mode = if run.policy.new_ids {
        "client-side over AMQP (peek-lock, send copy with a new MessageId, complete)"
    } else {
        "client-side over AMQP (peek-lock, send copy, complete)"
    };
    let mut st = State {
        report: RedriveReport {
            mode: mode.into(),
            errors: run
                .policy
                .notes
                .iter()
                .map(|n| format!("note: {n}"))
                .collect(),
            ..Default::default()
        },
        remaining_ids: req.only_ids.as_ref().map(|v| v.iter().cloned().collect()),
        ..Default::default()
    };
    let total = match (&req.only_ids, run.max) {
        (Some(ids), Some(m)) => Some(m.min(ids.len() as u64)),
        (Some(ids), None) => Some(ids.len() as u64),
        (None, m) => m,
    };
    progress.set_total(total);
    progress.phase("resubmitting");
    let mut rx = LockReceiver::open(run.amqp, &run.source, Mode::PeekLock).await?;
    let mut tx = match send::Link::open(run.amqp, &run.target).await {
        Ok(t) => t,
        Err(e) => {
            rx.close().await;
            return Err(e);
        }
    };
    let pace = Limiter::new(req.rate);
    // The window caps the copies sent but not yet confirmed deleted: what a crash could
    // duplicate.
    let window = req.window.map_or(BATCH, |w| {
        usize::try_from(w).unwrap_or(BATCH).clamp(1, BATCH)
    });
    let batch = req
        .rate
        .map_or(window, |r| r.batch(Duration::from_secs(1), window));
    let locks = LockSet::default();
    let keep = Keep {
        amqp: run.amqp,
        source: &run.source,
        linked: [&run.source, &run.target],
        lock_secs: run.lock_secs,
    };
    let work = async {
        while !st.stop && !progress.cancelled() {
            let sides = (&mut rx, &mut tx);
            if let Err(e) = one_batch(&run, &mut st, sides, &locks, &pace, batch, progress).await {
                return Some(e);
            }
        }
        None
    };
    let fatal = tokio::select! {
        f = work => f,
        () = keep.run(&locks) => None,
    };
    if fatal.is_none() && !progress.cancelled() {
        // Chosen messages the receiver never gets: deferred ones, received by number.
        if let Err(e) = deferred_pass(&run, &mut st, &mut tx, progress).await {
            st.error(format!("deferred messages: {e}"));
        }
    }
    progress.phase("releasing held messages");
    let held = std::mem::take(&mut st.held);
    let stuck = release(&run, &rx, &held).await;
    if stuck > 0 {
        st.error(format!(
            "{stuck} held message(s) could not be abandoned; they stay in the DLQ, locked until LockDuration passes"
        ));
    }
    rx.close().await;
    tx.close().await;
    finish(st, fatal, progress)
}

fn finish(
    mut st: State,
    fatal: Option<BackendError>,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    if st.past_watermark > 0 {
        let n = st.past_watermark;
        st.error(format!(
            "stopped at messages dead-lettered after the start ({n} seen): copies that dead-lettered again and newer dead letters stay in the DLQ"
        ));
    }
    let missing = st.remaining_ids.as_ref().map_or(0, HashSet::len);
    if missing > 0 && !progress.cancelled() {
        st.error(format!(
            "{missing} selected message(s) were not found in the DLQ (gone, or locked by another receiver)"
        ));
    }
    st.report.cancelled = progress.cancelled();
    progress.phase("done");
    match fatal {
        Some(e) if st.report.moved == 0 && st.report.possibly_duplicated == 0 => Err(e),
        Some(e) => {
            st.error(format!("stopped: {e}"));
            Ok(st.report)
        }
        None => Ok(st.report),
    }
}

/// Receive one batch, sort it (copy, hold, or stop at), then copy and complete.
async fn one_batch(
    run: &Run<'_>,
    st: &mut State,
    (rx, tx): (&mut LockReceiver, &mut send::Link),
    locks: &LockSet,
    pace: &Limiter,
    batch: usize,
    progress: &OpProgress,
) -> Result<()> {
    let room = match run.max {
        Some(m) => usize::try_from(m.saturating_sub(st.claimed)).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    let want = batch.min(room);
    if want == 0 || st.remaining_ids.as_ref().is_some_and(HashSet::is_empty) {
        st.stop = true;
        return Ok(());
    }
    run.amqp.keep_authorised(&run.source).await?;
    run.amqp.keep_authorised(&run.target).await?;
    run.amqp.bump("amqp.receive", 1);
    let got = match rx.batch(want, FIRST_WAIT, NEXT_WAIT).await {
        Ok(got) => got,
        Err(e) if st.reopens < MAX_REOPENS => {
            // The broker detached the receive link (a link fault, an entity moved): what it
            // received stays locked and settles by token; a new link carries on.
            st.reopens += 1;
            tracing::warn!(
                "servicebus: receiving from {}: {e}; opening a new link",
                run.source
            );
            let fresh = LockReceiver::open(run.amqp, &run.source, Mode::PeekLock).await?;
            std::mem::replace(rx, fresh).close().await;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if got.is_empty() {
        st.stop = true;
        return Ok(());
    }
    st.reopens = 0;
    let mut to_copy = Vec::new();
    for l in got {
        locks.hold(l.token);
        if st.past_watermark > 0 || is_copy_back(st, &l.msg) {
            st.past_watermark += 1;
            st.stop = true;
            st.held.push(l);
        } else if progress.cancelled() || !selected(st, &l.msg) {
            st.held.push(l);
        } else {
            if let (Some(id), Some(n)) = (identity(&l.msg), convert::sequence_number(&l.msg)) {
                st.moved.insert(id, n);
            }
            to_copy.push(l);
        }
    }
    st.claimed += to_copy.len() as u64;
    if req_paced(pace) {
        for l in to_copy {
            pace.take(1, &progress.cancel_token()).await;
            if progress.cancelled() {
                st.held.push(l);
                continue;
            }
            run.amqp.bump("amqp.send", 1);
            let r = tx.send(copy_for(&l.msg, run.policy.new_ids)).await;
            settle(run, st, locks, vec![(l, r)], progress).await;
        }
        return Ok(());
    }
    let copies = to_copy
        .iter()
        .map(|l| copy_for(&l.msg, run.policy.new_ids))
        .collect();
    run.amqp.bump("amqp.send", to_copy.len() as u64);
    let results = tx.send_all_until(copies, &progress.cancel_token()).await;
    let mut results = results.into_iter();
    let mut outcomes = Vec::with_capacity(to_copy.len());
    let mut link_gone = None;
    for l in to_copy {
        match results.next() {
            Some(r) => outcomes.push((l, r)),
            // Cancelled before this one was handed over: not sent, abandoned at the end.
            None if progress.cancelled() => st.held.push(l),
            None => {
                // The link failed before this one was handed over: not sent, left in the DLQ.
                st.held.push(l);
                link_gone.get_or_insert_with(|| {
                    BackendError::Unreachable(format!("the link to {} closed", run.target))
                });
            }
        }
    }
    settle(run, st, locks, outcomes, progress).await;
    link_gone.map_or(Ok(()), Err)
}

fn req_paced(pace: &Limiter) -> bool {
    pace.due().is_some()
}

/// Complete by lock token: every message given in one request, and where that fails, each
/// on its own (a lost lock fails only its message). One result per message, in order.
async fn complete(run: &Run<'_>, sent: &[Locked]) -> Vec<Result<()>> {
    let tokens: Vec<uuid::Uuid> = sent.iter().filter_map(|l| l.token).collect();
    if tokens.len() == sent.len()
        && settle_by_token(run.amqp, &run.source, &tokens, "completed")
            .await
            .is_ok()
    {
        return sent.iter().map(|_| Ok(())).collect();
    }
    let mut out = Vec::with_capacity(sent.len());
    for l in sent {
        out.push(match l.token {
            Some(t) => settle_by_token(run.amqp, &run.source, &[t], "completed").await,
            None => Err(BackendError::Protocol(
                "the broker gave no lock token to complete it by".into(),
            )),
        });
    }
    out
}

/// After the copies' outcomes: complete the originals whose copy was accepted, and hold the
/// others (abandoned at the end, so they stay in the DLQ).
async fn settle(
    run: &Run<'_>,
    st: &mut State,
    locks: &LockSet,
    outcomes: Vec<(Locked, Result<()>)>,
    progress: &OpProgress,
) {
    let mut sent = Vec::with_capacity(outcomes.len());
    for (l, r) in outcomes {
        match r {
            Ok(()) => sent.push(l),
            Err(e) => not_sent(st, l, e, progress),
        }
    }
    if sent.is_empty() {
        return;
    }
    let done = complete(run, &sent).await;
    for (l, r) in sent.into_iter().zip(done) {
        locks.drop_token(l.token);
        match r {
            Ok(()) => {
                st.report.moved += 1;
                progress.add_done(1);
            }
            Err(e) => {
                let id = convert::message_id(&l.msg).unwrap_or_default();
                st.report.possibly_duplicated += 1;
                st.error(format!(
                    "message {id}: copied to {} but not removed from the DLQ ({e}); it may be resubmitted twice",
                    run.target
                ));
                progress.add_failed(1);
            }
        }
    }
}

/// A copy the broker did not accept: the original is held (and stays in the DLQ).
fn not_sent(st: &mut State, l: Locked, e: BackendError, progress: &OpProgress) {
    let id = convert::message_id(&l.msg).unwrap_or_default();
    if let Some(i) = identity(&l.msg) {
        st.moved.remove(&i);
    }
    st.report.failed += 1;
    st.error(format!(
        "message {id}: not resubmitted, left in the DLQ: {e}"
    ));
    progress.add_failed(1);
    let fatal = matches!(
        e,
        BackendError::NotFound(_) | BackendError::Auth(_) | BackendError::Forbidden { .. }
    );
    st.held.push(l);
    if fatal {
        st.stop = true;
    }
}

/// Abandon what the run still holds, by lock token (the link that received it may be gone),
/// else on the link; how many could be neither.
async fn release(run: &Run<'_>, rx: &LockReceiver, held: &[Locked]) -> usize {
    let tokens: Vec<uuid::Uuid> = held.iter().filter_map(|l| l.token).collect();
    if held.is_empty()
        || (tokens.len() == held.len()
            && settle_by_token(run.amqp, &run.source, &tokens, "abandoned")
                .await
                .is_ok())
    {
        return 0;
    }
    let mut stuck = 0;
    for l in held {
        let by_token = match l.token {
            Some(t) => settle_by_token(run.amqp, &run.source, &[t], "abandoned")
                .await
                .is_ok(),
            None => false,
        };
        if !by_token && rx.abandon(l).await.is_err() {
            stuck += 1;
        }
    }
    stuck
}

/// The selected messages still missing that are deferred in the source (a receiver never
/// gets those again): found by peek, received by sequence number under a lock, copied, and
/// completed by lock token once the copy was accepted.
async fn deferred_pass(
    run: &Run<'_>,
    st: &mut State,
    tx: &mut send::Link,
    progress: &OpProgress,
) -> Result<()> {
    let Some(wanted) = st.remaining_ids.clone().filter(|r| !r.is_empty()) else {
        return Ok(());
    };
    let seqs = deferred_seqs(run.amqp, &run.source, &wanted).await?;
    if seqs.is_empty() {
        return Ok(());
    }
    progress.phase("resubmitting deferred messages");
    for (m, token) in super::scheduled::receive_deferred(run.amqp, &run.source, &seqs).await? {
        let _ = selected(st, &m);
        let id = convert::message_id(&m).unwrap_or_default();
        run.amqp.bump("amqp.send", 1);
        if let Err(e) = tx.send(copy_for(&m, run.policy.new_ids)).await {
            st.report.failed += 1;
            st.error(format!("deferred message {id}: not resubmitted: {e}"));
            progress.add_failed(1);
            continue;
        }
        let done = match token {
            Some(t) => settle_by_token(run.amqp, &run.source, &[t], "completed").await,
            None => Err(BackendError::Protocol("no lock token".into())),
        };
        match done {
            Ok(()) => {
                st.report.moved += 1;
                progress.add_done(1);
            }
            Err(e) => {
                st.report.possibly_duplicated += 1;
                st.error(format!(
                    "deferred message {id}: copied to {} but not removed ({e}); it may be resubmitted twice",
                    run.target
                ));
                progress.add_failed(1);
            }
        }
    }
    Ok(())
}

/// Sequence numbers of the deferred messages among `wanted` (ids or sequence numbers), by a
/// bounded peek of the entity.
pub async fn deferred_seqs(
    amqp: &Amqp,
    entity: &str,
    wanted: &HashSet<String>,
) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    let mut from = 0i64;
    for _ in 0..40 {
        let got = super::peek::peek_raw(amqp, entity, from, super::peek::PEEK_BATCH, None).await?;
        let Some(last) = got.last().and_then(convert::sequence_number) else {
            break;
        };
        for m in &got {
            let seq = convert::sequence_number(m);
            let hit = convert::message_id(m).is_some_and(|id| wanted.contains(&id))
                || seq.is_some_and(|n| wanted.contains(&n.to_string()));
            if hit && convert::state_name(m) == Some("Deferred") {
                out.extend(seq);
            }
        }
        from = last + 1;
    }
    Ok(out)
}
