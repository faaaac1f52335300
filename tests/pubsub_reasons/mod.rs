//! `qdeck reasons` on a Pub/Sub dead-letter subscription: Pub/Sub records no failure reason,
//! so dead letters group by the attribute the user names (`--by`), else by delivery count and
//! source subscription (the fake records no delivery count: "deliveries not recorded").

use serde_json::Value as Json;

use crate::pubsub_kill::{qdeck, write_config};
use crate::{project, scene};

/// (signature, origin, count) of each group, sorted.
fn groups(dir: &std::path::Path, args: &[&str]) -> Vec<(String, String, u64)> {
    let out = qdeck(dir, args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let mut g: Vec<_> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["signature"].as_str().unwrap().to_string(),
                g["origin"].as_str().unwrap_or("").to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    g.sort();
    g
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn reasons_group_by_a_named_attribute_else_by_deliveries_and_source() {
    let p = project();
    // Three poison messages dead-lettered by the fake (attribute why = "schema – v2 ✗"), and
    // two more in the dead-letter topic with another `why`.
    scene(&["dead-letters", &p, "dl", "--good", "1", "--poison", "3"]);
    scene(&[
        "publish",
        &p,
        "dl-dlq",
        "--count",
        "2",
        "--attr",
        "why=timeout",
    ]);
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &p, "");
    let dlq = format!("{p}/dl-dlq-sub");
    let src = format!("{p}/dl-sub");

    let plain = groups(dir.path(), &["reasons", &dlq, "-o", "json"]);
    assert_eq!(
        plain,
        vec![(
            "max delivery attempts reached deliveries not recorded".to_string(),
            src.clone(),
            5
        )],
        "one source, no failure text: one group"
    );
    let by_why = groups(dir.path(), &["reasons", &dlq, "--by", "why", "-o", "json"]);
    assert_eq!(
        by_why,
        vec![
            (
                "max delivery attempts reached: schema – v<n> ✗".to_string(),
                src.clone(),
                3
            ),
            (
                "max delivery attempts reached: timeout".to_string(),
                src.clone(),
                2
            ),
        ]
    );
    // Reading them was a browse: every one is still there for Google's client.
    let left = scene(&["read-back", &p, "dl-dlq-sub", "--nack"]);
    assert_eq!(left["messages"].as_array().unwrap().len(), 5);
}
