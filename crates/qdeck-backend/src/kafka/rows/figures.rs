//! The figures of one poll: every row's offsets read in two batched ListOffsets (earliest and
//! latest), then one row at a time, then the age of the oldest unread record of the rows that
//! lag (bounded fetches, see `age`).

use std::collections::{BTreeSet, HashMap};

use super::super::admin::{self, Tp, EARLIEST, LATEST};
use super::super::age::{self, Lagging};
use super::super::routing::ClusterMeta;
use super::super::{KafkaBackend, Target};
use super::{
    age_words, is_dead_letter_topic, members_on, share_figures, AgeOf, Snapshot, AGE_NOTE,
    DLT_AGE_NOTE, DLT_OLDEST_AGE, FIRST_UNREAD_AGE, RETENTION_BREACH, SHARE_START_AGE,
};
use crate::Result;
use qdeck_model::domain::*;

/// The start and end offsets of every partition read, and the partitions that failed.
struct Offsets {
    start: HashMap<Tp, i64>,
    end: HashMap<Tp, i64>,
    errors: HashMap<Tp, String>,
}

impl Offsets {
    async fn read(b: &KafkaBackend, meta: &ClusterMeta, tps: &[Tp]) -> Offsets {
        let (start, e1) = admin::offsets(&b.cluster, meta, tps, EARLIEST).await;
        let (end, mut e2) = admin::offsets(&b.cluster, meta, tps, LATEST).await;
        // The earliest read's error first, as the two are said alike.
        e2.extend(e1);
        Offsets {
            start,
            end,
            errors: e2,
        }
    }

    /// Records in `topic` (end − start over its partitions), or the first failure.
    /// The partitions of `topic` holding records: from each one's start offset.
    fn held(&self, meta: &ClusterMeta, topic: &str) -> Vec<Lagging> {
        let Some(m) = meta.topics.get(topic) else {
            return Vec::new();
        };
        m.leaders
            .keys()
            .filter_map(|p| {
                let tp = (topic.to_string(), *p);
                let (s, e) = (*self.start.get(&tp)?, *self.end.get(&tp)?);
                (e > s).then(|| Lagging {
                    topic: topic.to_string(),
                    partition: *p,
                    from: s,
                    lag: u64::try_from(e - s).unwrap_or(0),
                })
            })
            .collect()
    }

    fn records_of(&self, meta: &ClusterMeta, topic: &str) -> std::result::Result<u64, String> {
        let m = meta
            .topics
            .get(topic)
            .ok_or_else(|| format!("no Kafka topic {topic:?}"))?;
        let mut n = 0u64;
        for p in m.leaders.keys() {
            let tp = (topic.to_string(), *p);
            if let Some(e) = self.errors.get(&tp) {
                return Err(format!("{topic}[{p}]: {e}"));
            }
            let s = self.start.get(&tp).copied().unwrap_or(0);
            let e = self.end.get(&tp).copied().unwrap_or(0);
            n += u64::try_from(e - s).unwrap_or(0);
        }
        Ok(n)
    }

    /// Records ever written to `topic`: its end offsets summed.
    fn end_sum(&self, topic: &str) -> u64 {
        self.end
            .iter()
            .filter(|((t, _), _)| t == topic)
            .map(|(_, o)| u64::try_from(*o).unwrap_or(0))
            .sum()
    }
}

/// What one row's figures are read from.
struct Poll<'a> {
    snap: &'a Snapshot,
    offsets: Offsets,
    at_ms: i64,
}

fn topic_of(t: &Target) -> &str {
    match t {
        Target::Topic(t) | Target::Group { topic: t, .. } => t,
    }
}

fn other(e: impl Into<String>) -> QueueError {
    QueueError::new(QueueErrorKind::Other, e.into())
}

impl KafkaBackend {
    pub(in crate::kafka) async fn figures(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let targets: Vec<(QueueId, Target)> = queues
            .iter()
            .map(|q| (q.clone(), Target::parse(q)))
            .collect();
        let snap = self.snapshot_for(&targets).await?;
        let tps = Self::partitions_needed(&snap, &targets);
        let poll = Poll {
            offsets: Offsets::read(self, &snap.meta, &tps).await,
            snap: &snap,
            at_ms: chrono::Utc::now().timestamp_millis(),
        };
        let mut batch = StatsBatch::default();
        // Group rows with lag: their index in `batch.stats`, their lagging partitions, and
        // what the record read there is.
        let mut lagging: Vec<(usize, Vec<Lagging>, AgeOf)> = Vec::new();
        for (id, t) in targets {
            let dlq_depth = Self::dlt_of(&snap.meta, topic_of(&t))
                .and_then(|d| poll.offsets.records_of(&snap.meta, &d).ok());
            let row = match t {
                Target::Topic(topic) => {
                    poll.topic_row(id.clone(), &topic, dlq_depth)
                        .map(|(st, held)| {
                            if !held.is_empty() {
                                lagging.push((batch.stats.len(), held, DLT_OLDEST_AGE));
                            }
                            st
                        })
                }
                Target::Group { group, topic } => {
                    let share = snap.shares.iter().any(|g| g.id == group);
                    let row = if share {
                        poll.share_row(id.clone(), &group, &topic)
                    } else {
                        poll.group_row(id.clone(), &group, &topic, dlq_depth)
                    };
                    row.map(|(st, behind)| {
                        if !behind.is_empty() {
                            let what = if share {
                                SHARE_START_AGE
                            } else {
                                FIRST_UNREAD_AGE
                            };
                            lagging.push((batch.stats.len(), behind, what));
                        }
                        st
                    })
                }
            };
            match row {
                Ok(st) => batch.stats.push(st),
                Err(e) => batch.errors.push((id, e)),
            }
        }
        self.fill_ages(&snap.meta, &mut batch, &lagging).await;
        Ok(batch)
    }

    /// The groups asked about, described; only the cluster's metadata when none is. With a
    /// topic among the rows, every share group's settings too: whether a topic is a dead-letter
    /// topic is in the groups' config, and a topic row's depth must not depend on which rows
    /// are polled beside it (the console polls the rows on screen).
    async fn snapshot_for(&self, targets: &[(QueueId, Target)]) -> Result<Snapshot> {
        let wanted: BTreeSet<String> = targets
            .iter()
            .filter_map(|(_, t)| match t {
                Target::Group { group, .. } => Some(group.clone()),
                Target::Topic(_) => None,
            })
            .collect();
        let topics = targets.iter().any(|(_, t)| matches!(t, Target::Topic(_)));
        if !wanted.is_empty() {
            return self.snapshot_with(Some(&wanted), true, topics).await;
        }
        // Topics only: one group listing and one DescribeConfigs for the share groups'
        // settings. A principal that may not list groups still gets its topic rows (a topic
        // then reads as retention unless a Spring DLT, as before the groups were known).
        if topics {
            if let Ok(snap) = self.snapshot_with(Some(&wanted), false, true).await {
                return Ok(snap);
            }
        }
        Ok(Snapshot {
            meta: self.cluster.metadata(None).await?,
            groups: Vec::new(),
            committed: HashMap::new(),
            described: HashMap::new(),
            group_errors: HashMap::new(),
            shares: Vec::new(),
            share_offsets: HashMap::new(),
            share_configs: HashMap::new(),
        })
    }

    /// Every partition whose offsets are needed: the topics', the DLTs', the groups' topics.
    fn partitions_needed(snap: &Snapshot, targets: &[(QueueId, Target)]) -> Vec<Tp> {
        let meta = &snap.meta;
        let mut topics: BTreeSet<String> = BTreeSet::new();
        for (_, t) in targets {
            let topic = topic_of(t);
            topics.insert(topic.to_string());
            if let Some(d) = Self::dlt_of(meta, topic) {
                topics.insert(d);
            }
            if let Target::Group { group, topic } = t {
                if let Some(d) = Self::share_dlq(snap, group, topic) {
                    topics.insert(d);
                }
            }
        }
        topics
            .iter()
            .filter_map(|t| meta.topics.get(t))
            .flat_map(|m| m.leaders.keys().map(|p| (m.name.clone(), *p)))
            .collect()
    }

    /// The age of the oldest unread record of each lagging row, and how it was read.
    async fn fill_ages(
        &self,
        meta: &ClusterMeta,
        batch: &mut StatsBatch,
        lagging: &[(usize, Vec<Lagging>, AgeOf)],
    ) {
        let lists: Vec<Vec<Lagging>> = lagging.iter().map(|(_, l, _)| l.clone()).collect();
        let heads = age::heads(&self.cluster, meta, &lists).await;
        for ((i, _, what), h) in lagging.iter().zip(heads) {
            let st = &mut batch.stats[*i];
            st.oldest_age_secs = h.oldest_ms.map(|ts| (st.at_ms - ts).max(0) as f64 / 1000.0);
            let how = age_words(&h, *what);
            st.age_note = Some(match st.age_note.take().filter(|n| !n.is_empty()) {
                Some(n) => format!("{n}{how}"),
                None => how,
            });
        }
    }
}

impl Poll<'_> {
    /// A topic's row, and for a dead-letter topic its partitions holding records (whose
    /// oldest record's age is read after, at each partition's start offset).
    fn topic_row(
        &self,
        id: QueueId,
        topic: &str,
        dlq_depth: Option<u64>,
    ) -> std::result::Result<(QueueStats, Vec<Lagging>), QueueError> {
        let n = self
            .offsets
            .records_of(&self.snap.meta, topic)
            .map_err(other)?;
        // A topic keeps what its groups read: its records are retention, and its groups' lag
        // the backlog. A dead-letter topic's records are its dead letters.
        let dead = is_dead_letter_topic(self.snap, topic);
        let held = if dead {
            self.offsets.held(&self.snap.meta, topic)
        } else {
            Vec::new()
        };
        let st = QueueStats {
            id,
            at_ms: self.at_ms,
            depth: dead.then_some(n),
            retained: (!dead).then_some(n),
            dlq_depth,
            enqueued_total: Some(self.offsets.end_sum(topic)),
            age_note: Some(if dead { DLT_AGE_NOTE } else { AGE_NOTE }.into()),
            // Nothing held is an age of 0; otherwise it is read after.
            oldest_age_secs: (dead && held.is_empty()).then_some(0.0),
            ..Default::default()
        };
        Ok((st, held))
    }

    /// A share group's row on `topic`, and its share partitions holding records not yet
    /// acknowledged (whose age is read after, at their start offsets).
    fn share_row(
        &self,
        id: QueueId,
        group: &str,
        topic: &str,
    ) -> std::result::Result<(QueueStats, Vec<Lagging>), QueueError> {
        if let Some(e) = self.snap.group_errors.get(group) {
            return Err(other(e.clone()));
        }
        let dlq_depth = KafkaBackend::share_dlq(self.snap, group, topic)
            .and_then(|d| self.offsets.records_of(&self.snap.meta, &d).ok());
        let consumers = self.snap.described.get(group).map(|d| members_on(d, topic));
        let (lag, note) = share_figures(self.snap, group, topic).map_err(QueueError::not_found)?;
        let behind: Vec<Lagging> = self
            .snap
            .share_offsets
            .get(group)
            .into_iter()
            .flatten()
            .filter(|((t, _), p)| t == topic && p.lag.is_none_or(|l| l > 0))
            .map(|((t, partition), p)| Lagging {
                topic: t.clone(),
                partition: *partition,
                from: p.start,
                lag: p.lag.and_then(|l| u64::try_from(l).ok()).unwrap_or(0),
            })
            .collect();
        let st = QueueStats {
            id,
            at_ms: self.at_ms,
            depth: lag,
            dlq_depth,
            consumers,
            enqueued_total: Some(self.offsets.end_sum(topic)),
            // Nothing unacknowledged is an age of 0; otherwise it is read after.
            oldest_age_secs: (lag == Some(0)).then_some(0.0),
            age_note: Some(if behind.is_empty() {
                note
            } else {
                format!("{note}; ")
            }),
            ..Default::default()
        };
        Ok((st, behind))
    }

    /// A consumer group's row on `topic`, and its lagging partitions (whose age is read after).
    fn group_row(
        &self,
        id: QueueId,
        group: &str,
        topic: &str,
        dlq_depth: Option<u64>,
    ) -> std::result::Result<(QueueStats, Vec<Lagging>), QueueError> {
        if let Some(e) = self.snap.group_errors.get(group) {
            return Err(other(e.clone()));
        }
        let Some(offs) = self.snap.committed.get(group) else {
            return Err(QueueError::not_found(format!(
                "no consumer group {group:?}"
            )));
        };
        let mine: Vec<(&Tp, &i64)> = offs.iter().filter(|((t, _), _)| t == topic).collect();
        if mine.is_empty() {
            return Err(QueueError::not_found(format!(
                "group {group:?} has committed no offset on topic {topic:?}"
            )));
        }
        let lag = self.lag_of(&mine).map_err(other)?;
        let members = self.snap.described.get(group).map(|d| members_on(d, topic));
        let unread = !lag.behind.is_empty();
        let mut note = if unread {
            String::new()
        } else {
            "nothing unread".to_string()
        };
        if lag.lost > 0 {
            note = format!(
                "{}: {} records lost to this group by retention (committed offset below the log start on {} partition{}); {note}",
                RETENTION_BREACH,
                lag.lost,
                lag.lost_parts,
                if lag.lost_parts == 1 { "" } else { "s" }
            );
        }
        let st = QueueStats {
            id,
            at_ms: self.at_ms,
            depth: Some(lag.total),
            dlq_depth,
            consumers: members,
            enqueued_total: Some(self.offsets.end_sum(topic)),
            completed_total: Some(lag.committed_sum),
            // Nothing unread is an age of 0; a lagging row gets its age after.
            oldest_age_secs: (!unread).then_some(0.0),
            age_note: Some(note),
            lost: Some(lag.lost),
            ..Default::default()
        };
        Ok((st, lag.behind))
    }

    /// Lag, records lost to retention and the lagging partitions over a group's commits.
    fn lag_of(&self, mine: &[(&Tp, &i64)]) -> std::result::Result<GroupLag, String> {
        let mut out = GroupLag::default();
        for &(tp, c) in mine {
            let (Some(s), Some(e)) = (self.offsets.start.get(tp), self.offsets.end.get(tp)) else {
                let why = self
                    .offsets
                    .errors
                    .get(tp)
                    .cloned()
                    .unwrap_or_else(|| "no offsets".into());
                return Err(format!("{}[{}]: {why}", tp.0, tp.1));
            };
            out.total += u64::try_from(e - c).unwrap_or(0);
            if e > c {
                out.behind.push(Lagging {
                    topic: tp.0.clone(),
                    partition: tp.1,
                    // Below the log start the first unread record still there.
                    from: (*c).max(*s),
                    lag: u64::try_from(e - c).unwrap_or(0),
                });
            }
            out.committed_sum += u64::try_from(*c).unwrap_or(0);
            if c < s {
                out.lost += u64::try_from(s - c).unwrap_or(0);
                out.lost_parts += 1;
            }
        }
        Ok(out)
    }
}

#[derive(Default)]
struct GroupLag {
    total: u64,
    lost: u64,
    lost_parts: u32,
    committed_sum: u64,
    behind: Vec<Lagging>,
}
