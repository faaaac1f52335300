//! Purging a topic: DeleteRecords up to each partition's high watermark, sent to each
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
use qdeck_model::domain::{PurgeReport, QueueId};

pub const DELETE_RECORDS_V: i16 = 2;
/// DeleteRecords' offset meaning "the partition's high watermark now".
const HIGH_WATERMARK: i64 = -1;

pub const NOTE: &str = "DeleteRecords up to each partition's high watermark: the records are gone for every group reading the topic, and groups that had not read them count them as lost to retention";

pub async fn purge(
    b: &KafkaBackend,
    queue: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    let topic = match Target::parse(queue) {
        Target::Topic(t) => t,
        Target::Group { topic, .. } => {
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
    let tps: Vec<Tp> = tm.leaders.keys().map(|p| (topic.clone(), *p)).collect();
    let (before, errs) = admin::offsets(&b.cluster, &meta, &tps, EARLIEST).await;
    if let Some(((t, p), e)) = errs.into_iter().next() {
        return Err(BackendError::Unreachable(format!("{t}[{p}]: {e}")));
    }
    progress.set_total(Some(tps.len() as u64));
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, leader) in &tm.leaders {
        by_leader.entry(*leader).or_default().push(*p);
    }
    let timeout_ms = i32::try_from(b.cluster.timeout.as_millis()).unwrap_or(i32::MAX);
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
        let req = DeleteRecordsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
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
                continue;
            }
        };
        for t in resp.topics {
            for p in t.partitions {
                match p.error_code.err() {
                    None => {
                        let old = before
                            .get(&(topic.clone(), p.partition_index))
                            .copied()
                            .unwrap_or(p.low_watermark);
                        let n = u64::try_from(p.low_watermark - old).unwrap_or(0);
                        purged += n;
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
        }
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
