//! Reading records by offset with Fetch, straight from the partition's leader: no group is
//! joined, nothing is committed or acquired. Record batches are read by batch.rs (formats
//! before magic 2 by `kafka-protocol`); compressed ones are inflated here (gzip and snappy by the codec's pure-Rust features, lz4
//! by lz4_flex, zstd by ruzstd). Control records (transaction markers) are skipped; a batch cut
//! short at the end of a response is left for the next fetch.
//!
//! Reads are read_committed, as a consumer with `isolation.level=read_committed` sees them:
//! the broker answers up to the last stable offset and lists the aborted transactions, whose
//! records are dropped here. A dead letter whose transaction was rolled back never became one,
//! and must be neither shown nor sent back.

use std::io::Read;

use bytes::{Buf, Bytes};
use kafka_protocol::compression::{Decompressor, Gzip, Snappy};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::routing::{Cluster, ClusterMeta};
use crate::{BackendError, Result};

pub const FETCH_V: i16 = 12;

/// One record as Kafka stored it: key, value and header values kept as bytes, null as `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct KRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    /// 0 create time, 1 log append time.
    pub timestamp_type: i8,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

pub struct Fetched {
    pub records: Vec<KRecord>,
    pub high_watermark: i64,
    /// Where the next fetch starts (past the last record returned, or past skipped markers).
    pub next: i64,
}

/// The codec's decompression hook returns its errors as `anyhow`'s.
fn inflate(buf: &mut Bytes, c: Compression) -> anyhow::Result<Bytes> {
    let all = |b: &mut Bytes| Ok(b.copy_to_bytes(b.remaining()));
    match c {
        Compression::None => Ok(buf.split_to(buf.len())),
        Compression::Gzip => Gzip::decompress(buf, all),
        Compression::Snappy => Snappy::decompress(buf, all),
        Compression::Lz4 => {
            let mut out = Vec::new();
            lz4_flex::frame::FrameDecoder::new(buf.as_ref()).read_to_end(&mut out)?;
            Ok(Bytes::from(out))
        }
        Compression::Zstd => {
            let mut out = Vec::new();
            ruzstd::decoding::StreamingDecoder::new(buf.as_ref())
                .map_err(|e| anyhow::anyhow!("zstd: {e}"))?
                .read_to_end(&mut out)?;
            Ok(Bytes::from(out))
        }
    }
}

/// A control record's type, from its key (version, type): 0 is ABORT, 1 COMMIT.
fn is_abort_marker(key: Option<&Bytes>) -> bool {
    key.is_some_and(|k| k.len() >= 4 && i16::from_be_bytes([k[2], k[3]]) == 0)
}

/// One record with what its batch says about it.
struct Decoded {
    offset: i64,
    timestamp: i64,
    timestamp_type: i8,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(String, Option<Bytes>)>,
    control: bool,
    transactional: bool,
    producer_id: i64,
}

/// The records of one whole batch: magic 2 by qdeck's own reader (batch.rs), which keeps a
/// header key written twice; the formats before it by the codec crate's.
fn records_of(batch: Bytes, at: &dyn Fn() -> String) -> Result<Vec<Decoded>> {
    let unflate = |mut b: Bytes, c| inflate(&mut b, c).map_err(|e| e.to_string());
    match super::batch::decode(&batch, unflate) {
        Ok(b) => Ok(b
            .records
            .into_iter()
            .map(|e| Decoded {
                offset: e.offset,
                timestamp: e.timestamp,
                timestamp_type: b.timestamp_type,
                key: e.key,
                value: e.value,
                headers: e.headers,
                control: b.control,
                transactional: b.transactional,
                producer_id: b.producer_id,
            })
            .collect()),
        Err(super::batch::BatchError::OldMagic(_)) => {
            let mut batch = batch;
            let set = RecordBatchDecoder::decode_with_custom_compression(&mut batch, Some(inflate))
                .map_err(|e| BackendError::Protocol(format!("{}: {e}", at())))?;
            Ok(set
                .records
                .into_iter()
                .map(|r| Decoded {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    timestamp_type: r.timestamp_type as i8,
                    key: r.key,
                    value: r.value,
                    headers: r
                        .headers
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                    control: r.control,
                    transactional: r.transactional,
                    producer_id: r.producer_id,
                })
                .collect())
        }
        Err(e) => Err(BackendError::Protocol(format!("{}: {e}", at()))),
    }
}

/// Decode the complete record batches of a Fetch response's `records`, skipping records
/// before `from`, control records and the records of `aborted` transactions (producer id,
/// first offset, as the Fetch response lists them); the offset after the last batch seen.
pub fn decode(
    topic: &str,
    partition: i32,
    mut data: Bytes,
    from: i64,
    aborted: &[(i64, i64)],
) -> Result<(Vec<KRecord>, Option<i64>)> {
    let mut out = Vec::new();
    let mut next = None;
    // Kafka's own rule (Java's CompletedFetch): a producer's records are skipped from the
    // first offset of its aborted transaction until its ABORT marker.
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    pending.sort_by_key(|a| std::cmp::Reverse(a.1));
    let mut aborting: std::collections::HashSet<i64> = std::collections::HashSet::new();
    while data.len() >= 12 {
        let base = i64::from_be_bytes(data[0..8].try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(data[8..12].try_into().unwrap_or([0; 4]));
        let Ok(len) = usize::try_from(len) else { break };
        if data.len() < 12 + len || len < 49 {
            break;
        }
        let batch = data.split_to(12 + len);
        // last offset delta sits at byte 23 of the batch: the next offset is base + delta + 1.
        let delta = i32::from_be_bytes(batch[23..27].try_into().unwrap_or([0; 4]));
        next = Some(base + i64::from(delta) + 1);
        let where_ = || format!("Kafka record batch of {topic}[{partition}] at {base}");
        for r in records_of(batch, &where_)? {
            while pending.last().is_some_and(|a| a.1 <= r.offset) {
                if let Some((producer, _)) = pending.pop() {
                    aborting.insert(producer);
                }
            }
            if r.control {
                if r.transactional && is_abort_marker(r.key.as_ref()) {
                    aborting.remove(&r.producer_id);
                }
                continue;
            }
            if r.offset < from || (r.transactional && aborting.contains(&r.producer_id)) {
                continue;
            }
            out.push(KRecord {
                topic: topic.to_string(),
                partition,
                offset: r.offset,
                timestamp: r.timestamp,
                timestamp_type: r.timestamp_type,
                key: r.key,
                value: r.value,
                headers: r.headers,
            });
        }
    }
    Ok((out, next))
}

/// Up to `max_bytes` of records of one partition from `offset`, asked of its leader.
pub async fn fetch(
    c: &Cluster,
    meta: &ClusterMeta,
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: i32,
) -> Result<Fetched> {
    let leader = meta
        .topics
        .get(topic)
        .and_then(|t| t.leaders.get(&partition))
        .copied()
        .filter(|l| *l >= 0)
        .ok_or_else(|| {
            BackendError::Unreachable(format!("{topic}[{partition}] has no leader now"))
        })?;
    let req = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(max_bytes)
        .with_isolation_level(1)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(max_bytes)])]);
    let resp = c.to(leader, "Fetch", &req, FETCH_V).await?;
    if let Some(e) = resp.error_code.err() {
        return Err(BackendError::Protocol(format!(
            "Fetch {topic}[{partition}]: {e}"
        )));
    }
    let pd = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| {
            BackendError::Protocol(format!(
                "Fetch {topic}[{partition}]: no answer for the partition"
            ))
        })?;
    if let Some(e) = pd.error_code.err() {
        return Err(match e {
            kafka_protocol::ResponseError::TopicAuthorizationFailed => BackendError::Forbidden {
                msg: format!("not allowed to read Kafka topic {topic:?}"),
                right: Some("Read on the topic".into()),
            },
            kafka_protocol::ResponseError::OffsetOutOfRange => BackendError::NotFound(format!(
                "{topic}[{partition}] holds no record at offset {offset} (deleted by retention, or past the end)"
            )),
            other => BackendError::Protocol(format!("Fetch {topic}[{partition}]: {other}")),
        });
    }
    let (records, after) = match pd.records {
        Some(data) => {
            let aborted: Vec<(i64, i64)> = pd
                .aborted_transactions
                .iter()
                .flatten()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect();
            decode(topic, partition, data, offset, &aborted)?
        }
        None => (Vec::new(), None),
    };
    let next = records
        .last()
        .map(|r| r.offset + 1)
        .max(after)
        .unwrap_or(offset);
    Ok(Fetched {
        records,
        high_watermark: pd.high_watermark,
        next,
    })
}
