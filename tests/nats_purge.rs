//! Narrow purges on NATS JetStream through the CLI: `purge STREAM --subject FILTER` (the
//! server's filtered STREAM.PURGE) and `purge STREAM --seq …` (delete by sequence). Both need
//! access = "full", are confirmed and audited; nats-py reads back that only what they named
//! went.
//!
//! Needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON (nats-py).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use common::nats::{peer, write_config, Scene};
use serde_json::Value as Json;

fn subjects_left(stream: &str) -> Vec<String> {
    peer(&["readback", stream])["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["subject"].as_str().unwrap().to_string())
        .collect()
}

fn audit_lines(dir: &std::path::Path) -> Vec<Json> {
    std::fs::read_to_string(dir.join("state/qdeck/audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn json_out(out: &std::process::Output) -> Json {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn purge_by_subject_and_delete_by_sequence_take_only_what_they_name() {
    let scene = Scene::empty();
    let all = peer(&["subjects", &scene.p])["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    let stream = format!("{}_SUB", scene.p);
    let eu = format!("{}.orders.eu.>", scene.p);
    let dir = tempfile::tempdir().unwrap();

    // Below tier full: refused, audited, nothing gone.
    write_config(dir.path(), "access = \"redrive\"");
    let out = common::qdeck(dir.path())
        .args(["purge", &stream, "--subject", &eu, "--yes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs access = \"full\""));
    assert_eq!(audit_lines(dir.path())[0]["result"], "refused");
    assert_eq!(subjects_left(&stream), all);

    write_config(dir.path(), "");
    // The dry run counts what the filter matches (eu.1, eu.2, eu.de.3, eu.3; not eux.1).
    let plan = json_out(
        &common::qdeck(dir.path())
            .args([
                "purge",
                &stream,
                "--subject",
                &eu,
                "--dry-run",
                "-o",
                "json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(plan["depth"], 4, "{plan}");
    assert_eq!(plan["subject"], eu.as_str());
    // Unconfirmed (no terminal, no --yes): refused, nothing gone.
    let out = common::qdeck(dir.path())
        .args(["purge", &stream, "--subject", &eu])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(subjects_left(&stream), all);

    let done = json_out(
        &common::qdeck(dir.path())
            .args(["purge", &stream, "--subject", &eu, "--yes", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(done["purged"], 4, "{done}");
    let left = subjects_left(&stream);
    let kept: Vec<String> = all
        .iter()
        .filter(|s| !s.contains(".orders.eu."))
        .cloned()
        .collect();
    assert_eq!(left, kept, "only the EU subjects went");
    let line = audit_lines(dir.path()).pop().unwrap();
    assert_eq!(line["action"], "purge");
    assert_eq!(line["counts"]["subject"], eu.as_str());
    assert_eq!(line["counts"]["purged"], 4);

    // Delete by sequence: 2 (us.1) goes, 99 was never there.
    let done = json_out(
        &common::qdeck(dir.path())
            .args(["purge", &stream, "--seq", "2,99", "--yes", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        (done["deleted"].as_u64(), done["missing"].as_u64()),
        (Some(1), Some(1)),
        "{done}"
    );
    let after = subjects_left(&stream);
    assert_eq!(after.len(), kept.len() - 1);
    assert!(!after.contains(&all[1]), "sequence 2 ({}) went", all[1]);
    let line = audit_lines(dir.path()).pop().unwrap();
    assert_eq!(line["action"], "delete");
    assert_eq!(line["counts"]["deleted"], 1);

    // A subject purge of a consumer or of a DLQ stream is refused with one line.
    let out = common::qdeck(dir.path())
        .args(["purge", &format!("{stream}/x"), "--subject", &eu, "--yes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
