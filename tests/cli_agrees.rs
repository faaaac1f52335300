//! The CLI tells what the console tells, in every format (issue 25): workers needed from a
//! sample, reasons through a queue's DLQ, bodies whole for scripts, figures and their notes
//! apart, worker states as values, and commands that say what they did. Each test runs the
//! binary on its own local broker file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::cli_env::CliEnv as Env;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use qdeck_backend::local::{LocalBackend, QueueOptions};
use qdeck_model::domain::OutgoingMessage;
use serde_json::Value;

impl Env {
    /// Standard output of a command that must succeed.
    fn stdout(&self, args: &[&str]) -> String {
        let out = self.qdeck().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let text = self.stdout(&[args, &["-o", "json"]].concat());
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }
}

fn msg(body: &[u8]) -> OutgoingMessage {
    OutgoingMessage {
        body: body.to_vec(),
        ..Default::default()
    }
}

/// One worker taking a message, acknowledging it and pausing, until dropped.
struct SteadyWorker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SteadyWorker {
    fn start(b: LocalBackend, queue: &'static str) -> SteadyWorker {
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                if let Ok(got) = b.receive(queue, "steady-1", 1, None) {
                    let receipts: Vec<String> = got.into_iter().map(|m| m.receipt).collect();
                    let _ = b.ack(queue, "steady-1", &receipts);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = b.release_worker("steady-1");
        });
        SteadyWorker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SteadyWorker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------- item 8: workers needed from a sample ----------

/// One steady consumer for the whole sample: `ls --sample` and `stats --sample` give workers
/// needed (the console's sum on the work between the two polls), not "measuring" forever.
#[test]
fn sample_gives_workers_needed_with_a_steady_consumer() {
    let e = Env::new();
    let b = e.local();
    b.create_queue("work", &QueueOptions::default()).unwrap();
    let backlog: Vec<OutgoingMessage> =
        (0..2000).map(|i| msg(format!("m{i}").as_bytes())).collect();
    b.send_batch("work", &backlog).unwrap();
    let _worker = SteadyWorker::start(e.local(), "work");
    // The worker is seen before the first poll.
    std::thread::sleep(Duration::from_millis(300));

    let rows = e.json(&["ls", "--sample", "3s"]);
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "work")
        .unwrap();
    let d = &row["derived"];
    assert_eq!(row["consumers"], 1, "{row}");
    assert_eq!(d["measuring"], false, "{d}");
    assert!(d["per_worker_rate"].as_f64().unwrap() > 0.0, "{d}");
    assert!(d["workers_needed"].as_u64().unwrap() >= 1, "{d}");
    assert!(
        d["arithmetic"].as_str().unwrap().contains("per worker"),
        "{d}"
    );

    let stats = e.json(&["stats", "work", "--sample", "3s"]);
    let d = &stats["queue"]["derived"];
    assert!(d["workers_needed"].as_u64().is_some(), "{d}");
    let plain = e.stdout(&["stats", "work", "--sample", "3s", "-o", "plain"]);
    let needed = plain
        .lines()
        .find_map(|l| l.strip_prefix("workers needed\t"))
        .unwrap();
    assert!(needed.parse::<u32>().is_ok(), "{plain}");
}

// ---------- item 11: reasons through the DLQ ----------

/// `reasons orders` reads orders' DLQ (as the console's `F` does) and says so; `--live` reads
/// the live queue.
#[test]
fn reasons_of_a_queue_read_its_dlq_and_say_so() {
    let e = Env::new();
    e.stdout(&[
        "create",
        "orders",
        "--dlq",
        "orders.dlq",
        "--max-receives",
        "1",
    ]);
    e.stdout(&["create", "plain"]);
    let b = e.local();
    b.send_batch("orders", &[msg(b"doomed"), msg(b"doomed too")])
        .unwrap();
    for _ in 0..2 {
        let got = b.receive("orders", "w", 1, None).unwrap();
        let receipts: Vec<String> = got.into_iter().map(|m| m.receipt).collect();
        assert_eq!(b.nack("orders", "w", &receipts, Duration::ZERO).unwrap(), 1);
    }
    b.send_batch("orders", &[msg(b"live and well")]).unwrap();

    let r = e.json(&["reasons", "orders"]);
    assert_eq!(r["queue"], "orders.dlq", "{r}");
    assert_eq!(r["dlq_of"], "orders");
    assert_eq!(r["scanned"], 2, "the DLQ's two, not the live one");
    let table = e.stdout(&["reasons", "orders", "-o", "table"]);
    assert!(
        table.starts_with("reasons of orders.dlq (the DLQ of orders)\n"),
        "{table}"
    );
    let out = e
        .qdeck()
        .args(["reasons", "orders", "-o", "plain"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reasons of orders.dlq (the DLQ of orders): grouped all 2"),
        "{err}"
    );

    let live = e.json(&["reasons", "orders", "--live"]);
    assert_eq!(live["queue"], "orders");
    assert_eq!(live["scanned"], 1);
    assert_eq!(live["live"], true);
    assert_eq!(live["dlq_of"], Value::Null);

    let dlq = e.json(&["reasons", "orders.dlq"]);
    assert_eq!(
        (dlq["queue"].as_str(), dlq["scanned"].as_u64()),
        (Some("orders.dlq"), Some(2))
    );

    // A queue that is neither a known DLQ nor has one (a parking queue no source names) is
    // read itself, and the title says so.
    let table = e.stdout(&["reasons", "plain", "-o", "table"]);
    assert!(
        table.starts_with("reasons of plain (no DLQ of its own: its messages)\n"),
        "{table}"
    );
}

// ---------- item 12: whole bodies for scripts ----------

/// CSV and plain never cut a body; an empty body is an empty cell in every format.
#[test]
fn peek_csv_and_plain_print_whole_bodies_and_empty_cells() {
    let e = Env::new();
    e.stdout(&["create", "q"]);
    let long = format!("{{\"order\": 7, \"note\": \"{}\"}}", "x".repeat(300));
    let b = e.local();
    b.send_batch(
        "q",
        &[
            msg(long.as_bytes()),
            msg(b""),
            msg(b"two\nlines\tand a tab"),
        ],
    )
    .unwrap();

    let csv = e.stdout(&["peek", "q", "-o", "csv"]);
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let body = |row: &csv::StringRecord| row.get(7).unwrap().to_string();
    assert_eq!(body(&rows[0]), long);
    assert_eq!(body(&rows[1]), "");
    assert_eq!(body(&rows[2]), "two\nlines\tand a tab");
    assert!(!csv.contains('…') && !csv.contains("(empty)"), "{csv}");

    let plain = e.stdout(&["peek", "q", "-o", "plain"]);
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(lines.len(), 3, "one line per message: {plain}");
    let cell = |l: &str| l.split('\t').nth(7).unwrap().to_string();
    assert_eq!(cell(lines[0]), long);
    assert_eq!(cell(lines[1]), "");
    assert_eq!(cell(lines[2]), "two␊lines␉and a tab");

    let table = e.stdout(&["peek", "q", "-o", "table"]);
    assert!(!table.contains("(empty)"), "{table}");
}

/// `peek --scheduled` follows the same rule.
#[test]
fn scheduled_listing_prints_whole_bodies() {
    let e = Env::new();
    e.stdout(&["create", "q"]);
    let long = "y".repeat(200);
    e.stdout(&["send", "q", &long, "--delay", "1h"]);
    let csv = e.stdout(&["peek", "q", "--scheduled", "-o", "csv"]);
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let row = r.records().next().unwrap().unwrap();
    assert_eq!(row.get(7), Some(long.as_str()), "{csv}");
}

// ---------- item 13: stats figures and worker states ----------

/// `stats` for scripts: a figure is a number or an empty value, its note on a line of its own;
/// CSV is CSV.
#[test]
fn stats_machine_output_keeps_figures_and_notes_apart() {
    let e = Env::new();
    e.stdout(&["create", "q"]);
    let plain = e.stdout(&["stats", "q", "--sample", "1s", "-o", "plain"]);
    assert!(!plain.contains('—'), "{plain}");
    let field = |k: &str| {
        plain
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}\t")))
            .unwrap_or_else(|| panic!("no {k}: {plain}"))
            .to_string()
    };
    assert_eq!(field("oldest age"), "0");
    assert!(field("in per s").parse::<f64>().is_ok(), "{plain}");
    assert!(field("out per s").parse::<f64>().is_ok(), "{plain}");
    assert_eq!(field("dlq"), "");

    let csv = e.stdout(&["stats", "q", "-o", "csv"]);
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(r.headers().unwrap(), vec!["FIELD", "VALUE"]);
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let dlq = rows.iter().find(|x| x.get(0) == Some("dlq")).unwrap();
    assert_eq!(dlq.get(1), Some(""));
    assert!(!csv.contains('—'), "{csv}");
}

/// The workers JSON gives the state as a value and when it began; the text people read is
/// `state_text`, and the table keeps it.
#[test]
fn workers_json_state_is_a_value_with_a_time() {
    let e = Env::new();
    e.stdout(&["create", "q"]);
    let b = e.local();
    b.send_batch("q", &[msg(b"a"), msg(b"b")]).unwrap();
    let got = b.receive("q", "holder", 1, None).unwrap();
    assert_eq!(got.len(), 1);

    let list = e.json(&["consumers", "q"]);
    let w = &list.as_array().unwrap()[0];
    assert_eq!(w["tag"], "holder");
    assert_eq!(w["state"], "busy", "{w}");
    assert_eq!(w["state_text"], "busy");
    assert!(w.get("state_since_ms").is_some(), "{w}");
    let table = e.stdout(&["consumers", "q", "-o", "table"]);
    assert!(table.contains("busy"), "{table}");
}

// ---------- item 17: commands say what they did ----------

#[test]
fn send_says_what_it_did() {
    let e = Env::new();
    e.stdout(&["create", "orders"]);
    let out = e.stdout(&["send", "orders", "hello"]);
    assert!(
        out.starts_with("sent 1 message to orders (profile local), id "),
        "{out}"
    );
    let j = e.json(&["send", "orders", "again"]);
    assert_eq!(
        (j["queue"].as_str(), j["sent"].as_u64()),
        (Some("orders"), Some(1))
    );
    assert_eq!(j["profile"], "local");
    assert!(j["id"].is_string(), "{j}");
}

#[test]
fn config_validate_counts_what_it_lists() {
    let e = Env::new();
    let p = e.dir.path().join("two.toml");
    std::fs::write(
        &p,
        "[[profiles]]\nname = \"a\"\nkind = \"local\"\npath = \"/tmp/a.db\"\n\
         [[profiles]]\nname = \"b\"\nkind = \"local\"\npath = \"/tmp/b.db\"\n",
    )
    .unwrap();
    let out = e.stdout(&["config", "validate", p.to_str().unwrap()]);
    assert!(
        out.ends_with(": valid, 3 profiles: a, b, local (built in)\n"),
        "{out}"
    );
}

/// The redrive summary names its mode without parentheses inside parentheses.
#[test]
fn redrive_summary_has_no_nested_parentheses() {
    let e = Env::new();
    e.stdout(&["create", "orders", "--dlq", "orders.dlq"]);
    e.stdout(&["send", "orders.dlq", "back"]);
    let out = e.stdout(&["redrive", "orders.dlq", "--to", "orders", "-y"]);
    assert!(
        out.contains("possibly duplicated 0; client-side (copy and delete in one transaction)"),
        "{out}"
    );
    assert!(!out.contains("))"), "{out}");
}
