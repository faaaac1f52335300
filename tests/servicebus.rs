//! Service Bus backend against the in-process stand-in (tests/servicebus_standin): no Azure,
//! no env var needed. Verified against the stand-in, not against Azure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
mod contract;
#[path = "servicebus_standin/mod.rs"]
mod standin;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use qdeck_backend::{build, Backend, BackendError, OpProgress};
use qdeck_model::domain::*;
use serde_json::Value;
use standin::{new_msg, StandIn};

async fn backend_with(cs: &str) -> Result<Arc<dyn Backend>, BackendError> {
    common::servicebus_backend("sb-test", cs, None).await
}

async fn backend_opts(cs: &str, topics: Option<bool>) -> Result<Arc<dyn Backend>, BackendError> {
    common::servicebus_backend("sb-test", cs, topics).await
}

async fn backend(s: &StandIn) -> Arc<dyn Backend> {
    backend_with(&s.manage_conn_str()).await.expect("backend")
}

fn q(s: &str) -> QueueId {
    QueueId::new(s)
}

fn dlq(s: &str) -> QueueId {
    QueueId::new(format!("{s}/$DeadLetterQueue"))
}

fn rich_msg(i: usize) -> standin::Msg {
    let mut m = new_msg(format!("{{\"order\":{i}}}").as_bytes());
    m.message_id = format!("msg-{i}");
    m.content_type = Some("application/json".into());
    m.props
        .insert("CorrelationId".into(), Value::String(format!("corr-{i}")));
    m.props
        .insert("Label".into(), Value::String("order-created".into()));
    m.props
        .insert("SessionId".into(), Value::String(format!("s{}", i % 7)));
    m.custom.push(("tenant".into(), format!("\"t{}\"", i % 3)));
    m.custom.push(("attempt".into(), "3".into()));
    m
}

#[tokio::test]
async fn counts_and_settings_match_the_standin() {
    let s = StandIn::start().await;
    s.create_queue("orders", 10, 30);
    s.create_queue("billing", 5, 60);
    let b = backend(&s).await;
    for i in 0..3 {
        b.sender()
            .expect("this backend publishes")
            .send(
                &q("orders"),
                OutgoingMessage {
                    body: format!("m{i}").into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    let delayed = OutgoingMessage {
        body: b"later".to_vec(),
        delay: Some(std::time::Duration::from_secs(3600)),
        ..Default::default()
    };
    b.sender()
        .expect("this backend publishes")
        .send(&q("orders"), delayed)
        .await
        .unwrap();
    s.seed_dlq("orders", new_msg(b"dead1"), "Poison");
    s.seed_dlq("orders", new_msg(b"dead2"), "Poison");

    let list = b.list_queues().await.unwrap();
    let orders = list
        .iter()
        .find(|i| i.id == q("orders"))
        .expect("orders listed");
    assert_eq!(orders.dlq, Some(dlq("orders")));
    assert_eq!(orders.settings.lease_secs, Some(30.0));
    assert_eq!(orders.settings.max_receives, Some(10));
    let od = list
        .iter()
        .find(|i| i.id == dlq("orders"))
        .expect("orders DLQ listed");
    assert!(od.is_dlq);
    assert_eq!(od.dlq_sources, vec![q("orders")]);
    assert_eq!(list.len(), 4);

    let ids = vec![q("orders"), dlq("orders"), q("billing"), q("missing")];
    let batch = b.stats(&ids).await.unwrap();
    let st = |id: &QueueId| batch.stats.iter().find(|x| &x.id == id).unwrap().clone();
    let o = st(&q("orders"));
    assert_eq!(o.depth, Some(3));
    assert_eq!(o.delayed, Some(1));
    assert_eq!(o.dlq_depth, Some(2));
    assert_eq!(
        o.in_flight, None,
        "Service Bus does not report in-flight: None, never 0"
    );
    assert_eq!(o.oldest_age_secs, None);
    assert!(o.age_note.is_some());
    assert_eq!(st(&dlq("orders")).depth, Some(2));
    assert_eq!(st(&q("billing")).depth, Some(0));
    assert_eq!(batch.errors.len(), 1);
    assert_eq!(batch.errors[0].0, q("missing"));
    assert!(matches!(b.capabilities().age, AgeSource::Unknown(_)));
    assert!(matches!(
        b.capabilities().browse,
        BrowseEffect::SideEffect(_)
    ));
}

#[tokio::test]
async fn active_browse_refused_because_lock_unlock_dead_letters() {
    let s = StandIn::start().await;
    s.create_queue("jobs", 2, 30);
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &q("jobs"),
            OutgoingMessage {
                body: b"x".to_vec(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let req = BrowseRequest {
        cursor: None,
        max: 10,
        force: false,
    };
    let e = b.browse(&q("jobs"), &req).await.unwrap_err();
    assert!(e.liftable_by_force(), "{e:?}");
    assert!(e.to_string().contains("MaxDeliveryCount"), "{e}");
    // Why: forcing it twice uses up MaxDeliveryCount=2; the next receive dead-letters the message.
    let forced = BrowseRequest {
        force: true,
        ..req.clone()
    };
    for n in 1..=2u64 {
        let p = b.browse(&q("jobs"), &forced).await.unwrap();
        assert_eq!(p.messages.len(), 1);
        assert_eq!(p.messages[0].receive_count, Some(n));
    }
    let p = b.browse(&q("jobs"), &forced).await.unwrap();
    assert!(p.messages.is_empty());
    assert_eq!(s.counts("jobs"), (0, 1));
    let p = b.browse(&dlq("jobs"), &req).await.unwrap();
    let dl = p.messages[0].dead_letter.clone().unwrap();
    assert_eq!(dl.reason.as_deref(), Some("MaxDeliveryCountExceeded"));
    assert_eq!(dl.origin, Some(q("jobs")));
}

#[tokio::test]
async fn scheduled_listing_is_refused_with_the_scheduled_count() {
    let s = StandIn::start().await;
    s.create_queue("later", 10, 30);
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &q("later"),
            OutgoingMessage {
                body: b"x".to_vec(),
                delay: Some(std::time::Duration::from_secs(600)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let e = qdeck_backend::scheduled_of(&*b, &q("later"))
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
    let why = e.to_string();
    assert!(
        why.contains("ScheduledMessageCount") && why.ends_with("(1 now)"),
        "{why}"
    );
}

#[tokio::test]
async fn dlq_browse_leaves_every_message_in_the_dlq() {
    let s = StandIn::start().await;
    s.create_queue("inv", 10, 30);
    for i in 0..25 {
        s.seed_dlq("inv", rich_msg(i), "Poison");
    }
    s.seed_dlq("inv", new_msg(&[0xff, 0x00, 0xfe]), "Binary");
    let b = backend(&s).await;
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let p = b
            .browse(
                &dlq("inv"),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 10,
                    force: false,
                },
            )
            .await
            .unwrap();
        assert!(p
            .effect_note
            .as_deref()
            .unwrap_or("")
            .contains("DeliveryCount"));
        seen.extend(p.messages);
        cursor = p.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen.len(), 26);
    let ids: BTreeSet<_> = seen.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids.len(), 26, "no message shown twice");
    assert_eq!(s.counts("inv"), (0, 26), "browse removed nothing");
    assert!(
        s.messages("inv", true).iter().all(|m| m.lock.is_none()),
        "all unlocked"
    );
    let m0 = seen.iter().find(|m| m.id == "msg-0").unwrap();
    assert!(
        m0.seq.unwrap() > u32::MAX as i64,
        "sequence numbers beyond 32 bits survive"
    );
    assert_eq!(m0.body, b"{\"order\":0}");
    assert_eq!(
        m0.dead_letter.as_ref().unwrap().reason.as_deref(),
        Some("Poison")
    );
    let h = |k: &str| m0.field_text(k);
    assert_eq!(h("CorrelationId").as_deref(), Some("corr-0"));
    assert_eq!(h("tenant").as_deref(), Some("t0"));
    assert!(m0.enqueued_ms.is_some());
    assert!(
        seen.iter().any(|m| m.body == [0xff, 0x00, 0xfe]),
        "binary body passed through"
    );
}

#[tokio::test]
async fn resubmit_1000_loses_nothing_and_keeps_properties() {
    let s = StandIn::start().await;
    s.create_queue("pay", 10, 60);
    for i in 0..1000 {
        s.seed_dlq("pay", rich_msg(i), "Poison");
    }
    let b = backend(&s).await;
    s.world.lock().unwrap().throttle_next = 5; // 429/503 at the start (below MAX_ATTEMPTS): backoff copes
    let before = b.api_calls().total();
    let (progress, rx) = OpProgress::new();
    let t = Instant::now();
    let req = RedriveRequest {
        source: dlq("pay"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&req, &progress).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    let calls = b.api_calls().total() - before;
    assert_eq!(
        (r.moved, r.failed, r.possibly_duplicated),
        (1000, 0, 0),
        "{r:?}"
    );
    assert_eq!(rx.borrow().done, 1000);
    assert_eq!(s.counts("pay"), (1000, 0));
    let moved = s.messages("pay", false);
    let ids: BTreeSet<_> = moved.iter().map(|m| m.message_id.clone()).collect();
    assert_eq!(
        ids,
        (0..1000)
            .map(|i| format!("msg-{i}"))
            .collect::<BTreeSet<_>>()
    );
    for m in &moved {
        let i: usize = m.message_id[4..].parse().unwrap();
        assert_eq!(m.body, format!("{{\"order\":{i}}}").into_bytes());
        assert_eq!(m.content_type.as_deref(), Some("application/json"));
        assert_eq!(m.props["CorrelationId"], Value::String(format!("corr-{i}")));
        assert_eq!(m.props["Label"], Value::String("order-created".into()));
        assert_eq!(m.props["SessionId"], Value::String(format!("s{}", i % 7)));
        let c = |k: &str| {
            m.custom
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(c("tenant"), Some(format!("\"t{}\"", i % 3)));
        assert_eq!(c("attempt").as_deref(), Some("3"));
    }
    println!(
        "FIGURE resubmit: 1000 messages in {secs:.2}s = {:.0} msg/s (debug build, stand-in); {calls} requests = {:.3} per message; by kind: {:?}",
        1000.0 / secs,
        calls as f64 / 1000.0,
        b.api_calls().snapshot()
    );
}

#[tokio::test]
async fn resubmit_to_chosen_queue_with_max_and_selection() {
    let s = StandIn::start().await;
    s.create_queue("src", 10, 60);
    s.create_queue("other", 10, 60);
    for i in 0..20 {
        s.seed_dlq("src", rich_msg(i), "Poison");
    }
    let b = backend(&s).await;
    let p = OpProgress::detached();
    let req = RedriveRequest {
        source: dlq("src"),
        target: RedriveTarget::Queue(q("other")),
        max: Some(5),
        rate: Some(qdeck_model::rate::Rate::fixed(200.0)),
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&req, &p).await.unwrap();
    assert_eq!(r.moved, 5);
    assert_eq!(s.counts("other"), (5, 0));
    assert_eq!(s.counts("src"), (0, 15));
    let only = RedriveRequest {
        max: None,
        rate: None,
        only_ids: Some(vec!["msg-17".into(), "msg-12".into()]),
        window: None,
        ..req.clone()
    };
    let r = b.redrive(&only, &p).await.unwrap();
    assert_eq!(r.moved, 2, "{r:?}");
    assert!(r.errors.is_empty(), "{r:?}");
    let gone = RedriveRequest {
        only_ids: Some(vec!["msg-17".into()]),
        window: None,
        ..only.clone()
    };
    let r = b.redrive(&gone, &p).await.unwrap();
    assert_eq!(r.moved, 0);
    assert!(r.errors.iter().any(|e| e.contains("not found")), "{r:?}");
    assert_eq!(s.counts("src"), (0, 13));
    assert!(
        s.messages("src", true).iter().all(|m| m.lock.is_none()),
        "held messages unlocked"
    );
    // Missing target: nothing leaves the DLQ.
    let bad = RedriveRequest {
        target: RedriveTarget::Queue(q("nope")),
        max: None,
        rate: None,
        only_ids: None,
        window: None,
        ..req
    };
    let e = b.redrive(&bad, &p).await.unwrap_err();
    assert!(matches!(e, BackendError::NotFound(_)), "{e}");
    assert_eq!(s.counts("src"), (0, 13));
    // Cancelled before it starts: moves nothing.
    let c = OpProgress::detached();
    c.cancel();
    let all = RedriveRequest {
        source: dlq("src"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&all, &c).await.unwrap();
    assert!(r.cancelled);
    assert_eq!(r.moved, 0);
    assert_eq!(s.counts("src"), (0, 13));
}

#[tokio::test]
async fn lost_lock_is_reported_and_message_stays_in_dlq() {
    let s = StandIn::start().await;
    s.create_queue("fast", 10, 0); // lock duration 0: every lock is lost at once
    s.seed_dlq("fast", rich_msg(1), "Poison");
    let b = backend(&s).await;
    let req = RedriveRequest {
        source: dlq("fast"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert_eq!((r.moved, r.possibly_duplicated), (0, 1), "{r:?}");
    assert_eq!(
        s.counts("fast"),
        (1, 1),
        "copy sent once, original kept in the DLQ"
    );
    assert!(!r.errors.is_empty());
}

#[tokio::test]
async fn sparse_broker_properties_still_work() {
    let s = StandIn::start().await;
    s.create_queue("odd", 10, 60);
    s.world.lock().unwrap().sparse_broker_properties = true;
    for i in 0..3 {
        s.seed_dlq("odd", rich_msg(i), "Poison");
    }
    let b = backend(&s).await;
    let p = b
        .browse(
            &dlq("odd"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(p.messages.len(), 3);
    assert!(p
        .messages
        .iter()
        .all(|m| m.receive_count.is_none() && m.seq.is_some()));
    assert!(s.messages("odd", true).iter().all(|m| m.lock.is_none()));
    let req = RedriveRequest {
        source: dlq("odd"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert_eq!(r.moved, 3);
    assert_eq!(s.counts("odd"), (3, 0));
}

#[tokio::test]
async fn purge_empties_the_queue() {
    let s = StandIn::start().await;
    s.create_queue("bulk", 10, 60);
    let b = backend(&s).await;
    for i in 0..300 {
        b.sender()
            .expect("this backend publishes")
            .send(
                &q("bulk"),
                OutgoingMessage {
                    body: format!("{i}").into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    s.seed_dlq("bulk", new_msg(b"d"), "Poison");
    let (p, rx) = OpProgress::new();
    let r = b.purge(&q("bulk"), &p).await.unwrap();
    assert_eq!(r.purged, Some(300));
    assert_eq!(rx.borrow().done, 300);
    assert_eq!(s.counts("bulk"), (0, 1), "the DLQ is a separate purge");
    let r = b.purge(&dlq("bulk"), &p).await.unwrap();
    assert_eq!(r.purged, Some(1));
    assert_eq!(s.counts("bulk"), (0, 0));
}

#[tokio::test]
async fn bad_signature_expired_token_and_listen_key_are_auth_errors() {
    let s = StandIn::start().await;
    s.create_queue("a", 10, 60);
    let wrong = backend_with(&s.conn_str("RootManageSharedAccessKey", "d3Jvbmcta2V5"))
        .await
        .unwrap();
    let e = wrong.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e}");
    assert!(!e.to_string().contains("d3Jvbmcta2V5"));
    assert!(
        !e.to_string().contains("Manage"),
        "a bad key is not a rights problem: {e}"
    );
    assert!(
        e.to_string().contains("claim is empty or token is invalid"),
        "Azure's own detail: {e}"
    );
    let e = wrong
        .browse(
            &dlq("a"),
            &BrowseRequest {
                cursor: None,
                max: 1,
                force: false,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e}");

    let expired = format!(
        "Endpoint=sb://{}/;SharedAccessSignature={};UseDevelopmentEmulator=true",
        s.addr,
        sas_for(
            &format!("http://{}/", s.addr),
            "RootManageSharedAccessKey",
            standin::MANAGE_KEY,
            1_000_000
        )
    );
    let e = backend_with(&expired)
        .await
        .unwrap()
        .list_queues()
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e}");
    assert!(e.to_string().contains("Expired"), "{e}");

    let listen = backend_with(&s.conn_str("ListenOnly", standin::LISTEN_KEY))
        .await
        .unwrap();
    let e = listen.list_queues().await.unwrap_err();
    assert!(
        matches!(e, BackendError::Forbidden { right: Some(ref r), .. } if r == "Manage"),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("needs the Manage right")
            || e.to_string().contains("need the Manage right"),
        "{e}"
    );
    // Sending needs Send: named as the missing right, not as a bad key.
    let e = listen
        .sender()
        .expect("this backend publishes")
        .send(&q("a"), OutgoingMessage::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, BackendError::Forbidden { right: Some(ref r), .. } if r == "Send"),
        "{e:?}"
    );
    // …but it can still browse the DLQ by name.
    assert!(listen
        .browse(
            &dlq("a"),
            &BrowseRequest {
                cursor: None,
                max: 1,
                force: false
            }
        )
        .await
        .is_ok());
}

fn sas_for(uri: &str, name: &str, key: &str, se: u64) -> String {
    qdeck_backend::servicebus::connstr::sas_token(uri, name, key, se)
}

#[tokio::test]
async fn missing_entities_are_not_found() {
    let s = StandIn::start().await;
    let b = backend(&s).await;
    let e = b
        .browse(
            &dlq("ghost"),
            &BrowseRequest {
                cursor: None,
                max: 1,
                force: false,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::NotFound(_)), "{e}");
    let e = b
        .sender()
        .expect("this backend publishes")
        .send(&q("ghost"), OutgoingMessage::default())
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::NotFound(_)), "{e}");
    let e = b
        .purge(&q("ghost"), &OpProgress::detached())
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::NotFound(_)), "{e}");
}

#[tokio::test]
async fn malformed_connection_string_is_a_clear_redacted_error() {
    for cs in [
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=TOPSECRETKEY",
        "this is not a connection string TOPSECRETKEY",
        "SharedAccessKeyName=Root;SharedAccessKey=TOPSECRETKEY",
    ] {
        let e = backend_with(cs).await.err().expect("must fail");
        let m = e.to_string();
        assert!(matches!(e, BackendError::Invalid(_)), "{m}");
        assert!(m.contains("malformed Service Bus connection string"), "{m}");
        assert!(!m.contains("TOPSECRETKEY"), "{m}");
    }
    let e = build(&common::servicebus(
        "p",
        "QDECK_TEST_SB_SURELY_UNSET_VAR",
        None,
    ))
    .await
    .err()
    .expect("must fail");
    assert!(
        e.to_string().contains("QDECK_TEST_SB_SURELY_UNSET_VAR"),
        "{e}"
    );
}

#[tokio::test]
async fn management_requests_per_refresh_for_250_queues() {
    let s = StandIn::start().await;
    for i in 0..250 {
        s.create_queue(&format!("q{i:03}"), 10, 60);
    }
    s.seed_dlq("q249", new_msg(b"x"), "Poison");
    let b = backend_opts(&s.manage_conn_str(), Some(false))
        .await
        .unwrap();
    let c0 = b.api_calls().total();
    let list = b.list_queues().await.unwrap();
    let c1 = b.api_calls().total();
    assert_eq!(list.len(), 500, "250 queues and their DLQs");
    let ids: Vec<QueueId> = list.iter().map(|i| i.id.clone()).collect();
    let batch = b.stats(&ids).await.unwrap();
    let c2 = b.api_calls().total();
    assert_eq!(batch.stats.len(), 500);
    assert!(batch.errors.is_empty());
    assert_eq!(
        batch
            .stats
            .iter()
            .find(|x| x.id == dlq("q249"))
            .unwrap()
            .depth,
        Some(1)
    );
    assert_eq!(c1 - c0, 3, "list: one request per page of 100");
    assert_eq!(c2 - c1, 3, "stats refresh: one request per page of 100");
    assert_eq!(s.requests().get("feed"), Some(&6));
    // With topics on (the default), one more page: the (empty) topic feed.
    let with_topics = backend(&s).await;
    with_topics.stats(&ids).await.unwrap();
    let t = with_topics.api_calls().total();
    assert_eq!(t, 4);
    println!(
        "FIGURE management requests for 250 queues: list_queues {}, stats refresh {} (topics off); {t} with topics on and no topics",
        c1 - c0,
        c2 - c1
    );
}

#[tokio::test]
async fn throttling_backs_off_then_reports_throttled() {
    let s = StandIn::start().await;
    s.create_queue("t", 10, 60);
    let b = backend(&s).await;
    s.world.lock().unwrap().throttle_next = 3;
    assert_eq!(
        b.list_queues().await.unwrap().len(),
        2,
        "retried through 429/503"
    );
    s.world.lock().unwrap().throttle_next = 1000;
    let e = b.list_queues().await.unwrap_err();
    assert!(matches!(e, BackendError::Throttled { .. }), "{e}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn topics_subscriptions_and_their_dlqs() {
    let s = StandIn::start().await;
    s.create_queue("plain", 10, 60);
    s.create_topic("events", &["audit", "billing"], 10, 60);
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &q("events"),
            OutgoingMessage {
                body: b"e1".to_vec(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    s.seed_dlq("events/Subscriptions/audit", rich_msg(1), "Poison");
    let list = b.list_queues().await.unwrap();
    let audit = q("events/Subscriptions/audit");
    let info = list
        .iter()
        .find(|i| i.id == audit)
        .expect("subscription listed");
    assert_eq!(info.kind, QueueKind::Subscription);
    assert_eq!(info.dlq, Some(dlq("events/Subscriptions/audit")));
    assert_eq!(info.settings.max_receives, Some(10));
    assert_eq!(
        list.len(),
        7,
        "plain + 2 subscriptions, each with its DLQ, and the topic itself"
    );
    let ids: Vec<QueueId> = list.iter().map(|i| i.id.clone()).collect();
    let batch = b.stats(&ids).await.unwrap();
    let st = |id: &QueueId| batch.stats.iter().find(|x| &x.id == id).unwrap().clone();
    assert_eq!(st(&audit).depth, Some(1));
    assert_eq!(st(&audit).dlq_depth, Some(1));
    assert_eq!(st(&q("events/Subscriptions/billing")).depth, Some(1));
    // Few queues: one GET per entity, subscriptions included.
    let few = b
        .stats(&[audit.clone(), dlq("events/Subscriptions/audit")])
        .await
        .unwrap();
    assert_eq!(few.stats.len(), 2, "{:?}", few.errors);

    let p = b
        .browse(
            &dlq("events/Subscriptions/audit"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(p.messages.len(), 1);
    assert_eq!(s.sub_counts("events", "audit"), (1, 1));

    let origin = RedriveRequest {
        source: dlq("events/Subscriptions/audit"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let e = b
        .redrive(&origin, &OpProgress::detached())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("subscription"), "{e}");
    let to_topic = RedriveRequest {
        target: RedriveTarget::Queue(q("events")),
        ..origin
    };
    let r = b.redrive(&to_topic, &OpProgress::detached()).await.unwrap();
    assert_eq!(r.moved, 1);
    assert_eq!(s.sub_counts("events", "audit"), (2, 0));
    assert_eq!(
        s.sub_counts("events", "billing"),
        (2, 0),
        "the topic fans out"
    );
}

#[tokio::test]
async fn entity_scoped_connection_string_lists_its_entity() {
    let s = StandIn::start().await;
    s.create_queue("one", 10, 60);
    s.create_queue("two", 10, 60);
    s.seed_dlq("one", rich_msg(5), "Poison");
    let b = backend_with(&format!("{};EntityPath=one", s.manage_conn_str()))
        .await
        .unwrap();
    let list = b.list_queues().await.unwrap();
    assert_eq!(list.len(), 2, "only the entity and its DLQ");
    let r = b
        .redrive(
            &RedriveRequest {
                source: dlq("one"),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: Some(vec!["msg-5".into()]),
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!(r.moved, 1);
    assert_eq!(s.counts("one"), (1, 0));
}

/// Evidence for the design choice in `crates/qdeck-backend/src/servicebus/runtime.rs`: the
/// `azure_messaging_servicebus` 0.21 crate can be pointed at any endpoint through a custom
/// `azure_core::HttpClient` that rewrites its hard-coded `https://{ns}.servicebus.windows.net`
/// and re-signs (its own token's `sr` names that host) — but its peek-lock fails on a binary
/// body and on sparse BrokerProperties *after* taking the lock, leaving the message locked.
mod crate_routing {
    use super::*;
    use std::collections::HashMap;

    use azure_core::error::ErrorKind;
    use azure_core::headers::{HeaderName, HeaderValue, Headers};
    use azure_messaging_servicebus::service_bus::QueueClient;

    #[derive(Debug)]
    struct Rewrite {
        http: reqwest::Client,
        base: String,
    }

    #[async_trait::async_trait]
    impl azure_core::HttpClient for Rewrite {
        async fn execute_request(
            &self,
            req: &azure_core::Request,
        ) -> azure_core::Result<azure_core::Response> {
            // https://{ns}.servicebus.windows.net/{path} → {profile endpoint}/{path}
            let url = req.url();
            let mut target = format!("{}{}", self.base, url.path().trim_start_matches('/'));
            if let Some(q) = url.query() {
                target = format!("{target}?{q}");
            }
            let method = reqwest::Method::from_bytes(req.method().as_ref().as_bytes())
                .map_err(|e| azure_core::Error::new(ErrorKind::DataConversion, e))?;
            let mut rb = self.http.request(method, &target);
            for (n, v) in req.headers().iter() {
                if n.as_str() != "authorization" {
                    rb = rb.header(n.as_str(), v.as_str());
                }
            }
            let tok = qdeck_backend::servicebus::connstr::sas_token(
                &self.base,
                "RootManageSharedAccessKey",
                standin::MANAGE_KEY,
                qdeck_backend::servicebus::connstr::unix_now() + 600,
            );
            rb = rb.header("authorization", tok);
            if let azure_core::Body::Bytes(b) = req.body() {
                rb = rb.body(b.to_vec());
            }
            let resp = rb
                .send()
                .await
                .map_err(|e| azure_core::Error::new(ErrorKind::Io, e))?;
            let status = azure_core::StatusCode::try_from(resp.status().as_u16())
                .map_err(|_| azure_core::Error::message(ErrorKind::DataConversion, "status"))?;
            let headers: HashMap<HeaderName, HeaderValue> = resp
                .headers()
                .iter()
                .filter_map(|(k, v)| {
                    Some((
                        HeaderName::from(k.as_str().to_string()),
                        HeaderValue::from(v.to_str().ok()?.to_string()),
                    ))
                })
                .collect();
            let body = resp
                .bytes()
                .await
                .map_err(|e| azure_core::Error::new(ErrorKind::Io, e))?;
            let stream = futures::stream::once(async move { Ok(body) });
            Ok(azure_core::Response::new(
                status,
                Headers::from(headers),
                Box::pin(stream),
            ))
        }
    }

    fn client(s: &StandIn, queue: &str) -> QueueClient {
        let http = Arc::new(Rewrite {
            http: http_client(),
            base: format!("http://{}/", s.addr),
        });
        QueueClient::new(
            http,
            "ignored",
            queue,
            "RootManageSharedAccessKey",
            "unused".to_string(),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn crate_reaches_the_standin_through_our_http_client() {
        let s = StandIn::start().await;
        s.create_queue("viacrate", 10, 60);
        // Small sequence numbers: the crate reads EnqueuedSequenceNumber as i32.
        s.world.lock().unwrap().next_seq = 1;
        let c = client(&s, "viacrate");
        c.send_message("hello", None).await.unwrap();
        assert_eq!(s.counts("viacrate"), (1, 0));
        let m = c.peek_lock_message2(None).await.unwrap();
        assert_eq!(m.body(), "hello");
        m.delete_message().await.unwrap();
        assert_eq!(s.counts("viacrate"), (0, 0));
    }

    #[tokio::test]
    async fn crate_peek_lock_fails_after_locking_on_binary_or_sparse_messages() {
        let s = StandIn::start().await;
        s.create_queue("bad", 10, 60);
        s.world.lock().unwrap().next_seq = 1; // isolate each failure mode
        s.seed_dlq("bad", new_msg(&[0xff, 0xfe]), "Binary");
        let c = client(&s, "bad/$DeadLetterQueue");
        assert!(c.peek_lock_message2(None).await.is_err(), "binary body");
        assert!(
            s.messages("bad", true)[0].lock.is_some(),
            "…and the message stays locked"
        );

        s.create_queue("sparse", 10, 60);
        s.world.lock().unwrap().sparse_broker_properties = true;
        s.seed_dlq("sparse", new_msg(b"text"), "Poison");
        let c = client(&s, "sparse/$DeadLetterQueue");
        assert!(
            c.peek_lock_message2(None).await.is_err(),
            "sparse BrokerProperties"
        );
        assert!(s.messages("sparse", true)[0].lock.is_some());
        {
            let mut w = s.world.lock().unwrap();
            w.sparse_broker_properties = false;
            w.next_seq = (1 << 33) + 1;
        }
        s.create_queue("big", 10, 60);
        s.seed_dlq("big", new_msg(b"text"), "Poison"); // sequence number beyond 32 bits
        let c = client(&s, "big/$DeadLetterQueue");
        assert!(
            c.peek_lock_message2(None).await.is_err(),
            "EnqueuedSequenceNumber > i32"
        );
        assert!(s.messages("big", true)[0].lock.is_some());
        // Our runtime reads all three (once the crate's stranded locks are released).
        {
            let mut w = s.world.lock().unwrap();
            for q in w.queues.values_mut() {
                for x in &mut q.dlq {
                    x.lock = None;
                }
            }
            w.sparse_broker_properties = true;
        }
        let b = backend(&s).await;
        let p = b
            .browse(
                &dlq("bad"),
                &BrowseRequest {
                    cursor: None,
                    max: 5,
                    force: false,
                },
            )
            .await
            .unwrap();
        assert_eq!(p.messages[0].body, [0xff, 0xfe]);
        let p = b
            .browse(
                &dlq("sparse"),
                &BrowseRequest {
                    cursor: None,
                    max: 5,
                    force: false,
                },
            )
            .await
            .unwrap();
        assert_eq!(p.messages[0].body, b"text");
        assert!(s.messages("sparse", true)[0].lock.is_none());
        s.world.lock().unwrap().sparse_broker_properties = false;
        let p = b
            .browse(
                &dlq("big"),
                &BrowseRequest {
                    cursor: None,
                    max: 5,
                    force: false,
                },
            )
            .await
            .unwrap();
        assert!(p.messages[0].seq.unwrap() > i32::MAX as i64);
    }
}

#[tokio::test]
async fn listen_key_scoped_to_an_entity_shows_what_it_can() {
    let s = StandIn::start().await;
    s.create_queue("solo", 10, 60);
    s.seed_dlq("solo", rich_msg(9), "Poison");
    let cs = format!(
        "{};EntityPath=solo",
        s.conn_str("ListenOnly", standin::LISTEN_KEY)
    );
    let b = backend_with(&cs).await.unwrap();
    let list = b.list_queues().await.unwrap();
    let ids: Vec<_> = list.iter().map(|i| i.id.clone()).collect();
    assert_eq!(ids, vec![q("solo"), dlq("solo")]);
    assert_eq!(
        list[0].settings.max_receives, None,
        "settings unknown without Manage"
    );
    // The listing stands; every row says what the key cannot read.
    let batch = b.stats(&ids).await.unwrap();
    assert!(batch.stats.is_empty());
    assert_eq!(batch.errors.len(), 2);
    for (_, why) in &batch.errors {
        assert_eq!(why.kind, QueueErrorKind::Permission, "{why}");
        assert!(why.message.contains("Manage right"), "{why}");
    }
    let p = b
        .browse(
            &dlq("solo"),
            &BrowseRequest {
                cursor: None,
                max: 5,
                force: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(p.messages.len(), 1);
}

fn redrive_req(source: QueueId, target: RedriveTarget, max: Option<u64>) -> RedriveRequest {
    RedriveRequest {
        source,
        target,
        max,
        rate: None,
        only_ids: None,
        window: None,
    }
}

/// Item 2: every copy dead-letters again (a consumer rejecting everything). The run moves what
/// was there at the start and ends; `max` is honoured exactly.
#[tokio::test]
async fn resubmit_ends_when_every_copy_dead_letters_again() {
    let s = StandIn::start().await;
    s.create_queue("loop", 10, 60);
    for i in 0..20 {
        s.seed_dlq("loop", rich_msg(i), "Poison");
    }
    s.configure("loop", |q| q.poison = true);
    let b = backend(&s).await;
    let r = b
        .redrive(
            &redrive_req(dlq("loop"), RedriveTarget::Origin, Some(7)),
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!((r.moved, r.failed), (7, 0), "max honoured exactly: {r:?}");
    assert_eq!(
        s.counts("loop"),
        (0, 20),
        "7 copies back in the DLQ, 13 untouched"
    );

    // No max: the DLQ count at the start caps the run (Manage key).
    let r = b
        .redrive(
            &redrive_req(dlq("loop"), RedriveTarget::Origin, None),
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!(r.moved, 20, "{r:?}");
    assert_eq!(s.counts("loop"), (0, 20));
}

/// Item 2 without the count: a Listen+Send key cannot read the DLQ's count, so only the
/// sequence-number watermark (copies come back with higher numbers) can end the run.
#[tokio::test]
async fn sequence_watermark_ends_the_run_without_a_count() {
    let s = StandIn::start().await;
    s.create_queue("loop2", 10, 60);
    for i in 0..30 {
        s.seed_dlq("loop2", rich_msg(i), "Poison");
    }
    s.configure("loop2", |q| q.poison = true);
    let b = backend_with(&s.conn_str("ListenSend", standin::LISTEN_SEND_KEY))
        .await
        .unwrap();
    let r = b
        .redrive(
            &redrive_req(dlq("loop2"), RedriveTarget::Origin, None),
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!((r.moved, r.failed), (30, 0), "{r:?}");
    assert!(
        r.errors.iter().any(|e| e.contains("sequence number")),
        "{:?}",
        r.errors
    );
    let left = s.messages("loop2", true);
    assert_eq!(left.len(), 30);
    assert!(left.iter().all(|m| m.lock.is_none()), "nothing left locked");
    // Each original was moved once: every copy in the DLQ names a distinct original.
    let originals: BTreeSet<String> = left
        .iter()
        .map(|m| {
            m.custom
                .iter()
                .find(|(k, _)| k == "originalmessageid")
                .map_or_else(
                    || m.message_id.clone(),
                    |(_, v)| v.trim_matches('"').to_string(),
                )
        })
        .collect();
    assert_eq!(originals.len(), 30);
}

/// Item 6: a target with duplicate detection gets copies with new MessageIds (the original id
/// in OriginalMessageId), and the dialog, the report and the queue's notes say so.
#[tokio::test]
async fn duplicate_detection_target_gets_new_message_ids() {
    let s = StandIn::start().await;
    s.create_queue("dd", 10, 60);
    s.configure("dd", |q| {
        q.dup_window = Some(std::time::Duration::from_secs(600));
    });
    let b = backend(&s).await;
    // The model: a second send with a MessageId inside the window is accepted, then dropped.
    for _ in 0..2 {
        b.sender()
            .expect("this backend publishes")
            .send(
                &q("dd"),
                OutgoingMessage {
                    body: b"x".to_vec(),
                    properties: vec![("MessageId".into(), "same".into())],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    assert_eq!((s.counts("dd").0, s.dropped_duplicates("dd")), (1, 1));
    b.purge(&q("dd"), &OpProgress::detached()).await.unwrap();
    // The originals went through dd moments ago: their ids are inside the window.
    s.configure("dd", |q| {
        for i in 0..10 {
            q.seen_ids
                .push((format!("msg-{i}"), std::time::Instant::now()));
        }
    });
    for i in 0..10 {
        s.seed_dlq("dd", rich_msg(i), "Poison");
    }
    let req = redrive_req(dlq("dd"), RedriveTarget::Origin, None);
    let plan = b.plan_redrive(&req).await.unwrap();
    assert_eq!(plan.count.ready, 10);
    assert!(plan.count.exact);
    assert!(
        plan.notes.iter().any(|n| n.contains("new MessageId")),
        "{:?}",
        plan.notes
    );
    let info = b.describe(&q("dd")).await.unwrap();
    assert!(b
        .capabilities_for(&info)
        .notes
        .iter()
        .any(|n| n.contains("new MessageId")));
    let r = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert_eq!(r.moved, 10, "{r:?}");
    assert!(r.mode.contains("new MessageId"), "{}", r.mode);
    assert!(r.errors.iter().any(|e| e.contains("OriginalMessageId")));
    assert_eq!(s.dropped_duplicates("dd"), 1, "no copy was dropped");
    let moved = s.messages("dd", false);
    assert_eq!(moved.len(), 10);
    let originals: BTreeSet<String> = moved
        .iter()
        .map(|m| {
            assert!(
                !m.message_id.starts_with("msg-"),
                "new id: {}",
                m.message_id
            );
            m.custom
                .iter()
                .find(|(k, _)| k == "originalmessageid")
                .map(|(_, v)| v.clone())
                .expect("original id kept")
        })
        .collect();
    assert_eq!(
        originals,
        (0..10)
            .map(|i| format!("\"msg-{i}\""))
            .collect::<BTreeSet<_>>()
    );
    // Without duplicate detection ids are kept.
    s.create_queue("plain", 10, 60);
    s.seed_dlq("plain", rich_msg(1), "Poison");
    let r = b
        .redrive(
            &redrive_req(dlq("plain"), RedriveTarget::Origin, None),
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!(r.moved, 1);
    assert_eq!(s.messages("plain", false)[0].message_id, "msg-1");
}

/// Item 6: REST cannot receive from a session-enabled entity: refused before locking, with the
/// reason; its DLQ (no sessions) browses and resubmits.
#[tokio::test]
async fn session_entities_are_refused_clearly() {
    let s = StandIn::start().await;
    s.create_queue("sess", 10, 60);
    s.configure("sess", |q| q.requires_session = true);
    for i in 0..3 {
        s.seed_dlq("sess", rich_msg(i), "Poison");
    }
    let mut no_session = new_msg(b"no session");
    no_session.message_id = "lonely".into();
    s.seed_dlq("sess", no_session, "Poison");
    let b = backend(&s).await;
    let info = b.describe(&q("sess")).await.unwrap();
    let caps = b.capabilities_for(&info);
    assert!(matches!(caps.browse, BrowseEffect::Unsupported(ref w) if w.contains("sessions")));
    assert!(matches!(caps.redrive, RedriveMode::Unsupported(_)));
    let before = s.requests().get("peek-lock").copied().unwrap_or(0);
    let e = b
        .browse(
            &q("sess"),
            &BrowseRequest {
                cursor: None,
                max: 1,
                force: true,
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, BackendError::Unsupported(ref m) if m.contains("sessions")),
        "{e}"
    );
    let e = b
        .purge(&q("sess"), &OpProgress::detached())
        .await
        .unwrap_err();
    assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
    assert_eq!(
        s.requests().get("peek-lock").copied().unwrap_or(0),
        before,
        "nothing locked"
    );
    let dinfo = b.describe(&dlq("sess")).await.unwrap();
    assert!(matches!(
        b.capabilities_for(&dinfo).browse,
        BrowseEffect::SideEffect(_)
    ));
    let r = b
        .redrive(
            &redrive_req(dlq("sess"), RedriveTarget::Origin, None),
            &OpProgress::detached(),
        )
        .await
        .unwrap();
    assert_eq!((r.moved, r.failed), (3, 1), "{r:?}");
    assert!(
        r.errors.iter().any(|e| e.contains("SessionId")),
        "{:?}",
        r.errors
    );
    assert_eq!(
        s.counts("sess"),
        (3, 1),
        "the message without a session stays"
    );
    // The broker's own refusal, for a key that cannot read settings, is a clear error too.
    let e = backend_with(&s.conn_str("ListenSend", standin::LISTEN_SEND_KEY))
        .await
        .unwrap()
        .browse(
            &q("sess"),
            &BrowseRequest {
                cursor: None,
                max: 1,
                force: true,
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("requires sessions"), "{e}");
}

/// Item 6: an empty receive long-polls for its timeout, as Azure does, instead of answering
/// 204 at once: a message sent during the wait is received by the waiting call.
#[tokio::test]
async fn empty_receive_long_polls() {
    let s = StandIn::start().await;
    s.create_queue("lp", 10, 60);
    let http = http_client();
    let base = format!("http://{}/", s.addr);
    let tok = sas_for(
        &base,
        "RootManageSharedAccessKey",
        standin::MANAGE_KEY,
        qdeck_backend::servicebus::connstr::unix_now() + 600,
    );
    let empty = http
        .post(format!("{base}lp/messages/head?timeout=1"))
        .header("authorization", &tok)
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status().as_u16(), 204);
    let waiting = {
        let (http, url, tok) = (
            http.clone(),
            format!("{base}lp/messages/head?timeout=30"),
            tok.clone(),
        );
        tokio::spawn(async move {
            http.post(url)
                .header("authorization", tok)
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &q("lp"),
            OutgoingMessage {
                body: b"late".to_vec(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let got = waiting.await.unwrap();
    assert_eq!(
        got.status().as_u16(),
        201,
        "the waiting receive got the late message"
    );
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"late");
}

/// Item 7: dead letters forwarded elsewhere are linked where they really go; forwarding shows
/// in the settings and the notes; describe is one GET.
#[tokio::test]
async fn forwarded_dead_letters_link_to_their_target() {
    let s = StandIn::start().await;
    s.create_queue("central", 10, 60);
    s.create_queue("orders", 10, 60);
    s.create_queue("inbox", 10, 60);
    s.configure("orders", |q| q.forward_dlq_to = Some("central".into()));
    s.configure("inbox", |q| q.forward_to = Some("orders".into()));
    s.seed_dlq("orders", rich_msg(1), "Poison");
    let b = backend(&s).await;
    let list = b.list_queues().await.unwrap();
    let find = |id: &QueueId| list.iter().find(|i| &i.id == id).unwrap().clone();
    let orders = find(&q("orders"));
    assert_eq!(
        orders.dlq,
        Some(q("central")),
        "linked to where dead letters go"
    );
    assert_eq!(
        orders
            .settings
            .extra
            .get("forward_dead_lettered_to")
            .map(String::as_str),
        Some("central")
    );
    assert_eq!(find(&q("central")).dlq_sources, vec![q("orders")]);
    let inbox = find(&q("inbox"));
    assert_eq!(
        inbox.settings.extra.get("forward_to").map(String::as_str),
        Some("orders")
    );
    assert!(b
        .capabilities_for(&inbox)
        .notes
        .iter()
        .any(|n| n.contains("orders")));
    assert!(b
        .capabilities_for(&orders)
        .notes
        .iter()
        .any(|n| n.contains("central")));
    let batch = b.stats(&[q("central"), q("orders")]).await.unwrap();
    let depth = |id: &QueueId| batch.stats.iter().find(|x| &x.id == id).unwrap().depth;
    assert_eq!(
        depth(&q("central")),
        Some(1),
        "the dead letter is in central"
    );
    let before = s.requests();
    let d = b.describe(&q("orders")).await.unwrap();
    let after = s.requests();
    assert_eq!(d.dlq, Some(q("central")));
    let n = |m: &std::collections::BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    assert_eq!(n(&after, "entry") - n(&before, "entry"), 1, "one GET");
    assert_eq!(n(&after, "feed"), n(&before, "feed"), "no feed");
    let c = b.count(&q("central")).await.unwrap();
    assert_eq!((c.ready, c.exact), (1, true));
}

/// Item 7: topics are rows with their own figures: a scheduled message on a topic shows.
#[tokio::test]
async fn topics_are_rows_with_their_scheduled_count() {
    assert_eq!(serde_json::to_value(QueueKind::Topic).unwrap(), "topic");
    let s = StandIn::start().await;
    s.create_topic("news", &["all"], 10, 60);
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &q("news"),
            OutgoingMessage {
                body: b"later".to_vec(),
                delay: Some(std::time::Duration::from_secs(3600)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let list = b.list_queues().await.unwrap();
    let topic = list.iter().find(|i| i.id == q("news")).expect("topic row");
    assert_eq!(topic.kind, QueueKind::Topic);
    assert_eq!(topic.dlq, None, "a topic has no DLQ");
    let ids: Vec<QueueId> = list.iter().map(|i| i.id.clone()).collect();
    let batch = b.stats(&ids).await.unwrap();
    let st = |id: &QueueId| batch.stats.iter().find(|x| &x.id == id).unwrap().clone();
    assert_eq!(st(&q("news")).delayed, Some(1));
    assert_eq!(st(&q("news/Subscriptions/all")).depth, Some(0));
    let caps = b.capabilities_for(topic);
    assert!(matches!(caps.browse, BrowseEffect::Unsupported(_)));
}

/// Item 7: an EntityPath naming a missing entity is NotFound with the entity named.
#[tokio::test]
async fn entity_path_naming_a_missing_entity_is_not_found() {
    let s = StandIn::start().await;
    let b = backend_with(&format!("{};EntityPath=nowhere", s.manage_conn_str()))
        .await
        .unwrap();
    let e = b.list_queues().await.unwrap_err();
    assert!(
        matches!(e, BackendError::NotFound(ref m) if m.contains("nowhere")),
        "{e}"
    );
}

/// Item 7 through the built binary: `ls` with an entity-scoped Listen key shows the entity and
/// what the key cannot read (exit 0); an EntityPath naming a missing entity exits 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_ls_with_entity_scoped_keys() {
    let s = StandIn::start().await;
    s.create_queue("solo", 10, 60);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config/qdeck/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        "[[profiles]]\nname = \"sb\"\nkind = \"servicebus\"\nconnection_string_env = \"QDECK_SB_CS\"\ntransport = \"rest\"\n",
    )
    .unwrap();
    let run = |cs: String| {
        let d = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            assert_cmd::Command::cargo_bin("qdeck")
                .unwrap()
                .env_clear()
                .env("HOME", &d)
                .env("XDG_CONFIG_HOME", d.join("config"))
                .env("XDG_DATA_HOME", d.join("data"))
                .env("XDG_STATE_HOME", d.join("state"))
                .env("QDECK_SB_CS", cs)
                .args(["--profile", "sb", "ls", "-o", "json"])
                .timeout(std::time::Duration::from_secs(60))
                .output()
                .unwrap()
        })
    };
    let listen = format!(
        "{};EntityPath=solo",
        s.conn_str("ListenOnly", standin::LISTEN_KEY)
    );
    let out = run(listen).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["name"], "solo");
    assert!(rows[0]["depth"].is_null());
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap_or("")
            .contains("Manage right"),
        "{rows:?}"
    );
    assert!(!stderr.contains(standin::LISTEN_KEY));
    let missing = format!("{};EntityPath=ghost", s.manage_conn_str());
    let out = run(missing).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("ghost"), "{stderr}");
}

/// The shared backend contract on the stand-in (one per test, in-process): its dead letters
/// are seeded the way the broker records them (reason and description properties on the
/// entity's DLQ).
struct StandInFixture {
    s: StandIn,
    backend: Arc<dyn Backend>,
}

impl StandInFixture {
    async fn setup() -> Self {
        let s = StandIn::start().await;
        let backend = backend(&s).await;
        StandInFixture { s, backend }
    }

    fn dead_letter(&self, tag: &str, what: &str, i: usize) {
        let mut m = rich_msg(i);
        m.message_id = format!("{tag}-{what}-{i}");
        self.s.seed_dlq(tag, m, "MaxDeliveryCountExceeded");
    }
}

impl contract::Fixture for StandInFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        self.s.create_queue(tag, 10, 30);
        for i in 0..dead {
            self.dead_letter(tag, "dead", i);
        }
        for i in 0..ready {
            self.backend
                .sender()
                .expect("this backend publishes")
                .send(
                    &q(tag),
                    OutgoingMessage {
                        body: format!("{tag} ready {i}").into_bytes(),
                        ..Default::default()
                    },
                )
                .await
                .expect("send");
        }
        contract::Scene {
            tag: tag.to_string(),
            src: q(tag),
            dlq: dlq(tag),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        self.s.create_queue(tag, 10, 30);
        q(tag)
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        for i in 0..n {
            self.dead_letter(&scene.tag, "late", i);
        }
    }

    /// The stand-in lives and dies with the test.
    async fn cleanup(&self) {}
}

contract_tests!(setup = StandInFixture::setup());

/// A plain reqwest client; qdeck's build has no TLS provider of reqwest's own, so install it.
fn http_client() -> reqwest::Client {
    qdeck_backend::tls::install_provider();
    reqwest::Client::new()
}

/// The message model on Service Bus: what qdeck sends carries its settable properties in
/// `BrokerProperties` and each custom property as the JSON type the REST API documents
/// (strings quoted, numbers and booleans bare); browsed back, the typed split holds the same
/// values, and a copy to another queue gives the stand-in the same wire values again. Read
/// with the stand-in, not Microsoft's client: its REST surface is the stand-in's.
#[tokio::test]
async fn typed_custom_properties_survive_send_browse_and_copy() {
    use qdeck_model::domain::Value as V;
    let s = StandIn::start().await;
    s.create_queue("typed", 10, 30);
    s.create_queue("typed-copy", 10, 30);
    let b = backend(&s).await;
    let sent = OutgoingMessage {
        body: b"{\"order\":7}".to_vec(),
        properties: vec![
            ("ContentType".into(), V::str("application/json")),
            ("CorrelationId".into(), V::str("corr-7")),
            ("Label".into(), V::str("order-created")),
        ],
        headers: vec![
            ("tenant".into(), V::str("acme")),
            ("count".into(), V::I64(7)),
            ("ratio".into(), V::F64(0.25)),
            ("flag".into(), V::Bool(true)),
            ("digits".into(), V::str("42")),
        ],
        ..Default::default()
    };
    b.sender()
        .expect("this backend publishes")
        .send(&q("typed"), sent.clone())
        .await
        .unwrap();
    let wire = &s.messages("typed", false)[0];
    assert_eq!(wire.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        wire.props.get("CorrelationId"),
        Some(&Value::String("corr-7".into()))
    );
    let raw: BTreeMap<&str, &str> = wire
        .custom
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(raw.get("count"), Some(&"7"));
    assert_eq!(raw.get("flag"), Some(&"true"));
    assert_eq!(
        raw.get("digits"),
        Some(&"\"42\""),
        "a numeric string stays a string"
    );

    let page = b
        .browse(
            &q("typed"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: true,
            },
        )
        .await
        .unwrap();
    let m = &page.messages[0];
    for (k, v) in &sent.properties {
        assert!(
            m.properties.contains(&(k.clone(), v.clone())),
            "{k}: {:?}",
            m.properties
        );
    }
    let mut got = m.headers.clone();
    let mut want = sent.headers.clone();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
    assert!(
        m.meta.iter().any(|(k, _)| k == "SequenceNumber"),
        "{:?}",
        m.meta
    );

    // A copy within Service Bus: the same wire values, a fresh MessageId.
    let mut ledger = qdeck_backend::headers::HeaderLedger::default();
    let out = qdeck_backend::headers::map_message(
        m,
        qdeck_backend::headers::rules_of(qdeck_model::domain::BrokerKind::Servicebus),
        qdeck_backend::headers::rules_of(qdeck_model::domain::BrokerKind::Servicebus),
        &mut ledger,
    );
    b.sender()
        .expect("this backend publishes")
        .send(&q("typed-copy"), out)
        .await
        .unwrap();
    let copy = &s.messages("typed-copy", false)[0];
    assert_eq!(copy.custom, wire.custom);
    assert_eq!(copy.props.get("Label"), wire.props.get("Label"));
    assert_ne!(copy.message_id, wire.message_id);
}

/// TimeToLive over the REST transport: the stand-in keeps it as Azure does (a TimeSpan, read
/// back as seconds, a float when not whole, `TimeSpan.MaxValue` when the message set none).
/// A copy of a message with the default TTL goes out with none, a fractional and a whole TTL
/// go out as they came in; never as 0, which Azure refuses or expires at once.
#[tokio::test]
async fn time_to_live_survives_browse_and_copy_over_rest() {
    use qdeck_model::domain::Value as V;
    let s = StandIn::start().await;
    s.create_queue("ttl", 10, 30);
    s.create_queue("ttl-copy", 10, 30);
    let b = backend(&s).await;
    let sender = b.sender().expect("this backend publishes");
    let cases: [(&str, Option<V>, V, Option<Value>); 3] = [
        ("default", None, V::F64(922_337_203_685.477_5), None),
        (
            "fractional",
            Some(V::F64(90.25)),
            V::F64(90.25),
            Some(serde_json::json!(90.25)),
        ),
        (
            "explicit",
            Some(V::I64(3600)),
            V::I64(3600),
            Some(serde_json::json!(3600)),
        ),
    ];
    for (label, ttl, _, _) in &cases {
        let mut m = OutgoingMessage::text(label.as_bytes().to_vec(), &[]);
        if let Some(t) = ttl {
            m.properties.push(("TimeToLive".into(), t.clone()));
        }
        sender.send(&q("ttl"), m).await.unwrap();
    }
    let page = b
        .browse(
            &q("ttl"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 3);
    let mut copies = Vec::new();
    for (m, (label, _, browsed, _)) in page.messages.iter().zip(&cases) {
        assert_eq!(m.body, label.as_bytes());
        let ttl = m.properties.iter().find(|(k, _)| k == "TimeToLive");
        assert_eq!(ttl.map(|(_, v)| v), Some(browsed), "{label}: browsed");
        let mut ledger = qdeck_backend::headers::HeaderLedger::default();
        copies.push(qdeck_backend::headers::map_message(
            m,
            qdeck_backend::headers::rules_of(BrokerKind::Servicebus),
            qdeck_backend::headers::rules_of(BrokerKind::Servicebus),
            &mut ledger,
        ));
    }
    for r in sender.send_many(&q("ttl-copy"), copies).await {
        r.unwrap();
    }
    let wire = s.messages("ttl-copy", false);
    assert_eq!(wire.len(), 3);
    for (m, (label, _, _, sent)) in wire.iter().zip(&cases) {
        assert_eq!(m.body, label.as_bytes());
        assert_eq!(m.props.get("TimeToLive"), sent.as_ref(), "{label}: copied");
    }

    // A TTL no transport can carry is refused by name, and nothing is sent.
    let mut bad = OutgoingMessage::text(b"x".to_vec(), &[]);
    bad.properties.push(("TimeToLive".into(), V::str("soon")));
    let e = sender.send(&q("ttl-copy"), bad).await.unwrap_err();
    assert!(e.to_string().contains("TimeToLive"), "{e}");
    assert_eq!(s.messages("ttl-copy", false).len(), 3);
}
