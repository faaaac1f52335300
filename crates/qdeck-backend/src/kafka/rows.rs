//! The rows qdeck shows for Kafka and their figures.
//! - A topic, `TOPIC`: records = end − start offsets summed over partitions; its retention.
//! - A consumer group reading a topic, `GROUP@TOPIC` (classic groups and KIP-848 ones): depth =
//!   lag = end offset − committed offset, summed over the partitions the group has committed
//!   on; consumers = the group's members; committed offsets below the log start offset are
//!   records lost to the group by retention, counted and said.
//! - A topic named `<topic>-dlt` / `<topic>.DLT` (Spring Kafka) is the DLQ of `<topic>` and of
//!   every group row on it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::admin::{self, GroupDescription, GroupListing, Tp};
use super::age;
use super::routing::ClusterMeta;
use super::share::{self, SharePart};
use super::{dlt, KafkaBackend, Target};
use crate::Result;
use qdeck_model::domain::*;

mod figures;

/// What one poll reads, each part batched (see admin).
pub struct Snapshot {
    pub meta: ClusterMeta,
    pub groups: Vec<GroupListing>,
    pub committed: HashMap<String, BTreeMap<Tp, i64>>,
    pub described: HashMap<String, GroupDescription>,
    pub group_errors: HashMap<String, String>,
    /// Share groups (KIP-932), their partitions as the broker reports them, and their configs.
    pub shares: Vec<GroupListing>,
    pub share_offsets: HashMap<String, BTreeMap<Tp, SharePart>>,
    pub share_configs: HashMap<String, BTreeMap<String, String>>,
}

/// Group types whose rows are `GROUP@TOPIC` consumer-group rows.
fn is_consumer_group(g: &GroupListing) -> bool {
    matches!(g.group_type.as_str(), "classic" | "consumer" | "")
        && (g.protocol_type.is_empty() || g.protocol_type == "consumer")
}

impl KafkaBackend {
    fn topic_shown(&self, meta: &ClusterMeta, t: &str) -> bool {
        meta.topics.get(t).is_some_and(|m| !m.internal)
            && !t.starts_with("__")
            && self.topics.as_ref().is_none_or(|r| r.is_match(t))
    }

    /// Metadata, groups and committed offsets (`wanted`: only these groups; `describe`: also
    /// their members).
    pub(super) async fn snapshot(
        &self,
        wanted: Option<&BTreeSet<String>>,
        describe: bool,
    ) -> Result<Snapshot> {
        self.snapshot_with(wanted, describe, false).await
    }

    /// As `snapshot`; `every_share_config`: the settings of every share group shown, not only
    /// the wanted ones (whether a topic is some share group's dead-letter topic is in them),
    /// read from the same group listing and in the same DescribeConfigs request.
    pub(super) async fn snapshot_with(
        &self,
        wanted: Option<&BTreeSet<String>>,
        describe: bool,
        every_share_config: bool,
    ) -> Result<Snapshot> {
        let meta = self.cluster.metadata(None).await?;
        let (all_shares, groups): (Vec<GroupListing>, Vec<GroupListing>) =
            admin::list_groups(&self.cluster, &meta)
                .await?
                .into_iter()
                .filter(|g| is_consumer_group(g) || g.group_type == "share")
                .filter(|g| self.groups.as_ref().is_none_or(|r| r.is_match(&g.id)))
                .partition(|g| g.group_type == "share");
        let is_wanted = |g: &GroupListing| wanted.is_none_or(|w| w.contains(&g.id));
        let groups: Vec<GroupListing> = groups.into_iter().filter(is_wanted).collect();
        let config_ids: Vec<String> = all_shares
            .iter()
            .filter(|g| every_share_config || is_wanted(g))
            .map(|g| g.id.clone())
            .collect();
        let shares: Vec<GroupListing> = all_shares.into_iter().filter(is_wanted).collect();
        let ids: Vec<String> = groups.iter().map(|g| g.id.clone()).collect();
        let share_ids: Vec<String> = shares.iter().map(|g| g.id.clone()).collect();
        let all: Vec<String> = ids.iter().chain(&share_ids).cloned().collect();
        let coords = if all.is_empty() {
            HashMap::new()
        } else {
            self.cluster.coordinators(&all).await?
        };
        let (committed, mut group_errors) = admin::committed(&self.cluster, &ids, &coords).await;
        let (share_offsets, share_errors) =
            share::offsets(&self.cluster, &share_ids, &coords).await;
        group_errors.extend(share_errors);
        // A group's own settings (resource type 32); a failed read leaves them unknown.
        let share_configs = admin::configs(
            &self.cluster,
            32,
            &config_ids,
            &[share::DELIVERY_LIMIT, share::LOCK_MS, share::DLQ_TOPIC],
        )
        .await
        .unwrap_or_default();
        let mut described = HashMap::new();
        if describe {
            let refs: Vec<&GroupListing> = groups.iter().collect();
            let (d, e) = admin::describe(&self.cluster, &refs, &coords).await;
            described = d;
            group_errors.extend(e);
            let (d, e) = share::describe(&self.cluster, &share_ids, &coords).await;
            described.extend(d);
            group_errors.extend(e);
        }
        Ok(Snapshot {
            meta,
            groups,
            committed,
            described,
            group_errors,
            shares,
            share_offsets,
            share_configs,
        })
    }

    /// A share group's dead-letter topic, when its config names one that exists; else the
    /// Spring DLT of the topic, as for other groups.
    fn share_dlq(snap: &Snapshot, group: &str, topic: &str) -> Option<String> {
        snap.share_configs
            .get(group)
            .and_then(|c| c.get(share::DLQ_TOPIC))
            .filter(|d| !d.is_empty() && snap.meta.topics.contains_key(*d))
            .cloned()
            .or_else(|| Self::dlt_of(&snap.meta, topic))
    }

    /// The Spring dead-letter topic of `topic`, if one exists.
    fn dlt_of(meta: &ClusterMeta, topic: &str) -> Option<String> {
        dlt::SPRING_SUFFIXES
            .iter()
            .map(|s| format!("{topic}{s}"))
            .find(|d| meta.topics.contains_key(d))
    }

    pub(super) async fn rows(&self, snap: &Snapshot) -> Result<Vec<QueueInfo>> {
        let topics: Vec<String> = snap
            .meta
            .topics
            .keys()
            .filter(|t| self.topic_shown(&snap.meta, t))
            .cloned()
            .collect();
        let configs = admin::configs(
            &self.cluster,
            2,
            &topics,
            &["retention.ms", "retention.bytes", "cleanup.policy"],
        )
        .await
        .unwrap_or_default();
        let mut rows: BTreeMap<String, QueueInfo> = BTreeMap::new();
        for t in &topics {
            rows.insert(t.clone(), topic_row(snap, t, configs.get(t)));
        }
        for q in group_rows(snap, &topics).chain(share_rows(snap, &topics)) {
            rows.insert(q.id.as_str().to_string(), q);
        }
        link_dlqs(&mut rows);
        Ok(rows.into_values().collect())
    }
}

/// A topic's row: partitions and its retention settings (its records are what it keeps).
fn topic_row(snap: &Snapshot, t: &str, cfg: Option<&BTreeMap<String, String>>) -> QueueInfo {
    let m = &snap.meta.topics[t];
    let mut settings = QueueSettings {
        retention_secs: cfg
            .and_then(|c| c.get("retention.ms"))
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v >= 0.0)
            .map(|ms| ms / 1000.0),
        ..Default::default()
    };
    settings
        .extra
        .insert("partitions".into(), m.leaders.len().to_string());
    if let Some(c) = cfg {
        for k in ["retention.bytes", "cleanup.policy"] {
            if let Some(v) = c.get(k) {
                settings.extra.insert(k.into(), v.clone());
            }
        }
        if c.get("retention.ms").is_some_and(|v| v == "-1") {
            settings
                .extra
                .insert("retention.ms".into(), "-1 (kept forever)".into());
        }
    }
    QueueInfo {
        id: QueueId(t.to_string()),
        kind: QueueKind::Topic,
        dlq: KafkaBackend::dlt_of(&snap.meta, t).map(QueueId),
        settings,
        ..Default::default()
    }
}

/// The shown topics a group has offsets on (committed ones, or share partitions).
fn topics_read<'a, V>(
    parts: Option<&'a BTreeMap<Tp, V>>,
    topics: &'a [String],
) -> impl Iterator<Item = &'a String> + 'a {
    let read: BTreeSet<&String> = parts
        .map(|p| p.keys().map(|(t, _)| t).collect())
        .unwrap_or_default();
    read.into_iter().filter(move |t| topics.contains(t))
}

/// A `GROUP@TOPIC` row with the group's type and state among its settings.
fn group_row(
    g: &GroupListing,
    topic: &str,
    mut settings: QueueSettings,
    dlq: Option<String>,
) -> QueueInfo {
    settings
        .extra
        .insert("group type".into(), g.group_type.clone());
    settings.extra.insert("group state".into(), g.state.clone());
    QueueInfo {
        id: Target::Group {
            group: g.id.clone(),
            topic: topic.to_string(),
        }
        .id(),
        kind: QueueKind::Subscription,
        dlq: dlq.map(QueueId),
        settings,
        ..Default::default()
    }
}

/// A consumer group's row for each shown topic it has committed offsets on.
fn group_rows<'a>(
    snap: &'a Snapshot,
    topics: &'a [String],
) -> impl Iterator<Item = QueueInfo> + 'a {
    snap.groups.iter().flat_map(move |g| {
        topics_read(snap.committed.get(&g.id), topics).map(move |t| {
            let dlq = KafkaBackend::dlt_of(&snap.meta, t);
            group_row(g, t, QueueSettings::default(), dlq)
        })
    })
}

/// A share group's row for each shown topic it has offsets on, with its delivery limit and
/// lock duration from the group's config.
fn share_rows<'a>(
    snap: &'a Snapshot,
    topics: &'a [String],
) -> impl Iterator<Item = QueueInfo> + 'a {
    snap.shares.iter().flat_map(move |g| {
        let cfg = snap.share_configs.get(&g.id);
        let num = |k: &str| {
            cfg.and_then(|c| c.get(k))
                .and_then(|v| v.parse::<f64>().ok())
        };
        let settings = QueueSettings {
            max_receives: num(share::DELIVERY_LIMIT)
                .filter(|v| *v >= 1.0 && *v <= f64::from(u32::MAX))
                .map(|v| v as u32),
            lease_secs: num(share::LOCK_MS)
                .filter(|v| *v >= 0.0)
                .map(|ms| ms / 1000.0),
            ..Default::default()
        };
        topics_read(snap.share_offsets.get(&g.id), topics).map(move |t| {
            let dlq = KafkaBackend::share_dlq(snap, &g.id, t);
            group_row(g, t, settings.clone(), dlq)
        })
    })
}

/// DLQ links both ways: each DLQ row lists the rows that dead-letter into it.
fn link_dlqs(rows: &mut BTreeMap<String, QueueInfo>) {
    let links: Vec<(String, String)> = rows
        .values()
        .filter_map(|q| {
            q.dlq
                .as_ref()
                .map(|d| (q.id.as_str().to_string(), d.as_str().to_string()))
        })
        .collect();
    for (src, d) in links {
        if let Some(dq) = rows.get_mut(&d) {
            dq.is_dlq = true;
            dq.dlq_sources.push(QueueId(src));
        }
    }
}

/// A group's members reading `topic`: those assigned partitions of it when the broker tells
/// assignments, else every member.
fn members_on(d: &GroupDescription, topic: &str) -> u32 {
    let on_topic = d
        .members
        .iter()
        .filter(|m| m.assigned.iter().any(|(t, _)| t == topic))
        .count();
    let any_assigned = d.members.iter().any(|m| !m.assigned.is_empty());
    u32::try_from(if any_assigned {
        on_topic
    } else {
        d.members.len()
    })
    .unwrap_or(u32::MAX)
}

/// A share group row's depth (the broker's lag summed over the topic's share partitions;
/// unknown when any partition's lag is) and its note, or why there is no such row.
fn share_figures(
    snap: &Snapshot,
    group: &str,
    topic: &str,
) -> std::result::Result<(Option<u64>, String), String> {
    let parts: Vec<&SharePart> = snap
        .share_offsets
        .get(group)
        .into_iter()
        .flatten()
        .filter(|((t, _), _)| t == topic)
        .map(|(_, p)| p)
        .collect();
    if parts.is_empty() {
        return Err(format!(
            "share group {group:?} has no share partition on topic {topic:?}"
        ));
    }
    let lag: Option<u64> = parts
        .iter()
        .map(|p| p.lag.map(|l| u64::try_from(l).unwrap_or(0)))
        .sum();
    let how = if lag.is_some() {
        "depth is the share group's lag as the broker reports it (KIP-1226)"
    } else {
        "depth unknown: the broker reported no share-group lag (−1) for a partition"
    };
    // A share partition gets state only once the group reads from it; until then the broker
    // counts none of its records in the lag, and the row says so rather than add them itself.
    let all = snap.meta.topics.get(topic).map_or(0, |m| m.leaders.len());
    let unread = if all > parts.len() {
        format!(
            "; {} of {all} partitions have no share state yet (not read by the group): their records are not in the lag",
            all - parts.len()
        )
    } else {
        String::new()
    };
    Ok((lag, format!("{how}{unread}; {}", share::IN_FLIGHT_NOTE)))
}

/// What a consumer group row's age is the age of.
pub const FIRST_UNREAD: &str = "timestamp of the first unread record";
/// What a share group row's age is the age of: the share-partition start offset is the first
/// record not yet acknowledged or archived (the broker's persisted state, which may trail the
/// latest acknowledgements: an age read there is at most older than the truth, never younger).
pub const SHARE_START: &str =
    "timestamp of the record at the share-partition start offset (the oldest not yet acknowledged)";

/// How a group row's age was read, for its note.
/// What a row's age of oldest is read from, and what its partitions read are.
#[derive(Debug, Clone, Copy)]
pub struct AgeOf {
    pub what: &'static str,
    /// The partitions read, in the singular: "lagging partition", "partition holding records".
    pub partitions: &'static str,
}

pub const FIRST_UNREAD_AGE: AgeOf = AgeOf {
    what: FIRST_UNREAD,
    partitions: "lagging partition",
};
pub const SHARE_START_AGE: AgeOf = AgeOf {
    what: SHARE_START,
    partitions: "lagging partition",
};
pub const DLT_OLDEST_AGE: AgeOf = AgeOf {
    what: DLT_OLDEST,
    partitions: "partition holding records",
};

fn age_words(h: &age::Head, of: AgeOf) -> String {
    let AgeOf { what, partitions } = of;
    let s = |n: usize| if n == 1 { "" } else { "s" };
    if h.read == h.lagging {
        format!(
            "{what}, oldest over the {} {partitions}{}",
            h.lagging,
            s(h.lagging)
        )
    } else if h.read == 0 {
        format!(
            "not read this poll: {} {partitions}{}, at most {} read per poll",
            h.lagging,
            s(h.lagging),
            age::MAX_FETCHES
        )
    } else {
        format!(
            "estimated: {what} on {} of {} {partitions}s (at most {} read per poll, largest lags first); the others may hold older records",
            h.read,
            h.lagging,
            age::MAX_FETCHES
        )
    }
}

/// The start of the note on a group row whose committed offsets fell behind retention.
pub const RETENTION_BREACH: &str = "retention breach";

/// A Spring dead-letter topic of a listed topic, or a share group's configured DLQ topic.
fn is_dead_letter_topic(snap: &Snapshot, topic: &str) -> bool {
    dlt::spring_origin(topic).is_some_and(|o| snap.meta.topics.contains_key(o))
        || snap
            .share_configs
            .values()
            .any(|c| c.get(share::DLQ_TOPIC).is_some_and(|d| d == topic))
}

pub const DLT_AGE_NOTE: &str =
    "a dead-letter topic: depth is every record it holds, redriven ones too until retention removes them (a redrive plan counts only those past qdeck's progress); age is that of the oldest record it holds; ";

/// What the age of a dead-letter topic's row is read from.
pub const DLT_OLDEST: &str = "timestamp of the record at the partition's start offset";

pub const AGE_NOTE: &str =
    "a topic keeps what its groups read: its records are retention, not backlog; what each group has yet to read, and its age, are on its group rows (GROUP@TOPIC)";
