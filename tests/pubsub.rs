//! Google Cloud Pub/Sub backend against Google's own fake server (pstest, served by
//! scripts/pubsub_fake.sh) and the project's Monitoring stand-in, with Google's Python client
//! (google-cloud-pubsub) making the scenes and reading back what qdeck did.
//!
//! Needs QDECK_TEST_PUBSUB_EMULATOR (the fake's first line, e.g. 127.0.0.1:8085),
//! QDECK_TEST_PUBSUB_MONITORING (its second, e.g. http://127.0.0.1:8086) and QDECK_TEST_PYTHON
//! (a Python with google-cloud-pubsub and google-cloud-monitoring); `eval "$(scripts/pubsub_up.sh)"`
//! sets all three. Each test works in a project of its own, so tests share the fake safely.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
mod contract;
#[path = "pubsub_contract/mod.rs"]
mod pubsub_contract;
#[path = "pubsub_fleet/mod.rs"]
mod pubsub_fleet;
#[path = "pubsub_kill/mod.rs"]
mod pubsub_kill;
#[path = "pubsub_reasons/mod.rs"]
mod pubsub_reasons;
#[path = "pubsub_replay/mod.rs"]
mod pubsub_replay;
#[path = "pubsub_wif/mod.rs"]
mod pubsub_wif;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use qdeck_backend::{build, Backend, BackendError, OpProgress};
use qdeck_model::config::{Profile, ProfileKind, PubsubSettings};
use qdeck_model::domain::*;
use serde_json::{json, Value as Json};

const UNDELIVERED: &str = "pubsub.googleapis.com/subscription/num_undelivered_messages";
const OLDEST: &str = "pubsub.googleapis.com/subscription/oldest_unacked_message_age";
const FORWARDED: &str = "pubsub.googleapis.com/subscription/dead_letter_message_count";

fn emulator() -> String {
    common::broker_var(
        "QDECK_TEST_PUBSUB_EMULATOR",
        "the first line of scripts/pubsub_fake.sh PORT, e.g. 127.0.0.1:8085",
    )
}

fn monitoring() -> String {
    common::broker_var(
        "QDECK_TEST_PUBSUB_MONITORING",
        "the second line of scripts/pubsub_fake.sh PORT, e.g. http://127.0.0.1:8086",
    )
}

fn python() -> String {
    common::broker_var(
        "QDECK_TEST_PYTHON",
        "a Python with google-cloud-pubsub and google-cloud-monitoring (scripts/pubsub_up.sh)",
    )
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pubsub/scene.py")
}

/// A project id no other test uses.
fn project() -> String {
    format!(
        "qdeck-t-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

/// One scene.py command with Google's client pointed at the fake; its JSON answer.
fn scene(args: &[&str]) -> Json {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .env("PUBSUB_EMULATOR_HOST", emulator())
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "scene.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("scene.py {args:?} printed no JSON: {text:?}"));
    serde_json::from_str(line).expect("json answer")
}

/// Script the Monitoring stand-in's series for `project`.
async fn set_series(project: &str, page_size: u32, series: Json) {
    qdeck_backend::tls::install_provider();
    let r = reqwest::Client::new()
        .post(format!("{}/qdeck/series", monitoring()))
        .json(&json!({"project": project, "page_size": page_size, "series": series}))
        .send()
        .await
        .expect("post series");
    assert!(r.status().is_success(), "{}", r.status());
}

/// timeSeries.list calls the stand-in served for `project`.
async fn standin_calls(project: &str) -> u64 {
    qdeck_backend::tls::install_provider();
    let v: Json = reqwest::get(format!("{}/qdeck/calls", monitoring()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["timeSeries.list"][project].as_u64().unwrap_or(0)
}

fn profile(project: &str, emulator_host: &str, monitoring_endpoint: Option<String>) -> Profile {
    Profile {
        name: "pubsub-test".into(),
        kind: ProfileKind::Pubsub(PubsubSettings {
            projects: vec![project.to_string()],
            emulator_host: Some(emulator_host.to_string()),
            monitoring_endpoint,
            credentials_file: None,
            endpoint: None,
        }),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    }
}

async fn backend(project: &str) -> Arc<dyn Backend> {
    build(&profile(project, &emulator(), Some(monitoring())))
        .await
        .expect("pubsub backend")
}

fn q(s: String) -> QueueId {
    QueueId::new(s)
}

/// (data base64, attributes, ordering key) of each message Google's client read, sorted.
fn triples(v: &Json) -> Vec<(String, BTreeMap<String, String>, String)> {
    let mut out: Vec<_> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let attrs: BTreeMap<String, String> =
                serde_json::from_value(m["attributes"].clone()).unwrap();
            (
                m["data"].as_str().unwrap().to_string(),
                attrs,
                m["ordering_key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn page_triples(p: &Page) -> Vec<(String, BTreeMap<String, String>, String)> {
    use base64::Engine;
    let mut out: Vec<_> = p
        .messages
        .iter()
        .map(|m| {
            (
                base64::engine::general_purpose::STANDARD.encode(&m.body),
                m.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.text()))
                    .collect(),
                m.key.clone().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn rows_and_figures_equal_what_googles_clients_read() {
    let p = project();
    scene(&["dead-letters", &p, "dl", "--good", "2", "--poison", "3"]);
    scene(&["backlog", &p, "bl", "--grow", "30", "--drain", "10"]);
    let b = backend(&p).await;

    // Rows: the subscriptions with their DLQ links, and the topics.
    let rows = b.list_queues().await.unwrap();
    let row = |id: &str| rows.iter().find(|r| r.id.as_str() == id).unwrap().clone();
    let src = row(&format!("{p}/dl-sub"));
    assert_eq!(src.kind, QueueKind::Subscription);
    assert_eq!(src.dlq, Some(q(format!("{p}/dl-dlq-sub"))));
    assert_eq!(src.settings.max_receives, Some(5));
    assert_eq!(src.settings.lease_secs, Some(10.0));
    let dlq = row(&format!("{p}/dl-dlq-sub"));
    assert!(dlq.is_dlq);
    assert_eq!(dlq.dlq_sources, vec![q(format!("{p}/dl-sub"))]);
    assert_eq!(row(&format!("{p}/topics/dl-topic")).kind, QueueKind::Topic);
    assert_eq!(rows.len(), 3 + 3, "{rows:?}");

    // Figures: the stand-in's series, two points each (newest first), a page of two series.
    let subs = ["bl-sub", "dl-sub", "dl-dlq-sub"];
    let depths = [20, 0, 3];
    let ages = [95, 0, 400];
    let mut series = Vec::new();
    for ((s, d), a) in subs.iter().zip(depths).zip(ages) {
        series.push(json!({"metric": UNDELIVERED, "subscription_id": s, "values": [d, d + 7], "lag_seconds": 90}));
        series.push(json!({"metric": OLDEST, "subscription_id": s, "values": [a, a + 60], "lag_seconds": 90}));
    }
    // Forwarded to the dead-letter topic: a per-minute DELTA, three points in the window.
    series.push(json!({"metric": FORWARDED, "subscription_id": "dl-sub", "values": [2, 0, 3], "lag_seconds": 90}));
    set_series(&p, 2, Json::Array(series)).await;

    let ids: Vec<QueueId> = subs.iter().map(|s| q(format!("{p}/{s}"))).collect();
    let before = b.api_calls().snapshot();
    let calls_before = standin_calls(&p).await;
    let batch = b.stats(&ids).await.unwrap();
    let after = b.api_calls().snapshot();
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);

    // What Google's Monitoring types parse from the same answers.
    let google_depth = scene(&["monitoring", &monitoring(), &p, UNDELIVERED]);
    let google_age = scene(&["monitoring", &monitoring(), &p, OLDEST]);
    let google_forwarded = scene(&["monitoring", &monitoring(), &p, FORWARDED]);
    for st in &batch.stats {
        let sub = st.id.as_str().rsplit('/').next().unwrap();
        assert_eq!(
            st.depth,
            google_depth["series"][sub]["value"].as_u64(),
            "{sub} depth"
        );
        assert_eq!(
            st.oldest_age_secs,
            google_age["series"][sub]["value"].as_f64(),
            "{sub} age"
        );
        let note = st.age_note.clone().unwrap_or_default();
        assert!(note.contains("Cloud Monitoring, figure 9"), "{note}");
    }
    let src = batch
        .stats
        .iter()
        .find(|s| s.id.as_str().ends_with("/dl-sub"))
        .unwrap();
    assert_eq!(
        src.dlq_depth,
        Some(3),
        "the DLQ's depth on its source's row"
    );
    // The window's total, as Google's types read the same series; only a subscription with a
    // dead-letter policy forwards (0 where no point was written), the others have no count.
    assert_eq!(google_forwarded["series"]["dl-sub"]["metric_kind"], "DELTA");
    let forwarded = src
        .forwarded
        .expect("a forwarded count on the source's row");
    assert_eq!(
        Some(forwarded.count),
        google_forwarded["series"]["dl-sub"]["sum"].as_u64(),
        "forwarded in the window"
    );
    assert_eq!((forwarded.count, forwarded.window_secs), (5, 600));
    for st in &batch.stats {
        if !st.id.as_str().ends_with("/dl-sub") {
            assert_eq!(st.forwarded, None, "{}: no dead-letter policy", st.id);
        }
    }

    // One call per metric per project, following pages: 3 series at 2 a page = 2 pages each
    // for depth and age, one page for the forwarded count.
    let delta = after.get("monitoring:timeSeries.list").unwrap_or(&0)
        - before.get("monitoring:timeSeries.list").unwrap_or(&0);
    assert_eq!(delta, 5, "{after:?}");
    assert_eq!(
        standin_calls(&p).await - calls_before,
        5 + 5,
        "qdeck's 5 and the Python reads' 5"
    );
    assert_eq!(google_depth["calls"], 2);
}

/// Monitoring's figures are minutes old: each row says as of when (the point's end time, a
/// minute's sampling), and the engine keeps a point read at several polls as one measurement,
/// so they read as no trend rather than a flat queue, and the figures' age is on the row.
#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn figures_say_how_old_they_are_and_count_once_in_the_history() {
    let p = project();
    scene(&["backlog", &p, "bl", "--grow", "12"]);
    let b = backend(&p).await;
    let rows = b.list_queues().await.unwrap();
    let id = q(format!("{p}/bl-sub"));
    set_series(
        &p,
        100,
        json!([
            {"metric": UNDELIVERED, "subscription_id": "bl-sub", "values": [12, 4], "lag_seconds": 150},
            {"metric": OLDEST, "subscription_id": "bl-sub", "values": [80, 20], "lag_seconds": 150},
        ]),
    )
    .await;
    let mut store = qdeck_engine::store::Store::with_defaults();
    store.set_queues(rows, qdeck_model::domain::now_ms());
    for poll in 0..3 {
        let mut batch = b.stats(std::slice::from_ref(&id)).await.unwrap();
        // As if read at polls 30 s apart: Monitoring would serve the same point all that while.
        batch.stats[0].at_ms += poll * 30_000;
        let st = &batch.stats[0];
        let sampled = st
            .sampled
            .expect("a Monitoring figure says when it was measured");
        assert_eq!(sampled.every_secs, 60);
        assert!(
            st.at_ms - sampled.at_ms >= 150_000,
            "the point ends 150 s before the stand-in was scripted: {st:?}"
        );
        store.apply(batch, qdeck_model::domain::now_ms());
    }
    let e = store.get(&id).unwrap();
    assert_eq!(
        e.history.len(),
        1,
        "three reads of one point are one measurement"
    );
    let d = store.derived(&id).unwrap();
    assert_eq!(d.trend, qdeck_engine::derive::Trend::Unknown, "{d:?}");
    assert!(d.figures_age_secs.unwrap() >= 150.0, "{d:?}");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn browse_counts_what_googles_client_pulls_and_leaves_every_message_deliverable() {
    let p = project();
    scene(&[
        "dead-letters",
        &p,
        "dl",
        "--good",
        "2",
        "--poison",
        "3",
        "--ordering-key",
        "k",
    ]);
    let b = backend(&p).await;

    // The source subscription dead-letters: browse is refused unless forced.
    let req = BrowseRequest {
        max: 50,
        ..Default::default()
    };
    let e = b.browse(&q(format!("{p}/dl-sub")), &req).await.unwrap_err();
    assert!(e.liftable_by_force(), "{e}");

    let page = b.browse(&q(format!("{p}/dl-dlq-sub")), &req).await.unwrap();
    assert_eq!(page.messages.len(), 3);
    assert!(page
        .effect_note
        .as_deref()
        .unwrap()
        .contains("delivery attempt"));
    for m in &page.messages {
        let dl = m.dead_letter.as_ref().expect("a dead letter");
        assert_eq!(
            dl.origin,
            Some(q(format!("{p}/dl-sub"))),
            "origin from the policies"
        );
    }
    // Everything qdeck browsed is still there for Google's client, byte for byte.
    let read = scene(&["read-back", &p, "dl-dlq-sub", "--nack"]);
    assert_eq!(triples(&read), page_triples(&page));
    // And qdeck browses the same again.
    let again = b.browse(&q(format!("{p}/dl-dlq-sub")), &req).await.unwrap();
    assert_eq!(page_triples(&again), page_triples(&page));

    // A topic holds nothing to browse.
    let e = b
        .browse(&q(format!("{p}/topics/dl-topic")), &req)
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn redrive_reaches_a_fixed_subscriber_once_with_data_attributes_and_key() {
    let p = project();
    scene(&[
        "dead-letters",
        &p,
        "dl",
        "--good",
        "3",
        "--poison",
        "4",
        "--ordering-key",
        "k",
    ]);
    let dead = triples(&scene(&["read-back", &p, "dl-dlq-sub", "--nack"]));
    assert_eq!(dead.len(), 4);
    scene(&["subscribe", &p, "dl-topic", "fixed"]);
    let b = backend(&p).await;

    let req = RedriveRequest {
        source: q(format!("{p}/dl-dlq-sub")),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: Some(3),
    };
    let plan = b.plan_redrive(&req).await.unwrap();
    let notes = plan.notes.join("\n");
    assert!(notes.contains(&format!("{p}/fixed")), "{notes}");
    assert!(notes.contains(&format!("{p}/topics/dl-topic")), "{notes}");

    let rep = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert_eq!(
        (rep.moved, rep.failed, rep.possibly_duplicated),
        (4, 0, 0),
        "{rep:?}"
    );

    // Every dead letter exactly once at the fixed subscriber, equal in all three parts.
    let got = triples(&scene(&["read-back", &p, "fixed"]));
    assert_eq!(got, dead);
    assert!(got.iter().all(|(_, _, k)| k.starts_with("k-poison-")));
    // And the DLQ holds none of them any more.
    let left = scene(&["read-back", &p, "dl-dlq-sub"]);
    assert_eq!(triples(&left), vec![]);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn purge_seeks_to_now_and_leaves_nothing() {
    let p = project();
    scene(&["backlog", &p, "bl", "--grow", "25", "--drain", "5"]);
    let b = backend(&p).await;
    let rep = b
        .purge(&q(format!("{p}/bl-sub")), &OpProgress::detached())
        .await
        .unwrap();
    assert!(rep.note.unwrap().contains("sought to"));
    assert_eq!(triples(&scene(&["read-back", &p, "bl-sub"])), vec![]);
    // New messages still arrive after it.
    scene(&["publish", &p, "bl-topic", "--count", "2"]);
    assert_eq!(triples(&scene(&["read-back", &p, "bl-sub"])).len(), 2);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn bad_input_is_one_line_without_a_hang() {
    // An emulator nobody serves.
    let port = common::peer::free_port();
    let b = build(&profile("p", &format!("127.0.0.1:{port}"), None))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(20), b.list_queues())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    let text = e.to_string();
    assert!(matches!(e, BackendError::Unreachable(_)), "{text}");
    assert!(
        !text.contains('\n') && text.contains("connection refused"),
        "{text}"
    );

    // Without a Monitoring endpoint depth and age are unknown, with the reason.
    let p = project();
    scene(&["backlog", &p, "bl", "--grow", "1"]);
    let b = build(&profile(&p, &emulator(), None)).await.unwrap();
    let st = b.stats(&[q(format!("{p}/bl-sub"))]).await.unwrap().stats;
    assert_eq!(st[0].depth, None);
    assert!(st[0]
        .age_note
        .clone()
        .unwrap()
        .contains("monitoring_endpoint"));

    // A project nobody made lists as empty on the fake; an unknown subscription is NotFound.
    let b = backend(&project()).await;
    assert!(b.list_queues().await.unwrap().is_empty());
    let e = b
        .browse(&q("nope/missing".into()), &BrowseRequest::default())
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::NotFound(_)), "{e}");

    // A topic deleted under its subscription: the row says so, and redrive asks for a target.
    let p = project();
    scene(&["dead-letters", &p, "dl", "--good", "1", "--poison", "1"]);
    scene(&["delete-topic", &p, "dl-topic"]);
    let b = backend(&p).await;
    let rows = b.list_queues().await.unwrap();
    let src = rows
        .iter()
        .find(|r| r.id.as_str() == format!("{p}/dl-sub"))
        .unwrap();
    assert!(src.settings.extra["topic"].contains("_deleted-topic_"));
    let req = RedriveRequest {
        source: q(format!("{p}/dl-dlq-sub")),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let rep = b.redrive(&req, &OpProgress::detached()).await;
    let text = match rep {
        Ok(r) => r.errors.join("\n"),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("_deleted-topic_"), "{text}");
    // Nothing was lost: the dead letter is still there.
    assert_eq!(
        triples(&scene(&["read-back", &p, "dl-dlq-sub", "--nack"])).len(),
        1
    );
}

/// The issue's benchmark, run by hand (`manual_`: not in CI): qdeck's figures for 1,000
/// subscriptions against a per-subscription loop of Monitoring reads by Google's types, and
/// qdeck's redrive of 5,000 dead letters against Google's Python client's own pull → publish →
/// ack loop, both on the same fake in the same run. Prints the ratios; asserts nothing about
/// time (the machine is shared).
#[tokio::test]
#[ignore = "benchmark: needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn manual_pubsub_benchmark() {
    let p = project();
    let n_subs = 1000;
    scene(&["many-subs", &p, "ms", "--count", &n_subs.to_string()]);
    let names: Vec<String> = (0..n_subs).map(|i| format!("ms-{i:05}")).collect();
    let mut series = Vec::new();
    for (i, s) in names.iter().enumerate() {
        series.push(json!({"metric": UNDELIVERED, "subscription_id": s, "values": [i]}));
        series.push(json!({"metric": OLDEST, "subscription_id": s, "values": [i * 2]}));
    }
    // Monitoring's default page is 100,000 series; the stand-in pages at 500 here.
    set_series(&p, 500, Json::Array(series)).await;
    let b = backend(&p).await;
    let ids: Vec<QueueId> = names.iter().map(|s| q(format!("{p}/{s}"))).collect();
    // Listed first, as the poller does: the figures' time is Monitoring's, not the listing's.
    b.list_queues().await.unwrap();
    let t = std::time::Instant::now();
    let batch = b.stats(&ids).await.unwrap();
    let qdeck_secs = t.elapsed().as_secs_f64();
    assert_eq!(batch.stats.len(), n_subs);
    assert_eq!(batch.stats[7].depth, Some(7));
    let t = std::time::Instant::now();
    let py = scene(&[
        "monitoring",
        &monitoring(),
        &p,
        UNDELIVERED,
        "--per-subscription",
        &names.join(","),
    ]);
    let py2 = scene(&[
        "monitoring",
        &monitoring(),
        &p,
        OLDEST,
        "--per-subscription",
        &names.join(","),
    ]);
    let py_secs = t.elapsed().as_secs_f64();
    assert_eq!(py["calls"].as_u64(), Some(n_subs as u64));
    assert_eq!(py2["series"].as_object().unwrap().len(), n_subs);
    println!(
        "figures for {n_subs} subscriptions: qdeck {qdeck_secs:.3} s (4 calls), per-subscription loop {py_secs:.3} s ({} calls): ratio {:.3} (target <= 0.2)",
        2 * n_subs,
        qdeck_secs / py_secs
    );

    // 5,000 dead letters each way, from d1-sub to t1-topic (whose t1-sub receives them).
    let n = 5000;
    scene(&["backlog", &p, "d1", "--grow", "0"]);
    scene(&["backlog", &p, "t1", "--grow", "0"]);
    scene(&["fill", &p, "d1-topic", "--count", &n.to_string()]);
    let py = scene(&["python-redrive", &p, "d1-sub", "t1-topic"]);
    assert_eq!(py["moved"].as_u64(), Some(n));
    let py_secs = py["secs"].as_f64().unwrap();
    scene(&["fill", &p, "d1-topic", "--count", &n.to_string()]);
    let req = RedriveRequest {
        source: q(format!("{p}/d1-sub")),
        target: RedriveTarget::Queue(q(format!("{p}/topics/t1-topic"))),
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let t = std::time::Instant::now();
    let rep = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    let qdeck_secs = t.elapsed().as_secs_f64();
    assert_eq!(rep.moved, n, "{rep:?}");
    println!(
        "redrive of {n}: qdeck {qdeck_secs:.2} s, Google's Python loop {py_secs:.2} s: speed-up {:.2}x (target >= 1.5x)",
        py_secs / qdeck_secs
    );
}

/// Credentials are skipped with an emulator, so they are tested without one: a service-account
/// key whose `token_uri` points at a token stand-in on loopback that refuses every assertion,
/// and a key file that is not one. Both fail at the token, before anything reaches Google.
#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn a_bad_or_refused_credential_is_one_line_naming_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = emulator(); // the same gate as the other broker tests
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("key.pem");
    let ok = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&pem)
        .output()
        .expect("openssl on PATH");
    assert!(ok.status.success());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let asked2 = asked.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            asked2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = vec![0u8; 16384];
            let _ = s.read(&mut buf).await;
            let body = r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#;
            let resp = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
        }
    });
    let key = json!({
        "type": "service_account",
        "project_id": "p",
        "private_key_id": "k1",
        "private_key": std::fs::read_to_string(&pem).unwrap(),
        "client_email": "qdeck@p.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": format!("http://127.0.0.1:{port}/token"),
    });
    let key_file = dir.path().join("sa.json");
    std::fs::write(&key_file, key.to_string()).unwrap();
    let bad_file = dir.path().join("bad.json");
    std::fs::write(&bad_file, "{ not a key").unwrap();

    // The profile names its own file: no process-wide variable is set.
    let google = |p: &str, file: &std::path::Path| Profile {
        kind: ProfileKind::Pubsub(PubsubSettings {
            projects: vec![p.to_string()],
            emulator_host: None,
            monitoring_endpoint: None,
            credentials_file: Some(file.display().to_string()),
            endpoint: None,
        }),
        ..profile(p, "unused", None)
    };
    let b = build(&google("p", &key_file)).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(20), b.list_queues())
        .await
        .expect("no hang")
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BackendError::Auth(_)), "{text}");
    assert!(
        text.contains("refused the credentials") && !text.contains('\n'),
        "{text}"
    );
    assert!(
        asked.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the stand-in was asked"
    );

    let b = build(&google("p", &bad_file)).await.unwrap();
    let e = b.list_queues().await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BackendError::Auth(_)), "{text}");
    assert!(
        text.contains("credentials_file")
            && text.contains(&bad_file.display().to_string())
            && !text.contains('\n'),
        "{text}"
    );
    assert!(!text.contains("BEGIN PRIVATE KEY"), "{text}");
}

contract_tests!(
    setup = pubsub_contract::PubsubFixture::setup(),
    ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON (scripts/pubsub_up.sh)",
);
