//! Incident triage on the local broker, as a user runs it: `reasons`, `redrive --where`,
//! `export` and `import`. Every test gets its own XDG directories and broker file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::cli_env::CliEnv as Env;

use std::path::{Path, PathBuf};
use std::time::Duration;

use predicates::prelude::*;
use qdeck_backend::local::{LocalBackend, QueueOptions};
use qdeck_model::domain::OutgoingMessage;
use serde_json::Value;

impl Env {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self
            .qdeck()
            .args(args)
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn depth(&self, q: &str) -> u64 {
        self.json(&["ls"])
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == q)
            .and_then(|r| r["depth"].as_u64())
            .unwrap_or_else(|| panic!("no queue {q}"))
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
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect(),
        ..Default::default()
    }
}

const UUIDS: [&str; 3] = [
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "9b2e6f3a-0c1d-4e5f-8a7b-112233445566",
];

/// orders → orders.dlq after one receive. In the DLQ: 5 dead-lettered by the broker (max
/// receives), 7 "customer <uuid> unknown" for tenant acme (2 of them redriven before), and 4
/// "timeout after <n>ms".
fn incident(e: &Env) -> LocalBackend {
    let b = e.local();
    b.create_queue(
        "orders",
        &QueueOptions {
            max_receives: Some(1),
            dlq: Some("orders.dlq".into()),
            ..Default::default()
        },
    )
    .unwrap();
    b.create_queue("retry", &QueueOptions::default()).unwrap();
    let five: Vec<OutgoingMessage> = (0..5)
        .map(|i| msg(format!("{{\"n\":{i}}}").as_bytes(), &[]))
        .collect();
    b.send_batch("orders", &five).unwrap();
    let leased = b.receive("orders", "w1", 5, None).unwrap();
    assert_eq!(leased.len(), 5);
    let receipts: Vec<String> = leased.into_iter().map(|l| l.receipt).collect();
    assert_eq!(
        b.nack("orders", "w1", &receipts, Duration::ZERO).unwrap(),
        5
    );
    let mut direct = Vec::new();
    for i in 0..7 {
        let err = format!(
            "order {} failed: customer {} unknown",
            100 + i,
            UUIDS[i % 3]
        );
        let mut h = vec![("x-exception-message", err.as_str()), ("x-tenant", "acme")];
        if i < 2 {
            h.push(("x-qdeck-redriven", "1"));
        }
        direct.push(msg(format!("{{\"order\":{i}}}").as_bytes(), &h));
    }
    for i in 0..4 {
        let err = format!("timeout after {}ms", 250 * (i + 1));
        direct.push(msg(
            b"t",
            &[("x-exception-message", err.as_str()), ("x-tenant", "other")],
        ));
    }
    b.send_batch("orders.dlq", &direct).unwrap();
    b
}

fn groups(report: &Value) -> Vec<(String, u64)> {
    report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["signature"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn reasons_counts_what_was_dead_lettered_per_reason_with_ids_normalised() {
    let e = Env::new();
    incident(&e);
    let r = e.json(&["reasons", "orders.dlq"]);
    assert_eq!(
        groups(&r),
        vec![
            ("order <n> failed: customer <uuid> unknown".to_string(), 7),
            ("max_receives exceeded".to_string(), 5),
            ("timeout after <n>ms".to_string(), 4),
        ]
    );
    let g = &r["groups"].as_array().unwrap();
    assert_eq!(g[1]["origin"], "orders");
    assert_eq!(g[0]["redriven"], 2, "came back after a redrive");
    assert_eq!(g[2]["redriven"], 0);
    assert!(g[0]["first_seen_ms"].as_i64() <= g[0]["last_seen_ms"].as_i64());
    assert_eq!(r["complete"], true);
    assert_eq!(r["scanned"], 16);
    assert_eq!(r["sample_note"], "grouped all 16 message(s)");
    // The table says the same, with the coverage line under it.
    e.qdeck()
        .args(["reasons", "orders.dlq", "-o", "table"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 came back after a redrive"))
        .stdout(predicate::str::contains(
            "grouped all 16 message(s); 3 group(s)",
        ));
}

#[test]
fn a_bounded_scan_says_it_is_a_sample() {
    let e = Env::new();
    incident(&e);
    let r = e.json(&["reasons", "orders.dlq", "--limit", "10"]);
    assert_eq!(r["complete"], false);
    assert_eq!(r["scanned"], 10);
    assert_eq!(
        r["sample_note"],
        "grouped 10 of 16 message(s) (scan limit reached): a sample"
    );
    assert_eq!(groups(&r).iter().map(|g| g.1).sum::<u64>(), 10);
    e.qdeck()
        .args(["reasons", "orders.dlq", "--limit", "3", "-o", "plain"])
        .assert()
        .success()
        .stderr(predicate::str::contains("grouped 3 of 16"));
    e.qdeck().args(["reasons", "nope.dlq"]).assert().code(4);
}

#[test]
fn filtered_redrive_moves_exactly_the_matching_messages() {
    let e = Env::new();
    incident(&e);
    let pred = r#"header.x-tenant = "acme" and signature ~ "customer""#;
    // The dry run counts and shows samples, and changes nothing.
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--to",
            "retry",
            "--where",
            pred,
            "--dry-run",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("7 match"))
        .stdout(predicate::str::contains("would move 7 chosen message(s)"))
        .stdout(predicate::str::contains("customer <uuid> unknown"));
    assert_eq!((e.depth("orders.dlq"), e.depth("retry")), (16, 0));
    let dry = e.json(&[
        "redrive",
        "orders.dlq",
        "--to",
        "retry",
        "--where",
        pred,
        "--dry-run",
    ]);
    assert_eq!(dry["count"], 7);
    assert_eq!(dry["selection"]["matched"], 7);
    assert_eq!(dry["samples"].as_array().unwrap().len(), 7);

    let out = e.json(&[
        "redrive",
        "orders.dlq",
        "--to",
        "retry",
        "--where",
        pred,
        "-y",
    ]);
    assert_eq!(
        (out["moved"].as_u64(), out["failed"].as_u64()),
        (Some(7), Some(0))
    );
    assert_eq!((e.depth("orders.dlq"), e.depth("retry")), (9, 7));
    // What stayed is exactly what did not match.
    let left = e.json(&["reasons", "orders.dlq"]);
    assert_eq!(
        groups(&left),
        vec![
            ("max_receives exceeded".to_string(), 5),
            ("timeout after <n>ms".to_string(), 4),
        ]
    );
    let moved = e.json(&["peek", "retry", "-n", "50"]);
    assert!(moved
        .as_array()
        .unwrap()
        .iter()
        .all(
            |m| String::from_utf8_lossy(m["body"].as_str().unwrap().as_bytes()).contains("order")
        ));
    let audit = e.audit();
    let line = audit
        .iter()
        .rev()
        .find(|l| l["action"] == "redrive")
        .unwrap();
    assert_eq!(line["counts"]["predicate"], pred);
    assert_eq!(line["counts"]["matched"], 7);
    assert_eq!(line["counts"]["scanned"], 16);
    assert_eq!(line["counts"]["moved"], 7);
    assert_eq!(line["result"], "ok");

    // Back to origin: only the broker's own dead letters, with --max capping the selection.
    let out = e.json(&[
        "redrive",
        "orders.dlq",
        "--where",
        r#"reason = "max_receives exceeded""#,
        "--max",
        "2",
        "-y",
    ]);
    assert_eq!(out["moved"], 2);
    assert_eq!((e.depth("orders.dlq"), e.depth("orders")), (7, 2));
    // Nothing matches: nothing moves, exit 0.
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--to",
            "retry",
            "--where",
            r#"reason = "nope""#,
            "-y",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to move"));
    assert_eq!(e.depth("orders.dlq"), 7);
}

#[test]
fn bad_predicates_exit_2_naming_the_column_and_change_nothing() {
    let e = Env::new();
    incident(&e);
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--where",
            r#"reason = "x" and tenant = "acme""#,
            "-y",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "column 18: unknown field \"tenant\"",
        ));
    e.qdeck()
        .args([
            "export",
            "orders.dlq",
            "-f",
            "x.jsonl",
            "--where",
            "receives >",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("column 11"));
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--where",
            r#"body ~ "(""#,
            "--dry-run",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad regex"));
    assert_eq!(e.depth("orders.dlq"), 16);
    // Unknown target: exit 4 before any scan.
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--to",
            "nope",
            "--where",
            "receives >= 0",
            "-y",
        ])
        .assert()
        .code(4);
    assert_eq!(e.depth("orders.dlq"), 16);
}

fn export(e: &Env, queue: &str, file: &Path) -> Vec<Value> {
    let out = e.json(&["export", queue, "-f", file.to_str().unwrap()]);
    let lines: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out["exported"].as_u64(), Some(lines.len() as u64));
    lines
}

/// Headers as sent again: without the local broker's own `state`.
fn user_headers(rec: &Value) -> Vec<(String, String)> {
    rec["headers"]
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
        .collect()
}

fn body(rec: &Value) -> Vec<u8> {
    use base64::Engine;
    match &rec["body"] {
        Value::String(s) => s.as_bytes().to_vec(),
        v => base64::engine::general_purpose::STANDARD
            .decode(v["base64"].as_str().unwrap())
            .unwrap(),
    }
}

#[test]
fn export_import_export_round_trips_bodies_byte_exact_and_headers() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("src", &QueueOptions::default()).unwrap();
    b.create_queue("dst", &QueueOptions::default()).unwrap();
    let binary: Vec<u8> = (0..=255u8).rev().collect();
    let mut keyed = msg(
        "ключ ✓ \u{1b}[2J".as_bytes(),
        &[("x-tenant", "acme"), ("x-tenant", "dup")],
    );
    keyed.key = Some("cust-1".into());
    b.send_batch(
        "src",
        &[
            msg(br#"{"a":1}"#, &[("content-type", "application/json")]),
            msg(&binary, &[("x-kind", "binary")]),
            keyed,
            msg(b"", &[]),
        ],
    )
    .unwrap();
    let first = export(&e, "src", &e.path("a.jsonl"));
    assert_eq!(first.len(), 4);
    assert!(
        first[1]["body"]["base64"].is_string(),
        "binary body as base64"
    );
    assert_eq!(e.depth("src"), 4, "export removes nothing");

    e.qdeck()
        .args([
            "import",
            "dst",
            "-f",
            e.path("a.jsonl").to_str().unwrap(),
            "--dry-run",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("would send 4 message(s)"))
        .stdout(predicate::str::contains("state"));
    assert_eq!(e.depth("dst"), 0);
    let r = e.json(&[
        "import",
        "dst",
        "-f",
        e.path("a.jsonl").to_str().unwrap(),
        "-y",
    ]);
    assert_eq!(
        (r["sent"].as_u64(), r["failed"].as_u64()),
        (Some(4), Some(0))
    );

    let second = export(&e, "dst", &e.path("b.jsonl"));
    assert_eq!(second.len(), 4);
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(body(a), body(b), "bodies byte-exact");
        assert_eq!(user_headers(a), user_headers(b), "headers preserved");
        assert_eq!(a["key"], b["key"]);
        assert_eq!(b["broker"], "local");
        assert_eq!(b["queue"], "dst");
    }
    assert_eq!(body(&second[1]), binary);
    let line = e
        .audit()
        .into_iter()
        .rev()
        .find(|l| l["action"] == "import")
        .unwrap();
    assert_eq!(line["counts"]["sent"], 4);
    assert_eq!(line["result"], "ok");

    // Export with a filter and a cap.
    let out = e.json(&[
        "export",
        "src",
        "-f",
        e.path("c.jsonl").to_str().unwrap(),
        "--where",
        r#"header.x-tenant = "acme""#,
    ]);
    assert_eq!(out["exported"], 1);
    let out = e.json(&[
        "export",
        "src",
        "-f",
        e.path("d.jsonl").to_str().unwrap(),
        "-n",
        "2",
    ]);
    assert_eq!(out["exported"], 2);
}

#[test]
fn a_malformed_import_line_stops_everything_before_sending() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("dst", &QueueOptions::default()).unwrap();
    let f = e.path("bad.jsonl");
    std::fs::write(
        &f,
        "{\"body\":\"one\"}\n\n{\"body\":\"two\"}\n{\"body\": oops}\n{\"body\":\"four\"}\n",
    )
    .unwrap();
    e.qdeck()
        .args(["import", "dst", "-f", f.to_str().unwrap(), "-y"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.jsonl line 4:"))
        .stderr(predicate::str::contains("nothing was sent"));
    std::fs::write(&f, "{\"body\":\"one\",\"hedaers\":[]}\n").unwrap();
    e.qdeck()
        .args(["import", "dst", "-f", f.to_str().unwrap(), "-y"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 1: unknown field `hedaers`"));
    assert_eq!(e.depth("dst"), 0);
    // A good file into an unknown queue: exit 4, nothing sent.
    std::fs::write(&f, "{\"body\":\"one\"}\n").unwrap();
    e.qdeck()
        .args(["import", "nope", "-f", f.to_str().unwrap(), "-y"])
        .assert()
        .code(4);
    // A read-only profile refuses it and says so in the audit log.
    e.qdeck()
        .args([
            "--read-only",
            "import",
            "dst",
            "-f",
            f.to_str().unwrap(),
            "-y",
        ])
        .assert()
        .code(5);
    assert_eq!(e.depth("dst"), 0);
    let last = e.audit().pop().unwrap();
    assert_eq!(
        (last["action"].as_str(), last["result"].as_str()),
        (Some("import"), Some("refused"))
    );
    // Without --yes and without a terminal: refused, nothing sent.
    e.qdeck()
        .args(["import", "dst", "-f", f.to_str().unwrap()])
        .assert()
        .code(5);
    assert_eq!(e.depth("dst"), 0);
}

#[test]
fn purge_where_deletes_exactly_the_matching_messages() {
    let e = Env::new();
    incident(&e);
    let pred = r#"signature ~ "^timeout""#;
    e.qdeck()
        .args(["purge", "orders.dlq", "--where", pred, "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("would delete 4 message(s)"));
    assert_eq!(e.depth("orders.dlq"), 16);
    // Without a terminal and without --yes: refused, audited, nothing deleted.
    e.qdeck()
        .args(["purge", "orders.dlq", "--where", pred])
        .assert()
        .code(5);
    assert_eq!(e.depth("orders.dlq"), 16);
    let r = e.json(&["purge", "orders.dlq", "--where", pred, "-y"]);
    assert_eq!(
        (r["deleted"].as_u64(), r["missing"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(e.depth("orders.dlq"), 12);
    let left = e.json(&["reasons", "orders.dlq"]);
    assert_eq!(
        groups(&left),
        vec![
            ("order <n> failed: customer <uuid> unknown".to_string(), 7),
            ("max_receives exceeded".to_string(), 5),
        ]
    );
    let line = e.audit().pop().unwrap();
    assert_eq!(line["action"], "delete");
    assert_eq!(line["counts"]["predicate"], pred);
    assert_eq!(line["counts"]["deleted"], 4);
    // Read-only refuses before scanning; scan flags without --where are a usage error.
    e.qdeck()
        .args(["--read-only", "purge", "orders.dlq", "--where", pred, "-y"])
        .assert()
        .code(5);
    e.qdeck()
        .args(["purge", "orders.dlq", "--limit", "5", "-y"])
        .assert()
        .code(2);
    assert_eq!(e.depth("orders.dlq"), 12);
}

/// The engine API the console builds on: pages, bounds, cancel, incremental groups.
#[tokio::test]
async fn engine_scan_pages_bounds_and_cancel() {
    use qdeck_backend::local::LocalHandle;
    use qdeck_backend::OpProgress;
    use qdeck_engine::triage::{self, Grouper, ScanLimits, SignatureConfig, StopReason};
    use qdeck_model::domain::QueueId;
    let e = Env::new();
    incident(&e);
    let h = LocalHandle(std::sync::Arc::new(e.local()));
    let q = QueueId::new("orders.dlq");
    let lim = |max: Option<u64>, time: Option<Duration>| ScanLimits {
        max_messages: max,
        max_time: time,
        page: 3,
        force: false,
    };
    // Small pages: every message once, groups growing page by page.
    let mut g = Grouper::new(SignatureConfig::default());
    let mut pages = 0;
    let s = triage::scan(&h, &q, &lim(None, None), &OpProgress::detached(), |p| {
        pages += 1;
        p.iter().for_each(|m| g.add(m));
        true
    })
    .await
    .unwrap();
    assert_eq!((s.scanned, s.stopped, pages), (16, StopReason::End, 6));
    assert_eq!(g.groups().iter().map(|x| x.count).sum::<u64>(), 16);
    // The caller stops early: reported as a limit, a sample.
    let s = triage::scan(&h, &q, &lim(None, None), &OpProgress::detached(), |_| false)
        .await
        .unwrap();
    assert_eq!((s.scanned, s.stopped), (3, StopReason::Limit));
    // Out of time before the first page.
    let s = triage::scan(
        &h,
        &q,
        &lim(None, Some(Duration::ZERO)),
        &OpProgress::detached(),
        |_| true,
    )
    .await
    .unwrap();
    assert_eq!((s.scanned, s.stopped), (0, StopReason::Time));
    // Cancelled.
    let p = OpProgress::detached();
    p.cancel();
    let s = triage::scan(&h, &q, &lim(None, None), &p, |_| true)
        .await
        .unwrap();
    assert_eq!(s.stopped, StopReason::Cancelled);
    assert!(s.sample_note("grouped").contains("cancelled"));
    // A limit that lands exactly on the last message is the whole queue.
    let s = triage::scan(
        &h,
        &q,
        &lim(Some(16), None),
        &OpProgress::detached(),
        |_| true,
    )
    .await
    .unwrap();
    assert!(s.complete());
}

/// A redrive stamps the copies; when they fail again the reasons view says they came back.
#[test]
fn messages_that_fail_again_after_a_redrive_are_marked() {
    let e = Env::new();
    let b = incident(&e);
    e.qdeck()
        .args([
            "redrive",
            "orders.dlq",
            "--where",
            "reason = 'max_receives exceeded'",
        ])
        .args(["--yes"])
        .assert()
        .success();
    assert_eq!(e.depth("orders"), 5);
    // The consumer still fails them: back to the DLQ after one more receive.
    let leased = b.receive("orders", "w2", 5, None).unwrap();
    let receipts: Vec<String> = leased.into_iter().map(|l| l.receipt).collect();
    assert_eq!(
        b.nack("orders", "w2", &receipts, Duration::ZERO).unwrap(),
        5
    );
    let r = e.json(&["reasons", "orders.dlq"]);
    let g = r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["signature"] == "max_receives exceeded")
        .cloned()
        .expect("the group came back");
    assert_eq!(g["count"], 5);
    assert_eq!(g["redriven"], 5, "every one came back after a redrive: {g}");
    let peek = e.json(&["peek", "orders.dlq", "-n", "50"]);
    let stamped = peek
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["headers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h[0] == "x-qdeck-redriven" && h[1] == "1")
        })
        .count();
    // Five from this redrive, plus the two the scene stamped by hand.
    assert_eq!(stamped, 7);
}

/// A profile's `reason_headers` are read first, then `[triage] reason_headers`, then the
/// built-in error headers.
#[test]
fn reason_headers_per_profile_come_before_the_global_ones() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("jobs.dlq", &QueueOptions::default())
        .unwrap();
    let both = [
        ("x-app-error", "db down after 42 tries"),
        ("x-error", "global 1"),
        ("x-exception-message", "builtin 1"),
    ];
    b.send_batch(
        "jobs.dlq",
        &[
            msg(b"a", &both),
            msg(b"b", &both[1..]),
            msg(b"c", &both[2..]),
        ],
    )
    .unwrap();
    let cfg = e.path("config/qdeck/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let write = |profile_line: &str| {
        std::fs::write(
            &cfg,
            format!(
                "[triage]\nreason_headers = [\"x-error\"]\n\
                 [[profiles]]\nname = \"l\"\nkind = \"local\"\n{profile_line}\n"
            ),
        )
        .unwrap();
    };
    write("reason_headers = [\"x-app-error\"]");
    let mut g = groups(&e.json(&["reasons", "jobs.dlq"]));
    g.sort();
    assert_eq!(
        g,
        vec![
            ("builtin <n>".to_string(), 1),
            ("db down after <n> tries".to_string(), 1),
            ("global <n>".to_string(), 1),
        ]
    );
    // Without the profile key, the global name wins for the first message too.
    write("");
    let mut g = groups(&e.json(&["reasons", "jobs.dlq"]));
    g.sort();
    assert_eq!(
        g,
        vec![
            ("builtin <n>".to_string(), 1),
            ("global <n>".to_string(), 2),
        ]
    );
}
