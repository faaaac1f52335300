//! NATS JetStream dead letters beyond the basic scene (tests/nats.rs): what a redrive sends
//! back, read by nats-py field by field; a capture stream that takes every advisory (naks
//! included) lists, counts, deletes and redrives only the dead letters; a consumer without a
//! capture stream says what the server lets be told; a failing `create-dlq` is audited.
//!
//! Needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON (nats-py) and, for the wide capture, nats-server
//! on PATH (it runs on a server of its own: a stream on `$JS.EVENT.ADVISORY.>` would overlap
//! every `create-dlq` other tests make on the shared one).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::nats::{backend, nats_url, peer, peer_at, profile, stats_of, OwnServer, Scene};
use qdeck_backend::{build, OpProgress};
use qdeck_model::config::NatsSettings;
use qdeck_model::domain::*;
use serde_json::Value as Json;

fn pairs(v: &Json) -> Vec<(String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_string(),
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Headers compared as NATS keeps them: by name, the values of a repeated name in order.
fn by_name(mut h: Vec<(String, String)>) -> Vec<(String, String)> {
    h.sort_by(|a, b| a.0.cmp(&b.0));
    h
}

fn redrive_all(dlq: &str) -> RedriveRequest {
    RedriveRequest {
        source: QueueId::new(dlq),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn a_redriven_message_is_its_original_field_by_field_plus_the_stamps() {
    let scene = Scene::empty();
    let sent = peer(&["fidelity", &scene.p])["sent"]
        .as_array()
        .unwrap()
        .clone();
    let wq = scene.wq();
    let dlq = format!("DLQ_{wq}_worker");
    let b = backend().await;
    let st = &stats_of(b.as_ref(), &[format!("{wq}/worker")]).await[0];
    assert_eq!(st.dlq_depth, Some(sent.len() as u64), "each one dead");

    let t0 = now_ms();
    let rep = b
        .redrive(&redrive_all(&dlq), &OpProgress::detached())
        .await
        .unwrap();
    let t1 = now_ms();
    assert_eq!((rep.moved, rep.failed), (sent.len() as u64, 0), "{rep:?}");

    // nats-py reads the stream by sequence and parses the header blocks itself.
    let back = peer(&["readback", &wq])["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(back.len(), sent.len(), "the copies, and no original left");
    let by_seq: BTreeMap<String, &Json> = sent
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap().to_string(), m))
        .collect();
    let mut seen = BTreeSet::new();
    for copy in &back {
        let headers = pairs(&copy["headers"]);
        let stamp = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n == k)
                .map_or_else(|| panic!("no {k} on {copy}"), |(_, v)| v.clone())
        };
        let from = stamp("x-qdeck-redriven-from");
        let (origin, seq) = from.split_once('#').unwrap();
        assert_eq!(origin, format!("{wq}/worker"));
        let orig = by_seq[seq];
        seen.insert(seq.to_string());
        assert_eq!(copy["subject"], orig["subject"], "subject of {seq}");
        assert_eq!(copy["body"], orig["body"], "body bytes of {seq}");
        let theirs: Vec<(String, String)> = pairs(&orig["headers"])
            .into_iter()
            .filter(|(k, _)| k != "Nats-Msg-Id")
            .collect();
        let ours: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !k.starts_with("x-qdeck-"))
            .cloned()
            .collect();
        assert_eq!(by_name(ours), by_name(theirs), "headers of {seq}");
        assert_eq!(stamp("x-qdeck-redriven"), "1");
        let at: i64 = stamp("x-qdeck-redriven-at").parse().unwrap();
        assert!((t0..=t1).contains(&at), "{at} not in {t0}..{t1}");
        if let Some((_, id)) = pairs(&orig["headers"])
            .iter()
            .find(|(k, _)| k == "Nats-Msg-Id")
        {
            assert_eq!(&stamp("x-qdeck-nats-msg-id"), id);
        }
    }
    assert_eq!(seen.len(), sent.len(), "one copy per original");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON with nats-py, and nats-server on PATH"]
async fn a_capture_of_every_advisory_lists_and_moves_only_the_dead_letters() {
    nats_url();
    let store = tempfile::tempdir().unwrap();
    let server = OwnServer::start(&["-js", "-sd", store.path().to_str().unwrap()]);
    let p = common::nats::unique_prefix();
    let all = format!("{p}_ADV");
    peer_at(&server.url, &["wide_capture", &all]);
    peer_at(&server.url, &["setup", &p]);
    let failed = peer_at(&server.url, &["fail", &p]);
    let advised: BTreeSet<u64> = failed["seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let wq = format!("{p}_WQ");
    let consumer = format!("{wq}/worker");
    let captured = peer_at(&server.url, &["readback", &all])["messages"]
        .as_array()
        .unwrap()
        .clone();
    let naks: Vec<&Json> = captured
        .iter()
        .filter(|m| m["subject"].as_str().unwrap().contains(".MSG_NAKED."))
        .collect();
    assert!(!naks.is_empty(), "the capture holds naks too");

    let b = build(&profile(NatsSettings {
        url: Some(server.url.clone()),
        ..Default::default()
    }))
    .await
    .unwrap();
    let info = b.describe(&QueueId::new(consumer.clone())).await.unwrap();
    assert_eq!(info.dlq, Some(QueueId::new(all.clone())));
    let st = stats_of(b.as_ref(), &[consumer.clone(), all.clone()]).await;
    let of = |id: &str| st.iter().find(|s| s.id.as_str() == id).unwrap();
    assert_eq!(
        of(&consumer).dlq_depth,
        Some(advised.len() as u64),
        "dead letters, not naks"
    );
    assert_eq!(of(&all).depth, Some(advised.len() as u64));

    let page = b
        .browse(
            &QueueId::new(all.clone()),
            &BrowseRequest {
                max: 1000,
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
    assert_eq!(page.messages.len(), advised.len(), "{:?}", page.messages);
    // nats-server 2.9 puts no reason in a terminated advisory: the dead letter says so.
    let term = page
        .messages
        .iter()
        .find(|m| m.dead_letter.as_ref().unwrap().reason.as_deref() == Some("terminated"))
        .unwrap();
    assert!(
        term.field_text("terminate reason")
            .unwrap()
            .contains("nats-server 2.9 sends no AckTerm reason"),
        "{term:?}"
    );

    // A nak's id is no dead letter: deleting it touches neither it nor its message.
    let nak = naks[0];
    let nak_seq = nak["seq"].as_u64().unwrap().to_string();
    let rep = b
        .deleter()
        .unwrap()
        .delete_ids(
            &QueueId::new(all.clone()),
            &[nak_seq],
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!((rep.deleted, rep.missing), (0, 1));
    let nak_body: Json =
        serde_json::from_slice(&base64_decode(nak["body"].as_str().unwrap())).unwrap();
    let held = nak_body["stream_seq"].as_u64().unwrap().to_string();
    assert_eq!(peer_at(&server.url, &["get", &wq, &held])["found"], true);

    // The redrive moves the dead letters whose originals are there, and leaves the naks.
    let rep = b
        .redrive(&redrive_all(&all), &OpProgress::detached())
        .await
        .unwrap();
    assert_eq!((rep.moved, rep.failed), (3, 0), "{rep:?}");
    let after = peer_at(&server.url, &["readback", &all])["messages"]
        .as_array()
        .unwrap()
        .clone();
    let subjects: Vec<&str> = after
        .iter()
        .map(|m| m["subject"].as_str().unwrap())
        .collect();
    assert!(!subjects.iter().any(|s| s.contains(".MAX_DELIVERIES.")));
    assert!(!subjects.iter().any(|s| s.contains(".MSG_TERMINATED.")));
    assert_eq!(
        subjects
            .iter()
            .filter(|s| s.contains(".MSG_NAKED."))
            .count(),
        naks.len(),
        "every nak left"
    );
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn without_a_capture_a_consumer_says_what_it_gave_up_on_and_the_command() {
    let scene = Scene::new();
    let failed = peer(&["fail", &scene.p]);
    // On a work queue the terminated message is gone; the max_deliver ones are still stored.
    let gave_up = failed["advisories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"].as_str().unwrap().ends_with(".max_deliver"))
        .count();
    assert_eq!(gave_up, 3);
    let dir = tempfile::tempdir().unwrap();
    common::nats::write_config(dir.path(), "");
    let worker = format!("{}/worker", scene.wq());
    let out = common::qdeck(dir.path())
        .args(["stats", &worker, "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v: Json = serde_json::from_str(&text).unwrap();
    let stopped = find_text(&v, "stopped_delivering").unwrap_or_else(|| panic!("{text}"));
    assert!(stopped.starts_with(&format!("{gave_up} (")), "{stopped}");
    let dlq = find_text(&v, "dlq").unwrap_or_default();
    assert!(
        text.contains(&format!("qdeck create-dlq {worker}")),
        "{dlq} {text}"
    );
    // On a limits stream the server does not tell: said plainly.
    let reader = backend()
        .await
        .describe(&QueueId::new(format!("{}/reader", scene.lim())))
        .await
        .unwrap();
    assert!(
        reader.settings.extra["stopped_delivering"].starts_with("not told"),
        "{:?}",
        reader.settings.extra
    );

    // A create-dlq that fails (no such consumer) leaves an audit line saying so.
    let nobody = format!("{}/nobody", scene.wq());
    let out = common::qdeck(dir.path())
        .args(["create-dlq", &nobody])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no consumer"), "{err}");
    let audit = std::fs::read_to_string(dir.path().join("state/qdeck/audit.log")).unwrap();
    let line: Json = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["action"], "create");
    assert_eq!(line["queue"], nobody);
    assert_eq!(line["result"], "error");
    assert!(
        line["error"].as_str().unwrap().contains("no consumer"),
        "{line}"
    );
}

/// The text of the first `key` anywhere in a JSON document (`stats -o json` nests settings).
fn find_text(v: &Json, key: &str) -> Option<String> {
    match v {
        Json::Object(m) => m
            .get(key)
            .and_then(Json::as_str)
            .map(str::to_string)
            .or_else(|| m.values().find_map(|x| find_text(x, key))),
        Json::Array(a) => a.iter().find_map(|x| find_text(x, key)),
        _ => None,
    }
}

/// Dead letters captured the ways NATS's own docs show: MAX_DELIVERIES alone over a stream's
/// consumers (`.*`), with MSG_TERMINATED and a `>` wildcard, or for one named consumer. Each
/// capture is the DLQ of the consumer it covers, counts that consumer's dead letters (only
/// the kinds it captures), and lists it as its source; a capture of a stream with no consumer
/// says what it captures instead of an empty name.
#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON with nats-py, and nats-server on PATH"]
async fn captures_as_the_nats_docs_show_them_are_each_consumers_dlq() {
    nats_url();
    let store = tempfile::tempdir().unwrap();
    let server = OwnServer::start(&["-js", "-sd", store.path().to_str().unwrap()]);
    let md = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES";
    let term = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED";
    let mut scenes = Vec::new();
    for shape in ["star", "gt", "named"] {
        let p = common::nats::unique_prefix();
        peer_at(&server.url, &["setup", &p]);
        let wq = format!("{p}_WQ");
        let cap = format!("CAP_{shape}_{p}");
        let (subjects, with_term) = match shape {
            "star" => (vec![format!("{md}.{wq}.*")], false),
            "gt" => (vec![format!("{md}.{wq}.>"), format!("{term}.{wq}.*")], true),
            _ => (vec![format!("{md}.{wq}.worker")], false),
        };
        let mut args = vec!["capture".to_string(), cap.clone()];
        args.extend(subjects);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        peer_at(&server.url, &args);
        let failed = peer_at(&server.url, &["fail", &p]);
        let dead = failed["advisories"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| {
                let s = a["subject"].as_str().unwrap();
                s.contains(".MAX_DELIVERIES.") || (with_term && s.contains(".MSG_TERMINATED."))
            })
            .count() as u64;
        assert!(dead > 0, "{shape}: nothing died");
        scenes.push((shape, wq, cap, dead));
    }
    // A capture over a stream that has no consumer (yet).
    let lonely = common::nats::unique_prefix();
    let orphan = format!("CAP_orphan_{lonely}");
    peer_at(
        &server.url,
        &["capture", &orphan, &format!("{md}.{lonely}_NONE.*")],
    );

    let b = build(&profile(NatsSettings {
        url: Some(server.url.clone()),
        ..Default::default()
    }))
    .await
    .unwrap();
    let listed = b.list_queues().await.unwrap();
    let row = |id: &str| {
        listed
            .iter()
            .find(|q| q.id.as_str() == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
            .clone()
    };
    for (shape, wq, cap, dead) in &scenes {
        let consumer = format!("{wq}/worker");
        let info = b.describe(&QueueId::new(consumer.clone())).await.unwrap();
        assert_eq!(info.dlq, Some(QueueId::new(cap.clone())), "{shape}");
        let st = stats_of(b.as_ref(), &[consumer.clone(), cap.clone()]).await;
        let of = |id: &str| st.iter().find(|s| s.id.as_str() == id).unwrap();
        assert_eq!(
            of(&consumer).dlq_depth,
            Some(*dead),
            "{shape}: the consumer's DLQ depth"
        );
        assert_eq!(of(cap).depth, Some(*dead), "{shape}: the capture's depth");
        let c = row(cap);
        assert!(c.is_dlq, "{shape}");
        assert_eq!(
            c.dlq_sources,
            vec![QueueId::new(consumer.clone())],
            "{shape}"
        );
        assert_eq!(c.dlq_of().as_deref(), Some(consumer.as_str()), "{shape}");
        // The limits stream's consumers are not covered by a capture of the work queue.
        let reader = row(&format!("{}_LIM/reader", wq.trim_end_matches("_WQ")));
        assert_ne!(reader.dlq, Some(QueueId::new(cap.clone())), "{shape}");
    }
    let o = row(&orphan);
    assert!(o.is_dlq && o.dlq_sources.is_empty());
    let of = o.dlq_of().unwrap();
    assert!(
        of.contains(&format!("every consumer of {lonely}_NONE")),
        "the orphan capture's row names nothing: {of:?}"
    );
}
