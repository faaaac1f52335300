//! The admin reads one poll makes, each batched: ListGroups (one per broker: each lists the
//! groups it coordinates), DescribeGroups / ConsumerGroupDescribe and OffsetFetch (many groups
//! per request, one request per coordinator), ListOffsets (every partition led by a broker in
//! one request to that broker), DescribeConfigs (every topic in one request).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DescribeConfigsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, ListOffsetsRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::routing::{Cluster, ClusterMeta};
use crate::{BackendError, Result};

pub const LIST_GROUPS_V: i16 = 5;
pub const DESCRIBE_GROUPS_V: i16 = 5;
pub const CONSUMER_GROUP_DESCRIBE_V: i16 = 0;
pub const OFFSET_FETCH_V: i16 = 8;
pub const LIST_OFFSETS_V: i16 = 7;
pub const DESCRIBE_CONFIGS_V: i16 = 4;

/// ListOffsets' special timestamps.
pub const EARLIEST: i64 = -2;
pub const LATEST: i64 = -1;

pub type Tp = (String, i32);

#[derive(Debug, Clone)]
pub struct GroupListing {
    pub id: String,
    /// `classic`, `consumer` (KIP-848), `share`, `streams`.
    pub group_type: String,
    pub state: String,
    pub protocol_type: String,
}

#[derive(Debug, Clone, Default)]
pub struct Member {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    /// Partitions assigned, where the broker says (classic groups: decoded from the consumer
    /// protocol's assignment; KIP-848 groups: the member's assignment).
    pub assigned: Vec<Tp>,
}

#[derive(Debug, Clone, Default)]
pub struct GroupDescription {
    pub state: String,
    pub members: Vec<Member>,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn refused(what: &str, e: ResponseError) -> BackendError {
    match e {
        ResponseError::GroupAuthorizationFailed
        | ResponseError::TopicAuthorizationFailed
        | ResponseError::ClusterAuthorizationFailed => BackendError::Forbidden {
            msg: format!("{what}: {e}"),
            right: None,
        },
        ResponseError::CoordinatorNotAvailable
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::NotCoordinator
        | ResponseError::NotLeaderOrFollower
        | ResponseError::LeaderNotAvailable => BackendError::Unreachable(format!("{what}: {e}")),
        _ => BackendError::Protocol(format!("{what}: {e}")),
    }
}

/// Every group of the cluster: one ListGroups to each broker.
pub async fn list_groups(c: &Cluster, meta: &ClusterMeta) -> Result<Vec<GroupListing>> {
    let mut out = Vec::new();
    let mut answered = 0;
    let mut last_err = None;
    for id in meta.brokers.keys() {
        let req = ListGroupsRequest::default();
        match c.to(*id, "ListGroups", &req, LIST_GROUPS_V).await {
            Ok(resp) => {
                answered += 1;
                if let Some(e) = resp.error_code.err() {
                    return Err(refused("ListGroups", e));
                }
                for g in resp.groups {
                    out.push(GroupListing {
                        id: g.group_id.0.to_string(),
                        group_type: g.group_type.to_string(),
                        state: g.group_state.to_string(),
                        protocol_type: g.protocol_type.to_string(),
                    });
                }
            }
            Err(e) => last_err = Some(e),
        }
    }
    if answered == 0 {
        if let Some(e) = last_err {
            return Err(e);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    Ok(out)
}

/// Groups batched by their coordinator; a group without one goes to `errors` with the reason.
pub fn by_coordinator<'a>(
    groups: impl IntoIterator<Item = &'a String>,
    coords: &HashMap<String, i32>,
    errors: &mut HashMap<String, String>,
) -> BTreeMap<i32, Vec<&'a String>> {
    let mut by: BTreeMap<i32, Vec<&String>> = BTreeMap::new();
    for g in groups {
        match coords.get(g) {
            Some(n) => by.entry(*n).or_default().push(g),
            None => {
                errors.insert(g.clone(), "no coordinator found for the group".to_string());
            }
        }
    }
    by
}

/// Every group of one coordinator's batch gets the error of the request that failed.
pub fn batch_failed(errors: &mut HashMap<String, String>, gs: &[&String], e: &BackendError) {
    for g in gs {
        errors.insert((*g).clone(), e.to_string());
    }
}

/// A member as the describe responses give it, with its assigned partitions.
pub fn member(id: &StrBytes, client: &StrBytes, host: &StrBytes, assigned: Vec<Tp>) -> Member {
    Member {
        member_id: id.to_string(),
        client_id: client.to_string(),
        host: host.to_string(),
        assigned,
    }
}

/// A KIP-848 / KIP-932 assignment (topic name, partitions) as (topic, partition) pairs.
pub fn assigned<'a>(topics: impl IntoIterator<Item = (&'a TopicName, &'a [i32])>) -> Vec<Tp> {
    topics
        .into_iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.0.to_string(), *p)))
        .collect()
}

/// Committed offsets of each group, per partition: one OffsetFetch per coordinator. A group
/// whose coordinator could not be found or did not answer is in the errors.
pub async fn committed(
    c: &Cluster,
    groups: &[String],
    coords: &HashMap<String, i32>,
) -> (HashMap<String, BTreeMap<Tp, i64>>, HashMap<String, String>) {
    let mut out: HashMap<String, BTreeMap<Tp, i64>> = HashMap::new();
    let mut errors = HashMap::new();
    for (node, gs) in by_coordinator(groups, coords, &mut errors) {
        let req = OffsetFetchRequest::default().with_groups(
            gs.iter()
                .map(|g| {
                    // No topics named: every partition the group committed on.
                    OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(sb(g)))
                        .with_topics(None)
                })
                .collect(),
        );
        match c.to(node, "OffsetFetch", &req, OFFSET_FETCH_V).await {
            Ok(resp) => {
                for g in resp.groups {
                    let id = g.group_id.0.to_string();
                    if let Some(e) = g.error_code.err() {
                        errors.insert(id, format!("OffsetFetch: {e}"));
                        continue;
                    }
                    let m = out.entry(id).or_default();
                    for t in g.topics {
                        for p in t.partitions {
                            if p.error_code.is_ok() && p.committed_offset >= 0 {
                                m.insert(
                                    (t.name.0.to_string(), p.partition_index),
                                    p.committed_offset,
                                );
                            }
                        }
                    }
                }
            }
            Err(e) => batch_failed(&mut errors, &gs, &e),
        }
    }
    (out, errors)
}

type Described = (HashMap<String, GroupDescription>, HashMap<String, String>);

/// Members of classic groups (DescribeGroups) and KIP-848 groups (ConsumerGroupDescribe),
/// one request of each kind per coordinator.
pub async fn describe(
    c: &Cluster,
    groups: &[&GroupListing],
    coords: &HashMap<String, i32>,
) -> Described {
    let mut found: Described = (HashMap::new(), HashMap::new());
    let classic = groups
        .iter()
        .filter(|g| g.group_type != "consumer" && g.group_type != "share")
        .map(|g| &g.id);
    for (node, gs) in by_coordinator(classic, coords, &mut found.1) {
        describe_classic(c, node, &gs, &mut found).await;
    }
    let modern = groups
        .iter()
        .filter(|g| g.group_type == "consumer")
        .map(|g| &g.id);
    for (node, gs) in by_coordinator(modern, coords, &mut found.1) {
        describe_modern(c, node, &gs, &mut found).await;
    }
    found
}

/// DescribeGroups on one coordinator; members' assignments decoded for consumer groups.
async fn describe_classic(c: &Cluster, node: i32, gs: &[&String], found: &mut Described) {
    let (out, errors) = found;
    let req =
        DescribeGroupsRequest::default().with_groups(gs.iter().map(|g| GroupId(sb(g))).collect());
    let resp = match c.to(node, "DescribeGroups", &req, DESCRIBE_GROUPS_V).await {
        Ok(resp) => resp,
        Err(e) => return batch_failed(errors, gs, &e),
    };
    for g in resp.groups {
        let id = g.group_id.0.to_string();
        if let Some(e) = g.error_code.err() {
            errors.insert(id, format!("DescribeGroups: {e}"));
            continue;
        }
        let consumer = g.protocol_type.as_str() == "consumer";
        let members = g
            .members
            .iter()
            .map(|m| {
                let assigned = if consumer {
                    decode_assignment(&m.member_assignment)
                } else {
                    Vec::new()
                };
                member(&m.member_id, &m.client_id, &m.client_host, assigned)
            })
            .collect();
        out.insert(
            id,
            GroupDescription {
                state: g.group_state.to_string(),
                members,
            },
        );
    }
}

/// ConsumerGroupDescribe (KIP-848) on one coordinator: members with their assignments.
async fn describe_modern(c: &Cluster, node: i32, gs: &[&String], found: &mut Described) {
    let (out, errors) = found;
    let req = ConsumerGroupDescribeRequest::default()
        .with_group_ids(gs.iter().map(|g| GroupId(sb(g))).collect());
    let resp = match c
        .to(
            node,
            "ConsumerGroupDescribe",
            &req,
            CONSUMER_GROUP_DESCRIBE_V,
        )
        .await
    {
        Ok(resp) => resp,
        Err(e) => return batch_failed(errors, gs, &e),
    };
    for g in resp.groups {
        let id = g.group_id.0.to_string();
        if let Some(e) = g.error_code.err() {
            errors.insert(id, format!("ConsumerGroupDescribe: {e}"));
            continue;
        }
        let members = g
            .members
            .iter()
            .map(|m| {
                let tps = m.assignment.topic_partitions.iter();
                let assigned = assigned(tps.map(|t| (&t.topic_name, t.partitions.as_slice())));
                member(&m.member_id, &m.client_id, &m.client_host, assigned)
            })
            .collect();
        out.insert(
            id,
            GroupDescription {
                state: g.group_state.to_string(),
                members,
            },
        );
    }
}

/// The consumer protocol's assignment: version (i16), [topic (string), [partition (i32)]],
/// user data. Anything that does not parse is an empty assignment.
pub fn decode_assignment(b: &[u8]) -> Vec<Tp> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Some(h)
    }
    fn i16_(b: &mut &[u8]) -> Option<i16> {
        take(b, 2).map(|x| i16::from_be_bytes([x[0], x[1]]))
    }
    fn i32_(b: &mut &[u8]) -> Option<i32> {
        take(b, 4).map(|x| i32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    }
    let mut out = Vec::new();
    let mut cur = b;
    let parse = |cur: &mut &[u8], out: &mut Vec<Tp>| -> Option<()> {
        i16_(cur)?;
        let topics = i32_(cur)?;
        for _ in 0..topics.max(0) {
            let len = usize::try_from(i16_(cur)?).ok()?;
            let name = String::from_utf8_lossy(take(cur, len)?).to_string();
            let n = i32_(cur)?;
            for _ in 0..n.max(0) {
                out.push((name.clone(), i32_(cur)?));
            }
        }
        Some(())
    };
    if parse(&mut cur, &mut out).is_none() {
        out.clear();
    }
    out
}

/// Offsets at `timestamp` (EARLIEST, LATEST) of each partition: one ListOffsets per leader.
/// Partitions whose leader did not answer are in the errors, with the reason.
pub async fn offsets(
    c: &Cluster,
    meta: &ClusterMeta,
    tps: &[Tp],
    timestamp: i64,
) -> (HashMap<Tp, i64>, HashMap<Tp, String>) {
    let mut by: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    let mut out = HashMap::new();
    let mut errors = HashMap::new();
    for (t, p) in tps {
        match meta.topics.get(t).and_then(|m| m.leaders.get(p)) {
            Some(l) if *l >= 0 => by
                .entry(*l)
                .or_default()
                .entry(t.clone())
                .or_default()
                .push(*p),
            _ => {
                errors.insert((t.clone(), *p), "no leader for the partition".to_string());
            }
        }
    }
    for (leader, topics) in by {
        let req = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(sb(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(*p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        match c.to(leader, "ListOffsets", &req, LIST_OFFSETS_V).await {
            Ok(resp) => {
                for t in resp.topics {
                    for p in t.partitions {
                        let tp = (t.name.0.to_string(), p.partition_index);
                        match p.error_code.err() {
                            None => {
                                out.insert(tp, p.offset);
                            }
                            Some(e) => {
                                errors.insert(tp, format!("ListOffsets: {e}"));
                            }
                        }
                    }
                }
            }
            Err(e) => {
                let who = c.who_answered().await;
                for (t, ps) in topics {
                    for p in ps {
                        errors.insert((t.clone(), p), format!("broker {leader}: {e} ({who})"));
                    }
                }
            }
        }
    }
    (out, errors)
}

/// Chosen configs of many resources in one DescribeConfigs (resource type 2: topic, 32: group).
pub async fn configs(
    c: &Cluster,
    resource_type: i8,
    names: &[String],
    keys: &[&str],
) -> Result<HashMap<String, BTreeMap<String, String>>> {
    let mut out = HashMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    let req = DescribeConfigsRequest::default().with_resources(
        names
            .iter()
            .map(|n| {
                DescribeConfigsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(sb(n))
                    .with_configuration_keys(Some(keys.iter().map(|k| sb(k)).collect()))
            })
            .collect(),
    );
    let resp = c.any("DescribeConfigs", &req, DESCRIBE_CONFIGS_V).await?;
    for r in resp.results {
        if r.error_code.is_err() {
            continue;
        }
        let m: BTreeMap<String, String> = r
            .configs
            .into_iter()
            .filter_map(|e| e.value.map(|v| (e.name.to_string(), v.to_string())))
            .collect();
        out.insert(r.resource_name.to_string(), m);
    }
    Ok(out)
}
