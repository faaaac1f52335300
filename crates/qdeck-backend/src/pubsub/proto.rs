//! The few messages of `google.pubsub.v1` qdeck sends and reads, written by hand with prost's
//! derive from the field numbers of Google's pubsub.proto (as published in googleapis and in the
//! Go client's pubsubpb). Only the fields qdeck uses are declared: protobuf skips unknown fields
//! on decode, and an absent field is its default on the wire, so the subset is compatible both
//! ways. No build script and no `protoc`.

use std::collections::BTreeMap;

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    pub fn from_ms(ms: i64) -> Timestamp {
        Timestamp {
            seconds: ms.div_euclid(1000),
            nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
        }
    }

    pub fn to_ms(self) -> i64 {
        self.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(self.nanos) / 1_000_000)
    }
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Topic {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "8")]
    pub message_retention_duration: Option<Duration>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PubsubMessage {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(btree_map = "string, string", tag = "2")]
    pub attributes: BTreeMap<String, String>,
    #[prost(string, tag = "3")]
    pub message_id: String,
    #[prost(message, optional, tag = "4")]
    pub publish_time: Option<Timestamp>,
    #[prost(string, tag = "5")]
    pub ordering_key: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PublishRequest {
    #[prost(string, tag = "1")]
    pub topic: String,
    #[prost(message, repeated, tag = "2")]
    pub messages: Vec<PubsubMessage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PublishResponse {
    #[prost(string, repeated, tag = "1")]
    pub message_ids: Vec<String>,
}

/// ListTopics, ListSubscriptions and ListTopicSubscriptions share this shape: the parent
/// (`project` or `topic`), page size, page token.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListRequest {
    #[prost(string, tag = "1")]
    pub parent: String,
    #[prost(int32, tag = "2")]
    pub page_size: i32,
    #[prost(string, tag = "3")]
    pub page_token: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListTopicsResponse {
    #[prost(message, repeated, tag = "1")]
    pub topics: Vec<Topic>,
    #[prost(string, tag = "2")]
    pub next_page_token: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DeadLetterPolicy {
    #[prost(string, tag = "1")]
    pub dead_letter_topic: String,
    #[prost(int32, tag = "2")]
    pub max_delivery_attempts: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Subscription {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub topic: String,
    #[prost(int32, tag = "5")]
    pub ack_deadline_seconds: i32,
    #[prost(bool, tag = "7")]
    pub retain_acked_messages: bool,
    #[prost(message, optional, tag = "8")]
    pub message_retention_duration: Option<Duration>,
    #[prost(bool, tag = "10")]
    pub enable_message_ordering: bool,
    #[prost(string, tag = "12")]
    pub filter: String,
    #[prost(message, optional, tag = "13")]
    pub dead_letter_policy: Option<DeadLetterPolicy>,
    #[prost(bool, tag = "15")]
    pub detached: bool,
    #[prost(bool, tag = "16")]
    pub enable_exactly_once_delivery: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListSubscriptionsResponse {
    #[prost(message, repeated, tag = "1")]
    pub subscriptions: Vec<Subscription>,
    #[prost(string, tag = "2")]
    pub next_page_token: String,
}

/// GetSubscriptionRequest and GetTopicRequest: the one name, field 1.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetRequest {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PullRequest {
    #[prost(string, tag = "1")]
    pub subscription: String,
    #[prost(bool, tag = "2")]
    pub return_immediately: bool,
    #[prost(int32, tag = "3")]
    pub max_messages: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReceivedMessage {
    #[prost(string, tag = "1")]
    pub ack_id: String,
    #[prost(message, optional, tag = "2")]
    pub message: Option<PubsubMessage>,
    #[prost(int32, tag = "3")]
    pub delivery_attempt: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PullResponse {
    #[prost(message, repeated, tag = "1")]
    pub received_messages: Vec<ReceivedMessage>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ModifyAckDeadlineRequest {
    #[prost(string, tag = "1")]
    pub subscription: String,
    #[prost(int32, tag = "3")]
    pub ack_deadline_seconds: i32,
    #[prost(string, repeated, tag = "4")]
    pub ack_ids: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AcknowledgeRequest {
    #[prost(string, tag = "1")]
    pub subscription: String,
    #[prost(string, repeated, tag = "2")]
    pub ack_ids: Vec<String>,
}

/// SeekRequest with its `time` target (field 2 of the `target` oneof; a snapshot is field 3).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SeekRequest {
    #[prost(string, tag = "1")]
    pub subscription: String,
    #[prost(message, optional, tag = "2")]
    pub time: Option<Timestamp>,
}

/// `google.protobuf.Empty` and SeekResponse: nothing qdeck reads.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn a_message_round_trips_with_its_attributes_and_key() {
        let m = PubsubMessage {
            data: vec![0xff, 0, 1],
            attributes: [("a".to_string(), "✗".to_string())].into_iter().collect(),
            message_id: "m1".into(),
            publish_time: Some(Timestamp::from_ms(1_700_000_000_123)),
            ordering_key: "k".into(),
        };
        let back = PubsubMessage::decode(m.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.publish_time.unwrap().to_ms(), 1_700_000_000_123);
    }

    #[test]
    fn the_ack_ids_of_a_modify_go_in_field_4() {
        // Field 4, wire type 2: tag byte 0x22. Field 2 there is reserved (the old single ack id).
        let r = ModifyAckDeadlineRequest {
            subscription: String::new(),
            ack_deadline_seconds: 0,
            ack_ids: vec!["x".into()],
        };
        assert_eq!(r.encode_to_vec(), vec![0x22, 1, b'x']);
    }
}
