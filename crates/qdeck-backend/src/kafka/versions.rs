//! Which version of each API to speak to one broker. A broker lists the versions it serves in
//! its ApiVersions answer, read once per connection. qdeck writes each request for one
//! version (the callers' constants); where it can fill an older one correctly too, the API
//! says so with a floor, and the broker's highest version at or above that floor is spoken.
//! A broker that serves none of them gets one line naming the API and both ranges, instead of
//! a codec error or a closed connection.

use std::collections::BTreeMap;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use crate::BackendError;

/// The version ranges one broker serves, by API key.
#[derive(Debug, Clone, Default)]
pub struct Served {
    ranges: BTreeMap<i16, (i16, i16)>,
}

impl Served {
    pub fn from_response(resp: &ApiVersionsResponse) -> Served {
        Served {
            ranges: resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect(),
        }
    }

    /// The broker's range for `key`, if it serves it at all.
    pub fn range(&self, key: ApiKey) -> Option<(i16, i16)> {
        self.ranges.get(&(key as i16)).copied()
    }

    /// The version to speak: `preferred` when the broker serves it, else the broker's highest
    /// that is still at least `floor`. `addr` names the broker in the refusal.
    pub fn pick(
        &self,
        addr: &str,
        key: ApiKey,
        preferred: i16,
        floor: i16,
    ) -> Result<i16, BackendError> {
        let Some((min, max)) = self.range(key) else {
            return Err(BackendError::Unsupported(format!(
                "Kafka broker {addr} does not serve {key:?}{}",
                needs(key)
            )));
        };
        if (min..=max).contains(&preferred) {
            return Ok(preferred);
        }
        let highest = max.min(preferred);
        if highest >= floor && highest >= min {
            return Ok(highest);
        }
        let ours = if floor == preferred {
            format!("v{preferred}")
        } else {
            format!("v{floor}–v{preferred}")
        };
        Err(BackendError::Unsupported(format!(
            "Kafka broker {addr} serves {key:?} v{min}–v{max}, qdeck speaks {ours}{}",
            needs(key)
        )))
    }
}

/// What a broker needs to serve `key`, for the refusal's tail.
fn needs(key: ApiKey) -> &'static str {
    match key {
        ApiKey::ShareGroupDescribe
        | ApiKey::DescribeShareGroupOffsets
        | ApiKey::AlterShareGroupOffsets => {
            ": share groups need Kafka 4.2 or later with the share.version feature enabled"
        }
        ApiKey::ConsumerGroupDescribe => {
            ": groups on the consumer protocol (KIP-848) need Kafka 4.0 or later"
        }
        _ => ": upgrade the broker (qdeck is tested on Kafka 4.4)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn served(ranges: &[(ApiKey, i16, i16)]) -> Served {
        let keys = ranges
            .iter()
            .map(|(k, min, max)| {
                ApiVersion::default()
                    .with_api_key(*k as i16)
                    .with_min_version(*min)
                    .with_max_version(*max)
            })
            .collect();
        Served::from_response(&ApiVersionsResponse::default().with_api_keys(keys))
    }

    #[test]
    fn the_preferred_version_is_spoken_when_the_broker_serves_it() {
        let s = served(&[(ApiKey::Metadata, 0, 13)]);
        assert_eq!(s.pick("b:9092", ApiKey::Metadata, 12, 12).unwrap(), 12);
    }

    #[test]
    fn an_older_broker_is_spoken_to_at_its_highest_version_above_the_floor() {
        let s = served(&[(ApiKey::ListGroups, 0, 4)]);
        assert_eq!(s.pick("b:9092", ApiKey::ListGroups, 5, 0).unwrap(), 4);
    }

    #[test]
    fn a_newer_broker_that_dropped_old_versions_is_refused_in_one_line() {
        let s = served(&[(ApiKey::Fetch, 13, 17)]);
        let e = s.pick("b:9092", ApiKey::Fetch, 12, 12).unwrap_err();
        assert!(matches!(e, BackendError::Unsupported(_)), "{e:?}");
        let line = e.to_string();
        assert!(line.contains("b:9092") && line.contains("Fetch v13–v17") && line.contains("v12"));
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_broker_below_the_floor_is_refused_naming_both_ranges() {
        let s = served(&[(ApiKey::Metadata, 0, 9)]);
        let line = s
            .pick("b:9092", ApiKey::Metadata, 12, 12)
            .unwrap_err()
            .to_string();
        assert!(
            line.contains("Metadata v0–v9") && line.contains("qdeck speaks v12"),
            "{line}"
        );
    }

    #[test]
    fn a_missing_share_api_says_what_the_broker_needs() {
        let s = served(&[(ApiKey::Metadata, 0, 13)]);
        let line = s
            .pick("b:9092", ApiKey::ShareGroupDescribe, 1, 1)
            .unwrap_err()
            .to_string();
        assert!(
            line.contains("does not serve ShareGroupDescribe") && line.contains("share.version"),
            "{line}"
        );
    }

    /// A broker test in the crate (it needs `Conn`): without the broker variable it prints the
    /// notice `.ci/run` fails on, as tests/common's `skip` does.
    #[tokio::test]
    #[ignore = "broker test: needs QDECK_TEST_KAFKA_BOOTSTRAP (eval \"$(scripts/services.sh env)\")"]
    async fn a_real_broker_is_asked_what_it_serves_and_spoken_to_within_it() {
        use super::super::connection::Conn;
        use super::super::security::Security;
        use kafka_protocol::messages::{ListGroupsRequest, MetadataRequest};
        use std::sync::Arc;
        use std::time::Duration;

        let Some(bs) = std::env::var("QDECK_TEST_KAFKA_BOOTSTRAP")
            .ok()
            .filter(|v| !v.trim().is_empty())
        else {
            let line =
                "skipping: kafka::versions broker test: QDECK_TEST_KAFKA_BOOTSTRAP is not set";
            eprintln!("\n{line}");
            panic!("{line}");
        };
        let addr = bs.split(',').next().unwrap_or_default().trim().to_string();
        let conn = Conn::new(
            &addr,
            "qdeck-test",
            Duration::from_secs(10),
            Arc::new(Security::default()),
        );
        // ListGroups may go older than asked: a version past the broker's own is brought down
        // to the broker's highest, and the answer reads.
        conn.send(&ListGroupsRequest::default(), 99)
            .await
            .expect("ListGroups at the broker's highest version");
        let served = conn
            .served()
            .await
            .expect("the broker's ApiVersions answer was read");
        let (meta_min, meta_max) = served.range(ApiKey::Metadata).expect("Metadata is served");
        assert!(
            meta_max >= 12,
            "Kafka 4.4 serves Metadata v12 (max {meta_max})"
        );
        // Kafka 4.4 has share groups: qdeck's share calls are served at the versions it speaks.
        for (key, v) in [
            (
                ApiKey::ShareGroupDescribe,
                super::super::share::SHARE_DESCRIBE_V,
            ),
            (
                ApiKey::DescribeShareGroupOffsets,
                super::super::share::DESCRIBE_OFFSETS_V,
            ),
        ] {
            served.pick(&addr, key, v, v).expect("share API served");
        }
        // Metadata goes only at the version qdeck fills: past the broker's range it is one line
        // naming the API and both ranges, and the connection stays usable.
        let e = conn
            .send(&MetadataRequest::default(), meta_max + 1)
            .await
            .expect_err("a Metadata version the broker does not serve");
        assert!(matches!(e, BackendError::Unsupported(_)), "{e:?}");
        let line = e.to_string();
        assert!(
            line.contains(&addr)
                && line.contains(&format!("Metadata v{meta_min}–v{meta_max}"))
                && !line.contains('\n'),
            "{line}"
        );
        conn.send(&MetadataRequest::default(), 12)
            .await
            .expect("Metadata v12 on the same connection");
    }
}
