//! The lanes of a client-side redrive: consuming channels, what is unacknowledged on each, and
//! the acks (with their proof) that remove originals whose copies the broker confirmed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::Channel;

use super::super::conn::amqp_error;
use super::super::RabbitBackend;
use crate::ApiCalls;
use crate::Result;
use qdeck_model::domain::*;

/// Acknowledges originals whose copies are confirmed: one `multiple` ack for each run of
/// confirmed tags at the front, single acks behind a message we hold on purpose.
pub(super) struct Acks {
    /// delivery tag → copy confirmed?
    pub(super) open: BTreeMap<u64, bool>,
    /// Tags we keep unacknowledged (failed, skipped): never covered by a multiple ack.
    pub(super) held: BTreeSet<u64>,
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
pub(super) fn lane_for(depth: u64, channel_max: u16) -> u16 {
    let lanes = (u64::from(channel_max) / 2).max(1);
    (depth / lanes)
        .saturating_add(1)
        .clamp(u64::from(LANE), u64::from(u16::MAX)) as u16
}

/// A consuming channel and what is unacknowledged on it.
pub(super) struct Lane {
    pub(super) ch: Channel,
    pub(super) tag: String,
    pub(super) acks: Acks,
    /// Its consumer was cancelled: it holds what it has and is sent nothing more.
    pub(super) cancelled: bool,
    /// Acks sent on it whose proof has not come back: the next wait for it, so a lane's acks
    /// reach the broker in the order `Acks::ready` gave them.
    pub(super) proving: bool,
    pub(super) duplicates: PossibleDuplicates,
}

/// Confirmed copies of one lane whose originals may remain in the source. The broker never
/// holds more than the lane's prefetch unacknowledged on its consumer and gives them all back
/// when the channel closes, so no more originals than that can remain, however many proofs
/// failed after the channel was lost.
#[derive(Default)]
pub(super) struct PossibleDuplicates(u64);

impl PossibleDuplicates {
    /// How many of a proof's `unknown` copies to report: what keeps the lane within `prefetch`.
    pub(super) fn count(&mut self, unknown: u64, prefetch: u16) -> u64 {
        let counted = unknown.min(u64::from(prefetch).saturating_sub(self.0));
        self.0 += counted;
        counted
    }
}

impl Lane {
    /// The acks its confirmed copies allow, sent and proven in the background; `None` while an
    /// earlier proof is out (they go with the next one) or when none are ready.
    pub(super) fn next_proof(
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
pub(super) struct Proof {
    pub(super) lane: usize,
    /// Originals the broker removed: their copies are confirmed, so they moved.
    pub(super) removed: u64,
    /// Confirmed copies whose originals may still be in the source.
    pub(super) unknown: u64,
    pub(super) errors: Vec<String>,
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
pub(super) struct InOrder<T>(VecDeque<(usize, BoxStream<'static, T>)>);

pub(super) type Deliveries = InOrder<lapin::Result<Delivery>>;

impl<T> InOrder<T> {
    pub(super) fn new() -> Self {
        Self(VecDeque::new())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next item and its lane; `None` once every stream so far has ended.
    pub(super) async fn next(&mut self) -> Option<(usize, T)> {
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
pub(super) type Opened = (Channel, String, lapin::Consumer);

/// A channel for a lane, its prefetch set (0: none).
pub(super) async fn lane_channel(b: &RabbitBackend, vhost: &str, prefetch: u16) -> Result<Channel> {
    let ch = b.pool.channel(vhost).await?;
    ch.basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| amqp_error(&e, "basic.qos"))?;
    Ok(ch)
}

/// Cancel the consumer on `old` (tag `old_tag`) and, once the broker confirmed it, start
/// consuming `src` on a new lane channel (opened meanwhile).
pub(super) async fn switch_lane(
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
pub(super) async fn consume_on(
    b: &RabbitBackend,
    ch: Channel,
    src: &str,
    id: &QueueId,
) -> Result<Opened> {
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
pub(super) fn add_lane((ch, tag, consumer): Opened, lanes: &mut Vec<Lane>, all: &mut Deliveries) {
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
