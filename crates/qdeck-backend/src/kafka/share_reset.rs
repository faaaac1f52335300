//! Moving a share group's start offsets (KIP-932's AlterShareGroupOffsets, v0), the share
//! groups' counterpart of an admin OffsetCommit: sent to the group's coordinator, taken by
//! Kafka only while the group has no member. A share partition's start offset is where the
//! group's reading starts again: records before it count as acknowledged, records after it
//! are delivered anew.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::admin::Tp;
use super::groups::coordinator_refusal;
use super::share::{self, SharePart};
use super::KafkaBackend;
use crate::{BackendError, Result};
use qdeck_model::domain::{OffsetResetPlan, OffsetResetReport};

pub const ALTER_SHARE_OFFSETS_V: i16 = 0;

impl KafkaBackend {
    /// The group's share partitions: start offset and the broker's lag.
    pub(super) async fn share_state(
        &self,
        coordinator: i32,
        group: &str,
    ) -> Result<BTreeMap<Tp, SharePart>> {
        let coords: HashMap<String, i32> = [(group.to_string(), coordinator)].into();
        let (mut found, errors) =
            share::offsets(&self.cluster, &[group.to_string()], &coords).await;
        if let Some(e) = errors.get(group) {
            return Err(BackendError::Unreachable(format!(
                "share group {group:?}: {e}"
            )));
        }
        Ok(found.remove(group).unwrap_or_default())
    }

    /// Sets each planned partition's start offset; how many partitions moved.
    pub(super) async fn alter_share_offsets(
        &self,
        coordinator: i32,
        plan: &OffsetResetPlan,
    ) -> Result<OffsetResetReport> {
        let sb = |s: &str| StrBytes::from_string(s.to_string());
        let req = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(sb(&plan.group)))
            .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(sb(&plan.topic)))
                .with_partitions(
                    plan.partitions
                        .iter()
                        .map(|p| {
                            AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(p.partition)
                                .with_start_offset(p.new)
                        })
                        .collect(),
                )]);
        let resp = self
            .cluster
            .to(
                coordinator,
                "AlterShareGroupOffsets",
                &req,
                ALTER_SHARE_OFFSETS_V,
            )
            .await?;
        let refusal =
            |what: String, code: i16| coordinator_refusal(what, code, "Read on the group");
        if resp.error_code != 0 {
            let words = resp
                .error_message
                .map(|m| m.to_string())
                .unwrap_or_default();
            return Err(refusal(
                format!("share group {:?} ({words})", plan.group),
                resp.error_code,
            ));
        }
        let mut done = 0u64;
        for t in resp.responses {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(refusal(
                        format!(
                            "share group {:?}: the coordinator refused the start offset of {}[{}] ({done} of {} partition(s) moved)",
                            plan.group,
                            plan.topic,
                            p.partition_index,
                            plan.partitions.len()
                        ),
                        p.error_code,
                    ));
                }
                done += 1;
            }
        }
        Ok(OffsetResetReport {
            group: plan.group.clone(),
            topic: plan.topic.clone(),
            partitions: done,
            lag_after: plan.lag_after(),
        })
    }
}
