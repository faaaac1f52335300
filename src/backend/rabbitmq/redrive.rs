//! Client-side redrive: consume the DLQ with a prefetch window, publish each message with
//! publisher confirms (many in flight), and ack the DLQ message only after its copy is
//! confirmed. Messages that cannot be moved stay unacknowledged and return to the DLQ when
//! the channel closes. A crash mid-way may duplicate, never lose.
//!
//! Two filters ride on the same loop: chosen ids (`only_ids`, from a scan), and a predicate
//! tested on each delivery (`redrive_matching`, a one-pass `redrive --where`). Either way the
//! messages passed over stay unacknowledged until the channel closes, so none is read twice.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, FuturesUnordered, SelectAll};
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Confirmation};

use super::browse::message_of;
use super::conn::amqp_error;
use super::headers::{message_id, parse_dead_letter, stamped};
use super::RabbitBackend;
use crate::backend::{BackendError, MessageFilter, OpProgress, Result};
use crate::domain::*;

/// Copies sent but not yet confirmed-and-deleted at once, unless the request says: what a
/// crash (kill -9, lost connection) may duplicate. 500 keeps a 1 KB redrive near the
/// broker's own shovel speed on a local broker (confirms are pipelined; the window only has
/// to cover one round trip of publishes) while a crash costs at most 500 duplicates.
pub const DEFAULT_WINDOW: u32 = 500;
/// Largest window a request may ask for.
const MAX_WINDOW: u32 = 5000;
/// Stop when the DLQ stays silent this long with nothing in flight (someone else drained it).
const IDLE: Duration = Duration::from_secs(5);
/// With an id filter, a pause this long makes us ask the broker whether any message is still
/// ready: none ready (twice in a row) means every message there reached us.
const QUIET: Duration = Duration::from_millis(300);
const MAX_ERRORS: usize = 10;

/// What became of one copy.
enum Outcome {
    /// The broker confirmed the copy: the original may be acknowledged.
    Confirmed,
    /// Not copied; the original stays in the DLQ.
    Failed(String),
    /// The copy may or may not exist; the original stays: maybe twice, never lost.
    Lost(String),
}

/// Acknowledges originals whose copies are confirmed: one `multiple` ack for each run of
/// confirmed tags at the front, single acks behind a message we hold on purpose.
struct Acks {
    /// delivery tag → copy confirmed?
    open: BTreeMap<u64, bool>,
    /// Tags we keep unacknowledged (failed, skipped): never covered by a multiple ack.
    held: BTreeSet<u64>,
}

impl Acks {
    /// Acks to send now: (tag, multiple, messages covered).
    fn ready(&mut self) -> Vec<(u64, bool, u64)> {
        let mut out = Vec::new();
        let first_held = self.held.iter().next().copied().unwrap_or(u64::MAX);
        let mut last = None;
        let mut n = 0;
        while let Some((&t, &done)) = self.open.iter().next() {
            if !done || t > first_held {
                break;
            }
            self.open.remove(&t);
            last = Some(t);
            n += 1;
        }
        if let Some(t) = last {
            out.push((t, true, n));
        }
        let behind: Vec<u64> = self
            .open
            .range(first_held..)
            .filter(|(_, &d)| d)
            .map(|(&t, _)| t)
            .collect();
        for t in behind {
            self.open.remove(&t);
            out.push((t, false, 1));
        }
        out
    }
}

/// With a filter, each consuming channel holds at most this many unacknowledged messages
/// (its prefetch), and a new channel starts consuming once one holds `LANE_FULL` passed-over
/// messages. RabbitMQ finds the message an ack names by walking the channel's list of
/// unacknowledged deliveries from the oldest: past every message held there. On one channel
/// that holds 40,000, a 50,000-message pass took 120 s; lanes keep each ack's walk short.
const LANE: u16 = 2000;
const LANE_FULL: usize = 1500;

/// A consuming channel and what is unacknowledged on it.
struct Lane {
    ch: Channel,
    tag: String,
    acks: Acks,
}

type Deliveries = SelectAll<BoxStream<'static, (usize, lapin::Result<Delivery>)>>;

/// Open a consuming channel with `prefetch` (0: none) and add its deliveries, tagged with its
/// index, to `all`.
async fn open_lane(
    b: &RabbitBackend,
    vhost: &str,
    src: &str,
    id: &QueueId,
    prefetch: u16,
    lanes: &mut Vec<Lane>,
    all: &mut Deliveries,
) -> Result<()> {
    let ch = b.pool.channel(vhost).await?;
    ch.basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "basic.qos"))?;
    let tag = format!("qdeck-redrive-{}", uuid::Uuid::new_v4());
    b.calls.bump("amqp:basic.consume");
    let consumer = ch
        .basic_consume(
            src.into(),
            tag.as_str().into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| amqp_error(&e, &format!("consume '{id}'")))?;
    let idx = lanes.len();
    all.push(consumer.map(move |d| (idx, d)).boxed());
    lanes.push(Lane {
        ch,
        tag,
        acks: Acks {
            open: BTreeMap::new(),
            held: BTreeSet::new(),
        },
    });
    Ok(())
}

/// Prefetch window when the average message size is unknown.
const UNKNOWN_SIZE_WINDOW: u16 = 2000;
/// Bytes we let the broker push ahead of us (prefetched plus in flight).
const WINDOW_BYTES: u64 = 64 * 1024 * 1024;

/// Prefetch window from the source's average message size (management API), so big
/// messages do not buffer gigabytes: at most `MAX_WINDOW`, at least 10.
async fn window_for(b: &RabbitBackend, source: &QueueId) -> u16 {
    match b.queue_bytes(source).await {
        Some((bytes, msgs)) if msgs > 0 && bytes > 0 => {
            let avg = (bytes / msgs).max(1);
            (WINDOW_BYTES / avg).clamp(10, MAX_WINDOW as u64) as u16
        }
        // Size unknown (new queue whose stats are not in yet, management API down).
        _ => UNKNOWN_SIZE_WINDOW,
    }
}

/// Passive declare (NotFound names the queue as the user knows it). A failure closes the
/// channel: callers use a throw-away one.
pub(super) async fn declare_passive(
    ch: &Channel,
    queue: &str,
    id: &QueueId,
) -> Result<lapin::Queue> {
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            passive: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .map_err(|e| match amqp_error(&e, &format!("queue '{id}'")) {
        BackendError::NotFound(_) => BackendError::NotFound(format!("queue '{id}' not found")),
        other => other,
    })
}

/// Messages ready in `queue`, by passive declare.
pub(super) async fn count(ch: &Channel, queue: &str, id: &QueueId) -> Result<u64> {
    Ok(declare_passive(ch, queue, id).await?.message_count() as u64)
}

pub async fn redrive(
    b: &RabbitBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    run(b, req, None, progress).await
}

/// A one-pass filtered redrive (checks in `one_pass`).
pub async fn redrive_matching(
    b: &RabbitBackend,
    req: &RedriveRequest,
    filter: &MessageFilter,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    super::one_pass::check(b, req, filter).await?;
    run(b, req, Some(filter), progress).await
}

async fn run(
    b: &RabbitBackend,
    req: &RedriveRequest,
    matching: Option<&MessageFilter>,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let (vhost, src) = b.resolve(&req.source);
    let fixed: Option<String> = match &req.target {
        RedriveTarget::Origin => None,
        RedriveTarget::Queue(t) => {
            let (tv, tn) = b.resolve(t);
            if tv != vhost {
                return Err(BackendError::Unsupported(
                    "redrive across vhosts is not supported".into(),
                ));
            }
            if tn == src {
                return Err(BackendError::Invalid(
                    "source and target are the same queue".into(),
                ));
            }
            Some(tn)
        }
    };
    if let Some(r) = req.rate {
        if !r.is_finite() || r <= 0.0 {
            return Err(BackendError::Invalid("rate must be above 0".into()));
        }
    }
    let shovel =
        fixed.is_some() && req.rate.is_none() && req.only_ids.is_none() && matching.is_none();
    if let (true, Some(dest)) = (shovel && b.shovel_in_use().await, &fixed) {
        if let Some(rep) =
            super::shovel::move_with_shovel(b, &vhost, &src, dest, req.max, progress).await?
        {
            return Ok(rep);
        }
    }
    let mut report = RedriveReport {
        mode: "client-side".into(),
        ..Default::default()
    };

    // Count first: we move at most what is there now (new dead letters wait for next time).
    let probe = b.pool.channel(&vhost).await?;
    b.calls.bump("amqp:queue.declare");
    let available = count(&probe, &src, &req.source).await?;
    if let (Some(t), RedriveTarget::Queue(tid)) = (&fixed, &req.target) {
        b.calls.bump("amqp:queue.declare");
        count(&probe, t, tid).await?;
    }
    // The probe stays open: an id-filtered redrive asks it whether the queue is drained.
    // `max` caps the messages moved. Without an id filter that is the deliveries taken; with
    // one, the matching messages may sit anywhere in the queue, so every message there now is
    // passed (skipped ones held) until `max` of them matched.
    let max_moved = req.max.map_or(available, |m| m.min(available));
    let only: Option<HashSet<&str>> = req
        .only_ids
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    // With a predicate, the pass examines the messages ready now (they come first: the ones
    // passed over are held, so none comes round again) and `max` caps the matches.
    let examine = matching.map(|f| f.max_examined.map_or(available, |l| l.min(available)));
    if let Some(n) = examine {
        super::one_pass::check_size(b, &req.source, n).await?;
    }
    // With an id filter the count taken before the scan's requeues settled (or before new
    // dead letters) is no bound: we pass messages until every selected one matched or the
    // broker has no ready message left for us.
    let total = match (&only, examine) {
        (Some(_), _) => u64::MAX,
        (None, Some(n)) => n,
        (None, None) => max_moved,
    };
    progress.set_total(match (&only, examine) {
        (Some(ids), _) => Some((ids.len() as u64).min(max_moved)),
        // How many will match is not known until the pass ends.
        (None, Some(_)) => None,
        (None, None) => Some(max_moved),
    });
    if examine.is_some() {
        report.examined = Some(0);
        report.matched = Some(0);
    }
    if available == 0 || max_moved == 0 || examine == Some(0) {
        let _ = probe.close(200, "ok".into()).await;
        progress.phase("done");
        return Ok(report);
    }

    let pub_ch = b.pool.channel_on(&vhost, "publish").await?;
    pub_ch
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "confirm.select"))?;
    // Copies not yet confirmed-and-deleted: what a crash may duplicate.
    let cap = req.window.unwrap_or(DEFAULT_WINDOW).clamp(1, MAX_WINDOW) as u64;
    // With a filter, skipped messages stay held: lanes of `LANE` unacknowledged each (the
    // number of lanes is bounded by the depth; `one_pass` caps the predicate's).
    let filtered = only.is_some() || matching.is_some();
    let window = if filtered {
        LANE
    } else {
        window_for(b, &req.source).await.min(total.min(cap) as u16)
    };
    let mut lanes: Vec<Lane> = Vec::new();
    let mut deliveries: Deliveries = SelectAll::new();
    open_lane(
        b,
        &vhost,
        &src,
        &req.source,
        window,
        &mut lanes,
        &mut deliveries,
    )
    .await?;

    progress.phase("copying");
    let cancel = progress.cancel_token();
    let start = Instant::now();
    let mut inflight = FuturesUnordered::new();
    let mut taken: u64 = 0;
    let mut published: u64 = 0;
    let mut matched: u64 = 0;
    let mut stopping = false;
    // Lost confirms: the copy may or may not exist, the original stays in the source.
    let mut unconfirmed_lost: u64 = 0;
    let mut errors: Vec<String> = Vec::new();
    let note = |errors: &mut Vec<String>, e: String| {
        if errors.len() < MAX_ERRORS && !errors.contains(&e) {
            errors.push(e);
        }
    };
    let want = match (&only, matching) {
        (Some(o), _) => Some((o.len() as u64).min(max_moved)),
        (None, Some(_)) => req.max,
        (None, None) => None,
    };
    // Rate limit without burst credit: each publish is due 1/rate after the previous one.
    let gap = req.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut next_due: Option<Instant> = None;
    // Id filter: when a delivery last arrived, and whether the last quiet check found none ready.
    let mut last_delivery = Instant::now();
    let mut seen_drained = false;

    loop {
        let more_to_see = !stopping && taken < total && want.is_none_or(|w| matched < w);
        if filtered && more_to_see && lanes.last().is_some_and(|l| l.acks.held.len() >= LANE_FULL) {
            if let Err(e) = open_lane(
                b,
                &vhost,
                &src,
                &req.source,
                window,
                &mut lanes,
                &mut deliveries,
            )
            .await
            {
                note(&mut errors, format!("stopped: {e}"));
                stopping = true;
            }
        }
        // Rate limit: wait until the next publish is due.
        let due = next_due;
        let rate_ok = due.is_none_or(|d| Instant::now() >= d);
        let open: usize = lanes.iter().map(|l| l.acks.open.len()).sum();
        let wants_more = more_to_see && !stopping && (open as u64) < cap;
        let can_take = wants_more && rate_ok;
        if !wants_more && inflight.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled(), if !stopping => {
                stopping = true;
                report.cancelled = true;
                progress.phase("cancelling: waiting for confirms");
            }
            Some(first) = inflight.next(), if !inflight.is_empty() => {
                // Take every confirm that is already in, then ack in as few frames as we can.
                let mut batch: Vec<(usize, u64, Outcome)> = vec![first];
                while let Some(Some(o)) = futures::FutureExt::now_or_never(inflight.next()) {
                    batch.push(o);
                }
                for (li, tag, o) in batch {
                    let acks = &mut lanes[li].acks;
                    match o {
                        Outcome::Confirmed => { acks.open.insert(tag, true); }
                        Outcome::Failed(e) => {
                            acks.open.remove(&tag);
                            acks.held.insert(tag);
                            report.failed += 1;
                            progress.add_failed(1);
                            note(&mut errors, e);
                        }
                        Outcome::Lost(e) => {
                            // Not a confirmed copy: the original stays (held, requeued on
                            // close), so it is not moved; whether a copy exists is unknown.
                            acks.open.remove(&tag);
                            acks.held.insert(tag);
                            report.failed += 1;
                            unconfirmed_lost += 1;
                            progress.add_failed(1);
                            note(&mut errors, e);
                        }
                    }
                }
                for lane in lanes.iter_mut() {
                    let mut sent: u64 = 0;
                    for (tag, multiple, n) in lane.acks.ready() {
                        b.calls.bump("amqp:basic.ack");
                        match lane.ch.basic_ack(tag, BasicAckOptions { multiple }).await {
                            Ok(()) => sent += n,
                            Err(e) => {
                                // Confirmed copy, original not removed: a duplicate.
                                report.possibly_duplicated += n;
                                note(&mut errors, format!("copied but could not remove the original: {}", amqp_error(&e, "ack")));
                                stopping = true;
                            }
                        }
                    }
                    if sent > 0 {
                        // AMQP acks have no reply: a synchronous method behind them on the same
                        // channel (the broker handles a channel's frames in order) proves they
                        // were applied. Until then their outcome is unknown.
                        b.calls.bump("amqp:basic.qos");
                        match lane.ch.basic_qos(window, BasicQosOptions::default()).await {
                            Ok(()) => { report.moved += sent; progress.add_done(sent); }
                            Err(e) => {
                                report.possibly_duplicated += sent;
                                note(&mut errors, format!("copied, but whether the originals were removed is unknown: {}", amqp_error(&e, "ack")));
                                stopping = true;
                            }
                        }
                    }
                }
            }
            d = deliveries.next(), if can_take => {
                let (li, mut d) = match d {
                    Some((li, Ok(d))) => (li, d),
                    Some((_, Err(e))) => {
                        note(&mut errors, amqp_error(&e, "consume").to_string());
                        stopping = true;
                        continue;
                    }
                    None => { stopping = true; continue; }
                };
                taken += 1;
                last_delivery = Instant::now();
                seen_drained = false;
                let tag = d.delivery_tag;
                let acks = &mut lanes[li].acks;
                if let Some(ids) = &only {
                    if !ids.contains(message_id(&d.properties, &d.data).as_str()) {
                        acks.held.insert(tag); // requeued when the channel closes
                        continue;
                    }
                    matched += 1;
                }
                if let Some(f) = matching {
                    // The body goes into the message tested and comes back for the copy; a
                    // message passed over is dropped here and only its tag stays.
                    let body = std::mem::take(&mut d.data);
                    let m = message_of(&d, body, taken as i64 - 1);
                    let hit = f.matches(&m);
                    if taken.is_multiple_of(1000) {
                        progress.phase(&format!("examined {taken} of {total}, {} matched", matched + u64::from(hit)));
                    }
                    if !hit {
                        acks.held.insert(tag); // requeued when the channel closes
                        continue;
                    }
                    d.data = m.body;
                    matched += 1;
                }
                let target = match &fixed {
                    Some(t) => Some(t.clone()),
                    None => parse_dead_letter(&d.properties)
                        .and_then(|i| i.origin)
                        .map(|q| q.0)
                        .filter(|q| *q != src),
                };
                let Some(target) = target else {
                    acks.held.insert(tag);
                    report.failed += 1;
                    progress.add_failed(1);
                    note(&mut errors, "message without an x-death origin: choose a target queue".into());
                    continue;
                };
                if !pub_ch.status().connected() {
                    // The connection went away: stop; what we hold goes back when it closes.
                    acks.held.insert(tag);
                    note(&mut errors, "the publishing channel closed: stopped".into());
                    stopping = true;
                    continue;
                }
                if let Some(g) = gap {
                    next_due = Some(Instant::now().max(next_due.unwrap_or(start)) + g);
                }
                published += 1;
                acks.open.insert(tag, false);
                let ch = pub_ch.clone();
                inflight.push(async move {
                    let sent = ch
                        .basic_publish(
                            "".into(),
                            target.as_str().into(),
                            BasicPublishOptions { mandatory: true, ..Default::default() },
                            &d.data,
                            stamped(d.properties, now_ms()),
                        )
                        .await;
                    let outcome = match sent {
                        // Refused before anything was sent: no copy exists.
                        Err(e) => Outcome::Failed(amqp_error(&e, "publish").to_string()),
                        Ok(confirm) => match confirm.await {
                            Ok(Confirmation::Ack(None)) | Ok(Confirmation::NotRequested) => Outcome::Confirmed,
                            Ok(Confirmation::Ack(Some(_))) => Outcome::Failed(format!(
                                "target queue '{target}' does not exist (message returned unroutable)"
                            )),
                            Ok(Confirmation::Nack(_)) => {
                                Outcome::Failed(format!("the broker refused the copy for '{target}' (nack)"))
                            }
                            Err(e) => Outcome::Lost(format!("confirm lost: {}", amqp_error(&e, "publish"))),
                        },
                    };
                    (li, tag, outcome)
                });
            }
            _ = tokio::time::sleep_until(due.unwrap_or(start).into()), if wants_more && !rate_ok => {}
            _ = tokio::time::sleep(QUIET), if can_take && inflight.is_empty() && only.is_some() => {
                // Everything we were sent is held, so "none ready" means we saw the whole queue.
                b.calls.bump("amqp:queue.declare");
                match count(&probe, &src, &req.source).await {
                    Ok(0) if seen_drained => stopping = true,
                    Ok(0) => seen_drained = true,
                    Ok(_) => seen_drained = false,
                    Err(e) => {
                        note(&mut errors, format!("could not tell whether the queue is drained: {e}"));
                        stopping = true;
                    }
                }
                if !stopping && last_delivery.elapsed() >= IDLE {
                    note(&mut errors, format!("'{}' sent nothing for {} s although messages are ready there: stopped", req.source, IDLE.as_secs()));
                    stopping = true;
                }
            }
            _ = tokio::time::sleep(IDLE), if can_take && inflight.is_empty() && only.is_none() => {
                // Nothing arrives although the count said so: another consumer took them.
                stopping = true;
            }
        }
        if !stopping && taken >= total {
            progress.phase("waiting for confirms");
        }
    }

    let pass_ms = start.elapsed().as_millis();
    for lane in &lanes {
        let _ = lane
            .ch
            .basic_cancel(lane.tag.as_str().into(), BasicCancelOptions::default())
            .await;
    }
    // Closing requeues whatever we still hold (skipped, failed, prefetched but unused).
    for lane in &lanes {
        let _ = lane.ch.close(200, "redrive done".into()).await;
    }
    // Where a slow redrive spent its time (QDECK_LOG=qdeck=debug): the pass, or the requeue.
    tracing::debug!(
        "redrive of '{}': {taken} taken, {published} published over {} lanes in {pass_ms} ms; cancel and close took {} ms",
        req.source,
        lanes.len(),
        start.elapsed().as_millis() - pass_ms
    );
    let _ = pub_ch.close(200, "redrive done".into()).await;
    let _ = probe.close(200, "ok".into()).await;
    b.calls.bump_by("amqp:basic.publish", published);
    if unconfirmed_lost > 0 {
        errors.push(format!(
            "{unconfirmed_lost} copies were sent but never confirmed (connection lost): their originals stay in '{}', and the broker may also hold some of those copies in the target",
            req.source
        ));
    }
    report.errors = errors;
    if examine.is_some() {
        report.examined = Some(taken);
        report.matched = Some(matched);
    }
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_never_cover_a_held_message() {
        let mut a = Acks {
            open: BTreeMap::new(),
            held: BTreeSet::new(),
        };
        for t in 1..=6 {
            a.open.insert(t, false);
        }
        // 1, 2 confirmed; 3 held (failed); 4 confirmed; 5 in flight; 6 confirmed.
        a.open.insert(1, true);
        a.open.insert(2, true);
        a.open.remove(&3);
        a.held.insert(3);
        a.open.insert(4, true);
        a.open.insert(6, true);
        assert_eq!(a.ready(), vec![(2, true, 2), (4, false, 1), (6, false, 1)]);
        assert_eq!(a.open.keys().copied().collect::<Vec<_>>(), vec![5]);
        assert!(a.ready().is_empty());
    }
}
