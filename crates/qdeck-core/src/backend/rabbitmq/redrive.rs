//! Client-side redrive: consume the DLQ with a prefetch window, publish each message with
//! publisher confirms (many in flight), and ack the DLQ message only after its copy is
//! confirmed. Messages that cannot be moved stay unacknowledged and return to the DLQ when
//! the channel closes. A crash mid-way may duplicate, never lose.
//!
//! Two filters ride on the same loop: chosen ids (`only_ids`, from a scan), and a predicate
//! tested on each delivery (`redrive_matching`, a one-pass `redrive --where`). Either way the
//! messages passed over stay unacknowledged until the channel closes, so none is read twice.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use futures::stream::{BoxStream, FuturesUnordered};
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
use crate::backend::ApiCalls;
use crate::backend::{BackendError, MessageFilter, OpProgress, Result};
use crate::domain::*;
use crate::engine::rate::Limiter;

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

/// With a filter, each consuming channel holds at most `LANE` unacknowledged messages (its
/// prefetch). RabbitMQ finds the message an ack names by walking the channel's list of
/// unacknowledged deliveries from the oldest, rebuilding the list as it goes: every ack of a
/// matching message walks past the messages held before it on its channel. Measured over
/// 50,000 messages of which 10,000 match (`scripts/bench_filtered_redrive.sh`, RabbitMQ
/// 3.10): lanes of 2,000 took 4.2-8 s; lanes of 300, consumed one after another with acks
/// proven off the pass's path, 2.4-4.5 s (lanes of 100 and 1,000 no better).
///
/// Only one lane consumes at a time, so deliveries are examined in queue order and `max` takes
/// the first matching messages. Once a lane holds half its prefetch, its consumer is cancelled
/// (it keeps what it holds, and what was already sent to it arrives before the cancel-ok) and
/// the next lane's consumer starts after that; the pass goes on with the old lane's deliveries
/// meanwhile, and takes the new lane's only once the old lane's are all examined.
const LANE: u16 = 300;

/// Prefetch of each lane for a pass over `depth` messages: `LANE`, or more when lanes of
/// `LANE` would take over half the channels the connection may open (the console shares it).
fn lane_for(depth: u64, channel_max: u16) -> u16 {
    let lanes = (u64::from(channel_max) / 2).max(1);
    (depth / lanes)
        .saturating_add(1)
        .clamp(u64::from(LANE), u64::from(u16::MAX)) as u16
}

/// A consuming channel and what is unacknowledged on it.
struct Lane {
    ch: Channel,
    tag: String,
    acks: Acks,
    /// Its consumer was cancelled: it holds what it has and is sent nothing more.
    cancelled: bool,
    /// Acks sent on it whose proof has not come back: the next wait for it, so a lane's acks
    /// reach the broker in the order `Acks::ready` gave them.
    proving: bool,
    duplicates: PossibleDuplicates,
}

/// Confirmed copies of one lane whose originals may remain in the source. The broker never
/// holds more than the lane's prefetch unacknowledged on its consumer and gives them all back
/// when the channel closes, so no more originals than that can remain, however many proofs
/// failed after the channel was lost.
#[derive(Default)]
struct PossibleDuplicates(u64);

impl PossibleDuplicates {
    /// How many of a proof's `unknown` copies to report: what keeps the lane within `prefetch`.
    fn count(&mut self, unknown: u64, prefetch: u16) -> u64 {
        let counted = unknown.min(u64::from(prefetch).saturating_sub(self.0));
        self.0 += counted;
        counted
    }
}

impl Lane {
    /// The acks its confirmed copies allow, sent and proven in the background; `None` while an
    /// earlier proof is out (they go with the next one) or when none are ready.
    fn next_proof(
        &mut self,
        li: usize,
        prefetch: u16,
        calls: &Arc<ApiCalls>,
    ) -> Option<impl std::future::Future<Output = Proof> + 'static> {
        if self.proving {
            return None;
        }
        let acks = self.acks.ready();
        if acks.is_empty() {
            return None;
        }
        self.proving = true;
        Some(ack_and_prove(
            li,
            self.ch.clone(),
            acks,
            prefetch,
            calls.clone(),
        ))
    }
}

/// What a lane's acks and their proof came to.
struct Proof {
    lane: usize,
    /// Originals the broker removed: their copies are confirmed, so they moved.
    removed: u64,
    /// Confirmed copies whose originals may still be in the source.
    unknown: u64,
    errors: Vec<String>,
}

/// Send `acks` on `ch`, then a synchronous method behind them: AMQP acks have no reply, and
/// the broker handles a channel's frames in order, so its reply proves they were applied.
/// Until then their outcome is unknown.
async fn ack_and_prove(
    lane: usize,
    ch: Channel,
    acks: Vec<(u64, bool, u64)>,
    prefetch: u16,
    calls: Arc<ApiCalls>,
) -> Proof {
    let mut p = Proof {
        lane,
        removed: 0,
        unknown: 0,
        errors: Vec::new(),
    };
    let mut sent: u64 = 0;
    for (tag, multiple, n) in acks {
        calls.bump("amqp:basic.ack");
        match ch.basic_ack(tag, BasicAckOptions { multiple }).await {
            Ok(()) => sent += n,
            Err(e) => {
                // Confirmed copy, original not removed: a duplicate.
                p.unknown += n;
                p.errors.push(format!(
                    "copied but could not remove the original: {}",
                    amqp_error(&e, "ack")
                ));
            }
        }
    }
    if sent > 0 {
        calls.bump("amqp:basic.qos");
        match ch.basic_qos(prefetch, BasicQosOptions::default()).await {
            Ok(()) => p.removed = sent,
            Err(e) => {
                p.unknown += sent;
                p.errors.push(format!(
                    "copied, but whether the originals were removed is unknown: {}",
                    amqp_error(&e, "ack")
                ));
            }
        }
    }
    p
}

/// The lanes' deliveries, one lane after another: a lane's are taken only once every earlier
/// lane's consumer has ended (its deliveries all taken), so they come in queue order.
struct InOrder<T>(VecDeque<(usize, BoxStream<'static, T>)>);

type Deliveries = InOrder<lapin::Result<Delivery>>;

impl<T> InOrder<T> {
    fn new() -> Self {
        Self(VecDeque::new())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next item and its lane; `None` once every stream so far has ended.
    async fn next(&mut self) -> Option<(usize, T)> {
        while let Some((li, stream)) = self.0.front_mut() {
            if let Some(d) = stream.next().await {
                return Some((*li, d));
            }
            self.0.pop_front();
        }
        None
    }
}

/// A consuming channel, its consumer tag and its deliveries, before it joins the pass.
type Opened = (Channel, String, lapin::Consumer);

/// A channel for a lane, its prefetch set (0: none).
async fn lane_channel(b: &RabbitBackend, vhost: &str, prefetch: u16) -> Result<Channel> {
    let ch = b.pool.channel(vhost).await?;
    ch.basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "basic.qos"))?;
    Ok(ch)
}

/// Cancel the consumer on `old` (tag `old_tag`) and, once the broker confirmed it, start
/// consuming `src` on a new lane channel (opened meanwhile).
async fn switch_lane(
    b: &RabbitBackend,
    vhost: &str,
    prefetch: u16,
    (old, old_tag): (Channel, String),
    src: &str,
    id: &QueueId,
) -> Result<Opened> {
    let cancelled = async {
        old.basic_cancel(old_tag.as_str().into(), BasicCancelOptions::default())
            .await
            .map_err(|e| amqp_error(&e, "basic.cancel"))
    };
    let (ch, cancelled) = futures::join!(lane_channel(b, vhost, prefetch), cancelled);
    let ch = ch?;
    if let Err(e) = cancelled {
        let _ = ch.close(200, "redrive done".into()).await;
        return Err(e);
    }
    consume_on(b, ch, src, id).await
}

/// Start consuming `src` on `ch`.
async fn consume_on(b: &RabbitBackend, ch: Channel, src: &str, id: &QueueId) -> Result<Opened> {
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
    Ok((ch, tag, consumer))
}

/// Add an opened consumer to the pass: its deliveries, tagged with its lane's index, are taken
/// after every earlier lane's.
fn add_lane((ch, tag, consumer): Opened, lanes: &mut Vec<Lane>, all: &mut Deliveries) {
    all.0.push_back((lanes.len(), consumer.boxed()));
    lanes.push(Lane {
        ch,
        tag,
        acks: Acks {
            open: BTreeMap::new(),
            held: BTreeSet::new(),
        },
        cancelled: false,
        proving: false,
        duplicates: PossibleDuplicates::default(),
    });
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
        let depth = examine.unwrap_or(available);
        lane_for(depth, b.pool.channel_max(&vhost).await?)
    } else {
        window_for(b, &req.source).await.min(total.min(cap) as u16)
    };
    let mut lanes: Vec<Lane> = Vec::new();
    let mut deliveries = Deliveries::new();
    let first = lane_channel(b, &vhost, window).await?;
    add_lane(
        consume_on(b, first, &src, &req.source).await?,
        &mut lanes,
        &mut deliveries,
    );
    // The switch to the next lane, while the pass goes on with the current one: at most one.
    let mut opening: FuturesUnordered<BoxFuture<'_, Result<Opened>>> = FuturesUnordered::new();

    progress.phase("copying");
    let cancel = progress.cancel_token();
    let start = Instant::now();
    let mut inflight = FuturesUnordered::new();
    let mut proofs = FuturesUnordered::new();
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
    let pace = Limiter::new(req.rate);
    // Id filter: when a delivery last arrived, and whether the last quiet check found none ready.
    let mut last_delivery = Instant::now();
    let mut seen_drained = false;

    loop {
        let more_to_see = !stopping && taken < total && want.is_none_or(|w| matched < w);
        if filtered && more_to_see && opening.is_empty() {
            if let Some(last) = lanes
                .last_mut()
                .filter(|l| !l.cancelled && l.acks.held.len() >= usize::from(window / 2))
            {
                last.cancelled = true;
                let old = (last.ch.clone(), last.tag.clone());
                opening.push(Box::pin(switch_lane(
                    b,
                    &vhost,
                    window,
                    old,
                    &src,
                    &req.source,
                )));
            }
        }
        // Rate limit: wait until the next publish is due.
        let due = pace.due();
        let rate_ok = due.is_none_or(|d| Instant::now() >= d);
        let open: usize = lanes.iter().map(|l| l.acks.open.len()).sum();
        let wants_more = more_to_see && !stopping && (open as u64) < cap;
        let can_take = wants_more && rate_ok;
        if !wants_more && inflight.is_empty() && proofs.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled(), if !stopping => {
                stopping = true;
                report.cancelled = true;
                progress.phase("cancelling: waiting for confirms");
            }
            Some(opened) = opening.next(), if !opening.is_empty() => match opened {
                Ok(o) => add_lane(o, &mut lanes, &mut deliveries),
                Err(e) => {
                    note(&mut errors, format!("stopped: {e}"));
                    stopping = true;
                }
            },
            Some(first) = inflight.next(), if !inflight.is_empty() => {
                // Take every confirm that is already in, then ack in as few frames as we can.
                let mut batch: Vec<(usize, u64, Outcome)> = vec![first];
                while let Some(Some(o)) = futures::FutureExt::now_or_never(inflight.next()) {
                    batch.push(o);
                }
                let touched: BTreeSet<usize> = batch.iter().map(|(li, _, _)| *li).collect();
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
                for li in touched {
                    proofs.extend(lanes[li].next_proof(li, window, &b.calls));
                }
            }
            Some(p) = proofs.next(), if !proofs.is_empty() => {
                report.moved += p.removed;
                progress.add_done(p.removed);
                let lane = &mut lanes[p.lane];
                report.possibly_duplicated += lane.duplicates.count(p.unknown, window);
                if !p.errors.is_empty() {
                    stopping = true;
                }
                for e in p.errors {
                    note(&mut errors, e);
                }
                // Confirms that came in meanwhile go with the lane's next proof.
                lane.proving = false;
                proofs.extend(lane.next_proof(p.lane, window, &b.calls));
            }
            d = deliveries.next(), if can_take && !deliveries.is_empty() => {
                let (li, mut d) = match d {
                    Some((li, Ok(d))) => (li, d),
                    Some((_, Err(e))) => {
                        note(&mut errors, amqp_error(&e, "consume").to_string());
                        stopping = true;
                        continue;
                    }
                    // Every consumer ended: unless the next lane is on its way, the broker
                    // cancelled ours (the queue was deleted).
                    None => { stopping |= opening.is_empty(); continue; }
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
                pace.reserve(1);
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
            _ = tokio::time::sleep(QUIET), if can_take && inflight.is_empty() && opening.is_empty() && only.is_some() => {
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
            _ = tokio::time::sleep(IDLE), if can_take && inflight.is_empty() && opening.is_empty() && only.is_none() => {
                // Nothing arrives although the count said so: another consumer took them.
                stopping = true;
            }
        }
        if !stopping && taken >= total {
            progress.phase("waiting for confirms");
        }
    }

    let pass_ms = start.elapsed().as_millis();
    // A lane still starting may already consume: it is closed with the others.
    while let Some(opened) = opening.next().await {
        if let Ok(o) = opened {
            add_lane(o, &mut lanes, &mut deliveries);
        }
    }
    join_all(lanes.iter().filter(|l| !l.cancelled).map(|lane| {
        lane.ch
            .basic_cancel(lane.tag.as_str().into(), BasicCancelOptions::default())
    }))
    .await;
    // Closing requeues whatever we still hold (skipped, failed, prefetched but unused).
    join_all(
        lanes
            .iter()
            .map(|lane| lane.ch.close(200, "redrive done".into())),
    )
    .await;
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

    #[tokio::test]
    async fn a_later_lane_waits_for_every_earlier_one_to_end() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<u32>();
        let mut all = InOrder::new();
        all.0.push_back((0, rx.boxed()));
        all.0
            .push_back((1, futures::stream::iter([10, 11]).boxed()));
        tx.unbounded_send(1).unwrap();
        assert_eq!(all.next().await, Some((0, 1)));
        // Lane 1 has items ready, but lane 0 has not ended: nothing is taken from lane 1.
        assert!(futures::FutureExt::now_or_never(all.next()).is_none());
        tx.unbounded_send(2).unwrap();
        drop(tx);
        let rest: Vec<_> = [all.next().await, all.next().await, all.next().await].into();
        assert_eq!(rest, [Some((0, 2)), Some((1, 10)), Some((1, 11))]);
        assert_eq!(all.next().await, None);
        assert!(all.is_empty());
    }

    #[test]
    fn lanes_never_take_more_than_half_the_channels() {
        assert_eq!(lane_for(50_000, 2047), LANE);
        // 250,000 held on lanes of 300 would be 834 channels: fine under 2,047, not under 128.
        assert_eq!(lane_for(250_000, 2047), LANE);
        let lane = lane_for(250_000, 128);
        assert!(250_000 / u64::from(lane) < 64, "lane {lane}");
        assert_eq!(lane_for(10, u16::MAX), LANE);
        assert_eq!(lane_for(u64::MAX, 2), u16::MAX);
    }

    #[test]
    fn a_lane_reports_no_more_possible_duplicates_than_its_prefetch() {
        // Seen in CI: a proof's acks were sent but the proof failed (10 unknown), then the
        // acks confirmed meanwhile could not be sent on the dead channel (1 more), prefetch 10.
        let mut d = PossibleDuplicates::default();
        assert_eq!([d.count(10, 10), d.count(1, 10)], [10, 0]);
        let mut d = PossibleDuplicates::default();
        assert_eq!([d.count(4, 10), d.count(3, 10), d.count(5, 10)], [4, 3, 3]);
    }

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
