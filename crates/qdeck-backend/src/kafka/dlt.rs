//! Dead-letter topics and what their records say about where they came from:
//! - Spring Kafka's `<topic>-dlt` (older `<topic>.DLT`): `kafka_dlt-original-topic`,
//!   `-original-partition` (4-byte big-endian int), `-original-offset` (8-byte long),
//!   `-exception-fqcn`, `-exception-message`;
//! - a share group's dead-letter topic (KIP-1191, Kafka 4.4): `__dlq.errors.topic`,
//!   `.partition`, `.offset`, `.group`, `.delivery.count`, `.message`, all as text;
//! - Kafka Connect's: `__connect.errors.topic`, `.partition`, `.offset`,
//!   `.exception.class.name`, `.exception.message`, all as text.

use bytes::Bytes;

use super::fetch::KRecord;

/// The suffixes Spring Kafka names dead-letter topics with, newest first.
pub const SPRING_SUFFIXES: [&str; 2] = ["-dlt", ".DLT"];

/// The topic a Spring dead-letter topic's name points to.
pub fn spring_origin(dlt: &str) -> Option<&str> {
    SPRING_SUFFIXES
        .iter()
        .find_map(|s| dlt.strip_suffix(s))
        .filter(|o| !o.is_empty())
}

/// Where a dead letter came from and why, from its headers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origin {
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub group: Option<String>,
    pub delivery_count: Option<u64>,
    /// `spring`, `share-group` (KIP-1191) or `connect`.
    pub convention: &'static str,
}

fn header<'a>(r: &'a KRecord, name: &str) -> Option<&'a Bytes> {
    r.headers
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_ref())
}

fn text(r: &KRecord, name: &str) -> Option<String> {
    header(r, name).map(|v| String::from_utf8_lossy(v).into_owned())
}

/// A Spring int header: 4 bytes big-endian (what Spring writes), or decimal text.
fn spring_int(r: &KRecord, name: &str) -> Option<i64> {
    let v = header(r, name)?;
    match v.len() {
        4 => Some(i64::from(i32::from_be_bytes([v[0], v[1], v[2], v[3]]))),
        8 => Some(i64::from_be_bytes([
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7],
        ])),
        _ => std::str::from_utf8(v).ok()?.trim().parse().ok(),
    }
}

fn text_int(r: &KRecord, name: &str) -> Option<i64> {
    text(r, name)?.trim().parse().ok()
}

/// The origin a dead letter's headers name, if it follows one of the known conventions.
pub fn origin(r: &KRecord) -> Option<Origin> {
    if header(r, "kafka_dlt-original-topic").is_some() {
        return Some(Origin {
            topic: text(r, "kafka_dlt-original-topic"),
            partition: spring_int(r, "kafka_dlt-original-partition")
                .and_then(|p| i32::try_from(p).ok()),
            offset: spring_int(r, "kafka_dlt-original-offset"),
            reason: text(r, "kafka_dlt-exception-fqcn"),
            message: text(r, "kafka_dlt-exception-message"),
            group: text(r, "kafka_dlt-original-consumer-group"),
            delivery_count: None,
            convention: "spring",
        });
    }
    if header(r, "__dlq.errors.topic").is_some() {
        return Some(Origin {
            topic: text(r, "__dlq.errors.topic"),
            partition: text_int(r, "__dlq.errors.partition").and_then(|p| i32::try_from(p).ok()),
            offset: text_int(r, "__dlq.errors.offset"),
            reason: None,
            message: text(r, "__dlq.errors.message"),
            group: text(r, "__dlq.errors.group"),
            delivery_count: text_int(r, "__dlq.errors.delivery.count")
                .and_then(|c| u64::try_from(c).ok()),
            convention: "share-group",
        });
    }
    if header(r, "__connect.errors.topic").is_some() {
        return Some(Origin {
            topic: text(r, "__connect.errors.topic"),
            partition: text_int(r, "__connect.errors.partition")
                .and_then(|p| i32::try_from(p).ok()),
            offset: text_int(r, "__connect.errors.offset"),
            reason: text(r, "__connect.errors.exception.class.name"),
            message: text(r, "__connect.errors.exception.message"),
            group: None,
            delivery_count: None,
            convention: "connect",
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(headers: Vec<(&str, Vec<u8>)>) -> KRecord {
        KRecord {
            topic: "orders-dlt".into(),
            partition: 0,
            offset: 0,
            timestamp: 0,
            timestamp_type: 0,
            key: None,
            value: None,
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), Some(Bytes::from(v))))
                .collect(),
        }
    }

    #[test]
    fn spring_headers_are_read_as_spring_writes_them() {
        let r = rec(vec![
            ("kafka_dlt-original-topic", b"orders".to_vec()),
            ("kafka_dlt-original-partition", 2i32.to_be_bytes().to_vec()),
            ("kafka_dlt-original-offset", 77i64.to_be_bytes().to_vec()),
            ("kafka_dlt-exception-message", b"boom".to_vec()),
        ]);
        let o = origin(&r).unwrap();
        assert_eq!(o.topic.as_deref(), Some("orders"));
        assert_eq!(o.partition, Some(2));
        assert_eq!(o.offset, Some(77));
        assert_eq!(o.message.as_deref(), Some("boom"));
        assert_eq!(o.convention, "spring");
    }

    #[test]
    fn share_group_dead_letters_name_their_origin_as_text() {
        let r = rec(vec![
            ("__dlq.errors.topic", b"jobs".to_vec()),
            ("__dlq.errors.partition", b"0".to_vec()),
            ("__dlq.errors.offset", b"8".to_vec()),
            ("__dlq.errors.delivery.count", b"2".to_vec()),
        ]);
        let o = origin(&r).unwrap();
        assert_eq!(
            (o.partition, o.offset, o.delivery_count),
            (Some(0), Some(8), Some(2))
        );
    }

    #[test]
    fn spring_names() {
        assert_eq!(spring_origin("orders-dlt"), Some("orders"));
        assert_eq!(spring_origin("orders.DLT"), Some("orders"));
        assert_eq!(spring_origin("-dlt"), None);
        assert_eq!(spring_origin("orders"), None);
    }
}
