//! Consumer-group administration: moving a group's committed offsets on one topic
//! (OffsetCommit as an admin: generation −1, no member id; a share group's start offsets with
//! AlterShareGroupOffsets, share_reset.rs) and deleting a consumer or share group
//! (DeleteGroups), all sent to the group's coordinator. Kafka accepts either only while the
//! group has no members, and so does qdeck: the group is described before planning and again
//! right before the change, so a consumer that joined in between is named, not overridden.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{DeleteGroupsRequest, GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::admin::{self, GroupListing, Tp, EARLIEST, LATEST};
use super::redrive::OFFSET_COMMIT_V;
use super::routing::ClusterMeta;
use super::{KafkaBackend, Target};
use crate::{BackendError, GroupAdmin, Result};
use qdeck_model::domain::*;

pub const DELETE_GROUPS_V: i16 = 2;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// What a coordinator's refusal of a change to a group means to the user: the group is in use,
/// gone, not theirs to change (`right` names the ACL), or beyond what the broker can do. `code`
/// is the wire code, so one the codec does not know still reads as a number.
pub(super) fn coordinator_refusal(what: String, code: i16, right: &str) -> BackendError {
    let e = ResponseError::try_from_code(code);
    let msg = match &e {
        Some(e) => format!("{what}: {e}"),
        None => format!("{what}: error {code}"),
    };
    match e {
        Some(
            ResponseError::NonEmptyGroup
            | ResponseError::UnknownMemberId
            | ResponseError::IllegalGeneration
            | ResponseError::RebalanceInProgress,
        ) => BackendError::Refused(msg),
        Some(ResponseError::GroupIdNotFound) => BackendError::NotFound(msg),
        Some(ResponseError::GroupAuthorizationFailed | ResponseError::TopicAuthorizationFailed) => {
            BackendError::Forbidden {
                msg,
                right: Some(right.into()),
            }
        }
        Some(ResponseError::UnsupportedVersion) => BackendError::Unsupported(msg),
        Some(
            ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NotCoordinator,
        ) => BackendError::Unreachable(msg),
        _ => BackendError::Other(msg),
    }
}

/// The group row `row` names, or why it is not one.
fn group_row(row: &QueueId) -> Result<(String, String)> {
    match Target::parse(row) {
        Target::Group { group, topic } => Ok((group, topic)),
        Target::Topic(t) => Err(BackendError::Invalid(format!(
            "{t:?} is a topic: name a group reading it as GROUP@{t}"
        ))),
    }
}

/// A group as the offset operations need it: its coordinator, known empty.
struct EmptyGroup {
    coordinator: i32,
    /// A share group (KIP-932): its offsets are share partitions' start offsets.
    share: bool,
}

impl KafkaBackend {
    /// The group's coordinator, once its description shows no member; `Refused` naming the
    /// group and its members' count otherwise, `NotFound` when there is no such group.
    async fn empty_group(&self, meta: &ClusterMeta, group: &str) -> Result<EmptyGroup> {
        let listing: GroupListing = admin::list_groups(&self.cluster, meta)
            .await?
            .into_iter()
            .find(|g| g.id == group)
            .ok_or_else(|| BackendError::NotFound(format!("no consumer group {group:?}")))?;
        let share = listing.group_type == "share";
        if listing.group_type == "streams" {
            return Err(BackendError::Unsupported(format!(
                "{group:?} is a streams group: qdeck moves and deletes consumer and share groups only"
            )));
        }
        let coords = self.cluster.coordinators(&[group.to_string()]).await?;
        let coordinator = *coords.get(group).ok_or_else(|| {
            BackendError::Unreachable(format!("no coordinator found for group {group:?}"))
        })?;
        let (described, errors) = if share {
            super::share::describe(&self.cluster, &[group.to_string()], &coords).await
        } else {
            admin::describe(&self.cluster, &[&listing], &coords).await
        };
        if let Some(e) = errors.get(group) {
            return Err(BackendError::Unreachable(format!("group {group:?}: {e}")));
        }
        let members = described.get(group).map_or(0, |d| d.members.len());
        if members > 0 {
            return Err(BackendError::Refused(format!(
                "{} group {group:?} has {members} member(s): Kafka changes a group's offsets or deletes it only while it is empty; stop its consumers first",
                if share { "share" } else { "consumer" }
            )));
        }
        Ok(EmptyGroup { coordinator, share })
    }

    async fn plan_reset(&self, row: &QueueId, to: ResetTo) -> Result<OffsetResetPlan> {
        let (group, topic) = group_row(row)?;
        let meta = self
            .cluster
            .metadata(Some(std::slice::from_ref(&topic)))
            .await?;
        let tm = meta
            .topics
            .get(&topic)
            .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {topic:?}")))?;
        let g = self.empty_group(&meta, &group).await?;
        // Where the group stands per partition, and the broker's lag for a share partition.
        let (committed, share_lag): (BTreeMap<Tp, i64>, BTreeMap<Tp, Option<i64>>) = if g.share {
            let parts = self.share_state(g.coordinator, &group).await?;
            (
                parts.iter().map(|(tp, p)| (tp.clone(), p.start)).collect(),
                parts.iter().map(|(tp, p)| (tp.clone(), p.lag)).collect(),
            )
        } else {
            let coords: HashMap<String, i32> = [(group.clone(), g.coordinator)].into();
            let (committed, errs) =
                admin::committed(&self.cluster, std::slice::from_ref(&group), &coords).await;
            if let Some(e) = errs.get(&group) {
                return Err(BackendError::Unreachable(format!("group {group:?}: {e}")));
            }
            (
                committed.get(&group).cloned().unwrap_or_default(),
                BTreeMap::new(),
            )
        };
        let tps: Vec<Tp> = tm.leaders.keys().map(|p| (topic.clone(), *p)).collect();
        let bound = |at: i64| admin::offsets(&self.cluster, &meta, &tps, at);
        let (start, e1) = bound(EARLIEST).await;
        let (end, e2) = bound(LATEST).await;
        let at_time = match to {
            ResetTo::Time(ms) => Some(bound(ms).await),
            _ => None,
        };
        let mut partitions = Vec::new();
        for tp in &tps {
            let missing = |e: &HashMap<Tp, String>| e.get(tp).cloned();
            let (Some(s), Some(e)) = (start.get(tp).copied(), end.get(tp).copied()) else {
                let why = missing(&e1)
                    .or_else(|| missing(&e2))
                    .unwrap_or_else(|| "no offsets".into());
                return Err(BackendError::Unreachable(format!(
                    "{}[{}]: {why}",
                    tp.0, tp.1
                )));
            };
            let old = committed.get(tp).copied();
            let wanted = match to {
                ResetTo::Earliest => s,
                ResetTo::Latest => e,
                ResetTo::Offset(o) => o,
                ResetTo::Shift(n) => match old {
                    Some(c) => c.saturating_add(n),
                    // Nothing to shift from: left as it is.
                    None => continue,
                },
                ResetTo::Time(_) => {
                    let (found, errs) = at_time.as_ref().map_or_else(
                        || (None, None),
                        |(f, e)| (f.get(tp).copied(), e.get(tp).cloned()),
                    );
                    if let Some(why) = errs {
                        return Err(BackendError::Unreachable(format!(
                            "{}[{}]: {why}",
                            tp.0, tp.1
                        )));
                    }
                    // −1: no record that recent, so the end.
                    found.filter(|o| *o >= 0).unwrap_or(e)
                }
            };
            let new = wanted.clamp(s, e.max(s));
            partitions.push(PartitionReset {
                partition: tp.1,
                old,
                new,
                // A share partition's own lag, as the broker counts it, where it gives one.
                lag_before: match share_lag.get(tp) {
                    Some(Some(l)) => u64::try_from(*l).ok(),
                    _ => old.map(|c| u64::try_from(e - c).unwrap_or(0)),
                },
                lag_after: u64::try_from(e - new).unwrap_or(0),
                clamped: new != wanted,
            });
        }
        Ok(OffsetResetPlan {
            group,
            topic,
            to,
            partitions,
        })
    }

    async fn commit_plan(&self, plan: &OffsetResetPlan) -> Result<OffsetResetReport> {
        let meta = self
            .cluster
            .metadata(Some(std::slice::from_ref(&plan.topic)))
            .await?;
        let g = self.empty_group(&meta, &plan.group).await?;
        if g.share {
            return self.alter_share_offsets(g.coordinator, plan).await;
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(&plan.group)))
            // An admin commit: no generation, no member. Kafka takes it only for an empty group.
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb(&plan.topic)))
                .with_partitions(
                    plan.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p.partition)
                                .with_committed_offset(p.new)
                                .with_committed_leader_epoch(-1)
                        })
                        .collect(),
                )]);
        let resp = self
            .cluster
            .to(g.coordinator, "OffsetCommit", &req, OFFSET_COMMIT_V)
            .await?;
        let mut failed: BTreeMap<i32, i16> = BTreeMap::new();
        let mut done = 0u64;
        for t in resp.topics {
            for p in t.partitions {
                if p.error_code == 0 {
                    done += 1;
                } else {
                    failed.insert(p.partition_index, p.error_code);
                }
            }
        }
        if let Some((p, code)) = failed.iter().next() {
            return Err(coordinator_refusal(
                format!(
                    "group {:?}: the coordinator refused the new offset of {}[{p}] ({} of {} partition(s) moved)",
                    plan.group,
                    plan.topic,
                    done,
                    plan.partitions.len()
                ),
                *code,
                "Read on the group",
            ));
        }
        Ok(OffsetResetReport {
            group: plan.group.clone(),
            topic: plan.topic.clone(),
            partitions: done,
            lag_after: plan.lag_after(),
        })
    }

    async fn plan_delete(&self, group: &str) -> Result<GroupDeletePlan> {
        let meta = self.cluster.metadata(None).await?;
        let g = self.empty_group(&meta, group).await?;
        // (topic, lag) per partition: a share group's lag is the broker's own, a consumer
        // group's is the end offset less its commit.
        let lags: Vec<(String, u64)> = if g.share {
            self.share_state(g.coordinator, group)
                .await?
                .into_iter()
                .map(|(tp, p)| (tp.0, p.lag.and_then(|l| u64::try_from(l).ok()).unwrap_or(0)))
                .collect()
        } else {
            let coords: HashMap<String, i32> = [(group.to_string(), g.coordinator)].into();
            let (committed, errs) =
                admin::committed(&self.cluster, &[group.to_string()], &coords).await;
            if let Some(e) = errs.get(group) {
                return Err(BackendError::Unreachable(format!("group {group:?}: {e}")));
            }
            let committed = committed.get(group).cloned().unwrap_or_default();
            let tps: Vec<Tp> = committed.keys().cloned().collect();
            let (end, _) = admin::offsets(&self.cluster, &meta, &tps, LATEST).await;
            committed
                .into_iter()
                .map(|(tp, c)| {
                    let lag = end
                        .get(&tp)
                        .map_or(0, |e| u64::try_from(e - c).unwrap_or(0));
                    (tp.0, lag)
                })
                .collect()
        };
        let mut topics: BTreeMap<String, u64> = BTreeMap::new();
        for (topic, lag) in lags {
            *topics.entry(topic).or_default() += lag;
        }
        Ok(GroupDeletePlan {
            group: group.to_string(),
            topics: topics.into_iter().collect(),
        })
    }

    async fn delete(&self, group: &str) -> Result<()> {
        let meta = self.cluster.metadata(Some(&[])).await?;
        let g = self.empty_group(&meta, group).await?;
        let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(group))]);
        let resp = self
            .cluster
            .to(g.coordinator, "DeleteGroups", &req, DELETE_GROUPS_V)
            .await?;
        for r in resp.results {
            if r.error_code != 0 {
                return Err(coordinator_refusal(
                    format!("deleting group {group:?}"),
                    r.error_code,
                    "Delete on the group",
                ));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl GroupAdmin for KafkaBackend {
    async fn plan_offset_reset(&self, row: &QueueId, to: ResetTo) -> Result<OffsetResetPlan> {
        self.plan_reset(row, to).await
    }

    async fn reset_offsets(&self, plan: &OffsetResetPlan) -> Result<OffsetResetReport> {
        self.commit_plan(plan).await
    }

    async fn plan_group_delete(&self, group: &str) -> Result<GroupDeletePlan> {
        self.plan_delete(group).await
    }

    async fn delete_group(&self, group: &str) -> Result<()> {
        self.delete(group).await
    }

    async fn partitions(&self, row: &QueueId) -> Result<Vec<PartitionFigures>> {
        self.partition_figures(row).await
    }
}
