//! Record batches as Kafka's Java producer writes them: compressed with each codec Kafka has
//! (gzip, snappy, lz4, zstd), written in transactions (so control markers sit between the
//! records and offsets have gaps), some rolled back, with null keys and null values. Browse
//! and redrive must read every committed record, skip the markers and the rolled-back
//! records, keep nulls as nulls, and keep a header key written twice (Spring's exception
//! message of each failure) twice, in order.

use serde_json::Value as Json;

use crate::{b64, common, prefix, qdeck_json, scene, write_kafka_config};

#[test]
#[ignore = "needs QDECK_TEST_KAFKA_BOOTSTRAP and QDECK_TEST_KAFKA_SCENES (scripts/kafka_up.sh)"]
fn compressed_transactional_batches_are_browsed_and_redriven_with_nulls_kept() {
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let p = prefix(&format!("codec-{codec}"));
        let (t, dlt) = (format!("{p}pay"), format!("{p}pay-dlt"));
        scene(&["spring-dlt", &t, "14", codec, "tx"]);
        let dead = scene(&["read", &dlt]);
        assert_eq!(dead.len(), 14, "{codec}: the Java consumer's count");
        // Four records a transaction: each commit marker takes an offset, so offsets skip.
        let last = dead.last().unwrap()["offset"].as_i64().unwrap();
        assert!(last > 13, "{codec}: markers between the records: {last}");

        let dir = tempfile::tempdir().unwrap();
        write_kafka_config(dir.path(), &format!("^{p}"));
        let page = qdeck_json(dir.path(), &["peek", &dlt, "-n", "30", "-o", "json"]);
        let msgs = page
            .as_array()
            .unwrap_or_else(|| page["messages"].as_array().unwrap());
        assert_eq!(msgs.len(), 14, "{codec}: every record, no marker: {page}");
        assert!(
            !page.to_string().contains("aborted"),
            "{codec}: a rolled-back transaction's records are not dead letters: {page}"
        );
        for (m, want) in msgs.iter().zip(&dead) {
            let text = m.to_string();
            // Spring appends an exception message per failure: the key comes twice, in order.
            let messages: Vec<&Json> = m["headers"]
                .as_array()
                .unwrap_or_else(|| panic!("{codec}: headers as a list: {text}"))
                .iter()
                .filter(|h| h[0] == "kafka_dlt-exception-message")
                .map(|h| &h[1])
                .collect();
            assert_eq!(
                messages.len(),
                2,
                "{codec}: a repeated header key kept: {text}"
            );
            assert_eq!(
                messages[0], "earlier: timeout after 30000 ms",
                "{codec}: {text}"
            );
            assert_eq!(
                m["id"],
                Json::String(format!("0:{}", want["offset"])),
                "{codec}: {text}"
            );
            match b64(&want["key"]) {
                Some(k) => assert_eq!(
                    m["key"].as_str().map(str::as_bytes),
                    Some(&k[..]),
                    "{codec}: {text}"
                ),
                None => assert!(m["key"].is_null(), "{codec}: a null key stays null: {text}"),
            }
            match b64(&want["value"]) {
                Some(v) => assert!(
                    text.contains(&String::from_utf8(v).unwrap().replace('"', "\\\""))
                        && m.get("body_null").is_none(),
                    "{codec}: the value: {text}"
                ),
                // One representation: the typed flag, not a metadata line besides it.
                None => assert!(
                    m["body"] == "" && m["body_null"] == true && !text.contains(r#"["value","#),
                    "{codec}: a null value is marked null, once: {text}"
                ),
            }
        }

        let out = common::qdeck(dir.path())
            .args(["redrive", &dlt, "--yes", "-o", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{codec}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let back = scene(&["read", &t]);
        assert_eq!(back.len(), 14, "{codec}: each dead letter once");
        for (got, want) in back.iter().zip(&dead) {
            assert_eq!(got["key"], want["key"], "{codec}: key, null kept");
            assert_eq!(got["value"], want["value"], "{codec}: value, null kept");
            assert_eq!(got["headers"], want["headers"], "{codec}: every header");
        }
    }
}
