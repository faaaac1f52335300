//! Writing records with Produce to each partition's leader, acks = all, one uncompressed batch
//! per partition per request, and Java's default partitioner (murmur2 of the key) so that a
//! redriven record lands where the application's own producer would have put it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::routing::{Cluster, ClusterMeta};
use crate::{BackendError, Result};

pub const PRODUCE_V: i16 = 9;

/// Kafka's `Utils.murmur2`, as its default partitioner hashes keys.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    // Java hashes the length as an int: wrapping is what it does too.
    let mut h: u32 = SEED ^ (len as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Java's default partitioner gives a keyed record.
pub fn partition_for_key(key: &[u8], partitions: usize) -> i32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as usize;
    i32::try_from(positive % partitions.max(1)).unwrap_or(0)
}

/// A record to write: key, value and headers exactly as given.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// One uncompressed batch, by batch.rs, which writes each header as given, a repeated key
/// included (the codec crate's encoder keeps headers in a map).
fn batch(records: &[Outgoing]) -> Result<Bytes> {
    let now = chrono::Utc::now().timestamp_millis();
    let outs: Vec<super::batch::Out<'_>> = records
        .iter()
        .map(|r| super::batch::Out {
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: &r.headers,
        })
        .collect();
    Ok(super::batch::encode(&outs, now))
}

/// Write `by_partition`'s records to `topic`, one request per leader; the first offset given
/// to each partition's batch. Any refusal fails the whole call (nothing after it is trusted).
pub async fn produce(
    c: &Cluster,
    meta: &ClusterMeta,
    topic: &str,
    by_partition: &BTreeMap<i32, Vec<Outgoing>>,
) -> Result<BTreeMap<i32, i64>> {
    let tm = meta
        .topics
        .get(topic)
        .ok_or_else(|| BackendError::NotFound(format!("no Kafka topic {topic:?}")))?;
    let mut by_leader: BTreeMap<i32, Vec<(i32, Bytes)>> = BTreeMap::new();
    for (p, recs) in by_partition {
        if recs.is_empty() {
            continue;
        }
        let leader = tm
            .leaders
            .get(p)
            .copied()
            .filter(|l| *l >= 0)
            .ok_or_else(|| BackendError::Unreachable(format!("{topic}[{p}] has no leader now")))?;
        by_leader
            .entry(leader)
            .or_default()
            .push((*p, batch(recs)?));
    }
    let mut out = BTreeMap::new();
    let timeout_ms = i32::try_from(c.timeout.as_millis()).unwrap_or(30_000);
    for (leader, parts) in by_leader {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(timeout_ms)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(
                    parts
                        .into_iter()
                        .map(|(p, b)| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(b))
                        })
                        .collect(),
                )]);
        let resp = c.to(leader, "Produce", &req, PRODUCE_V).await?;
        for t in resp.responses {
            for p in t.partition_responses {
                if let Some(e) = p.error_code.err() {
                    let detail = p
                        .error_message
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default();
                    return Err(match e {
                        kafka_protocol::ResponseError::TopicAuthorizationFailed => {
                            BackendError::Forbidden {
                                msg: format!("not allowed to write to Kafka topic {topic:?}"),
                                right: Some("Write on the topic".into()),
                            }
                        }
                        other => BackendError::Other(format!(
                            "Kafka refused records for {topic}[{}]: {other}{detail}",
                            p.index
                        )),
                    });
                }
                out.insert(p.index, p.base_offset);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_javas() {
        // Values from org.apache.kafka.common.utils.Utils.murmur2 (kafka-clients 4.4).
        let vectors: &[(&str, i32)] = &[
            ("", 275646681),
            ("a", -1563381124),
            ("ab", 316155434),
            ("abc", 479470107),
            ("abcd", -1323649548),
            ("k-0", 43242055),
            ("order-10", 1960481346),
            ("hello world!", -1076261558),
        ];
        for (key, want) in vectors {
            assert_eq!(murmur2(key.as_bytes()), *want, "{key}");
        }
    }
}
