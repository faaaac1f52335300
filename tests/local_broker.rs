//! Behaviour of the embedded local broker, one test per behaviour. Runs everywhere: the
//! broker is a SQLite file in a temp dir. The multi-process test re-executes this binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use qdeck_backend::local::{KeyPolicy, LocalBackend, LocalHandle, QueueOptions};
use qdeck_backend::{Backend, BackendError, OpProgress};
use qdeck_model::domain::*;

fn broker() -> (tempfile::TempDir, Arc<LocalBackend>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = LocalBackend::open(&dir.path().join("q.db")).expect("open broker");
    (dir, Arc::new(b))
}

fn queue(b: &LocalBackend, name: &str) {
    b.create_queue(name, &QueueOptions::default())
        .expect("create queue");
}

fn queue_with(b: &LocalBackend, name: &str, opts: QueueOptions) {
    b.create_queue(name, &opts).expect("create queue");
}

fn msg(body: &str) -> OutgoingMessage {
    OutgoingMessage {
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn keyed(body: &str, key: &str) -> OutgoingMessage {
    OutgoingMessage {
        body: body.as_bytes().to_vec(),
        key: Some(key.to_string()),
        ..Default::default()
    }
}

fn bodies(ls: &[qdeck_backend::local::Leased]) -> Vec<String> {
    ls.iter()
        .map(|l| String::from_utf8_lossy(&l.body).into_owned())
        .collect()
}

fn receipts(ls: &[qdeck_backend::local::Leased]) -> Vec<String> {
    ls.iter().map(|l| l.receipt.clone()).collect()
}

async fn stats(b: &Arc<LocalBackend>, q: &str) -> QueueStats {
    let h = LocalHandle(b.clone());
    let mut batch = h.stats(&[QueueId::new(q)]).await.expect("stats");
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);
    batch.stats.pop().expect("one queue")
}

async fn browse_all(b: &Arc<LocalBackend>, q: &str) -> Vec<Message> {
    let h = LocalHandle(b.clone());
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = h
            .browse(
                &QueueId::new(q),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 50,
                    force: false,
                },
            )
            .await
            .expect("browse");
        out.extend(page.messages);
        match page.next {
            Some(n) => cursor = Some(n),
            None => return out,
        }
    }
}

/// Leases and delays the tests wait out: long enough that a loaded machine does not let
/// them lapse between two calls that expect them in force.
const SHORT: Duration = Duration::from_millis(700);
const RETRY: Duration = Duration::from_millis(1000);
const LONG: Duration = Duration::from_secs(60);

fn wait_past(d: Duration) {
    std::thread::sleep(d + Duration::from_millis(150));
}

#[tokio::test]
async fn send_with_key_delay_and_headers() {
    let (_d, b) = broker();
    queue(&b, "q");
    let id = b
        .send_sync(
            "q",
            &OutgoingMessage {
                body: b"hello".to_vec(),
                key: Some("order-101".into()),
                delay: None,
                headers: vec![("trace".into(), "abc".into()), ("x".into(), "1".into())],
                ..Default::default()
            },
        )
        .expect("send");
    b.send_sync(
        "q",
        &OutgoingMessage {
            body: b"later".to_vec(),
            delay: Some(RETRY),
            ..Default::default()
        },
    )
    .expect("send delayed");
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.delayed), (Some(1), Some(1)));

    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(got.len(), 1, "the delayed message is not visible yet");
    assert_eq!(got[0].id, id);
    assert_eq!(got[0].body, b"hello");
    assert_eq!(got[0].key.as_deref(), Some("order-101"));
    assert_eq!(
        got[0].headers,
        vec![("trace".into(), "abc".into()), ("x".into(), "1".into())]
    );

    wait_past(RETRY);
    let later = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&later), vec!["later"]);
    assert!(later[0].key.is_none() && later[0].headers.is_empty());
}

#[tokio::test]
async fn receive_n_leases_them() {
    let (_d, b) = broker();
    queue(&b, "q");
    for i in 0..5 {
        b.send_sync("q", &msg(&format!("m{i}"))).expect("send");
    }
    let first = b.receive("q", "w1", 3, Some(LONG)).expect("receive");
    assert_eq!(bodies(&first), vec!["m0", "m1", "m2"]);
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.in_flight), (Some(2), Some(3)));
    let second = b.receive("q", "w2", 10, Some(LONG)).expect("receive");
    assert_eq!(
        bodies(&second),
        vec!["m3", "m4"],
        "leased messages are hidden"
    );
    assert!(b
        .receive("q", "w3", 10, Some(LONG))
        .expect("receive")
        .is_empty());
    assert!(b.receive("q", "w3", 0, None).expect("receive 0").is_empty());
}

#[tokio::test]
async fn ack_deletes_and_stale_receipts_do_nothing() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &msg("a")).expect("send");
    b.send_sync("q", &msg("b")).expect("send");
    let got = b.receive("q", "w1", 2, Some(LONG)).expect("receive");
    assert_eq!(
        b.ack("q", "w2", &receipts(&got)).expect("ack"),
        0,
        "not w2's lease"
    );
    assert_eq!(b.ack("q", "w1", &receipts(&got)).expect("ack"), 2);
    assert_eq!(b.ack("q", "w1", &receipts(&got)).expect("ack again"), 0);
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.in_flight), (Some(0), Some(0)));
    assert_eq!(s.completed_total, Some(2));
    assert!(matches!(
        b.ack("q", "w1", &["garbage".to_string()]),
        Err(BackendError::Invalid(_))
    ));
}

#[tokio::test]
async fn nack_returns_the_message_now_or_after_a_retry_delay() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &msg("a")).expect("send");
    let got = b.receive("q", "w1", 1, Some(LONG)).expect("receive");
    assert_eq!(
        b.nack("q", "w1", &receipts(&got), Duration::ZERO)
            .expect("nack"),
        1
    );
    let again = b.receive("q", "w2", 1, Some(LONG)).expect("receive");
    assert_eq!(bodies(&again), vec!["a"], "visibility 0: back at once");

    assert_eq!(
        b.nack("q", "w2", &receipts(&again), RETRY).expect("nack"),
        1
    );
    assert!(b
        .receive("q", "w3", 1, Some(LONG))
        .expect("receive")
        .is_empty());
    let s = stats(&b, "q").await;
    assert_eq!(
        (s.depth, s.in_flight, s.delayed),
        (Some(0), Some(0), Some(1))
    );
    wait_past(RETRY);
    assert_eq!(
        bodies(&b.receive("q", "w3", 1, Some(LONG)).expect("receive")),
        vec!["a"]
    );
}

#[tokio::test]
async fn renew_extends_a_lease() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &msg("a")).expect("send");
    let got = b.receive("q", "w1", 1, Some(SHORT)).expect("receive");
    assert_eq!(
        b.renew("w2", &receipts(&got), LONG).expect("renew"),
        0,
        "not w2's lease"
    );
    assert_eq!(b.renew("w1", &receipts(&got), LONG).expect("renew"), 1);
    wait_past(SHORT);
    assert!(
        b.receive("q", "w2", 1, Some(LONG))
            .expect("receive")
            .is_empty(),
        "renewed lease still holds"
    );
    assert_eq!(b.ack("q", "w1", &receipts(&got)).expect("ack"), 1);
}

#[tokio::test]
async fn lease_expiry_makes_the_message_visible_again() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &msg("a")).expect("send");
    let first = b.receive("q", "w1", 1, Some(SHORT)).expect("receive");
    assert!(b
        .receive("q", "w2", 1, Some(LONG))
        .expect("receive")
        .is_empty());
    wait_past(SHORT);
    let second = b.receive("q", "w2", 1, Some(LONG)).expect("receive");
    assert_eq!(bodies(&second), vec!["a"]);
    assert_eq!(
        b.ack("q", "w1", &receipts(&first)).expect("stale ack"),
        0,
        "the first lease is gone"
    );
    assert_eq!(b.ack("q", "w2", &receipts(&second)).expect("ack"), 1);
}

#[tokio::test]
async fn receive_count_grows_with_each_receive() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &msg("a")).expect("send");
    for expect in 1..=4u32 {
        let got = b.receive("q", "w1", 1, Some(LONG)).expect("receive");
        assert_eq!(got[0].receive_count, expect);
        b.nack("q", "w1", &receipts(&got), Duration::ZERO)
            .expect("nack");
    }
    let m = browse_all(&b, "q").await;
    assert_eq!(m[0].receive_count, Some(4));
}

#[tokio::test]
async fn max_receives_moves_the_message_to_the_dlq_with_origin_reason_and_count() {
    let (_d, b) = broker();
    queue_with(
        &b,
        "q",
        QueueOptions {
            max_receives: Some(2),
            dlq: Some("q.dlq".into()),
            ..Default::default()
        },
    );
    b.send_sync("q", &msg("nacked")).expect("send");
    // "nacked" fails twice: the second failure sends it to the DLQ at once.
    for _ in 0..2 {
        let got = b.receive("q", "w1", 1, Some(LONG)).expect("receive");
        assert_eq!(bodies(&got), vec!["nacked"]);
        b.nack("q", "w1", &receipts(&got), Duration::ZERO)
            .expect("nack");
    }
    // "expired" is received twice and its lease runs out; the next receive dead-letters it.
    b.send_sync("q", &msg("expired")).expect("send");
    for _ in 0..2 {
        let got = b.receive("q", "w1", 1, Some(SHORT)).expect("receive");
        assert_eq!(bodies(&got), vec!["expired"]);
        wait_past(SHORT);
    }
    assert!(b
        .receive("q", "w1", 10, Some(LONG))
        .expect("receive")
        .is_empty());

    let dead = browse_all(&b, "q.dlq").await;
    assert_eq!(dead.len(), 2);
    for m in &dead {
        let dl = m.dead_letter.as_ref().expect("dead-letter info");
        assert_eq!(
            dl.origin.as_ref().map(qdeck_model::domain::QueueId::as_str),
            Some("q")
        );
        assert_eq!(dl.reason.as_deref(), Some("max_receives exceeded"));
        assert_eq!(dl.count, Some(2));
        assert!(dl.at_ms.is_some());
    }
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.dlq_depth), (Some(0), Some(2)));
    assert_eq!(s.dead_lettered_total, Some(2));
    let h = LocalHandle(b.clone());
    let info = h.list_queues().await.expect("list");
    let dlq = info
        .iter()
        .find(|q| q.id.as_str() == "q.dlq")
        .expect("dlq listed");
    assert!(dlq.is_dlq);
    assert_eq!(dlq.dlq_sources, vec![QueueId::new("q")]);
}

#[tokio::test]
async fn parallel_policy_lets_same_key_messages_overlap() {
    let (_d, b) = broker();
    queue(&b, "q");
    b.send_sync("q", &keyed("1", "order-101")).expect("send");
    b.send_sync("q", &keyed("2", "order-101")).expect("send");
    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&got), vec!["1", "2"]);
}

#[tokio::test]
async fn exclusive_policy_keeps_one_per_key_in_flight_but_not_order() {
    let (_d, b) = broker();
    queue_with(
        &b,
        "q",
        QueueOptions {
            key_policy: KeyPolicy::Exclusive,
            ..Default::default()
        },
    );
    b.send_sync("q", &keyed("1", "order-101")).expect("send");
    b.send_sync("q", &keyed("2", "order-101")).expect("send");
    b.send_sync("q", &keyed("3", "order-102")).expect("send");
    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&got), vec!["1", "3"]);
    assert!(
        b.receive("q", "w2", 10, Some(LONG))
            .expect("receive")
            .is_empty(),
        "2 waits while 1 runs"
    );
    // 1 fails and waits for a retry: 2 may run before it.
    b.nack("q", "w1", &receipts(&got[..1]), LONG).expect("nack");
    let next = b.receive("q", "w2", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&next), vec!["2"]);
}

#[tokio::test]
async fn ordered_policy_waits_through_retries_until_success_or_death() {
    let (_d, b) = broker();
    queue_with(
        &b,
        "q",
        QueueOptions {
            key_policy: KeyPolicy::Ordered,
            max_receives: Some(2),
            dlq: Some("q.dlq".into()),
            ..Default::default()
        },
    );
    b.send_sync("q", &keyed("1", "order-101")).expect("send");
    b.send_sync("q", &keyed("2", "order-101")).expect("send");
    b.send_sync("q", &keyed("3", "order-102")).expect("send");
    b.send_sync("q", &keyed("4", "order-102")).expect("send");
    b.send_sync("q", &msg("no-key")).expect("send");

    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&got), vec!["1", "3", "no-key"]);
    // 1 fails and waits for its retry; 3 succeeds.
    b.nack("q", "w1", &receipts(&got[..1]), RETRY)
        .expect("nack");
    b.ack("q", "w1", &receipts(&got[1..])).expect("ack");
    let next = b.receive("q", "w2", 10, Some(LONG)).expect("receive");
    assert_eq!(
        bodies(&next),
        vec!["4"],
        "2 keeps waiting for 1; other keys proceed"
    );
    b.ack("q", "w2", &receipts(&next)).expect("ack");

    // 1's retry comes first, then 2 — once 1 succeeds.
    wait_past(RETRY);
    let retry = b.receive("q", "w2", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&retry), vec!["1"]);
    assert_eq!(retry[0].receive_count, 2);
    assert!(b
        .receive("q", "w3", 10, Some(LONG))
        .expect("receive")
        .is_empty());
    b.ack("q", "w2", &receipts(&retry)).expect("ack");
    let two = b.receive("q", "w3", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&two), vec!["2"]);

    // A head that goes dead releases the key too.
    b.send_sync("q", &keyed("5", "order-101")).expect("send");
    b.nack("q", "w3", &receipts(&two), Duration::ZERO)
        .expect("nack");
    let two_again = b.receive("q", "w3", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&two_again), vec!["2"]);
    assert!(b
        .receive("q", "w4", 10, Some(LONG))
        .expect("receive")
        .is_empty());
    b.nack("q", "w3", &receipts(&two_again), Duration::ZERO)
        .expect("nack to DLQ");
    let five = b.receive("q", "w4", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&five), vec!["5"]);
    assert_eq!(browse_all(&b, "q.dlq").await.len(), 1);
}

#[tokio::test]
async fn purge_removes_everything() {
    let (_d, b) = broker();
    queue(&b, "q");
    queue(&b, "other");
    for i in 0..7 {
        b.send_sync("q", &msg(&i.to_string())).expect("send");
    }
    b.send_sync("other", &msg("keep")).expect("send");
    b.receive("q", "w1", 2, Some(LONG)).expect("receive");
    let h = LocalHandle(b.clone());
    let rep = h
        .purge(&QueueId::new("q"), &OpProgress::detached())
        .await
        .expect("purge");
    assert_eq!(rep.purged, Some(7));
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.in_flight), (Some(0), Some(0)));
    assert_eq!(stats(&b, "other").await.depth, Some(1));
    assert!(matches!(
        h.purge(&QueueId::new("nope"), &OpProgress::detached())
            .await,
        Err(BackendError::NotFound(_))
    ));
}

/// Fill `q.dlq` with `n` dead letters from `q` (max_receives 1).
fn dead_letters(b: &LocalBackend, n: usize) {
    queue_with(
        b,
        "q",
        QueueOptions {
            max_receives: Some(1),
            dlq: Some("q.dlq".into()),
            ..Default::default()
        },
    );
    for i in 0..n {
        b.send_sync("q", &msg(&format!("d{i}"))).expect("send");
    }
    let got = b.receive("q", "w1", n, Some(LONG)).expect("receive");
    b.nack("q", "w1", &receipts(&got), Duration::ZERO)
        .expect("nack");
}

#[tokio::test]
async fn redrive_to_origin_and_to_a_named_queue_with_a_limit_loses_nothing() {
    let (_d, b) = broker();
    dead_letters(&b, 5);
    queue(&b, "elsewhere");
    let h = LocalHandle(b.clone());
    assert_eq!(browse_all(&b, "q.dlq").await.len(), 5);

    let req = RedriveRequest {
        source: QueueId::new("q.dlq"),
        target: RedriveTarget::Origin,
        max: Some(3),
        rate: None,
        only_ids: None,
        window: None,
    };
    assert_eq!(b.redrive_plan(&req).expect("plan"), 3);
    let rep = h
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive");
    assert_eq!((rep.moved, rep.failed, rep.possibly_duplicated), (3, 0, 0));
    let back = browse_all(&b, "q").await;
    assert_eq!(back.len(), 3);
    assert!(back
        .iter()
        .all(|m| m.receive_count == Some(0) && m.dead_letter.is_none()));

    let rep = h
        .redrive(
            &RedriveRequest {
                target: RedriveTarget::Queue(QueueId::new("elsewhere")),
                max: None,
                rate: Some(qdeck_model::rate::Rate::fixed(1000.0)),
                ..req.clone()
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_eq!(rep.moved, 2);
    let (q, dlq, other) = (
        browse_all(&b, "q").await,
        browse_all(&b, "q.dlq").await,
        browse_all(&b, "elsewhere").await,
    );
    assert_eq!((q.len(), dlq.len(), other.len()), (3, 0, 2));
    let mut all: Vec<Vec<u8>> = q.into_iter().chain(other).map(|m| m.body).collect();
    all.sort();
    let want: Vec<Vec<u8>> = (0..5).map(|i| format!("d{i}").into_bytes()).collect();
    assert_eq!(all, want, "every message arrived exactly once");
}

#[tokio::test]
async fn redrive_without_origin_or_target_fails_clearly() {
    let (_d, b) = broker();
    queue(&b, "loose");
    queue(&b, "target");
    b.send_sync("loose", &msg("x")).expect("send");
    let h = LocalHandle(b.clone());
    let req = RedriveRequest {
        source: QueueId::new("loose"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let err = h
        .redrive(&req, &OpProgress::detached())
        .await
        .expect_err("no origin");
    assert!(matches!(err, BackendError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("--to"), "{err}");
    assert_eq!(browse_all(&b, "loose").await.len(), 1, "nothing moved");

    for bad in [
        RedriveRequest {
            target: RedriveTarget::Queue(QueueId::new("missing")),
            ..req.clone()
        },
        RedriveRequest {
            source: QueueId::new("missing"),
            ..req.clone()
        },
    ] {
        assert!(matches!(
            h.redrive(&bad, &OpProgress::detached()).await,
            Err(BackendError::NotFound(_))
        ));
    }
    for bad in [
        RedriveRequest {
            target: RedriveTarget::Queue(QueueId::new("loose")),
            ..req.clone()
        },
        RedriveRequest {
            target: RedriveTarget::Queue(QueueId::new("target")),
            max: Some(0),
            ..req.clone()
        },
    ] {
        assert!(matches!(
            h.redrive(&bad, &OpProgress::detached()).await,
            Err(BackendError::Invalid(_))
        ));
    }
    assert_eq!(browse_all(&b, "loose").await.len(), 1, "nothing moved");
}

#[tokio::test]
async fn stats_and_consumers_report_the_figures() {
    let (_d, b) = broker();
    queue_with(
        &b,
        "q",
        QueueOptions {
            max_receives: Some(1),
            dlq: Some("q.dlq".into()),
            ..Default::default()
        },
    );
    for i in 0..6 {
        b.send_sync("q", &msg(&i.to_string())).expect("send");
    }
    b.send_sync(
        "q",
        &OutgoingMessage {
            body: b"later".to_vec(),
            delay: Some(LONG),
            ..Default::default()
        },
    )
    .expect("send");
    let w1 = b.receive("q", "w1", 2, Some(LONG)).expect("receive");
    b.ack("q", "w1", &receipts(&w1)).expect("ack");
    let w1 = b.receive("q", "w1", 1, Some(LONG)).expect("receive");
    let w2 = b.receive("q", "w2", 2, Some(LONG)).expect("receive");
    b.nack("q", "w2", &receipts(&w2[..1]), Duration::ZERO)
        .expect("nack → DLQ");
    std::thread::sleep(Duration::from_millis(20));

    let s = stats(&b, "q").await;
    assert_eq!(s.depth, Some(1));
    assert_eq!(s.in_flight, Some(2));
    assert_eq!(s.delayed, Some(1));
    assert_eq!(s.dlq_depth, Some(1));
    assert_eq!(s.enqueued_total, Some(7));
    assert_eq!(s.completed_total, Some(2));
    assert_eq!(s.dead_lettered_total, Some(1));
    assert_eq!(s.consumers, Some(2));
    assert!(s.oldest_age_secs.is_some_and(|a| a > 0.0));
    let d = stats(&b, "q.dlq").await;
    assert_eq!(
        (d.depth, d.enqueued_total, d.dlq_depth),
        (Some(1), Some(1), None)
    );

    let h = LocalHandle(b.clone());
    let mut cs = h.consumers(&QueueId::new("q")).await.expect("consumers");
    cs.sort_by(|a, b| a.tag.cmp(&b.tag));
    let view: Vec<_> = cs
        .iter()
        .map(|c| (c.tag.as_str(), c.holding, c.processed, c.failed))
        .collect();
    assert_eq!(
        view,
        vec![
            ("w1", Some(1), Some(2), Some(0)),
            ("w2", Some(1), Some(0), Some(1))
        ]
    );
    assert!(cs.iter().all(|c| c.state == "busy"));
    assert_eq!(b.release_worker("w1").expect("release"), 1);
    drop(w1);
    let s = stats(&b, "q").await;
    assert_eq!((s.depth, s.in_flight), (Some(2), Some(1)));

    let all = h.stats(&[]).await.expect("all stats");
    assert_eq!(all.stats.len(), 2);
    let missing = h.stats(&[QueueId::new("nope")]).await.expect("stats");
    assert_eq!(missing.errors.len(), 1);
    assert!(matches!(
        h.consumers(&QueueId::new("nope")).await,
        Err(BackendError::NotFound(_))
    ));
}

#[tokio::test]
async fn binary_and_invalid_utf8_bodies_round_trip_as_bytes() {
    let (_d, b) = broker();
    queue(&b, "q");
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let bad_utf8 = vec![0xff, 0xfe, b'a', 0xc3, 0x28, 0x00, 0x1b, b'[', b'2', b'J'];
    let empty = Vec::new();
    for body in [&all_bytes, &bad_utf8, &empty] {
        b.send_sync(
            "q",
            &OutgoingMessage {
                body: body.clone(),
                ..Default::default()
            },
        )
        .expect("send");
    }
    let browsed: Vec<Vec<u8>> = browse_all(&b, "q")
        .await
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(
        browsed,
        vec![all_bytes.clone(), bad_utf8.clone(), empty.clone()]
    );
    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    let got: Vec<Vec<u8>> = got.into_iter().map(|l| l.body).collect();
    assert_eq!(got, vec![all_bytes, bad_utf8, empty]);
}

#[test]
fn corrupt_file_gives_a_storage_error_and_is_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("garbage.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&path, &garbage).expect("write");
    let err = LocalBackend::open(&path).err().expect("open must fail");
    assert!(matches!(err, BackendError::Storage(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("not a qdeck database") || text.contains("corrupt"),
        "{text}"
    );
    assert!(!text.contains('\n'));
    assert_eq!(std::fs::read(&path).expect("read"), garbage, "nothing lost");
}

#[test]
fn another_applications_sqlite_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.db");
    {
        let c = rusqlite::Connection::open(&path).expect("create");
        c.execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES('ada');")
            .expect("fill");
    }
    let before = std::fs::read(&path).expect("read");
    let err = LocalBackend::open(&path).err().expect("refused");
    assert!(matches!(err, BackendError::Storage(_)), "{err:?}");
    assert!(err.to_string().contains("another application"), "{err}");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "file untouched"
    );

    // A qdeck file reopens fine (schema already there).
    let ours = dir.path().join("q.db");
    let b = LocalBackend::open(&ours).expect("open");
    queue(&b, "q");
    b.send_sync("q", &msg("kept")).expect("send");
    drop(b);
    let b = LocalBackend::open(&ours).expect("reopen");
    assert_eq!(
        bodies(&b.receive("q", "w", 1, None).expect("receive")),
        vec!["kept"]
    );
}

#[test]
fn locked_database_gives_a_storage_error_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("q.db");
    let b = LocalBackend::open(&path).expect("open");
    queue(&b, "q");
    b.send_sync("q", &msg("before")).expect("send");
    b.set_busy_timeout(Duration::from_millis(100))
        .expect("timeout");

    let other = rusqlite::Connection::open(&path).expect("second connection");
    other.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let err = b.send_sync("q", &msg("during")).expect_err("locked");
    assert!(matches!(err, BackendError::Storage(_)), "{err:?}");
    assert!(err.to_string().contains("locked"), "{err}");
    let err = b.receive("q", "w1", 1, None).expect_err("locked");
    assert!(matches!(err, BackendError::Storage(_)), "{err:?}");
    other.execute_batch("ROLLBACK").expect("unlock");

    b.send_sync("q", &msg("after")).expect("send after unlock");
    let got = b.receive("q", "w1", 10, Some(LONG)).expect("receive");
    assert_eq!(bodies(&got), vec!["before", "after"]);
}

#[tokio::test]
async fn unknown_queue_and_bad_options_are_clear_errors() {
    let (_d, b) = broker();
    assert!(matches!(
        b.send_sync("nope", &msg("x")),
        Err(BackendError::NotFound(_))
    ));
    assert!(matches!(
        b.receive("nope", "w", 1, None),
        Err(BackendError::NotFound(_))
    ));
    assert!(matches!(
        b.delete_queue("nope"),
        Err(BackendError::NotFound(_))
    ));
    for opts in [
        QueueOptions {
            max_receives: Some(3),
            ..Default::default()
        },
        QueueOptions {
            max_receives: Some(0),
            dlq: Some("d".into()),
            ..Default::default()
        },
        QueueOptions {
            dlq: Some("same".into()),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            b.create_queue("same", &opts),
            Err(BackendError::Invalid(_))
        ));
    }
    assert!(matches!(
        b.create_queue("bad\x1bname", &QueueOptions::default()),
        Err(BackendError::Invalid(_))
    ));
    queue(&b, "q");
    b.send_sync("q", &msg("x")).expect("send");
    b.delete_queue("q").expect("delete");
    assert!(matches!(
        b.send_sync("q", &msg("x")),
        Err(BackendError::NotFound(_))
    ));
}

// ---- two OS processes competing on one file -------------------------------------------------

const CHILD_DB: &str = "QDECK_TEST_CHILD_DB";
const CHILD_ID: &str = "QDECK_TEST_CHILD_ID";
const CHILD_OUT: &str = "QDECK_TEST_CHILD_OUT";
const CHILD_GO: &str = "QDECK_TEST_CHILD_GO";

/// Run by `two_processes_compete_without_double_leases` in a child process: receive, record,
/// acknowledge until the queue stays empty. Does nothing when run by hand.
#[test]
#[ignore = "child process of two_processes_compete_without_double_leases"]
fn manual_child_worker() {
    let (Ok(db), Ok(id), Ok(out), Ok(go)) = (
        std::env::var(CHILD_DB),
        std::env::var(CHILD_ID),
        std::env::var(CHILD_OUT),
        std::env::var(CHILD_GO),
    ) else {
        return;
    };
    let b = LocalBackend::open(Path::new(&db)).expect("child open");
    std::fs::write(format!("{out}.ready"), b"").expect("ready file");
    while !Path::new(&go).exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Short leases, and every 5th batch the worker is too slow: its leases lapse, the other
    // process may take those messages, and this process's late acks must then do nothing.
    let lease = Duration::from_millis(300);
    let mut log = String::new();
    let mut empty = 0;
    let mut batches = 0u32;
    while empty < 100 {
        let got = b.receive("q", &id, 7, Some(lease)).expect("child receive");
        if got.is_empty() {
            empty += 1;
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        empty = 0;
        batches += 1;
        if batches.is_multiple_of(5) {
            std::thread::sleep(lease + Duration::from_millis(300));
        }
        for l in &got {
            let acked = b
                .ack("q", &id, std::slice::from_ref(&l.receipt))
                .expect("child ack");
            log.push_str(&format!("{} {} {}\n", l.id, l.receive_count, acked));
        }
    }
    std::fs::write(&out, log).expect("child output");
}

#[test]
fn two_processes_compete_without_double_leases() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("shared.db");
    let b = LocalBackend::open(&db).expect("open");
    queue(&b, "q");
    const N: usize = 600;
    let batch: Vec<OutgoingMessage> = (0..N).map(|i| msg(&format!("m{i}"))).collect();
    b.send_batch("q", &batch).expect("send batch");
    let go = dir.path().join("go");
    let exe = std::env::current_exe().expect("test binary");
    let outs: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("child{i}.out")))
        .collect();
    let mut children = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        let child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "manual_child_worker",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DB, &db)
            .env(CHILD_ID, format!("proc{i}"))
            .env(CHILD_OUT, out)
            .env(CHILD_GO, &go)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn child");
        children.push(child);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !outs
        .iter()
        .all(|o| Path::new(&format!("{}.ready", o.display())).exists())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "children did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::write(&go, b"").expect("go");
    for mut c in children {
        let status = c.wait().expect("wait child");
        assert!(status.success(), "child failed: {status}");
    }

    // Each lease is one (message, receive count): no two receives may share one, and each
    // message is acknowledged exactly once in all.
    let mut leases: HashMap<(i64, u32), usize> = HashMap::new();
    let mut acks: HashMap<i64, u32> = HashMap::new();
    let mut per_child = Vec::new();
    let mut redelivered = 0;
    for (i, out) in outs.iter().enumerate() {
        let text = std::fs::read_to_string(out).expect("child output");
        let mut n = 0;
        for line in text.lines() {
            let mut parts = line.split(' ');
            let id: i64 = parts.next().and_then(|s| s.parse().ok()).expect("id");
            let count: u32 = parts.next().and_then(|s| s.parse().ok()).expect("count");
            let acked: u32 = parts.next().and_then(|s| s.parse().ok()).expect("acked");
            if let Some(prev) = leases.insert((id, count), i) {
                panic!(
                    "message {id} (receive {count}) leased by child {prev} and child {i} at once"
                );
            }
            if count > 1 {
                redelivered += 1;
            }
            *acks.entry(id).or_default() += acked;
            n += acked;
        }
        per_child.push(n);
    }
    println!("acked per process: {per_child:?}; redeliveries after a lapsed lease: {redelivered}");
    assert_eq!(acks.len(), N, "every message was received");
    let ids: HashSet<i64> = acks
        .iter()
        .filter(|(_, n)| **n == 1)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids.len(), N, "every message acked exactly once");
    let s = {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let b = Arc::new(b);
        rt.block_on(stats(&b, "q"))
    };
    assert_eq!((s.depth, s.in_flight), (Some(0), Some(0)));
    assert_eq!(s.completed_total, Some(N as u64));
}

// ---- the demo workload -----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_workload_moves_every_queue_and_stops_cleanly() {
    use qdeck::demo::{DemoConfig, DemoHandle};
    let (_d, b) = broker();
    let cfg = DemoConfig {
        produce_rate: 40.0,
        workers: 2,
        per_worker_rate: 50.0,
        poison_share: 0.3,
        crash_share: 0.0,
    };
    // The demo's queues come first, as `qdeck demo` plans them through the gate.
    for (n, o) in qdeck::demo::queues() {
        b.create_queue(&n, &o).expect("demo queue");
    }
    let demo = DemoHandle::start(b.clone(), cfg).expect("demo starts");
    assert_eq!(demo.workers(), 2);
    demo.add_worker();
    assert_eq!(demo.workers(), 3);
    demo.remove_worker();
    assert_eq!(demo.workers(), 2);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let c = demo.counters();
    let produced = c.produced.load(std::sync::atomic::Ordering::Relaxed);
    let processed = c.processed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(produced > 0 && processed > 0, "{produced} {processed}");
    assert_eq!(
        c.order_violations
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    tokio::task::spawn_blocking(move || drop(demo))
        .await
        .expect("stop");

    let h = LocalHandle(b.clone());
    let all = h.stats(&[]).await.expect("stats");
    let names: HashSet<&str> = all.stats.iter().map(|s| s.id.as_str()).collect();
    for q in [
        "orders",
        "orders.dlq",
        "payments",
        "payments.dlq",
        "reports",
    ] {
        assert!(names.contains(q), "{q} missing from {names:?}");
    }
    let orders = all
        .stats
        .iter()
        .find(|s| s.id.as_str() == "orders")
        .expect("orders");
    assert!(orders.completed_total.is_some_and(|n| n > 0));
    assert!(
        orders.dlq_depth.is_some_and(|n| n > 0),
        "poison reached the DLQ"
    );
    assert_eq!(
        orders.in_flight,
        Some(0),
        "stopped workers returned their leases"
    );
    let payments = all
        .stats
        .iter()
        .find(|s| s.id.as_str() == "payments")
        .expect("payments");
    assert_eq!(payments.in_flight, Some(0));
    let workers = h
        .consumers(&QueueId::new("orders"))
        .await
        .expect("consumers");
    assert!(workers
        .iter()
        .any(|w| w.tag == "orders-w1" && w.processed > Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_demo_prints_and_ends_after_its_duration() {
    let (_d, b) = broker();
    // The demo's queues come first, as `qdeck demo` plans them through the gate.
    for (n, o) in qdeck::demo::queues() {
        b.create_queue(&n, &o).expect("demo queue");
    }
    qdeck::demo::run_headless(
        b.clone(),
        qdeck::demo::DemoConfig::default(),
        Some(Duration::from_millis(3300)),
    )
    .await
    .expect("headless demo");
    let s = stats(&b, "orders").await;
    assert!(s.enqueued_total.is_some_and(|n| n > 0));
    assert!(s.completed_total.is_some_and(|n| n > 0));
}

/// The seeds' story, to watch by hand (timing, so not part of the suite):
/// `cargo test --test local_broker manual_demo_story -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "demo to watch by hand"]
async fn manual_demo_story() {
    use qdeck::demo::{DemoConfig, DemoHandle};
    let (_d, b) = broker();
    // The demo's queues come first, as `qdeck demo` plans them through the gate.
    for (n, o) in qdeck::demo::queues() {
        b.create_queue(&n, &o).expect("demo queue");
    }
    let demo = DemoHandle::start(b.clone(), DemoConfig::default()).expect("demo starts");
    for step in 0..12 {
        if step == 5 {
            demo.add_worker();
            demo.add_worker();
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        let s = stats(&b, "orders").await;
        println!(
            "t={:>2}s workers {} depth {:?} in-flight {:?} dlq {:?} done {:?}",
            (step + 1) * 4,
            demo.workers(),
            s.depth,
            s.in_flight,
            s.dlq_depth,
            s.completed_total
        );
    }
    tokio::task::spawn_blocking(move || drop(demo))
        .await
        .expect("stop");
}

/// Safety item 2: a consumer rejects every redriven message (max_receives 1), so each one
/// dead-letters again while the redrive runs. The run ends and moves exactly what the DLQ
/// held at its start; nothing is lost.
#[tokio::test]
async fn redrive_ends_while_its_messages_dead_letter_again() {
    let (dir, b) = broker();
    const N: usize = 53;
    dead_letters(&b, N);
    assert_eq!(browse_all(&b, "q.dlq").await.len(), N);

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rejected = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let worker = {
        let (stop, rejected) = (stop.clone(), rejected.clone());
        let other = LocalBackend::open(&dir.path().join("q.db")).expect("second connection");
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let got = other
                    .receive("q", "poison", 10, Some(LONG))
                    .expect("receive");
                if got.is_empty() {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let n = other
                    .nack("q", "poison", &receipts(&got), Duration::ZERO)
                    .expect("nack");
                rejected.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    // Batches of 10 a second: the worker has time to send each batch back before the next.
    let req = RedriveRequest {
        source: QueueId::new("q.dlq"),
        target: RedriveTarget::Origin,
        max: None,
        rate: Some(qdeck_model::rate::Rate::fixed(10.0)),
        only_ids: None,
        window: None,
    };
    let run = LocalHandle(b.clone());
    let rep = tokio::time::timeout(
        Duration::from_secs(120),
        run.redrive(&req, &OpProgress::detached()),
    )
    .await
    .expect("the redrive ends")
    .expect("redrive");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    worker.join().expect("worker thread");
    assert_eq!(rep.moved, N as u64, "{rep:?}");
    assert!(
        rejected.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the worker rejected redriven messages during the run"
    );
    let mut all: Vec<Vec<u8>> = browse_all(&b, "q")
        .await
        .into_iter()
        .chain(browse_all(&b, "q.dlq").await)
        .map(|m| m.body)
        .collect();
    all.sort();
    let mut want: Vec<Vec<u8>> = (0..N).map(|i| format!("d{i}").into_bytes()).collect();
    want.sort();
    assert_eq!(all, want, "every message is in q or q.dlq exactly once");
}

/// A qdeck command against the broker file `db`, with its own config and state dirs.
fn qdeck_cmd(dir: &Path, db: &Path) -> std::process::Command {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_profile = \"t\"\n[[profiles]]\nname = \"t\"\nkind = \"local\"\npath = {:?}\n",
            db.display().to_string()
        ),
    )
    .expect("config");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_qdeck"));
    c.env("QDECK_CONFIG", &config)
        .env("HOME", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_DATA_HOME", dir.join("data"));
    c
}

/// Milliseconds in 0..max from the clock (no rand crate needed for a kill moment).
fn random_ms(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            d.subsec_nanos() as u64 ^ (d.as_secs() * 2_654_435_761)
        });
    nanos % max.max(1)
}

/// Loss trial: `qdeck redrive` killed with SIGKILL at a random moment, QDECK_TRIALS times
/// (default 5). The local broker copies and deletes in one transaction per batch, so every
/// message is afterwards in the DLQ or its origin exactly once.
#[tokio::test]
async fn redrive_killed_at_random_moments_loses_and_duplicates_nothing() {
    let trials: usize = std::env::var("QDECK_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    const N: usize = 3000;
    for trial in 0..trials {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("q.db");
        {
            let b = LocalBackend::open(&db).expect("open");
            queue_with(
                &b,
                "q",
                QueueOptions {
                    max_receives: Some(1),
                    dlq: Some("q.dlq".into()),
                    ..Default::default()
                },
            );
            let batch: Vec<OutgoingMessage> = (0..N).map(|i| msg(&format!("d{i}"))).collect();
            b.send_batch("q.dlq", &batch).expect("fill the DLQ");
        }
        let mut child = qdeck_cmd(dir.path(), &db)
            .args(["redrive", "q.dlq", "--yes", "--rate", "1500"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn qdeck");
        let delay = random_ms(2000);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let status = child.wait().expect("wait");
        let b = Arc::new(LocalBackend::open(&db).expect("reopen"));
        let mut count: HashMap<String, usize> = HashMap::new();
        for q in ["q", "q.dlq"] {
            for m in browse_all(&b, q).await {
                *count
                    .entry(String::from_utf8_lossy(&m.body).into_owned())
                    .or_default() += 1;
            }
        }
        let missing = (0..N)
            .filter(|i| !count.contains_key(&format!("d{i}")))
            .count();
        let dup = count.values().filter(|n| **n > 1).count();
        println!("trial {trial}: killed after {delay} ms ({status}); {missing} missing, {dup} duplicated");
        assert_eq!((missing, dup), (0, 0), "trial {trial}");
        assert_eq!(count.len(), N);
    }
}

/// Item 11: with another connection holding a write transaction (`BEGIN IMMEDIATE`), opening
/// the broker, listing, figures and browsing all work (WAL lets readers proceed; opening a
/// current file writes nothing). A write still waits and then fails clearly.
#[tokio::test]
async fn readers_work_while_another_process_holds_the_write_lock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("q.db");
    {
        let b = LocalBackend::open(&db).expect("open");
        dead_letters(&b, 3);
    }
    let writer = rusqlite::Connection::open(&db).expect("second connection");
    writer.execute_batch("BEGIN IMMEDIATE").expect("write lock");
    writer
        .execute(
            "UPDATE queues SET lease_secs = lease_secs WHERE name = 'q'",
            [],
        )
        .expect("write inside the transaction");

    let b = Arc::new(LocalBackend::open(&db).expect("open while locked"));
    b.set_busy_timeout(Duration::from_millis(200))
        .expect("timeout");
    let h = LocalHandle(b.clone());
    assert_eq!(h.list_queues().await.expect("list").len(), 2);
    assert_eq!(stats(&b, "q.dlq").await.depth, Some(3));
    assert_eq!(browse_all(&b, "q.dlq").await.len(), 3);
    let info = h.describe(&QueueId::new("q.dlq")).await.expect("describe");
    assert_eq!(info.dlq_sources, vec![QueueId::new("q")]);
    let err = b
        .send_sync("q", &msg("blocked"))
        .expect_err("writes wait for the lock");
    assert!(matches!(err, BackendError::Storage(_)), "{err:?}");

    // The commands users run, as separate processes.
    for args in [
        vec!["ls"],
        vec!["peek", "q.dlq", "-n", "3"],
        vec!["stats", "q.dlq"],
    ] {
        let out = qdeck_cmd(dir.path(), &db)
            .args(&args)
            .output()
            .expect("run qdeck");
        assert!(
            out.status.success(),
            "qdeck {args:?}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    writer.execute_batch("ROLLBACK").expect("unlock");
}

/// Item 11: a broker file in a directory qdeck cannot write is still readable. As root,
/// permission bits do not stop writes, so the directory is made immutable (`chattr +i`) when
/// chmod is not enough; where neither works the same read-only open is forced with
/// `open_read_only` (SQLITE_OPEN_READ_ONLY), which is what `open` falls back to.
#[tokio::test]
async fn a_database_in_a_read_only_directory_is_still_readable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).expect("mkdir");
    let db = sub.join("q.db");
    {
        let b = LocalBackend::open(&db).expect("open");
        dead_letters(&b, 4);
    }
    // Closed cleanly: no -wal/-shm left, so reading needs to create one or open immutable.
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let probe = sub.join("probe");
    let mut immutable = false;
    if std::fs::write(&probe, b"").is_ok() {
        let _ = std::fs::remove_file(&probe);
        immutable = std::process::Command::new("chattr")
            .arg("+i")
            .arg(&sub)
            .status()
            .is_ok_and(|s| s.success());
    }
    let read_only_dir = std::fs::write(&probe, b"").is_err();
    let _ = std::fs::remove_file(&probe);
    let b = if read_only_dir {
        LocalBackend::open(&db).expect("open in a read-only directory")
    } else {
        eprintln!("cannot make a directory read-only here: testing the forced read-only open");
        LocalBackend::open_read_only(&db).expect("open read-only")
    };
    let b = Arc::new(b);
    let note = b.read_only_note().map(str::to_string);
    let h = LocalHandle(b.clone());
    let listed = h.list_queues().await;
    let depth = stats(&b, "q.dlq").await.depth;
    let page = browse_all(&b, "q.dlq").await.len();
    let write = b.send_sync("q", &msg("nope"));
    let caps = h.capabilities();
    if immutable {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&sub)
            .status();
    }
    let _ = std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755));
    assert_eq!(listed.expect("list").len(), 2);
    assert_eq!(depth, Some(4));
    assert_eq!(page, 4);
    let note = note.expect("opened read-only, and says so");
    assert!(note.contains("read-only"), "{note}");
    assert!(caps.notes.iter().any(|n| n == &note), "{:?}", caps.notes);
    assert!(
        matches!(write, Err(BackendError::Storage(_))),
        "writes are refused: {write:?}"
    );
}

/// A few queues asked for by name among many get the same figures as a full scan gives them
/// (depth, DLQ depth, age of oldest), and a name that does not exist is an error, not a row.
#[tokio::test]
async fn stats_by_name_match_the_full_scan() {
    let (_d, b) = broker();
    for i in 0..50 {
        queue(&b, &format!("other-{i:02}"));
    }
    queue_with(
        &b,
        "jobs",
        QueueOptions {
            dlq: Some("jobs-dlq".into()),
            ..Default::default()
        },
    );
    for i in 0..3 {
        b.send_sync("jobs", &msg(&format!("j{i}"))).unwrap();
    }
    b.send_sync("jobs-dlq", &msg("dead")).unwrap();
    b.send_sync("other-07", &msg("x")).unwrap();
    let h = LocalHandle(b.clone());
    let all = h.stats(&[]).await.unwrap();
    let asked = h
        .stats(&[QueueId::new("jobs"), QueueId::new("nope")])
        .await
        .unwrap();
    assert_eq!(asked.stats.len(), 1, "{asked:?}");
    assert_eq!(asked.errors.len(), 1);
    assert_eq!(asked.errors[0].0, QueueId::new("nope"));
    let one = &asked.stats[0];
    let full = all.stats.iter().find(|s| s.id.as_str() == "jobs").unwrap();
    assert_eq!(
        (one.depth, one.dlq_depth, one.enqueued_total),
        (Some(3), Some(1), Some(3))
    );
    assert_eq!(
        (one.depth, one.dlq_depth, one.enqueued_total),
        (full.depth, full.dlq_depth, full.enqueued_total)
    );
    assert!(one.oldest_age_secs.is_some());
}
