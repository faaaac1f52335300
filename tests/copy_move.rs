//! `qdeck copy` / `qdeck move` as a user runs them: across two profiles (two local brokers in
//! different directories), with --where, the gates of both profiles, and an unknown target.
//! Each test has its own XDG directories, broker files and config.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use qdeck_backend::local::{LocalBackend, QueueOptions};
use qdeck_model::domain::OutgoingMessage;
use serde_json::Value;

mod common;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// Two local profiles, `a` (default) and `b`, each its own broker file; `a_extra` and
    /// `b_extra` are added to the profiles (e.g. an access tier). Seeded as `seed` says.
    fn seeded(a_extra: &str, b_extra: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("a")).unwrap();
        std::fs::create_dir_all(d.join("b")).unwrap();
        common::write_config(
            d,
            "a",
            &[
                common::local_profile("a", &d.join("a/q.db"), a_extra),
                common::local_profile("b", &d.join("b/q.db"), b_extra),
            ],
        );
        let e = Env { dir };
        seed(&e);
        e
    }

    fn qdeck(&self) -> Command {
        common::qdeck(self.dir.path())
    }

    /// `qdeck VERB orders.dlq --to replay --to-profile b` followed by `more`: a copy or move
    /// of the seeded dead letters into profile b.
    fn to_b(&self, verb: &str, more: &[&str]) -> Command {
        let mut c = self.qdeck();
        c.args([verb, "orders.dlq", "--to", "replay", "--to-profile", "b"])
            .args(more);
        c
    }

    fn broker(&self, profile: &str) -> LocalBackend {
        LocalBackend::open(&self.path(&format!("{profile}/q.db"))).unwrap()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Every message of `queue` on `profile`, as `qdeck export` writes them.
    fn export(&self, profile: &str, queue: &str) -> Vec<Value> {
        let f = self.path(&format!("{profile}-{queue}.jsonl"));
        let out = self
            .qdeck()
            .args(["-p", profile, "export", queue, "-f"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("state/qdeck/audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn msg(body: &[u8], headers: &[(&str, &str)]) -> OutgoingMessage {
    OutgoingMessage {
        body: body.to_vec(),
        key: Some("k1".into()),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect(),
        ..Default::default()
    }
}

/// The JSON report of a run that must succeed (its stderr shown if it did not).
fn json_ok(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Body bytes of a record (text or base64).
fn body(rec: &Value) -> Vec<u8> {
    use base64::Engine;
    match &rec["body"] {
        Value::String(s) => s.as_bytes().to_vec(),
        v => base64::engine::general_purpose::STANDARD
            .decode(v["base64"].as_str().unwrap())
            .unwrap(),
    }
}

fn headers(rec: &Value) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = rec["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_string(),
                p[1].as_str().unwrap().to_string(),
            )
        })
        .filter(|(k, _)| k != "state")
        .collect();
    h.sort();
    h
}

/// a/orders.dlq: 3 binary or text bodies for tenant acme (dead-lettered from orders by the
/// broker) and 2 for tenant other. b/replay exists and is empty.
fn seed(e: &Env) {
    let a = e.broker("a");
    a.create_queue(
        "orders",
        &QueueOptions {
            max_receives: Some(1),
            dlq: Some("orders.dlq".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let bodies: [&[u8]; 3] = [
        b"{\"n\":1}",
        &[0, 159, 146, 150, 255, b'\n'],
        "é ✓".as_bytes(),
    ];
    let acme: Vec<_> = bodies
        .iter()
        .map(|b| msg(b, &[("x-tenant", "acme"), ("x-trace", "t-1")]))
        .collect();
    a.send_batch("orders", &acme).unwrap();
    let leased = a.receive("orders", "w1", 3, None).unwrap();
    let receipts: Vec<String> = leased.into_iter().map(|l| l.receipt).collect();
    assert_eq!(
        a.nack("orders", "w1", &receipts, Duration::ZERO).unwrap(),
        3
    );
    let other: Vec<_> = (0..2)
        .map(|i| msg(format!("o{i}").as_bytes(), &[("x-tenant", "other")]))
        .collect();
    a.send_batch("orders.dlq", &other).unwrap();
    e.broker("b")
        .create_queue("replay", &QueueOptions::default())
        .unwrap();
}

#[test]
fn copy_across_profiles_keeps_bodies_and_headers_and_lists_what_it_renamed() {
    let e = Env::seeded("", "");
    let r = json_ok(e.to_b("copy", &["-y", "-o", "json"]).output().unwrap());
    assert_eq!(
        (r["sent"].as_u64(), r["failed"].as_u64()),
        (Some(5), Some(0))
    );
    assert_eq!(r["from"], "a/orders.dlq");
    assert_eq!(r["to"], "b/replay");
    let src = e.export("a", "orders.dlq");
    let dst = e.export("b", "replay");
    assert_eq!(src.len(), 5, "a copy leaves the source as it was");
    assert_eq!(dst.len(), 5);
    // Every copy: the same body bytes and key, the same user headers, plus the dead-letter
    // facts of the source as x-qdeck-* headers.
    let mut want: Vec<_> = src
        .iter()
        .map(|s| {
            let mut h = headers(s);
            let dl = &s["dead_letter"];
            if !dl.is_null() {
                h.push((
                    "x-qdeck-dead-letter-origin".into(),
                    dl["origin"].as_str().unwrap().into(),
                ));
                h.push((
                    "x-qdeck-dead-letter-reason".into(),
                    dl["reason"].as_str().unwrap().into(),
                ));
            }
            h.sort();
            (body(s), s["key"].clone(), h)
        })
        .collect();
    let mut got: Vec<_> = dst
        .iter()
        .map(|d| (body(d), d["key"].clone(), headers(d)))
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
    assert!(got.iter().any(|g| g.0 == [0, 159, 146, 150, 255, b'\n']));
    // The report lists the renamed facts with their counts.
    let renamed: Vec<(String, u64)> = r["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["to"].as_str().unwrap().to_string(),
                h["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        renamed,
        vec![
            ("x-qdeck-dead-letter-origin".to_string(), 3),
            ("x-qdeck-dead-letter-reason".to_string(), 3)
        ]
    );
    // One audit line on each profile, naming the other side.
    let audit = e.audit();
    let copies: Vec<&Value> = audit.iter().filter(|l| l["action"] == "copy").collect();
    assert_eq!(copies.len(), 2, "{audit:?}");
    assert!(copies
        .iter()
        .any(|l| l["profile"] == "a" && l["target"] == "b/replay"));
    assert!(copies
        .iter()
        .any(|l| l["profile"] == "b" && l["counts"]["source"] == "a/orders.dlq"));
    assert!(copies
        .iter()
        .all(|l| l["counts"]["sent"] == 5 && l["result"] == "ok"));
}

#[test]
fn move_with_where_moves_only_the_matching_and_leaves_the_rest() {
    let e = Env::seeded("", "");
    let acme = "header.x-tenant = \"acme\"";
    let dry = e
        .to_b("move", &["--where", acme, "--dry-run"])
        .output()
        .unwrap();
    assert!(dry.status.success());
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        text.contains("would move 3 message(s) from a/orders.dlq (local) to b/replay (local)"),
        "{text}"
    );
    assert_eq!(e.export("b", "replay").len(), 0, "a dry run sends nothing");
    let r = json_ok(
        e.to_b("move", &["--where", acme, "-y", "-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        (r["sent"].as_u64(), r["deleted"].as_u64()),
        (Some(3), Some(3))
    );
    let left = e.export("a", "orders.dlq");
    let moved = e.export("b", "replay");
    let tenants = |recs: &[Value]| -> Vec<String> {
        recs.iter()
            .map(|r| {
                headers(r)
                    .into_iter()
                    .find(|(k, _)| k == "x-tenant")
                    .unwrap()
                    .1
            })
            .collect()
    };
    assert_eq!(tenants(&left), vec!["other", "other"]);
    assert_eq!(tenants(&moved), vec!["acme", "acme", "acme"]);
    let audit = e.audit();
    let moves: Vec<&Value> = audit.iter().filter(|l| l["action"] == "move").collect();
    assert_eq!(moves.len(), 2);
    assert!(moves
        .iter()
        .all(|l| l["counts"]["deleted"] == 3
            && l["counts"]["predicate"] == "header.x-tenant = \"acme\""));
}

#[test]
fn a_missing_target_is_exit_4_before_anything_is_read() {
    let e = Env::seeded("", "");
    for cmd in ["copy", "move"] {
        e.qdeck()
            .args([cmd, "orders.dlq", "--to", "nope", "--to-profile", "b", "-y"])
            .assert()
            .code(4)
            .stderr(predicates::str::contains("nope"));
    }
    // Same profile, unknown target: the same.
    e.qdeck()
        .args(["move", "orders.dlq", "--to", "nope", "-y"])
        .assert()
        .code(4);
    assert_eq!(e.export("a", "orders.dlq").len(), 5);
    assert!(e
        .audit()
        .iter()
        .all(|l| l["action"] != "copy" && l["action"] != "move"));
    // An unknown profile is a configuration error.
    e.qdeck()
        .args([
            "copy",
            "orders.dlq",
            "--to",
            "replay",
            "--to-profile",
            "zz",
            "-y",
        ])
        .assert()
        .code(2);
}

#[test]
fn tiers_on_both_profiles_gate_copy_and_move() {
    // Target browse-only: no copy into it.
    let e = Env::seeded("", "access = \"browse\"");
    e.to_b("copy", &["-y"])
        .assert()
        .code(5)
        .stderr(predicates::str::contains("\"b\"").and(predicates::str::contains("redrive")));
    // Source at redrive: copy out is fine, move out (it deletes) is not.
    let e = Env::seeded("access = \"redrive\"", "");
    e.to_b("move", &["-y"])
        .assert()
        .code(5)
        .stderr(predicates::str::contains("full"));
    assert_eq!(e.export("b", "replay").len(), 0);
    e.to_b("copy", &["-y"]).assert().success();
    assert_eq!(e.export("b", "replay").len(), 5);
    assert_eq!(e.export("a", "orders.dlq").len(), 5);
    // Source stats-only: its bodies cannot be read, not even for a dry run.
    let e = Env::seeded("access = \"stats\"", "");
    e.to_b("copy", &["--dry-run"]).assert().code(5);
    let refused = e.audit();
    assert!(
        refused.iter().any(|l| l["result"] == "refused"),
        "{refused:?}"
    );
}

use predicates::prelude::PredicateBooleanExt;
