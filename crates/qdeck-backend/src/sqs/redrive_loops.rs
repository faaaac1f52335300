//! The client-side redrive's copy loops: each claims up to 10 messages, receives them (held
//! invisible), sorts out those this run must not move, groups the rest by destination and
//! hands them to `redrive_batch` in size-limited batches. Several loops run at once unless a
//! rate or a selection is set; their shared state is locked only between awaits.

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_sqs::types::{Message as SqsMessage, MessageSystemAttributeName};

use super::client::one_line;
use super::redrive::{BATCH_BYTES, RUN_ATTR};
use super::redrive_batch::{approx_size, copy_then_delete, Tally};
use super::{lock, QueueMeta, SqsBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

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

impl State {
    fn unclaim(&mut self, n: i32) {
        self.claimed = self.claimed.saturating_sub(n as u64);
    }
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

/// The source's depth: from the last figures read (no extra call when stats ran before),
/// else asked for.
async fn source_depth(b: &SqsBackend, src_id: &QueueId, src: &QueueMeta) -> Option<u64> {
    let recent_depth = lock(&b.recent).get(src_id).and_then(|r| {
        r.attrs
            .get("ApproximateNumberOfMessages")
            .and_then(|v| v.parse::<u64>().ok())
    });
    match recent_depth {
        Some(d) => Some(d),
        None => b.fetch_attrs(src_id, src).await.ok().and_then(|a| {
            a.get("ApproximateNumberOfMessages")
                .and_then(|v| v.parse::<u64>().ok())
        }),
    }
}

pub(crate) async fn client_side(
    b: &SqsBackend,
    src: &QueueMeta,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let depth = source_depth(b, &req.source, src).await;
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
    run.finish().await
}

/// One copy loop: claim → receive → copy → delete, until drained, cancelled or at `max`.
async fn worker(run: &Run<'_>, index: usize) {
    let mut stale_batches = 0u32;
    loop {
        let Some(n) = run.claim(index) else {
            return;
        };
        let Some(batch) = run.receive(n).await else {
            return;
        };
        let take = match run.sort(&batch, n, &mut stale_batches) {
            Sorted::Take(take) => take,
            Sorted::Again => continue,
            Sorted::Stop => return,
        };
        run.move_batch(take, n).await;
    }
}

/// What became of a received batch once sorted.
enum Sorted<'m> {
    /// Fresh, selected messages to move (the rest are held).
    Take(Vec<&'m SqsMessage>),
    /// Nothing fresh in it: receive again.
    Again,
    /// Nothing fresh too many times in a row: the loops stop.
    Stop,
}

/// One batch's messages grouped by destination, with what happened to them.
#[derive(Default)]
struct Pass<'m> {
    /// By destination, keeping receive order inside each group.
    groups: Vec<(QueueId, QueueMeta, Vec<&'m SqsMessage>)>,
    /// Messages whose destination could not be found.
    unroutable: u64,
    total: Tally,
    errors: Vec<String>,
    hold: Vec<String>,
}

impl Run<'_> {
    /// Claim the size of the next receive, or None when this loop is done.
    fn claim(&self, index: usize) -> Option<i32> {
        let mut s = lock(&self.st);
        if s.stop {
            return None;
        }
        if self.progress.cancelled() {
            s.report.cancelled = true;
            s.stop = true;
            return None;
        }
        if let Some(w) = &self.wanted {
            if w.iter().all(|id| s.seen.contains(id)) {
                s.stop = true;
                return None;
            }
        }
        // Failures count toward `max`: the run tries at most that many messages.
        let done = s.report.moved + s.report.possibly_duplicated + s.report.failed;
        let remaining = self.req.max.map(|m| m.saturating_sub(done + s.claimed));
        if remaining == Some(0) {
            return None;
        }
        if index > 0 && self.expected.is_some_and(|e| done + s.claimed >= e) {
            return None;
        }
        let n = remaining.map_or(self.per_batch_cap, |r| {
            (r.min(10) as i32).min(self.per_batch_cap)
        });
        s.claimed += n as u64;
        Some(n)
    }

    /// Wait for the rate, then receive up to `n` (held invisible). None when the loops stop:
    /// cancelled, the receive failed, or the source is drained.
    async fn receive(&self, n: i32) -> Option<Vec<SqsMessage>> {
        self.pace
            .take(n as u64, &self.progress.cancel_token())
            .await;
        if self.progress.cancelled() {
            let mut s = lock(&self.st);
            s.unclaim(n);
            s.report.cancelled = true;
            s.stop = true;
            return None;
        }
        let batch = match self
            .b
            .receive(&self.req.source, self.src, n, self.hold_secs, 1)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                let mut s = lock(&self.st);
                s.unclaim(n);
                s.report.errors.push(e.to_string());
                s.fatal.get_or_insert(e);
                s.stop = true;
                return None;
            }
        };
        if batch.is_empty() {
            // Drained (long poll came back empty): every loop stops.
            let mut s = lock(&self.st);
            s.unclaim(n);
            s.stop = true;
            return None;
        }
        Some(batch)
    }

    /// Keep fresh, selected messages; hold the rest invisible until the end.
    fn sort<'m>(&self, batch: &'m [SqsMessage], n: i32, stale_batches: &mut u32) -> Sorted<'m> {
        let mut take: Vec<&SqsMessage> = Vec::new();
        let mut s = lock(&self.st);
        let mut fresh = 0usize;
        for m in batch {
            let mid = m.message_id().unwrap_or_default().to_string();
            if sent_by(m, &self.run_id) {
                // Our own copy, dead-lettered again: not moved twice, not counted.
                s.returned += 1;
                s.hold.extend(m.receipt_handle().map(str::to_string));
                continue;
            }
            let new = s.seen.insert(mid.clone());
            fresh += usize::from(new);
            let selected = self.wanted.as_ref().is_none_or(|w| w.contains(&mid));
            if new && selected {
                take.push(m);
            } else {
                s.hold.extend(m.receipt_handle().map(str::to_string));
            }
        }
        // Only messages seen before (held ones whose visibility ran out on a long run):
        // they are held again; stop only if that keeps happening.
        if fresh == 0 {
            *stale_batches += 1;
            s.unclaim(n);
            if *stale_batches >= 3 {
                s.stop = true;
                return Sorted::Stop;
            }
            return Sorted::Again;
        }
        *stale_batches = 0;
        Sorted::Take(take)
    }

    /// Move the taken messages of one receive (claimed as `n`) and add the outcome to the run.
    async fn move_batch(&self, take: Vec<&SqsMessage>, n: i32) {
        let mut pass = self.group(take).await;
        for (d, dest, msgs) in &pass.groups {
            // Split by payload size.
            let mut start = 0;
            while start < msgs.len() {
                let end = batch_end(msgs, start);
                let t = copy_then_delete(
                    self.b,
                    (&self.req.source, self.src),
                    (d, dest),
                    &msgs[start..end],
                    &self.run_id,
                    &mut pass.errors,
                    &mut pass.hold,
                )
                .await;
                self.progress.update(|s| {
                    s.done += t.moved + t.dup;
                    s.failed += t.failed;
                });
                pass.total.moved += t.moved;
                pass.total.failed += t.failed;
                pass.total.dup += t.dup;
                start = end;
            }
        }
        if pass.unroutable > 0 {
            self.progress.add_failed(pass.unroutable);
        }
        let mut s = lock(&self.st);
        s.unclaim(n);
        s.report.moved += pass.total.moved;
        s.report.failed += pass.total.failed;
        s.report.possibly_duplicated += pass.total.dup;
        s.report.errors.append(&mut pass.errors);
        s.hold.append(&mut pass.hold);
        s.dests.extend(pass.groups.into_iter().map(|(d, _, _)| d));
    }

    /// Group by destination, keeping receive order inside each group. A message with no
    /// destination fails and is held.
    async fn group<'m>(&self, take: Vec<&'m SqsMessage>) -> Pass<'m> {
        let mut pass = Pass::default();
        for m in take {
            match destination(self.b, self.src, self.req, m).await {
                Ok((d, meta)) => match pass.groups.iter_mut().find(|(g, _, _)| *g == d) {
                    Some((_, _, v)) => v.push(m),
                    None => pass.groups.push((d, meta, vec![m])),
                },
                Err(e) => {
                    pass.unroutable += 1;
                    pass.errors.push(one_line(&e, 200));
                    pass.hold.extend(m.receipt_handle().map(str::to_string));
                }
            }
        }
        pass.total.failed = pass.unroutable;
        pass
    }

    /// After the loops: release what was held, and the report (or the error that stopped a
    /// run that did nothing).
    async fn finish(self) -> Result<RedriveReport> {
        let (b, src_id) = (self.b, &self.req.source);
        let st = std::mem::take(&mut *lock(&self.st));
        release(b, src_id, self.src, &st.hold).await;
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
        self.progress.phase(if report.cancelled {
            "cancelled"
        } else {
            "done"
        });
        Ok(report)
    }
}

/// End (exclusive) of the batch starting at `start`: as many as fit in `BATCH_BYTES`, and at
/// least one.
fn batch_end(msgs: &[&SqsMessage], start: usize) -> usize {
    let mut end = start;
    let mut bytes = 0;
    while end < msgs.len() && (end == start || bytes + approx_size(msgs[end]) <= BATCH_BYTES) {
        bytes += approx_size(msgs[end]);
        end += 1;
    }
    end
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

/// True when `m` is a copy this run sent that has come back (dead-lettered again).
fn sent_by(m: &SqsMessage, run_id: &str) -> bool {
    m.message_attributes()
        .and_then(|a| a.get(RUN_ATTR))
        .and_then(|v| v.string_value())
        == Some(run_id)
}

/// Make held messages visible again (failed copies, unselected messages).
async fn release(b: &SqsBackend, id: &QueueId, meta: &QueueMeta, hold: &[String]) {
    if !hold.is_empty() {
        let _ = b.set_visibility(id, meta, hold, 0).await;
    }
}
