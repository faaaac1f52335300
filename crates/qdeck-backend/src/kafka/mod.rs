//! Apache Kafka, spoken with the `kafka-protocol` codec over qdeck's own connections.
//!
//! Rows: a topic is `TOPIC`; a consumer group reading a topic is `GROUP@TOPIC` (a topic name
//! never holds `@`; a group id may, so the last `@` splits). A Spring dead-letter topic
//! (`TOPIC-dlt`, `TOPIC.DLT`) is the DLQ of `TOPIC` and of its group rows. Requests go where
//! Kafka wants them: group reads to the group's coordinator (FindCoordinator), offsets and
//! records to each partition's leader (Metadata). Browsing reads by offset with Fetch: no group
//! is joined and nothing is committed. Redrive copies a dead-letter topic's records back to
//! their topic, byte for byte, and keeps its progress as the committed offsets of a group of
//! qdeck's own, so a second run does not send them again.

mod admin;
mod age;
mod batch;
mod connection;
mod dlt;
mod fetch;
mod groups;
mod message;
mod partitions;
mod produce;
mod purge;
mod redrive;
mod routing;
mod rows;
mod sasl;
mod scram;
mod security;
mod share;
mod share_reset;
mod versions;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;

use super::{ApiCalls, Backend, BackendError, OpProgress, Result};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{KafkaSettings, Profile};
use qdeck_model::domain::*;

pub use produce::{murmur2, partition_for_key};
pub use redrive::progress_group;
pub use rows::RETENTION_BREACH;

const DEFAULT_TIMEOUT_SECS: f64 = 10.0;
/// Records per browse page when the request gives no size.
const DEFAULT_PAGE: usize = 50;

pub fn connect(
    profile: &Profile,
    settings: &KafkaSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(KafkaBackend::new(
        &profile.name,
        settings,
        secrets,
    )?))
}

/// What a row id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Topic(String),
    Group { group: String, topic: String },
}

impl Target {
    pub fn parse(id: &QueueId) -> Target {
        match id.as_str().rsplit_once('@') {
            Some((g, t)) if !g.is_empty() && !t.is_empty() => Target::Group {
                group: g.to_string(),
                topic: t.to_string(),
            },
            _ => Target::Topic(id.as_str().to_string()),
        }
    }

    pub fn id(&self) -> QueueId {
        match self {
            Target::Topic(t) => QueueId(t.clone()),
            Target::Group { group, topic } => QueueId(format!("{group}@{topic}")),
        }
    }
}

pub struct KafkaBackend {
    cluster: routing::Cluster,
    calls: Arc<ApiCalls>,
    topics: Option<Regex>,
    groups: Option<Regex>,
}

fn regex(key: &str, v: Option<&str>, profile: &str) -> Result<Option<Regex>> {
    v.filter(|s| !s.trim().is_empty())
        .map(|s| {
            Regex::new(s).map_err(|e| {
                BackendError::Invalid(format!(
                    "profile {profile:?}: {key} is not a regular expression: {}",
                    e.to_string().lines().last().unwrap_or("invalid")
                ))
            })
        })
        .transpose()
}

impl KafkaBackend {
    pub fn new(
        profile: &str,
        s: &KafkaSettings,
        secrets: &dyn SecretSource,
    ) -> Result<KafkaBackend> {
        let bootstrap: Vec<String> = s
            .bootstrap_servers
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(str::to_string)
            .collect();
        if bootstrap.is_empty() {
            return Err(BackendError::Invalid(format!(
                "profile {profile:?}: bootstrap_servers is empty: give host:port of one or more brokers"
            )));
        }
        if let Some(b) = bootstrap.iter().find(|b| {
            b.rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        }) {
            return Err(BackendError::Invalid(format!(
                "profile {profile:?}: bootstrap server {b:?} is not host:port"
            )));
        }
        let secs = s.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
            return Err(BackendError::Invalid(format!(
                "profile {profile:?}: timeout_secs must be between 0 and 3600"
            )));
        }
        let security = security::Security::from_settings(profile, s, secrets)?;
        let calls = Arc::new(ApiCalls::default());
        Ok(KafkaBackend {
            cluster: routing::Cluster::new(
                bootstrap,
                s.client_id
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .unwrap_or("qdeck"),
                Duration::from_secs_f64(secs),
                calls.clone(),
                security,
            ),
            calls,
            topics: regex("topics", s.topics.as_deref(), profile)?,
            groups: regex("groups", s.groups.as_deref(), profile)?,
        })
    }

    /// Where browsing `queue` starts on each partition: a topic at its log start, a group row
    /// at the group's committed offsets (what it has yet to read).
    async fn starts(
        &self,
        target: &Target,
        meta: &routing::ClusterMeta,
    ) -> Result<Vec<(i32, i64)>> {
        let topic = match target {
            Target::Topic(t) | Target::Group { topic: t, .. } => t,
        };
        let tm = meta
            .topics
            .get(topic)
            .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {topic:?}")))?;
        let tps: Vec<admin::Tp> = tm.leaders.keys().map(|p| (topic.clone(), *p)).collect();
        let (start, errs) = admin::offsets(&self.cluster, meta, &tps, admin::EARLIEST).await;
        if let Some(((t, p), e)) = errs.into_iter().next() {
            return Err(BackendError::Unreachable(format!("{t}[{p}]: {e}")));
        }
        let mut out: Vec<(i32, i64)> = tps
            .iter()
            .map(|tp| (tp.1, start.get(tp).copied().unwrap_or(0)))
            .collect();
        if let Target::Group { group, .. } = target {
            let coords = self
                .cluster
                .coordinators(std::slice::from_ref(group))
                .await?;
            let (committed, errs) =
                admin::committed(&self.cluster, std::slice::from_ref(group), &coords).await;
            if let Some(e) = errs.get(group) {
                return Err(BackendError::Unreachable(format!("group {group:?}: {e}")));
            }
            let c = committed.get(group).cloned().unwrap_or_default();
            for (p, off) in &mut out {
                if let Some(co) = c.get(&(topic.clone(), *p)) {
                    *off = (*off).max(*co);
                }
            }
        }
        Ok(out)
    }

    async fn browse_pages(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        let max = if req.max == 0 { DEFAULT_PAGE } else { req.max };
        let target = Target::parse(queue);
        let topic = match &target {
            Target::Topic(t) | Target::Group { topic: t, .. } => t.clone(),
        };
        let meta = self
            .cluster
            .metadata(Some(std::slice::from_ref(&topic)))
            .await?;
        let starts = self.starts(&target, &meta).await?;
        // The cursor is PARTITION:OFFSET, where the next page starts.
        let (mut part_idx, mut offset) = match req.cursor.as_deref() {
            Some(c) => {
                let (p, o) = message::parse_id(c).ok_or_else(|| {
                    BackendError::Invalid(format!("bad cursor {c:?}: expected PARTITION:OFFSET"))
                })?;
                let i = starts.iter().position(|(sp, _)| *sp == p).ok_or_else(|| {
                    BackendError::Invalid(format!("bad cursor {c:?}: no partition {p}"))
                })?;
                (i, o.max(starts[i].1))
            }
            None => (0, starts.first().map_or(0, |s| s.1)),
        };
        let mut messages = Vec::new();
        while part_idx < starts.len() && messages.len() < max {
            let p = starts[part_idx].0;
            let got = fetch::fetch(&self.cluster, &meta, &topic, p, offset, 1 << 20).await?;
            let done = got.records.is_empty() && got.next <= offset;
            for r in got.records {
                if messages.len() >= max {
                    offset = r.offset;
                    break;
                }
                offset = r.offset + 1;
                messages.push(message::to_message(&r));
            }
            if messages.len() < max {
                offset = offset.max(got.next);
            }
            if done || offset >= got.high_watermark {
                part_idx += 1;
                offset = starts.get(part_idx).map_or(0, |s| s.1);
            }
        }
        let next = (part_idx < starts.len()).then(|| message::id(starts[part_idx].0, offset));
        Ok(Page {
            messages,
            next,
            effect_note: None,
        })
    }
}

#[async_trait]
impl Backend for KafkaBackend {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Kafka
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::None,
            redrive: RedriveMode::ClientSide,
            // Group rows: the first unread record's timestamp (rows.rs, age.rs); topics: none.
            age: AgeSource::Exact,
            consumers: ConsumerListing::Listed,
            purge_cooldown_secs: None,
            purge_note: None,
            broker_rates: false,
            notes: vec![
                "browse reads by offset (Fetch) from each partition's leader: no group is joined, nothing is committed".into(),
                "GROUP@TOPIC: depth is the group's lag (end offset − committed offset, summed over the partitions it committed on); in flight is not known: a Kafka consumer group holds partitions, not leases on records".into(),
                "GROUP@TOPIC of a share group: depth is the share-group lag the broker reports (KIP-1226), acquired records included; in flight is not known; max receives, lease and DLQ come from the group's config".into(),
                "a committed offset below the log start offset means records were deleted by retention before the group read them (retention breach, counted as lost)".into(),
                format!("GROUP@TOPIC: age of oldest is the timestamp of the first unread record of each lagging partition (one small Fetch each, at most {} partitions per poll, largest lags first; a row not read in full is marked estimated)", age::MAX_FETCHES),
                "redrive copies each dead letter to its topic byte for byte (key, value, headers), then commits the DLT's offsets for a group of qdeck's own (qdeck-redrive.DLT) so that it is not sent twice; the dead-letter topic keeps its records".into(),
                "redrive with a rate writes one record at a time, each booked before it is written; a chosen subset (redrive-where, selected ids) is refused: single records cannot be marked as redriven".into(),
            ],
        }
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut caps = self.capabilities();
        if let Target::Topic(_) = Target::parse(&queue.id) {
            caps.purge_note = Some(purge::NOTE.into());
            caps.age = AgeSource::Unknown(rows::AGE_NOTE.into());
        }
        if !queue.is_dlq {
            caps.redrive = RedriveMode::Unsupported(format!(
                "redrive starts from a dead-letter topic{}",
                queue
                    .dlq
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let snap = self.snapshot(None, false).await?;
        self.rows(&snap).await
    }

    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        if let Some((t, p)) = purge::partition_of(queue) {
            return purge::describe_partition(self, &t, p).await;
        }
        let target = Target::parse(queue);
        let wanted: Option<BTreeSet<String>> = match &target {
            Target::Group { group, .. } => Some([group.clone()].into_iter().collect()),
            Target::Topic(_) => Some(BTreeSet::new()),
        };
        let snap = self.snapshot(wanted.as_ref(), false).await?;
        if let Some(q) = self.rows(&snap).await?.into_iter().find(|q| &q.id == queue) {
            return Ok(q);
        }
        // A listing leaves out the topics the user may not describe; asked by name, Kafka
        // says so (TOPIC_AUTHORIZATION_FAILED), which is not "unknown" and must not read so.
        let topic = match target {
            Target::Topic(t) | Target::Group { topic: t, .. } => t,
        };
        self.cluster.metadata(Some(&[topic])).await?;
        Err(BackendError::NotFound(format!(
            "unknown queue {:?}",
            queue.as_str()
        )))
    }

    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        if let Some((t, p)) = purge::partition_of(queue) {
            return purge::count_partition(self, &t, p).await;
        }
        if let Target::Topic(t) = Target::parse(queue) {
            if dlt::spring_origin(&t).is_some() {
                let left = redrive::left(self, &t).await?;
                return Ok(MessageCount {
                    ready: left,
                    in_flight: None,
                    exact: true,
                });
            }
        }
        crate::count_from_stats(self, queue, true).await
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        self.figures(queues).await
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        let Target::Group { group, topic } = Target::parse(queue) else {
            return Err(BackendError::Unsupported(format!(
                "{queue} is a topic: its readers are the groups listed as GROUP@{queue}"
            )));
        };
        let wanted: BTreeSet<String> = [group.clone()].into_iter().collect();
        let snap = self.snapshot(Some(&wanted), true).await?;
        if let Some(e) = snap.group_errors.get(&group) {
            return Err(BackendError::Unreachable(e.clone()));
        }
        let d = snap
            .described
            .get(&group)
            .ok_or_else(|| BackendError::NotFound(format!("no consumer group {group:?}")))?;
        Ok(d.members
            .iter()
            .filter(|m| m.assigned.is_empty() || m.assigned.iter().any(|(t, _)| *t == topic))
            .map(|m| {
                let parts: Vec<String> = m
                    .assigned
                    .iter()
                    .filter(|(t, _)| *t == topic)
                    .map(|(_, p)| p.to_string())
                    .collect();
                // The assigned partitions go in the tag, where the view has room for them;
                // the state column says how many. The member id (client id, a dash and a
                // UUID) is cut to its end, which is enough to tell two members apart.
                let short = m
                    .member_id
                    .char_indices()
                    .rev()
                    .nth(7)
                    .map_or(m.member_id.as_str(), |(i, _)| &m.member_id[i..]);
                let (tag, state) = if parts.is_empty() {
                    (
                        format!("{} ({})", m.client_id, m.member_id),
                        format!("group {}", d.state),
                    )
                } else {
                    (
                        format!("{} partitions {} (…{short})", m.client_id, parts.join(",")),
                        format!(
                            "{} partition{}",
                            parts.len(),
                            if parts.len() == 1 { "" } else { "s" }
                        ),
                    )
                };
                Consumer {
                    queue: queue.clone(),
                    tag,
                    peer: Some(m.host.trim_start_matches('/').to_string()),
                    prefetch: None,
                    ack_mode: AckMode::Manual,
                    state,
                    status: WorkerState::Active,
                    status_since_ms: None,
                    holding: None,
                    processed: None,
                    failed: None,
                    rate: None,
                    last_seen_ms: None,
                }
            })
            .collect())
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        self.browse_pages(queue, req).await
    }

    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        redrive::plan(self, req).await
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        redrive::redrive(self, req, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        purge::purge(self, queue, progress).await
    }

    fn group_admin(&self) -> Option<&dyn crate::GroupAdmin> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }
}
