//! NATS JetStream backend against a real nats-server (2.9) with nats-py as the independent
//! client that makes the scene, plays the workers and reads the server's own figures back.
//!
//! Needs QDECK_TEST_NATS_URL (e.g. nats://127.0.0.1:4222, JetStream on) and QDECK_TEST_PYTHON
//! (a Python with nats-py). Each test names its streams with a prefix of its own and deletes
//! them at the end, also when it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
mod contract;
#[path = "nats_contract/mod.rs"]
mod nats_contract;

use std::collections::BTreeSet;
use std::process::Command;

use common::nats::{
    backend, n, nats_url, peer, profile, python, script, stats_of, OwnServer, Scene,
};
use common::peer::free_port;
use qdeck_backend::{build, BackendError, OpProgress};
use qdeck_model::config::NatsSettings;
use qdeck_model::domain::*;
use serde_json::Value as Json;

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn figures_equal_what_nats_py_reads() {
    let scene = Scene::new();
    peer(&["fail", &scene.p]);
    let truth = peer(&["info", &scene.p]);
    let b = backend().await;

    let ids = vec![
        scene.wq(),
        scene.lim(),
        format!("{}/worker", scene.wq()),
        format!("{}/reader", scene.lim()),
        format!("{}/pusher", scene.lim()),
    ];
    let before = b.api_calls().snapshot();
    let stats = stats_of(b.as_ref(), &ids).await;
    let after = b.api_calls().snapshot();
    for st in &stats {
        let id = st.id.as_str();
        if let Some(s) = truth["streams"].get(id) {
            // A work queue's messages are its backlog; a limits stream's are retention.
            let stored = Some(n(s, "messages"));
            if id == scene.wq() {
                assert_eq!((st.depth, st.retained), (stored, None), "{id} messages");
            } else {
                assert_eq!((st.depth, st.retained), (None, stored), "{id} messages");
            }
            assert_eq!(
                st.consumers,
                Some(n(s, "consumer_count") as u32),
                "{id} consumers"
            );
            assert_eq!(st.enqueued_total, Some(n(s, "last_seq")), "{id} last seq");
        } else {
            let c = &truth["consumers"][id];
            assert_eq!(st.depth, Some(n(c, "num_pending")), "{id} num_pending");
            assert_eq!(
                st.in_flight,
                Some(n(c, "num_ack_pending")),
                "{id} num_ack_pending"
            );
            assert_eq!(
                st.completed_total,
                Some(n(c, "ack_floor")),
                "{id} ack floor"
            );
        }
    }
    // The reader holds two unacked messages: their age is read by sequence, and is real.
    let reader = stats
        .iter()
        .find(|s| s.id.as_str().ends_with("/reader"))
        .unwrap();
    let age = reader.oldest_age_secs.expect("age of the reader's oldest");
    assert!(age > 0.0 && age < 600.0, "{age}");
    // One CONSUMER.LIST page per stream, and one MSG.GET only for the consumers holding any.
    let delta = |op: &str| after.get(op).unwrap_or(&0) - before.get(op).unwrap_or(&0);
    assert_eq!(
        delta("nats:CONSUMER.LIST"),
        2,
        "one page for each of the two streams: {after:?}"
    );
    assert!(delta("nats:STREAM.MSG") <= 2, "{after:?}");

    // Redelivered and waiting pulls, as nats-py reads them.
    for (id, c) in truth["consumers"].as_object().unwrap() {
        let info = b
            .describe(&QueueId::new(id.clone()))
            .await
            .expect("describe");
        assert_eq!(info.kind, QueueKind::Consumer);
        assert_eq!(
            info.settings.extra["redelivered"],
            n(c, "num_redelivered").to_string(),
            "{id}"
        );
        assert_eq!(
            info.settings.extra["waiting_pulls"],
            n(c, "num_waiting").to_string(),
            "{id}"
        );
    }
    let wq = b.describe(&QueueId::new(scene.wq())).await.unwrap();
    assert_eq!(wq.kind, QueueKind::Stream);
    assert_eq!(wq.settings.extra["retention"], "workqueue");
    let worker = b
        .describe(&QueueId::new(format!("{}/worker", scene.wq())))
        .await
        .unwrap();
    assert_eq!(worker.settings.max_receives, Some(3));
    assert!(
        worker.settings.extra["dlq"].contains("qdeck create-dlq"),
        "{:?}",
        worker.settings.extra
    );

    // A consumer's browse starts past its ack floor: the poison messages it gave up on.
    let page = b
        .browse(
            &QueueId::new(format!("{}/worker", scene.wq())),
            &BrowseRequest::default(),
        )
        .await
        .unwrap();
    let seqs: Vec<i64> = page.messages.iter().map(|m| m.seq.unwrap()).collect();
    assert_eq!(seqs, vec![2, 4, 7]);

    // Workers: the push consumer has no subscription bound; identities need /connz.
    let pushers = b
        .consumers(&QueueId::new(format!("{}/pusher", scene.lim())))
        .await
        .unwrap();
    assert_eq!(pushers.len(), 1);
    assert_eq!(pushers[0].status, WorkerState::Gone);
    assert!(pushers[0].peer.as_deref().unwrap().contains("/connz"));
}

fn write_nats_config(dir: &std::path::Path, access: Option<&str>) {
    common::nats::write_config(
        dir,
        &access.map_or(String::new(), |a| format!("access = \"{a}\"")),
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn dead_letters_are_the_advisories_and_redrive_sends_them_back() {
    let scene = Scene::new();
    let consumer = format!("{}/worker", scene.wq());
    let dir = tempfile::tempdir().unwrap();

    // create-dlq is a tier-full action: refused (and audited) below it.
    write_nats_config(dir.path(), Some("redrive"));
    let out = common::qdeck(dir.path())
        .args(["create-dlq", &consumer])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    write_nats_config(dir.path(), None);
    let out = common::qdeck(dir.path())
        .args(["create-dlq", &consumer, "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Json = serde_json::from_slice(&out.stdout).unwrap();
    let dlq = made["dlq"].as_str().unwrap().to_string();
    assert_eq!(made["created"], true);
    let audit = std::fs::read_to_string(dir.path().join("state/qdeck/audit.log")).unwrap();
    assert!(audit.contains("\"refused\""), "{audit}");
    assert!(audit.contains(&dlq), "{audit}");

    // The failing worker: poison messages reach max_deliver, one is terminated.
    let failed = peer(&["fail", &scene.p]);
    let seqs = failed["seqs"].as_array().unwrap();
    let advised: BTreeSet<u64> = seqs.iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(
        (seqs.len(), advised.len()),
        (4, 4),
        "one advisory each: {failed}"
    );

    let b = backend().await;
    let info = b.describe(&QueueId::new(consumer.clone())).await.unwrap();
    assert_eq!(info.dlq, Some(QueueId::new(dlq.clone())));
    let st = &stats_of(b.as_ref(), std::slice::from_ref(&consumer)).await[0];
    assert_eq!(st.dlq_depth, Some(4));

    // Browsing joins each advisory with its original; it creates no consumer.
    let page = b
        .browse(
            &QueueId::new(dlq.clone()),
            &BrowseRequest {
                max: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let listed: BTreeSet<u64> = page
        .messages
        .iter()
        .map(|m| m.seq.unwrap() as u64)
        .collect();
    assert_eq!(listed, advised);
    assert_eq!(
        page.messages.len(),
        advised.len(),
        "one dead letter per advisory"
    );
    let mut gone = 0;
    for m in &page.messages {
        let dl = m.dead_letter.as_ref().unwrap();
        assert_eq!(dl.origin, Some(QueueId::new(consumer.clone())));
        match m.field_text("original") {
            // A work queue removes a terminated message: its dead letter says so.
            Some(t) => {
                assert!(t.starts_with("gone"), "{t}");
                assert_eq!(dl.reason.as_deref(), Some("terminated"));
                gone += 1;
            }
            None => {
                assert_eq!(dl.reason.as_deref(), Some("max_deliveries"));
                assert_eq!(m.receive_count, Some(3));
                assert_eq!(m.field_text("X-Kind").as_deref(), Some("poison"));
                assert!(m.field_text("subject").unwrap().starts_with(&scene.p));
                assert!(String::from_utf8_lossy(&m.body).contains("poison"));
            }
        }
    }
    assert_eq!(gone, 1);
    let truth = peer(&["info", &scene.p]);
    assert_eq!(
        truth["streams"][scene.wq()]["consumer_count"],
        1,
        "no consumer left"
    );

    // The reasons view groups them by why the consumer gave up.
    let out = common::qdeck(dir.path())
        .args(["reasons", &dlq, "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("max_deliveries") && text.contains("terminated"),
        "{text}"
    );

    // Redrive through the CLI (the engine's gate, plan and audit).
    let out = common::qdeck(dir.path())
        .args(["redrive", &dlq, "--yes", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The fixed worker acks every redriven message; none of the originals is left.
    let drained = peer(&["drain", &scene.p]);
    let acked = drained["acked"].as_array().unwrap();
    assert_eq!(acked.len(), 3, "{drained}");
    for m in acked {
        assert!(m["body"].as_str().unwrap().contains("poison"), "{m}");
        assert_eq!(m["headers"]["X-Kind"], "poison");
        assert_eq!(m["headers"]["x-qdeck-redriven"], "1");
        assert!(
            !advised.contains(&m["seq"].as_u64().unwrap()),
            "a new sequence"
        );
    }
    assert_eq!(drained["left"], 0);
    for seq in &advised {
        let got = peer(&["get", &scene.wq(), &seq.to_string()]);
        assert_eq!(got["found"], false, "original {seq} still there");
    }
    let st = &stats_of(b.as_ref(), std::slice::from_ref(&dlq)).await[0];
    assert_eq!(st.depth, Some(0), "every advisory removed");
}

#[tokio::test]
async fn an_unreachable_server_is_one_clear_line() {
    let b = build(&profile(NatsSettings {
        url: Some("nats://127.0.0.1:1".into()),
        ..Default::default()
    }))
    .await
    .expect("building connects lazily");
    let e = b.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Unreachable(_)), "{e:?}");
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.contains("cannot connect to NATS at nats://127.0.0.1:1"),
        "{text}"
    );
    let progress = OpProgress::detached();
    assert!(b
        .purge(&QueueId::new("S"), &progress)
        .await
        .is_err_and(|e| matches!(e, BackendError::Unreachable(_))));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn delete_by_sequence_and_purge_change_only_what_they_name() {
    let scene = Scene::new();
    let b = backend().await;
    let lim = QueueId::new(scene.lim());
    let deleter = b.deleter().expect("NATS deletes by sequence");
    let progress = OpProgress::detached();
    // Sequence 2 goes, 2 again and 99 are already gone: counted as missing, not an error.
    let rep = deleter
        .delete_ids(&lim, &["2".into(), "2".into(), "99".into()], &progress)
        .await
        .unwrap();
    assert_eq!((rep.deleted, rep.missing), (1, 2), "{rep:?}");
    assert_eq!(peer(&["get", &scene.lim(), "2"])["found"], false);
    assert_eq!(peer(&["get", &scene.lim(), "3"])["found"], true);

    // Browsing reads by sequence and skips the hole; it creates no consumer.
    let page = b
        .browse(
            &lim,
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let seqs: Vec<i64> = page.messages.iter().map(|m| m.seq.unwrap()).collect();
    assert_eq!(seqs, vec![1, 3, 4, 5]);
    assert_eq!(page.messages[0].body, b"event 0");
    assert!(page.next.is_none());
    let truth = peer(&["info", &scene.p]);
    assert_eq!(truth["streams"][scene.lim()]["consumer_count"], 2);

    // A consumer's browse starts past its ack floor; one deleted meanwhile is a clear NotFound.
    let gone = b
        .browse(
            &QueueId::new(format!("{}/nobody", scene.lim())),
            &BrowseRequest::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(gone, BackendError::NotFound(_)), "{gone:?}");

    let rep = b.purge(&lim, &progress).await.unwrap();
    assert_eq!(rep.purged, Some(4));
    let truth = peer(&["info", &scene.p]);
    assert_eq!(truth["streams"][scene.lim()]["messages"], 0);
    assert_eq!(
        truth["streams"][scene.wq()]["messages"],
        7,
        "the other stream is untouched"
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL (and nats-server on PATH)"]
async fn wrong_credentials_and_a_server_without_jetstream_say_so_in_one_line() {
    nats_url();
    let server = OwnServer::start(&["--user", "ops", "--pass", "right-pw"]);
    let secrets = qdeck_model::config::secret::SecretMap::new().with("QDECK_T_NATS_PW", "wrong-pw");
    let settings = NatsSettings {
        url: Some(server.url.clone()),
        username: Some("ops".into()),
        password_env: Some("QDECK_T_NATS_PW".into()),
        ..Default::default()
    };
    let b = qdeck_backend::build_with(&profile(settings.clone()), &secrets)
        .await
        .unwrap();
    let e = b.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    let text = e.to_string();
    assert!(!text.contains('\n') && !text.contains("wrong-pw"), "{text}");
    assert!(text.contains(&server.url), "{text}");

    // The right password on a server without JetStream: the API has no responder.
    let secrets = qdeck_model::config::secret::SecretMap::new().with("QDECK_T_NATS_PW", "right-pw");
    let b = qdeck_backend::build_with(&profile(settings), &secrets)
        .await
        .unwrap();
    let e = b.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Unsupported(_)), "{e:?}");
    assert!(e.to_string().contains("JetStream is not enabled"), "{e}");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL (and nats-server on PATH)"]
async fn a_token_from_the_secret_source_opens_the_connection() {
    nats_url();
    let store = tempfile::tempdir().unwrap();
    let server = OwnServer::start(&[
        "-js",
        "-sd",
        store.path().to_str().unwrap(),
        "--auth",
        "t0ken-right",
    ]);
    let settings = NatsSettings {
        url: Some(server.url.clone()),
        token_env: Some("QDECK_T_NATS_TOKEN".into()),
        ..Default::default()
    };
    let with =
        |t: &str| qdeck_model::config::secret::SecretMap::new().with("QDECK_T_NATS_TOKEN", t);
    let b = qdeck_backend::build_with(&profile(settings.clone()), &with("t0ken-right"))
        .await
        .unwrap();
    assert!(b.list_queues().await.unwrap().is_empty());
    let b = qdeck_backend::build_with(&profile(settings), &with("t0ken-wrong"))
        .await
        .unwrap();
    let e = b.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    assert!(!e.to_string().contains("t0ken"), "{e}");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn a_redrive_killed_with_sigkill_loses_nothing() {
    let scene = Scene::with_poison(40);
    let consumer = format!("{}/worker", scene.wq());
    let dir = tempfile::tempdir().unwrap();
    write_nats_config(dir.path(), None);
    let ok = common::qdeck(dir.path())
        .args(["create-dlq", &consumer, "-o", "json"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    let dlq: Json = serde_json::from_slice(&ok.stdout).unwrap();
    let dlq = dlq["dlq"].as_str().unwrap().to_string();
    let failed = peer(&["fail", &scene.p]);
    let advised = failed["seqs"].as_array().unwrap().len();
    assert_eq!(advised, 44, "43 poison + 1 terminated");

    // A slow redrive, killed mid-way without a chance to clean up.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_qdeck"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("QDECK_CONFIG", dir.path().join("config.toml"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .args(["redrive", &dlq, "--yes", "--rate", "20"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let b = backend().await;
    let mid = stats_of(b.as_ref(), std::slice::from_ref(&dlq)).await[0]
        .depth
        .unwrap();
    assert!(
        mid > 0 && mid < 44,
        "the kill came mid-way: {mid} dead letters left"
    );

    // Run it again to the end: the stale advisories (original already deleted) go quietly.
    let out = common::qdeck(dir.path())
        .args(["redrive", &dlq, "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let drained = peer(&["drain", &scene.p]);
    let mut got: Vec<u64> = drained["acked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let body: Json = serde_json::from_str(m["body"].as_str().unwrap()).unwrap();
            body["n"].as_u64().unwrap()
        })
        .collect();
    got.sort_unstable();
    let total = got.len();
    got.dedup();
    let poison: Vec<u64> = [1u64, 3, 6].into_iter().chain(7..47).collect();
    assert_eq!(got, poison, "every poison message came back");
    assert!(
        total - got.len() <= 64,
        "duplicates within the window: {total}"
    );
    assert_eq!(drained["left"], 0);
}

/// The two comparisons with nats-py in one run, printed (never asserted on time):
/// listing 1,000 consumers over 10 streams with their figures, and redriving 10,000 dead
/// letters against nats-py doing the same read → publish → PubAck → delete → delete.
/// `cargo test --test nats manual_nats_benchmark -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "manual benchmark: needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn manual_nats_benchmark() {
    let n: usize = std::env::var("QDECK_BENCH_DEAD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let tag = || format!("qb{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let list = Scene {
        p: tag(),
        url: nats_url(),
    };
    peer(&["bench_setup", &list.p, "10", "100"]);
    let b = backend().await;
    let calls0 = b.api_calls().total();
    let t = std::time::Instant::now();
    let queues = b.list_queues().await.unwrap();
    let ids: Vec<QueueId> = queues
        .iter()
        .filter(|q| q.id.as_str().starts_with(&list.p) && q.kind == QueueKind::Consumer)
        .map(|q| q.id.clone())
        .collect();
    let list_calls = b.api_calls().total() - calls0;
    let t_stats = std::time::Instant::now();
    let stats = b.stats(&ids).await.unwrap();
    let stats_secs = t_stats.elapsed().as_secs_f64();
    let qdeck_secs = t.elapsed().as_secs_f64();
    let qdeck_calls = b.api_calls().total() - calls0;
    assert_eq!(stats.stats.len(), 1000);
    let py = peer(&["bench_list", &list.p]);
    println!(
        "listing 1000 consumers over 10 streams: qdeck `ls` {qdeck_secs:.3}s in {qdeck_calls} calls (listing {list_calls}, then a refresh of every figure with ages {stats_secs:.3}s in {} calls), nats-py {:.3}s in {} calls (the consumer listing alone); refresh vs nats-py {:.2}x",
        qdeck_calls - list_calls,
        py["secs"].as_f64().unwrap(),
        py["calls"],
        py["secs"].as_f64().unwrap() / stats_secs
    );

    let ours = Scene {
        p: tag(),
        url: nats_url(),
    };
    peer(&["bench_dead", &ours.p, &n.to_string()]);
    let dlq = format!("DLQ_{}_WQ_worker", ours.p);
    let t = std::time::Instant::now();
    let rep = b
        .redrive(
            &RedriveRequest {
                source: QueueId::new(dlq),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    let qdeck_secs = t.elapsed().as_secs_f64();
    assert_eq!(rep.moved as usize, n, "{rep:?}");
    let theirs = Scene {
        p: tag(),
        url: nats_url(),
    };
    peer(&["bench_dead", &theirs.p, &n.to_string()]);
    let py = peer(&["bench_redrive", &theirs.p]);
    let py_rate = py["moved"].as_f64().unwrap() / py["secs"].as_f64().unwrap();
    let our_rate = n as f64 / qdeck_secs;
    println!(
        "redrive of {n} dead letters: qdeck {our_rate:.0}/s ({qdeck_secs:.2}s), nats-py {py_rate:.0}/s; ratio {:.2}x",
        our_rate / py_rate
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn purging_a_dlq_deletes_each_original_then_its_advisory() {
    let scene = Scene::empty();
    // Five dead letters on P_WQ/worker, captured in DLQ_P_WQ_worker (sequences 1..=5 in both).
    peer(&["bench_dead", &scene.p, "5"]);
    let dlq = format!("DLQ_{}_WQ_worker", scene.p);
    let b = backend().await;
    let progress = OpProgress::detached();

    // One dead letter by its id (the advisory's sequence): its original goes with it.
    let rep = b
        .deleter()
        .unwrap()
        .delete_ids(&QueueId::new(dlq.clone()), &["2".into()], &progress)
        .await
        .unwrap();
    assert_eq!(rep.deleted, 1);
    assert_eq!(peer(&["get", &scene.wq(), "2"])["found"], false);
    assert_eq!(peer(&["get", &scene.wq(), "3"])["found"], true);

    let dir = tempfile::tempdir().unwrap();
    write_nats_config(dir.path(), None);
    let out = common::qdeck(dir.path())
        .args(["purge", &dlq, "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for seq in 1..=5 {
        assert_eq!(
            peer(&["get", &scene.wq(), &seq.to_string()])["found"],
            false
        );
    }
    let st = &stats_of(b.as_ref(), &[dlq, scene.wq()]).await;
    assert_eq!(st[0].depth, Some(0), "advisories gone");
    assert_eq!(st[1].depth, Some(0), "originals gone");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON with nats-py, and nats-server on PATH"]
async fn push_consumers_clients_are_named_from_the_monitoring_port() {
    nats_url();
    let store = tempfile::tempdir().unwrap();
    let mon = free_port();
    let server = OwnServer::start(&[
        "-js",
        "-sd",
        store.path().to_str().unwrap(),
        "-m",
        &mon.to_string(),
    ]);
    let mut holder = Command::new(python())
        .arg(script())
        .arg(&server.url)
        .args(["hold", "qh"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("ready"), "{line}");

    let settings = NatsSettings {
        url: Some(server.url.clone()),
        ..Default::default()
    };
    let q = QueueId::new("qh_PS/pusher");
    // Without the monitoring port: bound, but nameless.
    let plain = build(&profile(settings.clone())).await.unwrap();
    let rows = plain.consumers(&q).await.unwrap();
    assert_eq!(rows[0].status, WorkerState::Active);
    assert!(rows[0].peer.as_deref().unwrap().contains("/connz"));
    // With it: the subscribed connection, by name and address.
    let named = build(&profile(NatsSettings {
        monitor_url: Some(format!("http://127.0.0.1:{mon}")),
        ..settings
    }))
    .await
    .unwrap();
    let rows = named.consumers(&q).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let peer = rows[0].peer.as_deref().unwrap();
    assert!(peer.starts_with("qdeck-test-peer 127.0.0.1:"), "{peer}");
    drop(holder.stdin.take());
    let _ = holder.wait();
}

contract_tests!(
    setup = nats_contract::NatsFixture::setup(),
    ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py",
);
