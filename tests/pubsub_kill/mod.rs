//! `kill -9` trial of a Pub/Sub redrive: `qdeck redrive` killed mid-run, then run again, and a
//! fixed subscriber of the target topic must get every dead letter at least once, with no more
//! duplicates than the window (the batch pulled, published and not yet acknowledged).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{emulator, monitoring, project, scene, triples};

const DEAD: usize = 300;
const WINDOW: usize = 20;
/// The ack deadline qdeck's redrive extends a pulled batch to (`pubsub::redrive::HOLD_SECS`),
/// plus a margin: after it, whatever the killed run held is deliverable again.
const HELD_FOR: Duration = Duration::from_secs(75);

type Triple = (String, BTreeMap<String, String>, String);

/// `qdeck` reading and writing only under `dir` (its config at `dir/config.toml`).
pub fn qdeck(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qdeck"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("USER", "tester")
        .env("QDECK_CONFIG", dir.join("config.toml"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .args(args);
    c
}

/// `dir/config.toml` with one Pub/Sub profile `ps` on project `p`, the default, after
/// `prelude` (top-level tables such as `[ui]`); its path.
pub fn write_config(dir: &std::path::Path, p: &str, prelude: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "default_profile = \"ps\"\n{prelude}\n[[profiles]]\nname = \"ps\"\nkind = \"pubsub\"\nprojects = [\"{p}\"]\nemulator_host = \"{}\"\nmonitoring_endpoint = \"{}\"\n",
            emulator(),
            monitoring()
        ),
    )
    .unwrap();
    path
}

/// What the fixed subscriber holds now, acknowledged (so each read adds only new deliveries).
fn take(p: &str, into: &mut Vec<Triple>) {
    into.extend(triples(&scene(&["read-back", p, "fixed"])));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn a_redrive_killed_with_sigkill_loses_nothing_and_doubles_at_most_the_window() {
    let p = project();
    scene(&[
        "dead-letters",
        &p,
        "dl",
        "--good",
        "0",
        "--poison",
        &DEAD.to_string(),
    ]);
    let mut dead = triples(&scene(&["read-back", &p, "dl-dlq-sub", "--nack"]));
    assert_eq!(
        dead.len(),
        DEAD,
        "the fake dead-lettered every poison message"
    );
    dead.sort();
    scene(&["subscribe", &p, "dl-topic", "fixed"]);
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &p, "");
    let dlq = format!("{p}/dl-dlq-sub");
    let window = WINDOW.to_string();

    // Slow enough to be caught mid-way: killed once copies have started to arrive.
    let mut child = qdeck(
        dir.path(),
        &[
            "redrive", &dlq, "--yes", "--rate", "25", "--window", &window,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut got: Vec<Triple> = Vec::new();
    let started = Instant::now();
    while got.len() < WINDOW && started.elapsed() < Duration::from_secs(120) {
        take(&p, &mut got);
    }
    child.kill().unwrap(); // SIGKILL: no chance to acknowledge or give anything back
    child.wait().unwrap();
    let killed = Instant::now();
    take(&p, &mut got);
    assert!(
        !got.is_empty() && got.len() < DEAD,
        "killed mid-way: {} copies had arrived",
        got.len()
    );

    // Run again until everything arrived and what the killed run held has come back and moved.
    loop {
        let out = qdeck(dir.path(), &["redrive", &dlq, "--yes", "--window", &window])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the rerun: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        take(&p, &mut got);
        let mut distinct = got.clone();
        distinct.sort();
        distinct.dedup();
        if (distinct.len() == DEAD && killed.elapsed() > HELD_FOR)
            || killed.elapsed() > HELD_FOR * 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let mut distinct = got.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct, dead,
        "every dead letter reached the fixed subscriber"
    );
    assert!(
        got.len() - distinct.len() <= WINDOW,
        "{} duplicates, above the window of {WINDOW}",
        got.len() - distinct.len()
    );
    let left = scene(&["read-back", &p, "dl-dlq-sub"]);
    assert_eq!(triples(&left), vec![], "the DLQ holds none of them");
}
