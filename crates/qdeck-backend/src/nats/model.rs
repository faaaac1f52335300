//! The parts of JetStream's API answers qdeck reads (nats-server's `StreamInfo`,
//! `ConsumerInfo`, `StoredMsg` and advisories). Every field has a default, so an older or
//! newer server that leaves one out still parses.

use base64::Engine;
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamInfo {
    pub config: StreamConfig,
    pub state: StreamState,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamConfig {
    pub name: String,
    pub subjects: Vec<String>,
    /// `limits`, `interest` or `workqueue`.
    pub retention: String,
    pub storage: String,
    pub max_msgs: i64,
    pub max_bytes: i64,
    /// Nanoseconds; 0 = unlimited.
    pub max_age: i64,
    pub discard: String,
    pub allow_direct: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamState {
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub first_ts: Option<String>,
    pub last_seq: u64,
    pub last_ts: Option<String>,
    pub consumer_count: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ConsumerInfo {
    pub stream_name: String,
    pub name: String,
    pub config: ConsumerConfig,
    pub delivered: SeqInfo,
    pub ack_floor: SeqInfo,
    pub num_ack_pending: u64,
    pub num_redelivered: u64,
    pub num_waiting: u64,
    pub num_pending: u64,
    pub push_bound: bool,
}

impl ConsumerInfo {
    /// The first stream sequence the consumer still holds for delivery or acknowledgement.
    /// Above the ack floor sit the messages in flight and those the server gave up on (past
    /// max_deliver: never delivered again, never acked, so the floor stays); with nothing in
    /// flight, everything delivered is one of the latter, and the consumer's messages start
    /// after the last delivered one.
    pub fn first_held_seq(&self) -> u64 {
        if self.num_ack_pending == 0 {
            self.delivered.stream_seq.max(self.ack_floor.stream_seq) + 1
        } else {
            self.ack_floor.stream_seq + 1
        }
    }

    pub fn is_push(&self) -> bool {
        self.config
            .deliver_subject
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    }

    /// The subject filter its messages match (`>` when it takes the whole stream).
    pub fn filter(&self) -> &str {
        match self.config.filter_subject.as_deref() {
            Some(f) if !f.is_empty() => f,
            _ => ">",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ConsumerConfig {
    pub durable_name: Option<String>,
    pub deliver_subject: Option<String>,
    pub deliver_group: Option<String>,
    pub ack_policy: String,
    /// Nanoseconds.
    pub ack_wait: i64,
    /// -1 = unlimited.
    pub max_deliver: i64,
    pub filter_subject: Option<String>,
    pub max_ack_pending: i64,
    pub max_waiting: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SeqInfo {
    pub consumer_seq: u64,
    pub stream_seq: u64,
    pub last_active: Option<String>,
}

/// One page of `STREAM.LIST` or `CONSUMER.LIST` (or the error in its place).
#[derive(Debug, Clone, Deserialize)]
pub struct ListPage<T> {
    #[serde(default)]
    pub total: u64,
    #[serde(default = "none")]
    pub streams: Option<Vec<T>>,
    #[serde(default = "none")]
    pub consumers: Option<Vec<T>>,
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

fn none<T>() -> Option<T> {
    None
}

/// A message read by sequence (`STREAM.MSG.GET`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StoredMsg {
    pub subject: String,
    pub seq: u64,
    /// Base64 of the NATS/1.0 header block.
    pub hdrs: Option<String>,
    /// Base64 of the body.
    pub data: Option<String>,
    pub time: String,
}

impl StoredMsg {
    pub fn body(&self) -> Vec<u8> {
        decode64(self.data.as_deref())
    }

    pub fn header_block(&self) -> Vec<u8> {
        decode64(self.hdrs.as_deref())
    }

    pub fn time_ms(&self) -> Option<i64> {
        rfc3339_ms(&self.time)
    }
}

fn decode64(s: Option<&str>) -> Vec<u8> {
    s.and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default()
}

pub fn rfc3339_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
        // The zero time the server sends for "never".
        .filter(|ms| *ms > 0)
}

/// A `MAX_DELIVERIES` or `MSG_TERMINATED` advisory, as captured in a DLQ stream.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Advisory {
    #[serde(rename = "type")]
    pub kind: String,
    pub timestamp: String,
    pub stream: String,
    pub consumer: String,
    pub stream_seq: u64,
    pub deliveries: u64,
    /// Given by a worker's `AckTerm` with a reason (servers from 2.10).
    pub reason: Option<String>,
}

impl Advisory {
    /// A `max_deliver` or `terminated` advisory: a stream capturing `$JS.EVENT.ADVISORY.>`
    /// also holds naks, acks and others, which are no dead letters.
    pub fn is_dead_letter(&self) -> bool {
        self.kind.ends_with(".max_deliver") || self.kind.ends_with(".terminated")
    }

    /// `max_deliveries` or `terminated`: why the consumer stopped delivering the message.
    pub fn why(&self) -> &'static str {
        if self.kind.ends_with("terminated") {
            "terminated"
        } else {
            "max_deliveries"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_info_as_nats_server_2_9_sends_it_parses() {
        let j = r#"{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"S","name":"C",
          "created":"2026-12-06T02:00:00Z","config":{"durable_name":"C","ack_policy":"explicit",
          "ack_wait":30000000000,"max_deliver":3,"filter_subject":"s.a","max_waiting":512},
          "delivered":{"consumer_seq":7,"stream_seq":5,"last_active":"2026-12-06T02:00:01.5Z"},
          "ack_floor":{"consumer_seq":2,"stream_seq":2},"num_ack_pending":3,"num_redelivered":2,
          "num_waiting":1,"num_pending":4,"cluster":{"leader":"x"}}"#;
        let c: ConsumerInfo = serde_json::from_str(j).expect("parse");
        assert_eq!((c.num_pending, c.num_ack_pending, c.num_waiting), (4, 3, 1));
        assert_eq!(c.ack_floor.stream_seq, 2);
        assert_eq!(c.filter(), "s.a");
        assert!(!c.is_push());
        assert!(rfc3339_ms("0001-01-01T00:00:00Z").is_none());
    }
}
