//! Redrive from a dead-letter subscription to the topic of the subscription the message came
//! from: pull a batch, extend its ack deadline, publish copies (data, attributes and ordering key
//! byte for byte; `CloudPubSubDeadLetter*` attributes renamed `x-qdeck-*`), and acknowledge
//! each dead letter only after the service confirmed its copy. A crash duplicates at most the
//! batch in flight (the window) and never loses a message: an unacknowledged dead letter comes
//! back when its ack deadline passes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use super::listing::Listing;
use super::msg;
use super::names::{self, Target, DELETED_TOPIC};
use super::proto::{PubsubMessage, ReceivedMessage};
use super::PubsubBackend;
use crate::{BackendError, MessageFilter, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

/// Dead letters pulled, published and acknowledged together when the request gives no window.
pub const DEFAULT_WINDOW: u32 = 100;
/// The ack deadline a pulled batch is extended to while its copies are published.
const HOLD_SECS: i32 = 60;

pub const MODE: &str = "client-side: pull, publish a copy to the source subscription's topic, acknowledge the dead letter after the publish is confirmed";

/// Where one dead letter goes, or why it cannot go.
type Route = std::result::Result<String, String>;

/// How targets are found for this run.
pub struct Router {
    /// `--to`: every message to this topic (a full path).
    fixed: Option<String>,
    /// The topic of the subscription(s) whose dead-letter policy names the source's topic.
    by_policy: Route,
    /// Topic of a source subscription named by a message's attributes, by subscription path.
    by_attr: HashMap<String, Route>,
    project: String,
}

impl Router {
    async fn route(&mut self, b: &PubsubBackend, m: &PubsubMessage) -> Route {
        if let Some(t) = &self.fixed {
            return Ok(t.clone());
        }
        if let Some(src) = msg::source_subscription(&m.attributes, &self.project) {
            if let Some(r) = self.by_attr.get(&src) {
                return r.clone();
            }
            let r = match b.get_subscription(&src).await {
                Ok(s) if s.topic == DELETED_TOPIC => Err(format!(
                    "its source subscription {} lost its topic (_deleted-topic_): give a target topic",
                    names::sub_id(&src).map_or(src.clone(), |q| q.0)
                )),
                Ok(s) => Ok(s.topic),
                Err(e) => Err(format!("its source subscription: {e}")),
            };
            self.by_attr.insert(src, r.clone());
            return r;
        }
        self.by_policy.clone()
    }
}

/// The route every message without attributes takes: the topic of the subscriptions whose
/// dead-letter policy names `dl_topic`.
fn policy_route(l: &Listing, dl_topic: &str) -> Route {
    let sources = l.dead_lettering_into(dl_topic);
    let topics: HashSet<&str> = sources.iter().map(|s| s.topic.as_str()).collect();
    let shown = || {
        sources
            .iter()
            .filter_map(|s| names::sub_id(&s.name))
            .map(|q| q.0)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match topics.len() {
        0 => Err(format!(
            "no listed subscription dead-letters into {}: give a target topic (--to PROJECT/topics/TOPIC)",
            names::topic_id(dl_topic).map_or(dl_topic.to_string(), |q| q.0)
        )),
        1 => {
            let t = sources[0].topic.clone();
            if t == DELETED_TOPIC {
                Err(format!("the source subscription {} lost its topic (_deleted-topic_): give a target topic", shown()))
            } else {
                Ok(t)
            }
        }
        _ => Err(format!(
            "subscriptions of several topics dead-letter here ({}): give a target topic",
            shown()
        )),
    }
}

/// The target topic path of `--to`: a topic, or a subscription's topic.
async fn fixed_target(b: &PubsubBackend, to: &QueueId) -> Result<String> {
    match Target::parse(to)? {
        t @ Target::Topic { .. } => {
            let path = t.path();
            b.get_topic(&path).await?;
            Ok(path)
        }
        t @ Target::Subscription { .. } => {
            let s = b.get_subscription(&t.path()).await?;
            if s.topic == DELETED_TOPIC {
                return Err(BackendError::Invalid(format!(
                    "{to} lost its topic (_deleted-topic_)"
                )));
            }
            Ok(s.topic)
        }
    }
}

pub async fn router(b: &PubsubBackend, req: &RedriveRequest) -> Result<(String, Router)> {
    let t = Target::parse(&req.source)?;
    let Target::Subscription { project, .. } = &t else {
        return Err(BackendError::Unsupported(format!(
            "{} is a topic: redrive starts from a dead-letter subscription",
            req.source
        )));
    };
    let path = t.path();
    let sub = b.get_subscription(&path).await?;
    let fixed = match &req.target {
        RedriveTarget::Queue(q) => Some(fixed_target(b, q).await?),
        RedriveTarget::Origin => None,
    };
    let listing = super::listing::list_all(b).await?;
    Ok((
        path,
        Router {
            fixed,
            by_policy: policy_route(&listing, &sub.topic),
            by_attr: HashMap::new(),
            project: project.clone(),
        },
    ))
}

/// The plan's notes: where the copies go and who receives them.
pub async fn plan_notes(b: &PubsubBackend, req: &RedriveRequest) -> Result<Vec<String>> {
    let (_, router) = router(b, req).await?;
    let listing = b.listing_now().await?;
    let mut notes = Vec::new();
    let target = match (&router.fixed, &router.by_policy) {
        (Some(t), _) | (None, Ok(t)) => Some(t.clone()),
        (None, Err(e)) => {
            notes.push(format!(
                "messages whose CloudPubSubDeadLetterSourceSubscription attribute names their source go to its topic; the others cannot go anywhere: {e}"
            ));
            None
        }
    };
    if let Some(t) = target {
        let subs: Vec<String> = listing
            .subs_of_topic(&t)
            .iter()
            .filter_map(|s| names::sub_id(&s.name))
            .map(|q| q.0)
            .collect();
        let topic = names::topic_id(&t).map_or(t.clone(), |q| q.0);
        notes.push(if subs.is_empty() {
            format!("copies are published to {topic}, which has no subscription: nobody would receive them")
        } else {
            format!(
                "copies are published to {topic}; every subscription of it receives one: {}",
                subs.join(", ")
            )
        });
    }
    notes.push("each copy is a new message with a new id; data, attributes and ordering key are kept byte for byte; CloudPubSubDeadLetter* attributes become x-qdeck-*".into());
    notes.push("dead letters are pulled to be moved: one left behind (cancel, --max, --where) counts one more delivery".into());
    Ok(notes)
}

#[derive(Default)]
struct Tally {
    report: RedriveReport,
}

impl Tally {
    fn err(&mut self, e: String) {
        if self.report.errors.len() < 20 && !self.report.errors.contains(&e) {
            self.report.errors.push(e);
        }
    }
}

pub async fn redrive(
    b: &PubsubBackend,
    req: &RedriveRequest,
    filter: Option<&MessageFilter>,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let (path, mut router) = router(b, req).await?;
    let only: Option<HashSet<&str>> = req
        .only_ids
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    let limit = req.max.unwrap_or(u64::MAX);
    if let Some(ids) = &only {
        progress.set_total(Some((ids.len() as u64).min(limit)));
    } else if req.max.is_some() {
        progress.set_total(Some(limit));
    }
    progress.phase("republishing");
    let limiter = Limiter::new(req.rate);
    let mut window = req.window.unwrap_or(DEFAULT_WINDOW).clamp(1, 1000) as usize;
    if let Some(r) = req.rate {
        // A batch is published at once: at most one second's worth, so that no second
        // carries more than the rate plus that (the contract's pacing bound), and no batch
        // waits on the limiter anywhere near its 60 s hold.
        window = window.min(r.batch(Duration::from_secs(1), window));
    }
    let mut t = Tally::default();
    t.report.mode = MODE.into();
    let mut taken = 0u64;
    let mut examined = 0u64;
    let mut matched = 0u64;
    let mut run = Run::default();
    let mut held_at = Instant::now();
    while !progress.cancelled() && taken < limit {
        if !run.held.is_empty() && held_at.elapsed() > Duration::from_secs(30) {
            if let Err(e) = b.modify_ack_deadline(&path, &run.held, HOLD_SECS).await {
                t.err(format!(
                    "could not keep the messages left behind aside ({e}): some may be read twice"
                ));
            }
            held_at = Instant::now();
        }
        let want = window.min(usize::try_from(limit - taken).unwrap_or(window));
        let batch = b.pull(&path, want, Duration::from_secs(5)).await?;
        if batch.is_empty() {
            break;
        }
        let ack_ids: Vec<String> = batch.iter().map(|r| r.ack_id.clone()).collect();
        b.modify_ack_deadline(&path, &ack_ids, HOLD_SECS).await?;
        // Moving ones, grouped by target topic, in pull order.
        let mut groups: BTreeMap<String, Vec<&ReceivedMessage>> = BTreeMap::new();
        let mut again = Vec::new();
        for r in &batch {
            let m = r.message.clone().unwrap_or_default();
            if run.moved_ids.contains(&m.message_id) {
                again.push(r.ack_id.clone());
                continue;
            }
            let chosen = only
                .as_ref()
                .is_none_or(|ids| ids.contains(m.message_id.as_str()));
            let passes = chosen
                && filter.is_none_or(|f| {
                    examined += 1;
                    f.matches(&msg::to_message(r, &router.project, None))
                });
            if !passes || taken >= limit {
                run.held.push(r.ack_id.clone());
                continue;
            }
            matched += 1;
            match router.route(b, &m).await {
                Ok(topic) => {
                    taken += 1;
                    groups.entry(topic).or_default().push(r);
                }
                Err(e) => {
                    t.report.failed += 1;
                    progress.add_failed(1);
                    t.err(format!("{}: {e}", m.message_id));
                    run.held.push(r.ack_id.clone());
                }
            }
        }
        if !again.is_empty() {
            let _ = b.acknowledge(&path, &again).await;
        }
        publish_groups(b, &path, groups, &limiter, progress, &mut t, &mut run).await;
        if run.failure.is_some() {
            break;
        }
    }
    if !run.held.is_empty() {
        if let Err(e) = b.modify_ack_deadline(&path, &run.held, 0).await {
            t.err(format!(
                "messages left behind come back after their ack deadline ({e})"
            ));
        }
    }
    if let Some(e) = run.failure {
        if t.report.moved == 0 {
            return Err(e);
        }
    }
    t.report.cancelled = progress.cancelled();
    if filter.is_some() {
        t.report.examined = Some(examined);
        t.report.matched = Some(matched);
    }
    Ok(t.report)
}

/// What a run keeps across batches.
#[derive(Default)]
struct Run {
    /// Dead letters left in the subscription by this run (not chosen, not matching, no
    /// route): held, with their deadline extended, until the run ends, so that none is pulled
    /// twice and the pass ends when the subscription answers empty. Given back together at
    /// the end.
    held: Vec<String>,
    /// Copies confirmed: a dead letter that comes back after its copy was confirmed (its
    /// acknowledgement was lost) is acknowledged, not copied again.
    moved_ids: HashSet<String>,
    /// The failure that ends the run after this batch.
    failure: Option<BackendError>,
}

/// Publish each target topic's copies of a batch, paced, and acknowledge the dead letters
/// whose copies were confirmed; after a failure or a cancel the rest are held.
async fn publish_groups(
    b: &PubsubBackend,
    path: &str,
    groups: BTreeMap<String, Vec<&ReceivedMessage>>,
    limiter: &Limiter,
    progress: &OpProgress,
    t: &mut Tally,
    run: &mut Run,
) {
    let cancel = progress.cancel_token();
    for (topic, rs) in groups {
        if run.failure.is_some() || cancel.is_cancelled() {
            run.held.extend(rs.iter().map(|r| r.ack_id.clone()));
            continue;
        }
        limiter.take(rs.len() as u64, &cancel).await;
        if cancel.is_cancelled() {
            run.held.extend(rs.iter().map(|r| r.ack_id.clone()));
            continue;
        }
        let copies: Vec<PubsubMessage> = rs
            .iter()
            .map(|r| {
                let m = r.message.clone().unwrap_or_default();
                PubsubMessage {
                    data: m.data,
                    attributes: msg::copy_attributes(&m.attributes).0,
                    message_id: String::new(),
                    publish_time: None,
                    ordering_key: m.ordering_key,
                }
            })
            .collect();
        let n = rs.len() as u64;
        match b.publish(&topic, copies).await {
            Ok(_) => {
                run.moved_ids.extend(
                    rs.iter()
                        .filter_map(|r| r.message.as_ref().map(|m| m.message_id.clone())),
                );
                let ids: Vec<String> = rs.iter().map(|r| r.ack_id.clone()).collect();
                t.report.moved += n;
                progress.add_done(n);
                if let Err(e) = b.acknowledge(path, &ids).await {
                    t.report.possibly_duplicated += n;
                    t.err(format!("copies confirmed but the dead letters were not acknowledged ({e}): they will be delivered again"));
                    run.failure = Some(e);
                }
            }
            Err(e) => {
                t.report.failed += n;
                progress.add_failed(n);
                t.err(format!(
                    "publish to {}: {e}",
                    names::topic_id(&topic).map_or(topic.clone(), |q| q.0)
                ));
                run.held.extend(rs.iter().map(|r| r.ack_id.clone()));
                run.failure = Some(e);
            }
        }
    }
}
