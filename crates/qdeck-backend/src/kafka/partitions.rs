//! A consumer-group row's partitions, for the console's partition table: each partition's log
//! start and end offsets (ListOffsets to its leader), the group's committed offset (OffsetFetch
//! to the coordinator) and the member it is assigned to (DescribeGroups or, for KIP-848
//! groups, ConsumerGroupDescribe). Rates and stuck partitions are the engine's (they need
//! successive polls).

use std::collections::BTreeSet;

use super::admin::{self, Tp, EARLIEST, LATEST};
use super::{KafkaBackend, Target};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

impl KafkaBackend {
    pub(super) async fn partition_figures(&self, row: &QueueId) -> Result<Vec<PartitionFigures>> {
        let Target::Group { group, topic } = Target::parse(row) else {
            return Err(BackendError::Invalid(format!(
                "{row} is a topic: the partition table is a group's (GROUP@{row})"
            )));
        };
        let wanted: BTreeSet<String> = [group.clone()].into_iter().collect();
        let snap = self.snapshot(Some(&wanted), true).await?;
        if let Some(e) = snap.group_errors.get(&group) {
            return Err(BackendError::Unreachable(format!("group {group:?}: {e}")));
        }
        if snap.shares.iter().any(|g| g.id == group) {
            return Err(BackendError::Unsupported(format!(
                "{group:?} is a share group: its records are not read in offset order per member, so it has no per-partition committed offset"
            )));
        }
        let tm = snap
            .meta
            .topics
            .get(&topic)
            .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {topic:?}")))?;
        let tps: Vec<Tp> = tm.leaders.keys().map(|p| (topic.clone(), *p)).collect();
        let (start, e1) = admin::offsets(&self.cluster, &snap.meta, &tps, EARLIEST).await;
        let (end, e2) = admin::offsets(&self.cluster, &snap.meta, &tps, LATEST).await;
        if let Some(((t, p), e)) = e1.into_iter().chain(e2).next() {
            return Err(BackendError::Unreachable(format!("{t}[{p}]: {e}")));
        }
        let committed = snap.committed.get(&group);
        let members = snap.described.get(&group).map(|d| &d.members);
        Ok(tps
            .iter()
            .map(|tp| PartitionFigures {
                partition: tp.1,
                log_start: start.get(tp).copied().unwrap_or(0),
                end: end.get(tp).copied().unwrap_or(0),
                committed: committed.and_then(|c| c.get(tp)).copied(),
                member: members
                    .and_then(|ms| ms.iter().find(|m| m.assigned.contains(tp)))
                    .map(|m| format!("{} {}", m.client_id, m.host.trim_start_matches('/'))),
            })
            .collect())
    }
}
