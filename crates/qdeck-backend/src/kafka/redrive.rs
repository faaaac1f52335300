//! Redrive of a dead-letter topic: each record is written to its topic with the same key,
//! value and headers, byte for byte (partition: Java's default partitioner on the key, or for a
//! null key the partition the headers name), then the dead-letter topic's offsets are committed
//! for qdeck's own group `qdeck-redrive.<DLT>`. Kafka cannot delete one record, so that group's
//! offsets are what "moved" means: a later run starts after them and never sends a record
//! twice unless asked; a crash between the write and the commit may send the last batch again
//! (counted as possibly duplicated), never lose one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::admin::{self, Tp, EARLIEST, LATEST};
use super::fetch::{self, KRecord};
use super::produce::{self, Outgoing};
use super::routing::ClusterMeta;
use super::{dlt, message, KafkaBackend, Target};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

pub const OFFSET_COMMIT_V: i16 = 8;
const MODE: &str = "client-side: Fetch from the dead-letter topic → Produce (acks=all) → commit qdeck's progress offsets";
/// Bytes asked of one Fetch while redriving.
const FETCH_BYTES: i32 = 1 << 20;

/// The group whose committed offsets on `dlt` mark what qdeck has redriven.
pub fn progress_group(dlt: &str) -> String {
    format!("qdeck-redrive.{dlt}")
}

fn source_topic(req_source: &QueueId) -> Result<String> {
    match Target::parse(req_source) {
        Target::Topic(t) => Ok(t),
        Target::Group { .. } => Err(BackendError::Unsupported(format!(
            "{req_source}: redrive starts from a dead-letter topic, not a group row"
        ))),
    }
}

/// Per partition of `dlt`: (first offset not yet redriven, end offset).
async fn window(
    b: &KafkaBackend,
    meta: &ClusterMeta,
    dlt: &str,
) -> Result<BTreeMap<i32, (i64, i64)>> {
    let tm = meta
        .topics
        .get(dlt)
        .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {dlt:?}")))?;
    let tps: Vec<Tp> = tm.leaders.keys().map(|p| (dlt.to_string(), *p)).collect();
    let (start, e1) = admin::offsets(&b.cluster, meta, &tps, EARLIEST).await;
    let (end, e2) = admin::offsets(&b.cluster, meta, &tps, LATEST).await;
    if let Some(((t, p), e)) = e1.into_iter().chain(e2).next() {
        return Err(BackendError::Unreachable(format!("{t}[{p}]: {e}")));
    }
    let group = progress_group(dlt);
    let coords = b.cluster.coordinators(std::slice::from_ref(&group)).await?;
    let (committed, errs) =
        admin::committed(&b.cluster, std::slice::from_ref(&group), &coords).await;
    if let Some(e) = errs.get(&group) {
        return Err(BackendError::Unreachable(format!(
            "reading qdeck's redrive progress ({group}): {e}"
        )));
    }
    let done = committed.get(&group).cloned().unwrap_or_default();
    Ok(tps
        .iter()
        .map(|tp| {
            let s = start.get(tp).copied().unwrap_or(0);
            let from = done.get(tp).copied().map_or(s, |d| d.max(s));
            (tp.1, (from, end.get(tp).copied().unwrap_or(0)))
        })
        .collect())
}

/// Records of `dlt` not yet redriven.
pub async fn left(b: &KafkaBackend, dlt: &str) -> Result<u64> {
    let meta = b.cluster.metadata(Some(&[dlt.to_string()])).await?;
    Ok(window(b, &meta, dlt)
        .await?
        .values()
        .map(|(f, e)| u64::try_from(e - f).unwrap_or(0))
        .sum())
}

fn target_topic(req: &RedriveRequest, dlt: &str, r: &KRecord) -> Result<String> {
    match &req.target {
        RedriveTarget::Queue(q) => Ok(match Target::parse(q) {
            Target::Topic(t) | Target::Group { topic: t, .. } => t,
        }),
        RedriveTarget::Origin => dlt::origin(r)
            .and_then(|o| o.topic)
            .or_else(|| dlt::spring_origin(dlt).map(str::to_string))
            .ok_or_else(|| {
                BackendError::Invalid(format!(
                    "{dlt} {}: no original topic in its headers and {dlt:?} is not named TOPIC-dlt or TOPIC.DLT; give --to TOPIC",
                    message::id(r.partition, r.offset)
                ))
            }),
    }
}

/// Why a chosen subset is refused: Kafka deletes records only up to an offset, and qdeck's
/// progress offsets can only step past a contiguous run, so the records passed over and the
/// ones copied would look alike to a later run (which would copy the chosen ones again).
pub const SUBSET_REFUSED: &str = "a chosen subset of a dead-letter topic cannot be marked as redriven: Kafka cannot delete single records, and qdeck's progress offsets only step past a contiguous run; redrive from the start (with --max for a count)";

pub async fn plan(b: &KafkaBackend, req: &RedriveRequest) -> Result<RedrivePlan> {
    let dlt = source_topic(&req.source)?;
    if let RedriveTarget::Queue(t) = &req.target {
        let topic = match Target::parse(t) {
            Target::Topic(t) | Target::Group { topic: t, .. } => t,
        };
        let meta = b
            .cluster
            .metadata(Some(std::slice::from_ref(&topic)))
            .await?;
        if !meta.topics.contains_key(&topic) {
            return Err(BackendError::NotFound(format!("no Kafka topic {topic:?}")));
        }
    }
    let mut ready = left(b, &dlt).await?;
    if let Some(m) = req.max {
        ready = ready.min(m);
    }
    if let Some(ids) = &req.only_ids {
        ready = ready.min(ids.len() as u64);
    }
    let mut notes = vec![format!(
        "progress is kept as the committed offsets of group {} on {dlt}: records before them are not sent again; the dead-letter topic keeps its records",
        progress_group(&dlt)
    )];
    let origin = match &req.target {
        RedriveTarget::Queue(q) => Some(q.as_str().to_string()),
        RedriveTarget::Origin => dlt::spring_origin(&dlt).map(str::to_string),
    };
    if let Some(o) = origin {
        let snap = b.snapshot(None, false).await?;
        let readers: Vec<String> = snap
            .committed
            .iter()
            .filter(|(g, offs)| {
                !g.starts_with("qdeck-redrive.") && offs.keys().any(|(t, _)| *t == o)
            })
            .map(|(g, _)| g.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !readers.is_empty() {
            notes.push(format!(
                "every group reading {o} will read the copies: {}",
                readers.join(", ")
            ));
        }
    }
    Ok(RedrivePlan {
        count: MessageCount {
            ready,
            in_flight: None,
            exact: true,
        },
        mode: if req.only_ids.is_some() {
            RedriveMode::Unsupported(SUBSET_REFUSED.into())
        } else {
            RedriveMode::ClientSide
        },
        notes,
    })
}

async fn commit_progress(b: &KafkaBackend, dlt: &str, partition: i32, next: i64) -> Result<()> {
    let group = progress_group(dlt);
    let coords = b.cluster.coordinators(std::slice::from_ref(&group)).await?;
    let node = *coords
        .get(&group)
        .ok_or_else(|| BackendError::Unreachable(format!("no coordinator for group {group}")))?;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.clone())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(dlt.to_string())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(next)
                .with_committed_leader_epoch(-1)])]);
    let resp = b
        .cluster
        .to(node, "OffsetCommit", &req, OFFSET_COMMIT_V)
        .await?;
    for t in resp.topics {
        for p in t.partitions {
            if let Some(e) = p.error_code.err() {
                return Err(BackendError::Other(format!(
                    "committing qdeck's redrive progress ({group}) on {dlt}[{partition}]: {e}"
                )));
            }
        }
    }
    Ok(())
}

/// Where a redriven record goes: its topic, and the partition Java's default partitioner
/// gives its key; a record without a key goes back to the partition its headers name, else
/// round robin over the topic's partitions (`rr`: the last one chosen per topic).
fn route(
    meta: &ClusterMeta,
    req: &RedriveRequest,
    dlt: &str,
    r: &KRecord,
    rr: &mut HashMap<String, i32>,
) -> Result<(String, i32)> {
    let topic = target_topic(req, dlt, r)?;
    let tm = meta.topics.get(&topic).ok_or_else(|| {
        BackendError::NotFound(format!(
            "no Kafka topic {topic:?} (the original topic of {dlt})"
        ))
    })?;
    let parts = tm.leaders.len();
    if let Some(k) = &r.key {
        return Ok((topic, produce::partition_for_key(k, parts)));
    }
    let named = dlt::origin(r)
        .filter(|o| o.topic.as_deref() == Some(topic.as_str()))
        .and_then(|o| o.partition)
        .filter(|p| tm.leaders.contains_key(p));
    let part = match named {
        Some(p) => p,
        None => {
            let c = rr.entry(topic.clone()).or_insert(0);
            *c = (*c + 1) % i32::try_from(parts.max(1)).unwrap_or(1);
            *c
        }
    };
    Ok((topic, part))
}

pub async fn redrive(
    b: &KafkaBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let dlt = source_topic(&req.source)?;
    if req.only_ids.is_some() {
        return Err(BackendError::Unsupported(SUBSET_REFUSED.into()));
    }
    let meta = b.cluster.metadata(None).await?;
    let win = window(b, &meta, &dlt).await?;
    let limit = req.max.unwrap_or(u64::MAX);
    let total: u64 = win
        .values()
        .map(|(f, e)| u64::try_from(e - f).unwrap_or(0))
        .sum();
    progress.set_total(Some(total.min(limit)));
    progress.phase("redriving");
    let mut report = RedriveReport {
        mode: MODE.into(),
        ..Default::default()
    };
    let mut taken = 0u64;
    let mut rr: HashMap<String, i32> = HashMap::new();
    // With a rate, one record per round: each is booked with the limiter before it is
    // written, so progress never runs ahead of the rate and a cancel stops between records.
    let limiter = Limiter::new(req.rate);
    let per_round = if req.rate.is_some() { 1 } else { u64::MAX };
    let cancel = progress.cancel_token();
    'parts: for (p, (from, end)) in win {
        let mut offset = from;
        while offset < end {
            if progress.cancelled() {
                report.cancelled = true;
                break 'parts;
            }
            if taken >= limit {
                break 'parts;
            }
            let got = fetch::fetch(&b.cluster, &meta, &dlt, p, offset, FETCH_BYTES).await?;
            if got.records.is_empty() && got.next <= offset {
                break;
            }
            let mut next = got.next.max(offset);
            // Target topic → partition → records, in offset order.
            let mut out: BTreeMap<String, BTreeMap<i32, Vec<Outgoing>>> = BTreeMap::new();
            let mut n = 0u64;
            for r in &got.records {
                if r.offset >= end {
                    next = end;
                    break;
                }
                if taken >= limit || n >= per_round {
                    next = r.offset;
                    break;
                }
                let (topic, part) = route(&meta, req, &dlt, r, &mut rr)?;
                out.entry(topic)
                    .or_default()
                    .entry(part)
                    .or_default()
                    .push(Outgoing {
                        key: r.key.clone(),
                        value: r.value.clone(),
                        headers: r.headers.clone(),
                    });
                n += 1;
                taken += 1;
            }
            if n > 0 && req.rate.is_some() {
                limiter.take(n, &cancel).await;
                if progress.cancelled() {
                    report.cancelled = true;
                    break 'parts;
                }
            }
            for (topic, by_part) in &out {
                if let Err(e) = produce::produce(&b.cluster, &meta, topic, by_part).await {
                    report.failed += by_part.values().map(|v| v.len() as u64).sum::<u64>();
                    report.errors.push(e.to_string());
                    progress.add_failed(n);
                    return Ok(report);
                }
            }
            if let Err(e) = commit_progress(b, &dlt, p, next).await {
                // The copies are written; only the mark is missing: a later run sends them again.
                report.moved += n;
                report.possibly_duplicated += n;
                report.errors.push(e.to_string());
                return Ok(report);
            }
            report.moved += n;
            progress.add_done(n);
            offset = next;
        }
    }
    Ok(report)
}
