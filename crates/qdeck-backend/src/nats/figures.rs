//! Listing and figures. Streams come from one `STREAM.LIST` page walk (state included) and a
//! stream's consumers from one `CONSUMER.LIST` page walk: refreshing 1,000 consumers costs
//! pages, not 1,000 calls. The one call per consumer is the age of its oldest unacked
//! message, read by sequence (ack floor + 1) and only for consumers on screen that hold any.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::stream::{self, StreamExt};
use serde_json::json;

use super::model::{rfc3339_ms, ConsumerInfo, ListPage, StreamInfo};
use super::{dlq, msg, NatsBackend, Target};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Ages read at once: each is one small request on the one connection.
const AGE_CONCURRENCY: usize = 16;

/// Every page of a JetStream list operation, walked by `offset`.
pub async fn walk<T: serde::de::DeserializeOwned>(
    b: &NatsBackend,
    op: &str,
    field: &str,
) -> Result<Vec<T>> {
    let mut out: Vec<T> = Vec::new();
    loop {
        let msg = b.conn.api_raw(op, &json!({"offset": out.len()})).await?;
        let page: ListPage<T> = serde_json::from_slice(&msg.payload)
            .map_err(|e| BackendError::Protocol(format!("{op} answer: {e}")))?;
        if let Some(err) = &page.error {
            return Err(super::conn::api_error(err));
        }
        let items = match field {
            "streams" => page.streams,
            _ => page.consumers,
        }
        .unwrap_or_default();
        let got = items.len();
        out.extend(items);
        if got == 0 || out.len() as u64 >= page.total {
            return Ok(out);
        }
    }
}

pub async fn consumers_of(b: &NatsBackend, stream: &str) -> Result<Vec<ConsumerInfo>> {
    let all: Vec<ConsumerInfo> = walk(b, &format!("CONSUMER.LIST.{stream}"), "consumers").await?;
    // Ephemeral consumers belong to one client's session: not queues to watch.
    Ok(all
        .into_iter()
        .filter(|c| {
            c.config
                .durable_name
                .as_deref()
                .is_some_and(|d| !d.is_empty())
        })
        .collect())
}

fn secs_from_ns(ns: i64) -> Option<f64> {
    (ns > 0).then(|| ns as f64 / 1e9)
}

fn stream_info(s: &StreamInfo, sources: Vec<QueueId>) -> QueueInfo {
    let c = &s.config;
    let mut extra = BTreeMap::new();
    extra.insert("retention".into(), c.retention.clone());
    extra.insert("subjects".into(), c.subjects.join(", "));
    extra.insert("storage".into(), c.storage.clone());
    extra.insert("first_seq".into(), s.state.first_seq.to_string());
    extra.insert("last_seq".into(), s.state.last_seq.to_string());
    extra.insert("bytes".into(), s.state.bytes.to_string());
    extra.insert("consumers".into(), s.state.consumer_count.to_string());
    if c.max_msgs > 0 {
        extra.insert("max_msgs".into(), c.max_msgs.to_string());
    }
    if sources.is_empty() && dlq::is_capture(s) {
        // A capture whose consumers are not listed (none exists yet, or the listing was
        // filtered) still says whose dead letters it takes.
        extra.insert(
            qdeck_model::domain::DLQ_OF.into(),
            format!("{} (no such consumer listed)", dlq::covers(s)),
        );
    }
    QueueInfo {
        id: QueueId::new(c.name.clone()),
        kind: QueueKind::Stream,
        is_dlq: !sources.is_empty() || dlq::is_capture(s),
        dlq: None,
        dlq_sources: sources,
        settings: QueueSettings {
            retention_secs: secs_from_ns(c.max_age),
            extra,
            ..Default::default()
        },
    }
}

/// Without a capture stream: how many messages the consumer stopped delivering (reached
/// `max_deliver` or terminated), where JetStream lets that be told. The server keeps no such
/// count (2.9: no field of consumer info; its ack floor stays below the first such message).
/// A work queue removes what is acked, so what it still stores for the consumer is pending,
/// unacked or given up on; elsewhere acked and given-up messages look alike.
async fn stopped_delivering(b: &NatsBackend, s: &StreamInfo, c: &ConsumerInfo) -> String {
    if s.config.retention != "workqueue" {
        return format!(
            "not told: on a {} stream JetStream does not count the messages a consumer gave up on (num_redelivered, {}, counts those redelivered at least once, given up on or still retrying)",
            s.config.retention, c.num_redelivered
        );
    }
    let stored = if c.filter() == ">" {
        Ok(s.state.messages)
    } else {
        b.conn
            .api(
                &format!("STREAM.INFO.{}", s.config.name),
                &json!({"subjects_filter": c.filter()}),
            )
            .await
            .map(|v| {
                v.pointer("/state/subjects")
                    .and_then(|x| x.as_object())
                    .map_or(0, |m| {
                        m.values().filter_map(serde_json::Value::as_u64).sum()
                    })
            })
    };
    match stored {
        Ok(stored) => format!(
            "{} (derived on a work queue: {stored} stored − {} pending − {} unacked)",
            stored.saturating_sub(c.num_pending + c.num_ack_pending),
            c.num_pending,
            c.num_ack_pending
        ),
        Err(e) => format!("unknown: {e}"),
    }
}

fn consumer_info(c: &ConsumerInfo, dlq: Option<QueueId>, stopped: Option<String>) -> QueueInfo {
    let cfg = &c.config;
    let mut extra = BTreeMap::new();
    extra.insert("ack_policy".into(), cfg.ack_policy.clone());
    extra.insert("filter".into(), c.filter().to_string());
    extra.insert(
        "type".into(),
        if c.is_push() { "push" } else { "pull" }.to_string(),
    );
    if let Some(g) = cfg.deliver_group.as_deref().filter(|g| !g.is_empty()) {
        extra.insert("deliver_group".into(), g.to_string());
    }
    extra.insert("redelivered".into(), c.num_redelivered.to_string());
    extra.insert("waiting_pulls".into(), c.num_waiting.to_string());
    extra.insert("ack_floor_seq".into(), c.ack_floor.stream_seq.to_string());
    extra.insert("delivered_seq".into(), c.delivered.stream_seq.to_string());
    if cfg.max_ack_pending > 0 {
        extra.insert("max_ack_pending".into(), cfg.max_ack_pending.to_string());
    }
    if dlq.is_none() {
        extra.insert(
            "dlq".into(),
            format!(
                "none: `qdeck create-dlq {}/{}` captures its dead letters from now on (those it already gave up on stay in the stream, unlisted)",
                c.stream_name, c.name
            ),
        );
    }
    if let Some(n) = stopped {
        extra.insert("stopped_delivering".into(), n);
    }
    QueueInfo {
        id: consumer_id(&c.stream_name, &c.name),
        kind: QueueKind::Consumer,
        is_dlq: false,
        dlq,
        dlq_sources: Vec::new(),
        settings: QueueSettings {
            lease_secs: secs_from_ns(cfg.ack_wait),
            max_receives: u32::try_from(cfg.max_deliver).ok().filter(|n| *n > 0),
            ..Default::default()
        }
        .with_extra(extra),
    }
}

trait WithExtra {
    fn with_extra(self, extra: BTreeMap<String, String>) -> Self;
}

impl WithExtra for QueueSettings {
    fn with_extra(mut self, extra: BTreeMap<String, String>) -> Self {
        self.extra = extra;
        self
    }
}

pub fn consumer_id(stream: &str, consumer: &str) -> QueueId {
    QueueId::new(format!("{stream}/{consumer}"))
}

/// Streams and the durable consumers of those `wanted` (all when `None`), with DLQ links.
pub async fn list(b: &NatsBackend, wanted: Option<&HashSet<String>>) -> Result<Vec<QueueInfo>> {
    let streams = b.streams().await?;
    let names: Vec<String> = streams
        .iter()
        .filter(|s| wanted.is_none_or(|w| w.contains(&s.config.name)))
        .filter(|s| !dlq::is_capture(s))
        .map(|s| s.config.name.clone())
        .collect();
    let per_stream = consumers_by_stream(b, &names).await?;
    let by_name: HashMap<&str, &StreamInfo> = streams
        .iter()
        .map(|s| (s.config.name.as_str(), s))
        .collect();
    let mut out = Vec::new();
    let mut sources: HashMap<String, Vec<QueueId>> = HashMap::new();
    let mut consumers = Vec::new();
    for name in &names {
        for c in per_stream.get(name).into_iter().flatten() {
            let cap = dlq::capture_for(&streams, name, &c.name).map(|s| s.config.name.clone());
            if let Some(cap) = &cap {
                sources
                    .entry(cap.clone())
                    .or_default()
                    .push(consumer_id(name, &c.name));
            }
            let stopped = match (&cap, by_name.get(name.as_str())) {
                (None, Some(s)) => Some(stopped_delivering(b, s, c).await),
                _ => None,
            };
            consumers.push(consumer_info(c, cap.map(QueueId::new), stopped));
        }
    }
    for s in &streams {
        if wanted.is_none_or(|w| w.contains(&s.config.name)) {
            let src = sources.remove(&s.config.name).unwrap_or_default();
            out.push(stream_info(s, src));
        }
    }
    out.extend(consumers);
    Ok(out)
}

async fn consumers_by_stream(
    b: &NatsBackend,
    names: &[String],
) -> Result<HashMap<String, Vec<ConsumerInfo>>> {
    let results: Vec<(String, Result<Vec<ConsumerInfo>>)> = stream::iter(names.iter().cloned())
        .map(|n| async move {
            let r = consumers_of(b, &n).await;
            (n, r)
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let mut out = HashMap::new();
    for (n, r) in results {
        match r {
            Ok(v) => {
                out.insert(n, v);
            }
            // Deleted between the two walks: it simply has no consumers now.
            Err(BackendError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Where a consumer's oldest unprocessed message is: (stream, first held sequence, filter).
/// Its age is the time of the first message there, read by sequence. The first held sequence,
/// not ack floor + 1: with nothing in flight the floor stays below the messages the consumer
/// gave up on (max_deliver, terminated), and their age is no backlog.
type AgeKey = (String, u64, String);

fn age_key(c: &ConsumerInfo) -> AgeKey {
    (
        c.stream_name.clone(),
        c.first_held_seq(),
        c.filter().to_string(),
    )
}

fn age_secs(ms: i64) -> f64 {
    ((now_ms() - ms).max(0)) as f64 / 1000.0
}

pub async fn stats(b: &NatsBackend, ids: &[QueueId]) -> Result<StatsBatch> {
    let streams = b.streams().await?;
    let by_name: HashMap<&str, &StreamInfo> = streams
        .iter()
        .map(|s| (s.config.name.as_str(), s))
        .collect();
    let targets: Vec<(QueueId, Target)> = ids
        .iter()
        .map(|id| (id.clone(), Target::parse(id)))
        .collect();
    let need: Vec<String> = targets
        .iter()
        .filter_map(|(_, t)| match t {
            Target::Consumer(s, _) => Some(s.clone()),
            Target::Stream(_) => None,
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let per_stream = consumers_by_stream(b, &need).await?;
    let at = now_ms();
    let mut batch = StatsBatch::default();
    let mut wanted_consumers = Vec::new();
    for (id, t) in targets {
        match t {
            Target::Stream(s) => match by_name.get(s.as_str()) {
                Some(info) => batch.stats.push(stream_stats(id, info, at)),
                None => batch
                    .errors
                    .push((id, QueueError::not_found(format!("no stream {s:?}")))),
            },
            Target::Consumer(s, c) => {
                match per_stream
                    .get(&s)
                    .and_then(|v| v.iter().find(|x| x.name == c))
                {
                    Some(ci) => wanted_consumers.push((id, ci.clone())),
                    None => batch
                        .errors
                        .push((id, QueueError::not_found(format!("no consumer {s}/{c}")))),
                }
            }
        }
    }
    // Consumers of one stream at the same ack floor with the same filter share their oldest
    // message (fan-out consumers mostly do): one read serves them all.
    let keys: Vec<AgeKey> = wanted_consumers
        .iter()
        .filter(|(_, ci)| ci.num_pending + ci.num_ack_pending > 0)
        .map(|(_, ci)| age_key(ci))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let read: HashMap<AgeKey, std::result::Result<Option<f64>, String>> = stream::iter(keys)
        .map(|k| async move {
            let age = msg::get(b, &k.0, k.1, Some(&k.2))
                .await
                .map(|m| m.and_then(|m| m.time_ms()).map(age_secs))
                .map_err(|e| e.to_string());
            (k, age)
        })
        .buffer_unordered(AGE_CONCURRENCY)
        .collect()
        .await;
    let ages = wanted_consumers.into_iter().map(|(id, ci)| {
        let age = match read.get(&age_key(&ci)) {
            Some(Ok(a)) => Ok(*a),
            Some(Err(e)) => Err(BackendError::Other(e.clone())),
            None => Ok(None),
        };
        (id, ci, age)
    });
    let ages: Vec<_> = ages.collect();
    let wide = wide_capture_counts(b, &streams, &batch, &ages).await?;
    for st in &mut batch.stats {
        if let Some(c) = wide.get(st.id.as_str()) {
            st.depth = Some(c.total);
        }
    }
    for (id, ci, age) in ages {
        let cap = dlq::capture_for(&streams, &ci.stream_name, &ci.name);
        let mut st = consumer_stats(id, &ci, at);
        st.dlq_depth = cap.map(|s| match wide.get(s.config.name.as_str()) {
            Some(c) => c
                .per_consumer
                .get(&(ci.stream_name.clone(), ci.name.clone()))
                .copied()
                .unwrap_or(0),
            None => s.state.messages,
        });
        match age {
            Ok(a) => st.oldest_age_secs = a.or(Some(0.0)),
            Err(e) => st.age_note = Some(format!("oldest message unreadable: {e}")),
        }
        if ci.num_pending + ci.num_ack_pending == 0 {
            st.oldest_age_secs = Some(0.0);
        }
        batch.stats.push(st);
    }
    Ok(batch)
}

/// The dead-letter counts of the capture streams among these figures (their own rows, or a
/// consumer's DLQ) that take other advisories too or several consumers' dead letters, by
/// stream name: their message counts would count naks and the like as dead letters, or one
/// consumer's DLQ depth as every consumer's.
async fn wide_capture_counts(
    b: &NatsBackend,
    streams: &[StreamInfo],
    batch: &StatsBatch,
    consumers: &[(QueueId, ConsumerInfo, Result<Option<f64>>)],
) -> Result<HashMap<String, dlq::DeadCounts>> {
    let mut names: HashSet<&str> = batch.stats.iter().map(|st| st.id.as_str()).collect();
    for (_, ci, _) in consumers {
        if let Some(cap) = dlq::capture_for(streams, &ci.stream_name, &ci.name) {
            names.insert(cap.config.name.as_str());
        }
    }
    let mut out = HashMap::new();
    for s in streams {
        let name = s.config.name.as_str();
        // `dead_counts` passes over a capture of one consumer's dead letters only: its
        // message count is that consumer's.
        if names.contains(name) && dlq::is_capture(s) {
            if let Some(c) = dlq::dead_counts(b, s).await? {
                out.insert(name.to_string(), c);
            }
        }
    }
    Ok(out)
}

fn stream_stats(id: QueueId, s: &StreamInfo, at_ms: i64) -> QueueStats {
    let age = if s.state.messages == 0 {
        Some(0.0)
    } else {
        s.state
            .first_ts
            .as_deref()
            .and_then(rfc3339_ms)
            .map(age_secs)
    };
    let base = QueueStats {
        id,
        at_ms,
        in_flight: None,
        consumers: u32::try_from(s.state.consumer_count).ok(),
        // Every message ever stored took the next sequence.
        enqueued_total: Some(s.state.last_seq),
        ..Default::default()
    };
    if keeps_what_is_read(s) {
        QueueStats {
            retained: Some(s.state.messages),
            retained_age_secs: age,
            age_note: Some(RETENTION_NOTE.into()),
            ..base
        }
    } else {
        QueueStats {
            depth: Some(s.state.messages),
            oldest_age_secs: age,
            ..base
        }
    }
}

/// Why a log stream's row has no depth or age.
const RETENTION_NOTE: &str = "a log stream keeps what its consumers read: its messages are retention, not backlog; each consumer's row (STREAM/CONSUMER) carries what it has yet to process";

/// A limits or interest stream keeps messages its consumers already processed (until a limit,
/// or every interested consumer, lets them go), so what it stores is no backlog. A work queue
/// removes what is acked, and a capture stream's messages are dead letters: theirs is.
fn keeps_what_is_read(s: &StreamInfo) -> bool {
    s.config.retention != "workqueue" && !dlq::is_capture(s)
}

fn consumer_stats(id: QueueId, c: &ConsumerInfo, at_ms: i64) -> QueueStats {
    let workers = if c.is_push() {
        u32::from(c.push_bound)
    } else {
        u32::try_from(c.num_waiting).unwrap_or(u32::MAX)
    };
    QueueStats {
        id,
        at_ms,
        depth: Some(c.num_pending),
        in_flight: Some(c.num_ack_pending),
        consumers: Some(workers),
        // Sequences, not counts: their deltas between polls are the delivery and
        // completion rates on an unfiltered consumer (labelled derived by the store).
        enqueued_total: Some(c.delivered.stream_seq + c.num_pending),
        completed_total: Some(c.ack_floor.stream_seq),
        ..Default::default()
    }
}
