//! The pass of a client-side redrive: take deliveries, publish their copies with confirms, ack
//! the originals whose copies are confirmed, until the plan is done, cancelled or stopped.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicCancelOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::{Channel, Confirmation};

use super::super::browse::message_of;
use super::super::conn::amqp_error;
use super::super::headers::{message_id, parse_dead_letter, stamped};
use super::super::RabbitBackend;
use super::lanes::{
    add_lane, consume_on, lane_channel, lane_for, switch_lane, Deliveries, Lane, Opened, Proof,
};
use super::{count, window_for, Plan, DEFAULT_WINDOW, MAX_WINDOW};
use crate::{OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

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

/// A delivery to copy: its lane, its delivery tag there, and the queue its copy goes to.
struct ToCopy {
    lane: usize,
    tag: u64,
    target: String,
    delivery: Delivery,
}

/// Publish one copy on the confirming channel `ch` and wait for the broker's word on it.
async fn publish_copy(ch: Channel, c: ToCopy) -> (usize, u64, Outcome) {
    let ToCopy {
        lane,
        tag,
        target,
        delivery: d,
    } = c;
    let sent = ch
        .basic_publish(
            "".into(),
            target.as_str().into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            &d.data,
            stamped(d.properties, now_ms()),
        )
        .await;
    let outcome = match sent {
        // Refused before anything was sent: no copy exists.
        Err(e) => Outcome::Failed(amqp_error(&e, "publish").to_string()),
        Ok(confirm) => match confirm.await {
            Ok(Confirmation::Ack(None) | Confirmation::NotRequested) => Outcome::Confirmed,
            Ok(Confirmation::Ack(Some(_))) => Outcome::Failed(format!(
                "target queue '{target}' does not exist (message returned unroutable)"
            )),
            Ok(Confirmation::Nack(_)) => {
                Outcome::Failed(format!("the broker refused the copy for '{target}' (nack)"))
            }
            Err(e) => Outcome::Lost(format!("confirm lost: {}", amqp_error(&e, "publish"))),
        },
    };
    (lane, tag, outcome)
}

/// A client-side redrive under way: its channels and lanes, and what it has done so far.
pub(super) struct Pass<'a> {
    b: &'a RabbitBackend,
    req: &'a RedriveRequest,
    vhost: &'a str,
    src: &'a str,
    plan: Plan<'a>,
    progress: &'a OpProgress,
    /// The publishing channel, in confirm mode.
    pub_ch: Channel,
    /// Left open: an id-filtered pass asks it whether the queue is drained.
    probe: Channel,
    /// Each lane's prefetch.
    window: u16,
    /// Copies not yet confirmed-and-deleted: what a crash may duplicate.
    cap: u64,
    filtered: bool,
    pace: Limiter,
    lanes: Vec<Lane>,
    deliveries: Deliveries,
    /// The switch to the next lane, while the pass goes on with the current one: at most one.
    opening: FuturesUnordered<BoxFuture<'a, Result<Opened>>>,
    start: Instant,
    report: RedriveReport,
    taken: u64,
    published: u64,
    matched: u64,
    stopping: bool,
    /// Lost confirms: the copy may or may not exist, the original stays in the source.
    unconfirmed_lost: u64,
    errors: Vec<String>,
    /// Id filter: when a delivery last arrived, and whether the last quiet check found none
    /// ready.
    last_delivery: Instant,
    seen_drained: bool,
}

impl<'a> Pass<'a> {
    /// Open the publishing channel and the first lane, and start consuming.
    pub(super) async fn start(
        b: &'a RabbitBackend,
        req: &'a RedriveRequest,
        (vhost, src): (&'a str, &'a str),
        plan: Plan<'a>,
        probe: Channel,
        report: RedriveReport,
        progress: &'a OpProgress,
    ) -> Result<Pass<'a>> {
        let pub_ch = b.pool.channel_on(vhost, "publish").await?;
        pub_ch
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| amqp_error(&e, "confirm.select"))?;
        let cap = req.window.unwrap_or(DEFAULT_WINDOW).clamp(1, MAX_WINDOW) as u64;
        // With a filter, skipped messages stay held: lanes of `LANE` unacknowledged each (the
        // number of lanes is bounded by the depth; `one_pass` caps the predicate's).
        let filtered = plan.filtered();
        let window = if filtered {
            let depth = plan.examine.unwrap_or(plan.available);
            lane_for(depth, b.pool.channel_max(vhost).await?)
        } else {
            window_for(b, &req.source)
                .await
                .min(plan.total.min(cap) as u16)
        };
        let mut lanes: Vec<Lane> = Vec::new();
        let mut deliveries = Deliveries::new();
        let first = lane_channel(b, vhost, window).await?;
        add_lane(
            consume_on(b, first, src, &req.source).await?,
            &mut lanes,
            &mut deliveries,
        );
        let opening = FuturesUnordered::new();

        progress.phase("copying");
        let start = Instant::now();
        let pace = Limiter::new(req.rate);
        Ok(Pass {
            b,
            req,
            vhost,
            src,
            plan,
            progress,
            pub_ch,
            probe,
            window,
            cap,
            filtered,
            pace,
            lanes,
            deliveries,
            opening,
            start,
            report,
            taken: 0,
            published: 0,
            matched: 0,
            stopping: false,
            unconfirmed_lost: 0,
            errors: Vec::new(),
            last_delivery: Instant::now(),
            seen_drained: false,
        })
    }

    /// The pass itself: until it has taken what the plan allows (or stopped) and every copy
    /// and ack in flight has come back.
    pub(super) async fn run(mut self) -> Self {
        let cancel = self.progress.cancel_token();
        let mut inflight = FuturesUnordered::new();
        let mut proofs = FuturesUnordered::new();
        loop {
            let more_to_see = !self.stopping
                && self.taken < self.plan.total
                && self.plan.want.is_none_or(|w| self.matched < w);
            if self.filtered && more_to_see && self.opening.is_empty() {
                self.switch_lane_when_full();
            }
            // Rate limit: wait until the next publish is due.
            let due = self.pace.due();
            let rate_ok = due.is_none_or(|d| Instant::now() >= d);
            let open: usize = self.lanes.iter().map(|l| l.acks.open.len()).sum();
            let wants_more = more_to_see && !self.stopping && (open as u64) < self.cap;
            let can_take = wants_more && rate_ok;
            if !wants_more && inflight.is_empty() && proofs.is_empty() {
                break;
            }
            let quiet = can_take && inflight.is_empty() && self.opening.is_empty();
            tokio::select! {
                biased;
                _ = cancel.cancelled(), if !self.stopping => {
                    self.stopping = true;
                    self.report.cancelled = true;
                    self.progress.phase("cancelling: waiting for confirms");
                }
                Some(opened) = self.opening.next(), if !self.opening.is_empty() => match opened {
                    Ok(o) => add_lane(o, &mut self.lanes, &mut self.deliveries),
                    Err(e) => {
                        self.note(format!("stopped: {e}"));
                        self.stopping = true;
                    }
                },
                Some(first) = inflight.next(), if !inflight.is_empty() => {
                    // Take every confirm that is already in, then ack in as few frames as we can.
                    let mut batch: Vec<(usize, u64, Outcome)> = vec![first];
                    while let Some(Some(o)) = futures::FutureExt::now_or_never(inflight.next()) {
                        batch.push(o);
                    }
                    for li in self.confirmed(batch) {
                        proofs.extend(self.lanes[li].next_proof(li, self.window, &self.b.calls));
                    }
                }
                Some(p) = proofs.next(), if !proofs.is_empty() => {
                    let li = self.proven(p);
                    // Confirms that came in meanwhile go with the lane's next proof.
                    proofs.extend(self.lanes[li].next_proof(li, self.window, &self.b.calls));
                }
                d = self.deliveries.next(), if can_take && !self.deliveries.is_empty() => {
                    // Not copied (held, or the pass stops): straight to the next event.
                    let Some(c) = self.delivered(d) else { continue };
                    inflight.push(publish_copy(self.pub_ch.clone(), c));
                }
                _ = tokio::time::sleep_until(due.unwrap_or(self.start).into()), if wants_more && !rate_ok => {}
                _ = tokio::time::sleep(QUIET), if quiet && self.plan.only.is_some() => {
                    self.check_drained().await;
                }
                _ = tokio::time::sleep(IDLE), if quiet && self.plan.only.is_none() => {
                    // Nothing arrives although the count said so: another consumer took them.
                    self.stopping = true;
                }
            }
            if !self.stopping && self.taken >= self.plan.total {
                self.progress.phase("waiting for confirms");
            }
        }
        self
    }

    /// Keep an error for the report: the first `MAX_ERRORS` distinct ones.
    fn note(&mut self, e: String) {
        if self.errors.len() < MAX_ERRORS && !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// With a filter, once the newest lane holds half its prefetch its consumer is cancelled
    /// and the next lane opened meanwhile.
    fn switch_lane_when_full(&mut self) {
        let half = usize::from(self.window / 2);
        if let Some(last) = self
            .lanes
            .last_mut()
            .filter(|l| !l.cancelled && l.acks.held.len() >= half)
        {
            last.cancelled = true;
            let old = (last.ch.clone(), last.tag.clone());
            let req = self.req;
            self.opening.push(Box::pin(switch_lane(
                self.b,
                self.vhost,
                self.window,
                old,
                self.src,
                &req.source,
            )));
        }
    }

    /// Record a batch of copies' outcomes; returns the lanes whose acks may now go.
    fn confirmed(&mut self, batch: Vec<(usize, u64, Outcome)>) -> BTreeSet<usize> {
        let touched: BTreeSet<usize> = batch.iter().map(|(li, _, _)| *li).collect();
        for (li, tag, o) in batch {
            let acks = &mut self.lanes[li].acks;
            match o {
                Outcome::Confirmed => {
                    acks.open.insert(tag, true);
                }
                Outcome::Failed(e) => {
                    acks.open.remove(&tag);
                    acks.held.insert(tag);
                    self.report.failed += 1;
                    self.progress.add_failed(1);
                    self.note(e);
                }
                Outcome::Lost(e) => {
                    // Not a confirmed copy: the original stays (held, requeued on close), so
                    // it is not moved; whether a copy exists is unknown.
                    acks.open.remove(&tag);
                    acks.held.insert(tag);
                    self.report.failed += 1;
                    self.unconfirmed_lost += 1;
                    self.progress.add_failed(1);
                    self.note(e);
                }
            }
        }
        touched
    }

    /// Count what a lane's proof came to; returns the lane, free for its next proof.
    fn proven(&mut self, p: Proof) -> usize {
        self.report.moved += p.removed;
        self.progress.add_done(p.removed);
        let duplicates = &mut self.lanes[p.lane].duplicates;
        self.report.possibly_duplicated += duplicates.count(p.unknown, self.window);
        if !p.errors.is_empty() {
            self.stopping = true;
        }
        for e in p.errors {
            self.note(e);
        }
        self.lanes[p.lane].proving = false;
        p.lane
    }

    /// Take one delivery: the copy to publish, or `None` when it is passed over, held or the
    /// pass must stop.
    fn delivered(&mut self, d: Option<(usize, lapin::Result<Delivery>)>) -> Option<ToCopy> {
        let (li, mut d) = match d {
            Some((li, Ok(d))) => (li, d),
            Some((_, Err(e))) => {
                self.note(amqp_error(&e, "consume").to_string());
                self.stopping = true;
                return None;
            }
            // Every consumer ended: unless the next lane is on its way, the broker cancelled
            // ours (the queue was deleted).
            None => {
                self.stopping |= self.opening.is_empty();
                return None;
            }
        };
        self.taken += 1;
        self.last_delivery = Instant::now();
        self.seen_drained = false;
        let tag = d.delivery_tag;
        if !self.wanted(&mut d) {
            self.lanes[li].acks.held.insert(tag); // requeued when the channel closes
            return None;
        }
        let target = match &self.plan.fixed {
            Some(t) => Some(t.clone()),
            None => parse_dead_letter(&d.properties)
                .and_then(|i| i.origin)
                .map(|q| q.0)
                .filter(|q| q != self.src),
        };
        let Some(target) = target else {
            self.lanes[li].acks.held.insert(tag);
            self.report.failed += 1;
            self.progress.add_failed(1);
            self.note("message without an x-death origin: choose a target queue".into());
            return None;
        };
        if !self.pub_ch.status().connected() {
            // The connection went away: stop; what we hold goes back when it closes.
            self.lanes[li].acks.held.insert(tag);
            self.note("the publishing channel closed: stopped".into());
            self.stopping = true;
            return None;
        }
        self.pace.reserve(1);
        self.published += 1;
        self.lanes[li].acks.open.insert(tag, false);
        Some(ToCopy {
            lane: li,
            tag,
            target,
            delivery: d,
        })
    }

    /// Whether the filters (chosen ids, predicate) take this delivery; counts the matches.
    fn wanted(&mut self, d: &mut Delivery) -> bool {
        if let Some(ids) = &self.plan.only {
            if !ids.contains(message_id(&d.properties, &d.data).as_str()) {
                return false;
            }
            self.matched += 1;
        }
        if let Some(f) = self.plan.matching {
            // The body goes into the message tested and comes back for the copy; a message
            // passed over is dropped here and only its tag stays.
            let body = std::mem::take(&mut d.data);
            let m = message_of(d, body, self.taken as i64 - 1);
            let hit = f.matches(&m);
            if self.taken.is_multiple_of(1000) {
                self.progress.phase(&format!(
                    "examined {} of {}, {} matched",
                    self.taken,
                    self.plan.total,
                    self.matched + u64::from(hit)
                ));
            }
            if !hit {
                return false;
            }
            d.data = m.body;
            self.matched += 1;
        }
        true
    }

    /// Id filter, the pass quiet: everything we were sent is held, so "none ready" (twice)
    /// means we saw the whole queue.
    async fn check_drained(&mut self) {
        self.b.calls.bump("amqp:queue.declare");
        match count(&self.probe, self.src, &self.req.source).await {
            Ok(0) if self.seen_drained => self.stopping = true,
            Ok(0) => self.seen_drained = true,
            Ok(_) => self.seen_drained = false,
            Err(e) => {
                self.note(format!("could not tell whether the queue is drained: {e}"));
                self.stopping = true;
            }
        }
        if !self.stopping && self.last_delivery.elapsed() >= IDLE {
            let e = format!(
                "'{}' sent nothing for {} s although messages are ready there: stopped",
                self.req.source,
                IDLE.as_secs()
            );
            self.note(e);
            self.stopping = true;
        }
    }

    /// Close every lane (which requeues what it still holds) and the pass's channels, and
    /// make the report.
    pub(super) async fn finish(mut self) -> RedriveReport {
        let pass_ms = self.start.elapsed().as_millis();
        // A lane still starting may already consume: it is closed with the others.
        while let Some(opened) = self.opening.next().await {
            if let Ok(o) = opened {
                add_lane(o, &mut self.lanes, &mut self.deliveries);
            }
        }
        join_all(self.lanes.iter().filter(|l| !l.cancelled).map(|lane| {
            lane.ch
                .basic_cancel(lane.tag.as_str().into(), BasicCancelOptions::default())
        }))
        .await;
        // Closing requeues whatever we still hold (skipped, failed, prefetched but unused).
        join_all(
            self.lanes
                .iter()
                .map(|lane| lane.ch.close(200, "redrive done".into())),
        )
        .await;
        let (taken, published) = (self.taken, self.published);
        // Where a slow redrive spent its time (QDECK_LOG=qdeck=debug): the pass, or the requeue.
        tracing::debug!(
            "redrive of '{}': {taken} taken, {published} published over {} lanes in {pass_ms} ms; cancel and close took {} ms",
            self.req.source,
            self.lanes.len(),
            self.start.elapsed().as_millis() - pass_ms
        );
        let _ = self.pub_ch.close(200, "redrive done".into()).await;
        let _ = self.probe.close(200, "ok".into()).await;
        self.b.calls.bump_by("amqp:basic.publish", published);
        let mut report = self.report;
        let mut errors = self.errors;
        if self.unconfirmed_lost > 0 {
            errors.push(format!(
                "{} copies were sent but never confirmed (connection lost): their originals stay in '{}', and the broker may also hold some of those copies in the target",
                self.unconfirmed_lost, self.req.source
            ));
        }
        report.errors = errors;
        if self.plan.examine.is_some() {
            report.examined = Some(taken);
            report.matched = Some(self.matched);
        }
        self.progress.phase(if report.cancelled {
            "cancelled"
        } else {
            "done"
        });
        report
    }
}
