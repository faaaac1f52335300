//! The console started with no configuration at all, as a newcomer starts it: the demo runs
//! on the embedded broker, again on a second start, and where it cannot run the status bar
//! says why instead of showing a frozen broker.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use common::pty::Console;
use qdeck_backend::local::{LocalBackend, QueueOptions};

#[test]
fn the_demo_runs_on_each_start_and_says_why_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    // First start: an empty broker, the demo runs.
    let c = Console::spawn(dir.path(), &[], &[], 80, 24);
    c.wait_for("demo · ");
    c.wait_for("orders");
    c.quit();
    // Second start on the demo's own queues, left by the first: it runs again.
    let c = Console::spawn(dir.path(), &[], &[], 80, 24);
    c.wait_for("demo · ");
    c.quit();
    // A queue of the user's own: no demo, and the status bar says why.
    let db = dir.path().join("d/qdeck/local.db");
    LocalBackend::open(&db)
        .unwrap()
        .create_queue("billing", &QueueOptions::default())
        .unwrap();
    let c = Console::spawn(dir.path(), &[], &[], 80, 24);
    c.wait_for("no demo: the embedded broker holds queues of its own");
    c.quit();
}
