//! Retention is not backlog (issue 41 item 12). A JetStream limits stream keeps the messages
//! its consumers have read: a consumer that keeps up leaves nothing on fire, no age rule
//! firing and `check --max-age` OK, while a consumer that read nothing is still flagged
//! through its own row. nats-py makes the scene and plays the consumer that keeps up.
//!
//! Needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON (nats-py).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::time::Duration;

use common::nats::{backend, peer, stats_of, write_config, Scene};
use predicates::prelude::*;
use qdeck_engine::alerts::{Condition, Figures};
use qdeck_engine::depth_window::DepthWindow;
use qdeck_engine::fleet::{summarize, FleetRow};
use qdeck_engine::store::Store;
use qdeck_model::domain::{QueueStats, StatsBatch};

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn a_limits_stream_whose_consumer_keeps_up_is_no_backlog() {
    let scene = Scene::empty();
    peer(&["retention", &scene.p]);
    let log = format!("{}_LOG", scene.p);
    let kept = format!("{log}/caught_up");
    let behind = format!("{log}/unread");
    // Ages only grow: past this, every stored message is older than the 1 s limits below.
    std::thread::sleep(Duration::from_millis(1500));
    let b = backend().await;
    let ids = vec![log.clone(), kept.clone(), behind.clone()];
    let stats = stats_of(b.as_ref(), &ids).await;
    let of = |id: &str| -> QueueStats {
        stats
            .iter()
            .find(|s| s.id.as_str() == id)
            .cloned()
            .unwrap_or_else(|| panic!("no figures for {id}"))
    };

    // The stream: what it keeps is retention, with its age; it has no depth or age of oldest.
    let st = of(&log);
    assert_eq!((st.depth, st.retained), (None, Some(6)), "{st:?}");
    assert_eq!(st.oldest_age_secs, None, "{st:?}");
    assert!(st.retained_age_secs.is_some_and(|a| a >= 1.0), "{st:?}");
    // Its consumers carry the backlog: none for the one that keeps up, all for the other.
    let st = of(&kept);
    assert_eq!(
        (st.depth, st.in_flight, st.oldest_age_secs),
        (Some(0), Some(0), Some(0.0)),
        "{st:?}"
    );
    let st = of(&behind);
    assert_eq!(st.depth, Some(6), "{st:?}");
    assert!(st.oldest_age_secs.is_some_and(|a| a >= 1.0), "{st:?}");

    // On fire, with a 1 s age threshold: only the unread consumer ranks.
    let infos: Vec<_> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .filter(|q| ids.iter().any(|i| i == q.id.as_str()))
        .collect();
    assert_eq!(infos.len(), 3, "{infos:?}");
    let batch = StatsBatch {
        stats: stats.clone(),
        errors: Vec::new(),
    };
    let mut row = FleetRow {
        max_age_secs: 1.0,
        refresh_secs: 2.0,
        ..FleetRow::default()
    };
    summarize(&mut row, &infos, &batch, &mut DepthWindow::default());
    let severity = |id: &str| {
        row.fire
            .iter()
            .find(|e| e.queue.as_str() == id)
            .map(|e| e.severity)
            .unwrap()
    };
    assert_eq!(severity(&log), 0.0, "{:?}", row.fire);
    assert_eq!(severity(&kept), 0.0, "{:?}", row.fire);
    assert!(severity(&behind) > 0.0, "{:?}", row.fire);
    assert_eq!(row.fire[0].queue.as_str(), behind);
    assert_eq!(
        row.worst_age.as_ref().map(|(_, q)| q.as_str()),
        Some(behind.as_str())
    );

    // A `backlog-old` rule holds for the unread consumer only; the stream's age is there for a
    // rule that names it.
    let mut store = Store::with_defaults();
    store.set_queues(infos, qdeck_model::domain::now_ms());
    store.apply(batch, qdeck_model::domain::now_ms());
    let figures = |id: &str| {
        let e = store
            .entries()
            .iter()
            .find(|e| e.info.id.as_str() == id)
            .unwrap();
        Figures::of(e, 60.0)
    };
    let backlog_old = Condition::parse("age > 1s").unwrap();
    assert!(!backlog_old.holds(&figures(&log)));
    assert!(!backlog_old.holds(&figures(&kept)));
    assert!(backlog_old.holds(&figures(&behind)));
    assert!(Condition::parse("retained_age > 1s and retained = 6")
        .unwrap()
        .holds(&figures(&log)));

    // `check --max-age`: OK for the stream and the consumer that keeps up; CRITICAL, naming
    // only the unread consumer, once it is among the queues checked.
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    common::qdeck(dir.path())
        .args(["check", &format!("^{log}(/caught_up)?$"), "--max-age", "1s"])
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with(
            "QDECK OK - 2 queue(s) within limits",
        ));
    let out = common::qdeck(dir.path())
        .args(["check", &format!("^{log}"), "--max-age", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    // The problems, before the perfdata (which lists every figure).
    let (problems, _) = stdout.split_once(" | ").unwrap();
    assert!(
        problems.starts_with("QDECK CRITICAL - 1 problem(s)"),
        "{stdout}"
    );
    assert!(problems.contains(&format!("{behind} age")), "{stdout}");
    assert!(!problems.contains(&format!("{log} age")), "{stdout}");
    assert!(!problems.contains(&format!("{kept} age")), "{stdout}");
}
