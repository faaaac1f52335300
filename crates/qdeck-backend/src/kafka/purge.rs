//! Purging a topic, or one partition of it (`TOPIC:PARTITION`): DeleteRecords up to each partition's high watermark, sent to each
//! partition's leader (every partition it leads in one request). Kafka deletes by moving the
//! log start offset, so the count purged is the new log start minus the old one, per partition.
//! Groups keep their committed offsets: a group that had not read everything now sits below
//! the log start, and its row counts those records as lost to it.

use std::collections::BTreeMap;

use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::admin::{self, Tp, EARLIEST};
use super::{KafkaBackend, Target};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::{MessageCount, PurgeReport, QueueId, QueueInfo, QueueKind};

pub const DELETE_RECORDS_V: i16 = 2;
/// DeleteRecords' offset meaning "the partition's high watermark now".
const HIGH_WATERMARK: i64 = -1;

pub const NOTE: &str = "DeleteRecords up to each partition's high watermark: the records are gone for every group reading the topic, and groups that had not read them count them as lost to retention";

/// `TOPIC:PARTITION` names one partition of a topic (Kafka forbids `:` in topic names, so the
/// text cannot be a topic's; a group row, with its `@`, is never one).
pub fn partition_of(id: &QueueId) -> Option<(String, i32)> {
    let (t, p) = id.as_str().rsplit_once(':')?;
    if t.is_empty() || t.contains('@') {
        return None;
    }
    p.parse::<i32>()
        .ok()
        .filter(|p| *p >= 0)
        .map(|p| (t.to_string(), p))
}

/// The partition `id` names, checked against the cluster's metadata.
async fn known_partition(
    b: &KafkaBackend,
    topic: &str,
    p: i32,
) -> Result<super::routing::ClusterMeta> {
    let meta = b.cluster.metadata(Some(&[topic.to_string()])).await?;
    match meta.topics.get(topic) {
        None => Err(BackendError::NotFound(format!("no Kafka topic {topic:?}"))),
        Some(tm) if !tm.leaders.contains_key(&p) => Err(BackendError::NotFound(format!(
            "Kafka topic {topic:?} has no partition {p} (it has {})",
            tm.leaders.len()
        ))),
        Some(_) => Ok(meta),
    }
}

/// A partition as a row of its own, for a purge's plan.
pub async fn describe_partition(b: &KafkaBackend, topic: &str, p: i32) -> Result<QueueInfo> {
    known_partition(b, topic, p).await?;
    let mut info = QueueInfo {
        id: QueueId(format!("{topic}:{p}")),
        kind: QueueKind::Topic,
        ..Default::default()
    };
    info.settings
        .extra
        .insert("partition of".into(), topic.to_string());
    Ok(info)
}

/// Records held by one partition: end − log start.
pub async fn count_partition(b: &KafkaBackend, topic: &str, p: i32) -> Result<MessageCount> {
    let meta = known_partition(b, topic, p).await?;
    let tp = vec![(topic.to_string(), p)];
    let (start, e1) = admin::offsets(&b.cluster, &meta, &tp, EARLIEST).await;
    let (end, e2) = admin::offsets(&b.cluster, &meta, &tp, admin::LATEST).await;
    match (start.get(&tp[0]), end.get(&tp[0])) {
        (Some(s), Some(e)) => Ok(MessageCount {
            ready: u64::try_from(e - s).unwrap_or(0),
            in_flight: None,
            exact: true,
        }),
        _ => Err(BackendError::Unreachable(format!(
            "{topic}[{p}]: {}",
            e1.get(&tp[0])
                .or_else(|| e2.get(&tp[0]))
                .cloned()
                .unwrap_or_else(|| "no offsets".into())
        ))),
    }
}

/// DeleteRecords up to the high watermark of `parts` of `topic`, on their leader; the records
/// it removed (each partition's new low watermark against its earlier one). A partition that
/// failed goes to `failures`.
async fn delete_on(
    b: &KafkaBackend,
    leader: i32,
    topic: &str,
    parts: &[i32],
    before: &std::collections::HashMap<Tp, i64>,
    progress: &OpProgress,
    failures: &mut Vec<String>,
) -> u64 {
    let timeout_ms = i32::try_from(b.cluster.timeout.as_millis()).unwrap_or(i32::MAX);
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                parts
                    .iter()
                    .map(|p| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(*p)
                            .with_offset(HIGH_WATERMARK)
                    })
                    .collect(),
            )]);
    let resp = match b
        .cluster
        .to(leader, "DeleteRecords", &req, DELETE_RECORDS_V)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            failures.extend(parts.iter().map(|p| format!("{topic}[{p}]: {e}")));
            return 0;
        }
    };
    let mut purged = 0;
    for p in resp.topics.into_iter().flat_map(|t| t.partitions) {
        match p.error_code.err() {
            None => {
                let old = before
                    .get(&(topic.to_string(), p.partition_index))
                    .copied()
                    .unwrap_or(p.low_watermark);
                purged += u64::try_from(p.low_watermark - old).unwrap_or(0);
                progress.add_done(1);
            }
            Some(e) => {
                progress.add_failed(1);
                failures.push(format!(
                    "{topic}[{}]: DeleteRecords: {e}",
                    p.partition_index
                ));
            }
        }
    }
    purged
}

pub async fn purge(
    b: &KafkaBackend,
    queue: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let only = partition_of(queue);
    let topic = match (&only, Target::parse(queue)) {
        (Some((t, _)), _) => t.clone(),
        (None, Target::Topic(t)) => t,
        (None, Target::Group { topic, .. }) => {
            return Err(BackendError::Unsupported(format!(
                "{queue} is a group's view of topic {topic}: purging deletes the topic's records for every group, so purge {topic} itself"
            )))
        }
    };
    let meta = b
        .cluster
        .metadata(Some(std::slice::from_ref(&topic)))
        .await?;
    let tm = meta
        .topics
        .get(&topic)
        .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {topic:?}")))?;
    if let Some((_, p)) = &only {
        if !tm.leaders.contains_key(p) {
            return Err(BackendError::NotFound(format!(
                "Kafka topic {topic:?} has no partition {p}"
            )));
        }
    }
    let chosen = |p: &i32| only.as_ref().is_none_or(|(_, o)| o == p);
    let tps: Vec<Tp> = tm
        .leaders
        .keys()
        .filter(|p| chosen(p))
        .map(|p| (topic.clone(), *p))
        .collect();
    let (before, errs) = admin::offsets(&b.cluster, &meta, &tps, EARLIEST).await;
    if let Some(((t, p), e)) = errs.into_iter().next() {
        return Err(BackendError::Unreachable(format!("{t}[{p}]: {e}")));
    }
    progress.set_total(Some(tps.len() as u64));
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, leader) in tm.leaders.iter().filter(|(p, _)| chosen(p)) {
        by_leader.entry(*leader).or_default().push(*p);
    }
    let mut purged = 0u64;
    let mut failures: Vec<String> = Vec::new();
    for (leader, parts) in by_leader {
        if progress.cancelled() {
            break;
        }
        if leader < 0 {
            failures.extend(parts.iter().map(|p| format!("{topic}[{p}]: no leader")));
            continue;
        }
        purged += delete_on(b, leader, &topic, &parts, &before, progress, &mut failures).await;
    }
    if let Some(first) = failures.first() {
        let more = failures.len() - 1;
        return Err(BackendError::Other(format!(
            "purged {purged} record(s), but {} partition(s) were not purged: {first}{}",
            failures.len(),
            if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            }
        )));
    }
    Ok(PurgeReport {
        purged: Some(purged),
        note: progress
            .cancelled()
            .then(|| "cancelled before every partition was purged".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_topic_colon_number() {
        let p = |s: &str| partition_of(&QueueId::new(s));
        assert_eq!(p("orders:3"), Some(("orders".into(), 3)));
        assert_eq!(p("orders"), None);
        assert_eq!(p("orders:x"), None);
        assert_eq!(p("orders:-1"), None);
        assert_eq!(p(":3"), None);
        // Group rows are never partitions, whatever their group id holds.
        assert_eq!(p("billing@orders:3"), None);
        assert_eq!(p("team:2@orders"), None);
    }
}
