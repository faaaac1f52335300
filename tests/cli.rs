//! The one-shot CLI as a user runs it: exit codes, stderr text, JSON shape, the read-only
//! gate and the audit log. Every test gets its own XDG directories and local broker file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::cli_env::CliEnv as Env;

use std::path::{Path, PathBuf};
use std::time::Duration;

use predicates::prelude::*;
use qdeck_backend::local::QueueOptions;
use serde_json::Value;

impl Env {
    fn audit(&self) -> Vec<Value> {
        let p = self.dir.path().join("state/qdeck/audit.log");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("audit lines are JSON"))
            .collect()
    }

    fn write_config(&self, text: &str) -> PathBuf {
        let p = self.dir.path().join("config/qdeck/config.toml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Standard output of a command that must succeed.
    fn stdout(&self, args: &[&str]) -> Vec<u8> {
        self.qdeck()
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    }

    fn ls_json(&self) -> Vec<Value> {
        let out = self.qdeck().args(["ls", "-o", "json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }

    fn depth(&self, q: &str) -> u64 {
        self.ls_json()
            .into_iter()
            .find(|r| r["name"] == q)
            .and_then(|r| r["depth"].as_u64())
            .unwrap_or_else(|| panic!("no queue {q}"))
    }
}

fn send_n(e: &Env, q: &str, n: usize) {
    for i in 0..n {
        e.qdeck()
            .args(["send", q, &format!("msg {i}")])
            .assert()
            .success();
    }
}

#[test]
fn ls_on_an_empty_broker_prints_nothing() {
    let e = Env::new();
    e.qdeck()
        .args(["ls", "-o", "json"])
        .assert()
        .success()
        .stdout("[]\n");
    e.qdeck().arg("ls").assert().success().stdout("");
}

#[test]
fn ls_json_has_the_documented_fields_and_counts() {
    let e = Env::new();
    e.qdeck()
        .args([
            "create",
            "orders",
            "--dlq",
            "orders.dlq",
            "--max-receives",
            "3",
        ])
        .assert()
        .success();
    send_n(&e, "orders", 3);
    let rows = e.ls_json();
    assert_eq!(rows.len(), 2);
    let orders = &rows[0];
    for field in [
        "name",
        "kind",
        "depth",
        "in_flight",
        "delayed",
        "oldest_age_secs",
        "age_note",
        "dlq",
        "dlq_depth",
        "is_dlq",
        "dlq_sources",
        "consumers",
        "in_rate",
        "out_rate",
        "error",
    ] {
        assert!(
            orders.get(field).is_some(),
            "missing field {field}: {orders}"
        );
    }
    assert_eq!(orders["name"], "orders");
    assert_eq!(orders["depth"], 3);
    assert_eq!(orders["in_flight"], 0);
    assert_eq!(orders["dlq"], "orders.dlq");
    assert_eq!(orders["dlq_depth"], 0);
    // The local broker gives no broker-computed rates: null, never 0.
    assert_eq!(orders["in_rate"], Value::Null);
    let dlq = &rows[1];
    assert_eq!(dlq["is_dlq"], true);
    assert_eq!(dlq["dlq_sources"], serde_json::json!(["orders"]));
}

#[test]
fn pattern_filters_and_bad_pattern_is_a_usage_error() {
    let e = Env::new();
    for q in ["alpha", "beta", "alphabet"] {
        e.qdeck().args(["create", q]).assert().success();
    }
    e.qdeck()
        .args(["ls", "^alpha"])
        .assert()
        .success()
        .stdout(predicate::str::contains("alphabet"))
        .stdout(predicate::str::contains("beta\t").not());
    e.qdeck()
        .args(["ls", "("])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("qdeck: error: bad pattern"));
}

#[test]
fn unknown_queue_exits_4_with_one_line() {
    let e = Env::new();
    e.qdeck().args(["create", "orders"]).assert().success();
    let out = e
        .qdeck()
        .args(["peek", "order"])
        .assert()
        .code(4)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unknown queue \"order\"; did you mean orders?"),
        "{err}"
    );
}

#[test]
fn unknown_profile_and_bad_config_exit_2() {
    let e = Env::new();
    e.qdeck()
        .args(["--profile", "prod", "ls"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown profile \"prod\""));
    let f = e.write_config("[[profiles]]\nname = \"x\"\nkind = \"local\"\nlease = 3\n");
    e.qdeck()
        .arg("ls")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(f.display().to_string()))
        .stderr(predicate::str::contains("lease"));
    e.qdeck().args(["config", "validate"]).assert().code(2);
}

#[test]
fn peek_shows_hostile_and_binary_bodies_safely() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    e.qdeck()
        .args(["send", "q", "-"])
        .write_stdin(b"\x1b[2J\x1b]0;pwned\x07hello".to_vec())
        .assert()
        .success();
    e.qdeck()
        .args(["send", "q", "-"])
        .write_stdin(vec![0xff, 0xfe, 0x00, 0x41])
        .assert()
        .success();
    let out = e.stdout(&["peek", "q", "-o", "table"]);
    assert!(!out.contains(&0x1b), "raw ESC reached the output");
    assert!(!out.contains(&0x07), "raw BEL reached the output");
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("␛[2J"), "{text}");
    assert!(text.contains("0x ff fe 00 41"), "{text}");
    // JSON keeps the bytes exactly: text as text, binary as base64.
    let out = e.stdout(&["peek", "q", "-o", "json"]);
    let msgs: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(msgs[0]["body"], "\u{1b}[2J\u{1b}]0;pwned\u{7}hello");
    assert_eq!(msgs[1]["body"]["base64"], "//4AQQ==");
    // Browsing removed nothing.
    assert_eq!(e.depth("q"), 2);
}

#[test]
fn destructive_commands_refuse_without_a_terminal_or_yes() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    send_n(&e, "q", 2);
    e.qdeck()
        .args(["purge", "q"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("refusing without --yes"));
    assert_eq!(e.depth("q"), 2);
    e.qdeck()
        .args(["purge", "q", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "dry run: would purge q (2 ready, 0 in flight)",
        ));
    assert_eq!(e.depth("q"), 2);
    e.qdeck()
        .args(["purge", "q", "--yes"])
        .assert()
        .success()
        .stdout("purged 2 message(s)\n");
    assert_eq!(e.depth("q"), 0);
    let audit = e.audit();
    let purge = audit
        .iter()
        .find(|a| a["action"] == "purge" && a["result"] == "ok")
        .expect("purge audited");
    assert!(
        audit
            .iter()
            .any(|a| a["action"] == "purge" && a["result"] == "refused"),
        "the refusal without --yes is audited too"
    );
    assert_eq!(purge["user"], "tester");
    assert_eq!(purge["profile"], "local");
    assert_eq!(purge["queue"], "q");
    assert_eq!(purge["counts"]["purged"], 2);
    assert_eq!(purge["result"], "ok");
    assert!(purge["time"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn read_only_refuses_every_mutation_and_audits_the_refusal() {
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    send_n(&e, "q", 1);
    let before = e.audit().len();
    for args in [
        vec!["--read-only", "send", "q", "x"],
        vec!["--read-only", "purge", "q", "--yes"],
        vec!["--read-only", "redrive", "q.dlq", "--yes"],
        vec!["--read-only", "create", "other"],
    ] {
        e.qdeck()
            .args(&args)
            .assert()
            .code(5)
            .stderr(predicate::str::contains("read-only"));
    }
    assert_eq!(e.depth("q"), 1);
    assert!(!e.ls_json().iter().any(|r| r["name"] == "other"));
    let refused: Vec<Value> = e.audit().into_iter().skip(before).collect();
    assert_eq!(
        refused.len(),
        4,
        "send, purge, redrive and create refusals are audited: {refused:?}"
    );
    assert!(refused.iter().all(|a| a["result"] == "refused"));

    // The same through a read_only profile in the config file.
    e.write_config("[[profiles]]\nname = \"safe\"\nkind = \"local\"\nread_only = true\n");
    e.qdeck().args(["purge", "q", "--yes"]).assert().code(5);
    assert_eq!(e.depth("q"), 1);
    // Dry runs change nothing, so they stay allowed.
    e.qdeck()
        .args(["purge", "q", "--dry-run"])
        .assert()
        .success();
}

/// Every tier against every command: allowed ones run, the rest exit 5 naming the tier and
/// leave a "refused" audit line, and nothing reaches the broker.
#[test]
fn access_tiers_allow_and_refuse_each_command() {
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    send_n(&e, "q", 1);
    // One message to import, written by an export of the default (full) profile.
    let import = e.dir.path().join("import.jsonl");
    e.qdeck()
        .args(["export", "q", "--file"])
        .arg(&import)
        .assert()
        .success();
    let order = ["stats", "browse", "redrive", "full"];
    // (command, lowest tier, audit action when refused)
    let table: Vec<(Vec<&str>, &str, Option<&str>)> = vec![
        (vec!["ls"], "stats", None),
        (vec!["stats", "q"], "stats", None),
        (vec!["consumers", "q"], "stats", None),
        (vec!["check", "--max-depth", "1000"], "stats", None),
        (vec!["peek", "q"], "browse", Some("browse")),
        (vec!["reasons", "q.dlq"], "browse", Some("browse")),
        (
            vec!["redrive", "q.dlq", "--where", "reason = \"x\"", "--dry-run"],
            "browse",
            Some("browse"),
        ),
        (
            vec!["export", "q", "--file", "EXPORT"],
            "browse",
            Some("export"),
        ),
        (
            vec!["import", "q", "--file", "IMPORT", "--yes"],
            "redrive",
            Some("import"),
        ),
        (vec!["send", "q", "x"], "redrive", Some("send")),
        (
            vec!["redrive", "q.dlq", "--yes"],
            "redrive",
            Some("redrive"),
        ),
        (vec!["purge", "q.dlq", "--yes"], "full", Some("purge")),
        (vec!["create", "made-here"], "full", Some("create")),
        (vec!["demo", "--duration", "0s"], "full", Some("demo")),
    ];
    for (ti, tier) in order.iter().enumerate() {
        e.write_config(&format!(
            "[[profiles]]\nname = \"t\"\nkind = \"local\"\naccess = \"{tier}\"\n"
        ));
        for (args, needs, action) in &table {
            let allowed = ti >= order.iter().position(|t| t == needs).unwrap();
            if allowed && matches!(args[0], "demo" | "create") {
                continue; // they run a workload / leave a queue behind; refusals are the point
            }
            let before = e.audit().len();
            let depth_before = e.depth("q");
            let export = e.dir.path().join(format!("export-{tier}.jsonl"));
            let args: Vec<String> = args
                .iter()
                .map(|a| match *a {
                    "EXPORT" => export.display().to_string(),
                    "IMPORT" => import.display().to_string(),
                    a => a.to_string(),
                })
                .collect();
            let out = e.qdeck().args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if allowed {
                assert!(out.status.success(), "{tier} {args:?}: {err}");
                continue;
            }
            assert_eq!(out.status.code(), Some(5), "{tier} {args:?}: {err}");
            assert!(
                err.contains(&format!("access = \"{needs}\"")) && err.contains(tier),
                "{tier} {args:?}: {err}"
            );
            assert_eq!(
                e.depth("q"),
                depth_before,
                "{tier} {args:?} changed nothing"
            );
            let new: Vec<Value> = e.audit().into_iter().skip(before).collect();
            assert_eq!(new.len(), 1, "{tier} {args:?}: one audit line: {new:?}");
            assert_eq!(new[0]["result"], "refused");
            assert_eq!(new[0]["action"], action.unwrap());
            assert_eq!(new[0]["profile"], "t");
        }
    }
    // What the allowed runs did: one send and one import per tier from redrive up.
    assert_eq!(e.depth("q"), 5);
    assert!(!e.ls_json().iter().any(|r| r["name"] == "made-here"));
}

/// `--read-only` caps a `full` profile at `browse`; `read_only = true` is `browse` whatever
/// `access` says.
#[test]
fn read_only_caps_any_tier_at_browse() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    send_n(&e, "q", 1);
    e.write_config("[[profiles]]\nname = \"t\"\nkind = \"local\"\naccess = \"full\"\n");
    e.qdeck()
        .args(["--read-only", "peek", "q"])
        .assert()
        .success();
    e.qdeck()
        .args(["--read-only", "send", "q", "x"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("read-only"));
    e.write_config(
        "[[profiles]]\nname = \"t\"\nkind = \"local\"\naccess = \"full\"\nread_only = true\n",
    );
    e.qdeck().args(["purge", "q", "--yes"]).assert().code(5);
    assert_eq!(e.depth("q"), 1);
}

#[test]
fn unknown_access_value_is_a_config_error() {
    let e = Env::new();
    e.write_config("[[profiles]]\nname = \"t\"\nkind = \"local\"\naccess = \"admin\"\n");
    let out = e.qdeck().args(["ls"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("profiles[0].access") && err.contains("admin"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    e.qdeck().args(["config", "validate"]).assert().code(2);
}

#[test]
fn redrive_arguments_are_validated() {
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    e.qdeck()
        .args(["redrive", "q.dlq", "--max", "0", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--max must be at least 1"));
    // Every command taking --rate refuses a bad one alike, at parse time: exit 2, one wording.
    std::fs::write(e.dir.path().join("in.jsonl"), "").unwrap();
    let file = e.dir.path().join("in.jsonl");
    let file = file.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["redrive", "q.dlq", "--yes"],
        &["redrive", "q.dlq", "--yes", "--where", "reason = \"x\""],
        &["copy", "q.dlq", "--to", "q", "--yes"],
        &["move", "q.dlq", "--to", "q", "--yes"],
        &["import", "q", "-f", file, "--yes"],
    ];
    for cmd in commands {
        for bad in ["0", "-3", "NaN", "inf", "abc", ""] {
            let out = e
                .qdeck()
                .args(cmd)
                .arg(format!("--rate={bad}"))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd:?} --rate={bad}: {err}");
            assert!(
                err.contains("--rate") && err.contains(qdeck_model::rate::RATE_RULE),
                "{cmd:?} --rate={bad}: {err}"
            );
        }
    }
    e.qdeck()
        .args(["redrive", "q.dlq", "--rate", "0.5", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("at most 0.5/s"));
    e.qdeck()
        .args(["redrive", "q.dlq", "--max", "-1", "--yes"])
        .assert()
        .code(2);
}

/// Dead-letter `n` messages of `q` (max_receives 1) through the worker API.
fn dead_letter(e: &Env, q: &str, n: usize) {
    send_n(e, q, n);
    let b = e.local();
    let got = b.receive(q, "w1", n, None).unwrap();
    assert_eq!(got.len(), n);
    let receipts: Vec<String> = got.iter().map(|l| l.receipt.clone()).collect();
    b.nack(q, "w1", &receipts, Duration::ZERO).unwrap();
}

#[test]
fn redrive_moves_to_origin_with_max_and_reports() {
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    dead_letter(&e, "q", 5);
    assert_eq!(e.depth("q.dlq"), 5);
    assert_eq!(e.depth("q"), 0);
    e.qdeck()
        .args(["redrive", "q.dlq", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "would move 5 message(s) from q.dlq to their origin (q)",
        ));
    assert_eq!(e.depth("q.dlq"), 5);
    let out = e.stdout(&["redrive", "q.dlq", "--max", "3", "--yes", "-o", "json"]);
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(r["moved"], 3);
    assert_eq!(r["failed"], 0);
    assert_eq!(r["possibly_duplicated"], 0);
    assert_eq!(e.depth("q.dlq"), 2);
    assert_eq!(e.depth("q"), 3);
    let a = e.audit();
    let last = a.iter().rev().find(|a| a["action"] == "redrive").unwrap();
    assert_eq!(last["counts"]["moved"], 3);
    assert_eq!(last["target"], "origin");
}

#[test]
fn redrive_without_origin_or_target_fails_clearly() {
    let e = Env::new();
    e.qdeck().args(["create", "parking"]).assert().success();
    send_n(&e, "parking", 2);
    e.qdeck()
        .args(["redrive", "parking", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("give a target queue (--to QUEUE)"));
    assert_eq!(e.depth("parking"), 2);
    e.qdeck().args(["create", "work"]).assert().success();
    e.qdeck()
        .args(["redrive", "parking", "--to", "work", "--yes"])
        .assert()
        .success();
    assert_eq!(e.depth("work"), 2);
    assert_eq!(e.depth("parking"), 0);
}

#[test]
fn check_follows_the_monitoring_plugin_convention() {
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    send_n(&e, "q", 3);
    e.qdeck()
        .args(["check", "--max-depth", "10"])
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with(
            "QDECK OK - 2 queue(s) within limits",
        ));
    e.qdeck()
        .args(["check", "--warn-depth", "2", "--max-depth", "10"])
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("QDECK WARNING - 1 problem(s)"));
    e.qdeck()
        .args(["check", "--max-depth", "2"])
        .assert()
        .code(2)
        .stdout(
            predicate::str::contains("QDECK CRITICAL")
                .and(predicate::str::contains("q depth 3 > 2")),
        );
    dead_letter(&e, "q", 1);
    e.qdeck()
        .args(["check", "--max-dlq", "0"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("q.dlq dlq depth 1 > 0"));
    e.qdeck()
        .args(["check", "^nomatch$"])
        .assert()
        .code(3)
        .stdout(predicate::str::starts_with("QDECK UNKNOWN"));
    let out = e
        .qdeck()
        .args(["check", "--max-depth", "99"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
}

#[test]
fn check_is_unknown_when_the_broker_is_unusable() {
    let e = Env::new();
    std::fs::create_dir_all(e.db().parent().unwrap()).unwrap();
    std::fs::write(e.db(), vec![0x42u8; 8192]).unwrap();
    e.qdeck()
        .args(["check", "--max-depth", "1"])
        .assert()
        .code(3);
}

#[test]
fn corrupt_database_is_a_storage_error_and_left_alone() {
    let e = Env::new();
    std::fs::create_dir_all(e.db().parent().unwrap()).unwrap();
    let garbage = vec![0x42u8; 8192];
    std::fs::write(e.db(), &garbage).unwrap();
    e.qdeck()
        .arg("ls")
        .assert()
        .code(7)
        .stderr(predicate::str::contains("not a qdeck database"));
    assert_eq!(
        std::fs::read(e.db()).unwrap(),
        garbage,
        "the file was not touched"
    );
}

#[test]
fn config_show_redacts_and_env_layers_override() {
    let e = Env::new();
    // A password inside amqp_url is refused, naming the key, without echoing it.
    e.write_config(
        r#"
[[profiles]]
name = "rabbit"
kind = "rabbitmq"
amqp_url = "amqp://admin:hunter2@broker:5672/%2f"
"#,
    );
    let out = e.qdeck().args(["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("profiles[0].amqp_url") && err.contains("password_env"),
        "{err}"
    );
    assert!(!err.contains("hunter2") && out.stdout.is_empty(), "{err}");

    e.write_config(
        r#"
[[profiles]]
name = "rabbit"
kind = "rabbitmq"
amqp_url = "amqp://admin@broker:5672/%2f"
password_env = "RABBIT_PW"
"#,
    );
    let out = e
        .qdeck()
        .args(["config", "show"])
        .env("QDECK_UI__REFRESH_SECS", "7")
        .env("RABBIT_PW", "topsecret")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("topsecret"), "{text}");
    assert!(text.contains("amqp://admin@broker:5672"), "{text}");
    assert!(
        text.contains("refresh_secs = 7"),
        "env layer applied: {text}"
    );
    assert!(text.contains("password_env = \"RABBIT_PW\""), "{text}");
}

#[test]
fn config_path_validate_and_completions() {
    let e = Env::new();
    e.qdeck()
        .args(["config", "path"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "config/qdeck/config.toml (does not exist",
        ));
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    e.qdeck()
        .args(["config", "validate"])
        .arg(&example)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "valid, 8 profiles: local, rabbit-dev, aws-prod, azure-prod, jobs, js, kafka, gcp; 3 alert rules\n",
        ));
    e.qdeck()
        .args(["completions", "bash"])
        .assert()
        .success()
        .stdout(predicate::str::contains("qdeck"));
}

#[test]
fn send_reads_stdin_and_keeps_key_and_headers() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("q", &QueueOptions::default()).unwrap();
    e.qdeck()
        .args(["send", "q", "-", "--key", "order-7", "-H", "trace=abc"])
        .write_stdin("from stdin")
        .assert()
        .success();
    let out = e.stdout(&["peek", "q", "-o", "json"]);
    let msgs: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(msgs[0]["body"], "from stdin");
    assert_eq!(msgs[0]["key"], "order-7");
    assert!(msgs[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h[0] == "trace" && h[1] == "abc"));
    e.qdeck()
        .args(["send", "q", "x", "-H", "novalue"])
        .assert()
        .code(2);
}

#[test]
fn console_without_a_terminal_explains_itself() {
    let e = Env::new();
    e.qdeck()
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the console needs a terminal"));
}

#[test]
fn unrelated_qdeck_variables_do_not_break_the_config() {
    let e = Env::new();
    e.qdeck()
        .args(["ls"])
        .env("QDECK_LOG", "debug")
        .env("QDECK_TEST_SQS_ENDPOINT", "http://127.0.0.1:1")
        .env("QDECK_REQUIRE_BROKERS", "1")
        .assert()
        .success();
}

#[test]
fn every_refusal_is_audited_including_missing_yes_and_the_demo() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    send_n(&e, "q", 1);
    let before = e.audit().len();
    e.qdeck().args(["purge", "q"]).assert().code(5);
    e.qdeck()
        .args(["--read-only", "demo", "--duration", "1s"])
        .assert()
        .code(5);
    let lines: Vec<Value> = e.audit().into_iter().skip(before).collect();
    let got: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["action"].as_str().unwrap(), l["result"].as_str().unwrap()))
        .collect();
    assert_eq!(got, vec![("purge", "refused"), ("demo", "refused")]);
    assert!(lines[0]["error"].as_str().unwrap().contains("--yes"));
    assert_eq!(e.depth("q"), 1);
}

#[test]
fn dry_run_and_real_run_agree_on_a_dlq_without_origins() {
    let e = Env::new();
    e.qdeck().args(["create", "orders"]).assert().success();
    send_n(&e, "orders", 3);
    let dry = e
        .qdeck()
        .args(["redrive", "orders", "--dry-run"])
        .output()
        .unwrap();
    let real = e
        .qdeck()
        .args(["redrive", "orders", "--yes"])
        .output()
        .unwrap();
    assert_eq!(
        dry.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&dry.stdout)
    );
    assert_eq!(dry.status.code(), real.status.code());
    assert_eq!(dry.stderr, real.stderr);
    assert_eq!(e.depth("orders"), 3);
}

#[test]
fn a_redrive_moves_what_was_confirmed_even_if_more_arrives() {
    // The dry run counts exactly what the broker holds now, and JSON stays JSON when the
    // source is empty.
    let e = Env::new();
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    let out = e.stdout(&["redrive", "q.dlq", "--yes", "-o", "json"]);
    let r: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(r["moved"], 0);
    dead_letter(&e, "q", 4);
    let out = e.stdout(&["redrive", "q.dlq", "--dry-run", "-o", "json"]);
    let plan: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(plan["count"], 4);
    assert_eq!(plan["exact"], true);
}

#[test]
fn refused_and_failed_commands_still_answer_json() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    send_n(&e, "q", 1);
    let out = e
        .qdeck()
        .args(["purge", "q", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["exit_code"], 5);
    assert!(v["error"].as_str().unwrap().contains("--yes"));
    let out = e
        .qdeck()
        .args(["stats", "nope", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["exit_code"], 4);
}

#[test]
fn check_judges_the_dlq_of_every_matched_queue_and_needs_a_threshold() {
    let e = Env::new();
    e.qdeck()
        .args([
            "create",
            "orders",
            "--dlq",
            "orders.dlq",
            "--max-receives",
            "1",
        ])
        .assert()
        .success();
    dead_letter(&e, "orders", 3);
    // The pattern matches the source only; its DLQ is still judged.
    e.qdeck()
        .args(["check", "orders$", "--max-dlq", "0"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("orders.dlq dlq depth 3 > 0"));
    // A DLQ's age is not a queue age: --max-age leaves it alone, --max-dlq-age does not.
    e.qdeck()
        .args(["check", "--max-age", "0s"])
        .assert()
        .code(0);
    e.qdeck()
        .args(["check", "--max-dlq-age", "0s"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("orders.dlq dlq age"));
    e.qdeck()
        .args(["check", "orders"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("no threshold"));
    // Growth is measured between runs: the first run records, the second judges.
    e.qdeck()
        .args(["check", "--max-dlq-growth", "1"])
        .assert()
        .code(0);
    dead_letter(&e, "orders", 2);
    e.qdeck()
        .args(["check", "--max-dlq-growth", "1"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("orders.dlq dlq growth 2 > 1"));
    e.qdeck()
        .args(["check", "--max-dlq-growth", "1"])
        .assert()
        .code(0);
}

#[test]
fn check_perfdata_covers_every_matched_queue() {
    let e = Env::new();
    let b = e.local();
    for i in 0..60 {
        b.create_queue(&format!("q{i:02}"), &QueueOptions::default())
            .unwrap();
    }
    let out = e.stdout(&["check", "--max-depth", "5"]);
    let text = String::from_utf8(out).unwrap();
    let perf = text.split_once(" | ").unwrap().1;
    for i in 0..60 {
        assert!(perf.contains(&format!("'q{i:02} depth'=0;;5")), "{perf}");
    }
    // Each value carries the thresholds it was judged by (`;warn;crit`), for graphers.
    let out = e.stdout(&["check", "q07", "--warn-depth", "3", "--max-depth", "5"]);
    let text = String::from_utf8(out).unwrap();
    let perf = text.split_once(" | ").unwrap().1;
    assert!(perf.contains("'q07 depth'=0;3;5"), "{text}");
}

#[test]
fn user_input_in_errors_is_escaped() {
    let e = Env::new();
    let hostile = "(\u{1b}]0;PWNED\u{7}";
    for args in [
        vec!["ls", hostile],
        vec!["stats", hostile],
        vec!["ls", "-o", hostile],
        vec!["ls", "--profile", hostile],
    ] {
        let out = e.qdeck().args(&args).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b),
            "{args:?}: {err}"
        );
        // clap drops escape sequences from its own messages; qdeck's show them visibly.
        if args[1] != "-o" {
            assert!(
                err.contains("␛]0;PWNED") || err.contains("\\u{1b}]0;PWNED"),
                "{args:?}: the escape is shown visibly: {err}"
            );
        }
    }
}

#[test]
fn json_escapes_bidi_controls_and_machine_formats_use_plain_values() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("pay\u{202e}gpj.exe", &QueueOptions::default())
        .unwrap();
    b.create_queue("plain", &QueueOptions::default()).unwrap();
    let out = e.stdout(&["ls", "-o", "json"]);
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        !text.contains('\u{202e}') && text.contains("\\u202e"),
        "{text}"
    );
    let rows: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert!(rows.iter().any(|r| r["name"] == "pay\u{202e}gpj.exe"));
    let csv = String::from_utf8(e.stdout(&["ls", "plain", "-o", "csv"])).unwrap();
    assert!(!csv.contains('—'), "{csv}");
    assert_eq!(csv.lines().nth(1).unwrap(), "plain,0,0,0,0,,,0,");
}

#[test]
fn sample_adds_the_consoles_derived_figures() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    send_n(&e, "q", 3);
    let out = e.stdout(&["ls", "--sample", "1s", "-o", "json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out).unwrap();
    let d = &rows[0]["derived"];
    assert!(d.is_object(), "{rows:?}");
    assert!(d["trend"].is_string(), "{d}");
    assert!(d.get("workers_needed").is_some());
    // Without --sample the row shape is unchanged.
    let plain: Vec<Value> = serde_json::from_slice(&e.stdout(&["ls", "-o", "json"])).unwrap();
    assert!(plain[0].get("derived").is_none());
    let text = String::from_utf8(e.stdout(&["stats", "q", "--sample", "1s"])).unwrap();
    assert!(text.contains("time to drain"), "{text}");
    e.qdeck()
        .args(["check", "--max-stuck"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("--sample"));
}

// ---------- edit and resend ----------

/// One message with two headers, dead-lettered from `q` into `q.dlq`; returns its id there.
fn dead_lettered_with_headers(e: &Env) -> String {
    e.qdeck()
        .args(["create", "q", "--dlq", "q.dlq", "--max-receives", "1"])
        .assert()
        .success();
    e.qdeck()
        .args([
            "send",
            "q",
            "hello world",
            "-H",
            "x-tenant=acme",
            "-H",
            "x-keep=1",
            "--key",
            "k1",
        ])
        .assert()
        .success();
    let b = e.local();
    let got = b.receive("q", "w1", 1, None).unwrap();
    b.nack("q", "w1", &[got[0].receipt.clone()], Duration::ZERO)
        .unwrap();
    let peek: Vec<Value> =
        serde_json::from_slice(&e.stdout(&["peek", "q.dlq", "-o", "json"])).unwrap();
    assert_eq!(peek.len(), 1);
    peek[0]["id"].as_str().unwrap().to_string()
}

fn peek_json(e: &Env, q: &str) -> Vec<Value> {
    serde_json::from_slice(&e.stdout(&["peek", q, "-o", "json"])).unwrap()
}

#[test]
fn edit_sends_the_edited_copy_to_origin_then_deletes_the_original() {
    let e = Env::new();
    let id = dead_lettered_with_headers(&e);
    // The "editor" changes the body and removes one header line.
    let out = e
        .qdeck()
        .env("EDITOR", "sed -i -e s/hello/HELLO/ -e /^x-tenant/d")
        .args(["edit", "q.dlq", &id, "--yes", "-o", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r["target"], "q",
        "origin of a dead letter is its source queue"
    );
    assert_eq!(r["deleted"], true);
    assert_eq!(e.depth("q.dlq"), 0, "original deleted");
    let msgs = peek_json(&e, "q");
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["body"], "HELLO world");
    assert_eq!(msgs[0]["key"], "k1");
    let headers = msgs[0]["headers"].to_string();
    assert!(
        !headers.contains("x-tenant"),
        "removed header stays removed: {headers}"
    );
    assert!(headers.contains("x-keep"), "{headers}");
    // One audit line with both ids.
    let a = e
        .audit()
        .into_iter()
        .rfind(|a| a["action"] == "edit")
        .unwrap();
    assert_eq!(a["result"], "ok");
    assert_eq!(a["queue"], "q.dlq");
    assert_eq!(a["target"], "q");
    assert_eq!(a["counts"]["original_id"], id.as_str());
    assert_eq!(a["counts"]["new_id"], r["new_id"]);
}

#[test]
fn edit_to_a_named_queue_and_unknown_targets() {
    let e = Env::new();
    let id = dead_lettered_with_headers(&e);
    e.qdeck().args(["create", "other"]).assert().success();
    e.qdeck()
        .env("EDITOR", "sed -i s/hello/bye/")
        .args(["edit", "q.dlq", &id, "--to", "nope", "--yes"])
        .assert()
        .code(4);
    e.qdeck()
        .env("EDITOR", "sed -i s/hello/bye/")
        .args(["edit", "q.dlq", "999999", "--yes"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("999999"));
    assert_eq!(e.depth("q.dlq"), 1);
    e.qdeck()
        .env("EDITOR", "sed -i s/hello/bye/")
        .args(["edit", "q.dlq", &id, "--to", "other", "--yes"])
        .assert()
        .success();
    assert_eq!(peek_json(&e, "other")[0]["body"], "bye world");
    assert_eq!(e.depth("q.dlq"), 0);
    assert_eq!(e.depth("q"), 0);
}

/// An editor that fails, or saves nothing new, or leaves an unreadable file: nothing sent,
/// nothing deleted, and a clear line.
#[test]
fn edit_sends_nothing_when_the_editor_fails_or_changes_nothing() {
    let e = Env::new();
    let id = dead_lettered_with_headers(&e);
    let cases = [
        ("sed -i s/hello/bye/ \"$1\"; false", 5, "exited with"),
        ("true", 5, "unchanged"),
        ("sed -i s/^x-keep/x-keep/", 5, "unchanged"),
        ("sed -i /^+++/d", 2, "missing"),
        ("/nonexistent/editor", 5, "exited with"),
    ];
    for (editor, code, says) in cases {
        e.qdeck()
            .env("EDITOR", editor)
            .args(["edit", "q.dlq", &id, "--yes"])
            .assert()
            .code(code)
            .stderr(predicate::str::contains(says))
            .stderr(predicate::str::contains("nothing was sent"));
        assert_eq!(e.depth("q.dlq"), 1, "{editor}");
        assert_eq!(e.depth("q"), 0, "{editor}");
    }
    // VISUAL wins over EDITOR.
    e.qdeck()
        .env("VISUAL", "sed -i s/hello/visual/")
        .env("EDITOR", "false")
        .args(["edit", "q.dlq", &id, "--yes"])
        .assert()
        .success();
    assert_eq!(peek_json(&e, "q")[0]["body"], "visual world");
    // At tier browse the editor never opens.
    e.write_config("[[profiles]]\nname = \"t\"\nkind = \"local\"\naccess = \"browse\"\n");
    let ran = e.dir.path().join("editor-ran");
    e.qdeck()
        .env("EDITOR", format!("touch {} ; true", ran.display()))
        .args(["edit", "q", "1", "--yes"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("access = \"redrive\""));
    assert!(!ran.exists(), "the editor never opened");
}

/// Two local brokers and a RabbitMQ nobody listens on (port 1 refuses at once).
fn fleet(e: &Env) {
    let d = e.dir.path();
    e.write_config(&format!(
        r#"
[[profiles]]
name = "east"
kind = "local"
path = "{east}"

[[profiles]]
name = "west"
kind = "local"
path = "{west}"

[[profiles]]
name = "gone"
kind = "rabbitmq"
amqp_url = "amqp://guest@127.0.0.1:1/%2f"
management_url = "http://127.0.0.1:1"
"#,
        east = d.join("east.db").display(),
        west = d.join("west.db").display(),
    ));
    for (p, q, n) in [
        ("east", "orders", 3),
        ("west", "orders", 5),
        ("west", "mail", 1),
    ] {
        e.qdeck().args(["-p", p, "create", q]).assert().success();
        for i in 0..n {
            e.qdeck()
                .args(["-p", p, "send", q, &format!("m{i}")])
                .assert()
                .success();
        }
    }
}

fn json_of(out: &std::process::Output) -> Vec<Value> {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!("not JSON: {}", String::from_utf8_lossy(&out.stdout));
    })
}

#[test]
fn ls_over_a_profile_list_tags_rows_and_survives_a_dead_broker() {
    let e = Env::new();
    fleet(&e);
    // Both live profiles answer: rows carry `profile`, exit 0.
    let out = e
        .qdeck()
        .args(["ls", "-p", "east,west", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let rows = json_of(&out);
    let depth = |p: &str, q: &str| {
        rows.iter()
            .find(|r| r["profile"] == p && r["name"] == q)
            .and_then(|r| r["depth"].as_u64())
    };
    assert_eq!(rows.len(), 3);
    assert_eq!(depth("east", "orders"), Some(3));
    assert_eq!(depth("west", "orders"), Some(5));
    assert_eq!(depth("west", "mail"), Some(1));
    // Every profile, one of them dead: its error row, the others' rows, exit 3 (partial).
    let out = e
        .qdeck()
        .args(["ls", "--all-profiles", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let rows = json_of(&out);
    assert_eq!(rows.iter().filter(|r| r["name"].is_string()).count(), 3);
    let dead: Vec<&Value> = rows.iter().filter(|r| r["profile"] == "gone").collect();
    assert_eq!(dead.len(), 1, "{rows:?}");
    assert_eq!(dead[0]["exit_code"], 6);
    assert!(dead[0]["error"].as_str().unwrap().len() > 3);
    assert!(String::from_utf8_lossy(&out.stderr).contains("profile gone:"));
    // The table has a PROFILE column and an error row for the dead profile.
    let out = e
        .qdeck()
        .args(["ls", "--all-profiles", "-o", "table"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("PROFILE  NAME"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("gone ") && l.contains("error:")),
        "{text}"
    );
    // One profile named alone keeps the one-profile output: no `profile` field.
    let out = e
        .qdeck()
        .args(["ls", "-p", "west", "-o", "json"])
        .output()
        .unwrap();
    assert!(json_of(&out).iter().all(|r| r.get("profile").is_none()));
    // Only the dead profile: its own exit code.
    e.qdeck()
        .args(["ls", "-p", "gone,gone", "-o", "json"])
        .assert()
        .code(6);
    e.qdeck()
        .args(["ls", "-p", "east,nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown profile \"nope\""));
    e.qdeck()
        .args(["peek", "orders", "-p", "east,west"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("ls, stats and check only"));
}

#[test]
fn stats_over_a_profile_list_gives_one_answer_per_profile() {
    let e = Env::new();
    fleet(&e);
    let out = e
        .qdeck()
        .args(["stats", "mail", "--all-profiles", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let rows = json_of(&out);
    let by = |p: &str| rows.iter().find(|r| r["profile"] == p).unwrap();
    assert_eq!(by("west")["queue"]["depth"], 1);
    assert!(by("west")["capabilities"].is_object());
    assert_eq!(by("east")["exit_code"], 4, "mail exists only in west");
    assert_eq!(by("gone")["exit_code"], 6);
}

#[test]
fn check_over_every_profile_is_one_line_with_the_worst_status() {
    let e = Env::new();
    fleet(&e);
    let line = |args: &[&str]| {
        let out = e.qdeck().args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        (out.status.code(), text)
    };
    let (code, text) = line(&["check", "-p", "east,west", "--max-depth", "10"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("'east/orders depth'=3") && text.contains("'west/orders depth'=5"));
    let (code, text) = line(&["check", "-p", "east,west", "--max-depth", "4"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("west: orders depth 5 > 4"), "{text}");
    // The dead broker is UNKNOWN; the live ones are still judged and still in the perfdata.
    let (code, text) = line(&["check", "--all-profiles", "--max-depth", "10"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("gone: ") && text.contains("'west/mail depth'=1"),
        "{text}"
    );
    // A critical queue is louder than the dead broker.
    let (code, text) = line(&["check", "--all-profiles", "--max-depth", "4"]);
    assert_eq!(code, Some(2), "{text}");
}

/// A field of a message in `-o json`: the broker's metadata (state, due time), properties or
/// headers, each a list of `[name, value]`.
fn header<'a>(m: &'a Value, name: &str) -> Option<&'a str> {
    ["meta", "properties", "headers"]
        .iter()
        .filter_map(|part| m[part].as_array())
        .flatten()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

fn scheduled_json(e: &Env, q: &str) -> Vec<Value> {
    serde_json::from_slice(&e.stdout(&["peek", q, "--scheduled", "-o", "json"])).unwrap()
}

#[test]
fn peek_scheduled_lists_only_delayed_messages_soonest_first_with_due_time() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    let before = chrono::Utc::now();
    for (body, delay) in [("in 3h", "3h"), ("in 1h", "1h"), ("in 2h", "2h")] {
        e.qdeck()
            .args(["send", "q", body, "--delay", delay])
            .assert()
            .success();
    }
    send_n(&e, "q", 1);

    let listed = scheduled_json(&e, "q");
    let bodies: Vec<&str> = listed.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["in 1h", "in 2h", "in 3h"]);
    let due = header(&listed[0], "due-at").expect("due-at header");
    let due = chrono::DateTime::parse_from_rfc3339(due).unwrap();
    let ahead = due.signed_duration_since(before).num_seconds();
    assert!((3590..=3660).contains(&ahead), "due {ahead}s after send");
    assert_eq!(header(&listed[0], "state"), Some("delayed"));

    // -n pages through the listing in due order.
    let out = e.stdout(&["peek", "q", "--scheduled", "-n", "2", "-o", "json"]);
    let two: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[1]["body"], "in 2h");

    let table = String::from_utf8(e.stdout(&["peek", "q", "--scheduled", "-o", "table"])).unwrap();
    assert!(
        table.contains("DUE_IN") && table.contains("in 1h"),
        "{table}"
    );
    assert!(
        !table.contains("msg 0"),
        "a ready message is not scheduled: {table}"
    );

    // Plain peek is unchanged: every message, ready and delayed, in id order.
    assert_eq!(peek_json(&e, "q").len(), 4);
    assert_eq!(e.depth("q"), 1);

    e.qdeck()
        .args(["peek", "nope", "--scheduled"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("nope"));
}

#[test]
fn cancel_scheduled_deletes_one_delayed_message_through_the_gate() {
    let e = Env::new();
    e.qdeck().args(["create", "q"]).assert().success();
    e.qdeck()
        .args(["send", "q", "later", "--delay", "1h"])
        .assert()
        .success();
    send_n(&e, "q", 1);
    let delayed = scheduled_json(&e, "q")[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ready = peek_json(&e, "q")
        .into_iter()
        .find(|m| m["body"] == "msg 0")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    // A ready message is not cancellable; nothing changes.
    e.qdeck()
        .args(["cancel-scheduled", "q", &ready, "--yes"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("no delayed message"));
    // No terminal, no --yes: refused. Read-only: refused.
    e.qdeck()
        .args(["cancel-scheduled", "q", &delayed])
        .assert()
        .code(5);
    e.qdeck()
        .args(["--read-only", "cancel-scheduled", "q", &delayed, "--yes"])
        .assert()
        .code(5);
    assert_eq!(peek_json(&e, "q").len(), 2);

    e.qdeck()
        .args(["cancel-scheduled", "q", &delayed, "--yes"])
        .assert()
        .success();
    assert!(scheduled_json(&e, "q").is_empty());
    let left = peek_json(&e, "q");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["body"], "msg 0");
    let audit = e.audit();
    let last = audit.last().unwrap();
    assert_eq!(last["action"], "delete");
    assert_eq!(last["result"], "ok");
    assert_eq!(
        last["counts"]["cancel_scheduled"],
        delayed.as_str(),
        "{last}"
    );
}

/// The Service Bus emulator's connection string names its AMQP endpoint; without
/// `management_url` the listing goes there and fails. The error says what to set, in one
/// line, with the unreachable code (6).
#[test]
fn the_service_bus_emulator_without_management_url_says_what_to_set() {
    let e = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = e.write_config(
        "[[profiles]]\nname = \"emu\"\nkind = \"servicebus\"\nconnection_string_env = \"QDECK_EMU\"\n",
    );
    let conn = format!(
        "Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"
    );
    let out = e
        .qdeck()
        .env("QDECK_EMU", conn)
        .args(["--config", cfg.to_str().unwrap(), "ls"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("set management_url"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// `--help` opens with the package's description, which names every system qdeck reads (it
/// named four while the package read ten).
#[test]
fn help_names_every_system() {
    let env = Env::new();
    let out = String::from_utf8(env.stdout(&["--help"])).unwrap();
    // The first paragraph, as clap wraps it.
    let first = out
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(first, env!("CARGO_PKG_DESCRIPTION"));
    for system in [
        "SQS",
        "Service Bus",
        "RabbitMQ",
        "BullMQ",
        "Sidekiq",
        "RQ",
        "Celery",
        "NATS JetStream",
        "Kafka",
        "Pub/Sub",
        "local broker",
    ] {
        assert!(first.contains(system), "{system} missing from {first:?}");
    }
}
