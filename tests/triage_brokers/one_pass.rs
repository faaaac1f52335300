//! One-pass filtered redrive on RabbitMQ (`redrive --where` without a scan first): the DLQ is
//! consumed once, matching messages move through copy → confirm → ack, the others stay.
//! Every check reads the queues back message by message: nothing lost, nothing doubled,
//! bodies and headers as published.

use std::collections::BTreeMap;
use std::sync::Arc;

use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::BasicProperties;
use qdeck_backend::{Backend, MessageFilter, OpProgress};
use qdeck_engine::audit::AuditLog;
use qdeck_engine::gate::Gate;
use qdeck_engine::ops::{self, Outcome};
use qdeck_engine::triage::{EvalContext, Predicate, SignatureConfig};
use qdeck_model::domain::*;

use super::rabbitmq::{declare, setup, setup_with_profile};
use super::{uniq, wait_count};

const N: u64 = 10_000;
const EVERY: u64 = 5;
const PRED: &str = r#"header.x-tenant = "acme""#;

fn matches(seq: u64) -> bool {
    seq % EVERY == 2
}

fn body(seq: u64) -> Vec<u8> {
    format!("{{\"seq\":{seq},\"pad\":\"{}\"}}", "x".repeat(200)).into_bytes()
}

fn tenant(seq: u64) -> String {
    if matches(seq) {
        "acme".into()
    } else {
        format!("tenant-{}", seq % 7)
    }
}

/// `N` messages with `x-seq`, `x-tenant` and a message id, published with pipelined confirms.
async fn fill(conn: &lapin::Connection, q: &str) {
    let ch = conn.create_channel().await.expect("channel");
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirm.select");
    let s = |v: String| AMQPValue::LongString(LongString::from(v.into_bytes()));
    let mut pending = Vec::new();
    for seq in 0..N {
        let mut h = FieldTable::default();
        h.insert("x-seq".into(), s(seq.to_string()));
        h.insert("x-tenant".into(), s(tenant(seq)));
        let props = BasicProperties::default()
            .with_headers(h)
            .with_message_id(format!("msg-{seq}").into());
        pending.push(
            ch.basic_publish(
                "".into(),
                q.into(),
                BasicPublishOptions::default(),
                &body(seq),
                props,
            )
            .await
            .expect("publish"),
        );
        if pending.len() >= 1000 {
            for c in pending.drain(..) {
                assert!(c.await.expect("confirm").is_ack());
            }
        }
    }
    for c in pending {
        assert!(c.await.expect("confirm").is_ack());
    }
    let _ = ch.close(200, "filled".into()).await;
}

/// Every message in `q` (taken for good: the queue is deleted after), by `x-seq`, with its
/// body and its `x-tenant` header; a sequence number seen twice fails the test.
async fn drain(ch: &lapin::Channel, q: &str) -> BTreeMap<u64, (Vec<u8>, String)> {
    let mut out = BTreeMap::new();
    while let Some(m) = ch
        .basic_get(q.into(), BasicGetOptions { no_ack: true })
        .await
        .expect("get")
    {
        let d = m.delivery;
        let h = d.properties.headers().clone().unwrap_or_default();
        let text = |k: &str| match h.inner().get(k) {
            Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            other => panic!("header {k}: {other:?}"),
        };
        let seq: u64 = text("x-seq").parse().expect("x-seq");
        let dup = out.insert(seq, (d.data.clone(), text("x-tenant")));
        assert!(dup.is_none(), "message {seq} found twice in {q}");
    }
    out
}

/// The target held exactly `n` (`moved`, drained already, all matching), the DLQ holds every
/// other message; together they hold each of the `N` exactly once, bodies and headers
/// unchanged.
async fn check_split(
    ch: &lapin::Channel,
    dlq: &str,
    moved: &BTreeMap<u64, (Vec<u8>, String)>,
    n: u64,
) {
    let left = drain(ch, dlq).await;
    assert_eq!(moved.len() as u64, n, "moved");
    assert!(moved.keys().all(|&s| matches(s)), "only matching moved");
    for seq in 0..N {
        let got = match (moved.get(&seq), left.get(&seq)) {
            (Some(m), None) | (None, Some(m)) => m,
            (None, None) => panic!("message {seq} lost"),
            (Some(_), Some(_)) => panic!("message {seq} in both queues"),
        };
        assert_eq!(got, &(body(seq), tenant(seq)), "message {seq} intact");
    }
}

fn filter() -> MessageFilter {
    let pred = Predicate::parse(PRED).unwrap();
    let ctx = EvalContext::now(SignatureConfig::default());
    MessageFilter::new(PRED, move |m| pred.matches(m, &ctx))
}

fn request(dlq: &str, to: &str, max: Option<u64>) -> RedriveRequest {
    RedriveRequest {
        source: QueueId::new(dlq),
        target: RedriveTarget::Queue(QueueId::new(to)),
        max,
        rate: None,
        only_ids: None,
        window: None,
    }
}

async fn cleanup(ch: &lapin::Channel, queues: &[&str]) {
    for q in queues {
        ch.queue_delete((*q).into(), QueueDeleteOptions::default())
            .await
            .ok();
    }
}

/// Through the engine the CLI uses (gate, plan, run, audit): 10,000 messages, 1 in 5
/// matching, read once; exactly the matching ones move and the audit line says so.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL and QDECK_TEST_RABBITMQ_MGMT"]
async fn rabbitmq_one_pass_moves_exactly_the_matching_of_ten_thousand() {
    let (b, ch, conn, profile) = setup_with_profile().await;
    let (dlq, to) = (uniq("opdlq"), uniq("opto"));
    declare(&ch, &dlq, None).await;
    declare(&ch, &to, None).await;
    fill(&conn, &dlq).await;
    wait_count(b.as_ref(), &dlq, N).await;

    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let gate = Gate::new(b.clone(), &profile, AuditLog::new(audit.clone()));
    let planned = ops::plan_redrive_matching(&gate, request(&dlq, &to, None), filter())
        .await
        .expect("plan");
    assert_eq!(planned.count().ready, N, "the pass examines what is ready");
    let text = planned.describe();
    assert!(
        text.contains("matching") && text.contains("redelivered"),
        "{text}"
    );
    let r = match ops::run(&gate, planned, &OpProgress::detached()).await {
        Outcome::Redrive(r) => r,
        other => panic!("{other:?}"),
    };
    let want = N / EVERY;
    assert_eq!(
        (r.moved, r.failed, r.possibly_duplicated, r.cancelled),
        (want, 0, 0, false),
        "{r:?}"
    );
    assert_eq!((r.examined, r.matched), (Some(N), Some(want)), "{r:?}");
    wait_count(b.as_ref(), &to, want).await;
    wait_count(b.as_ref(), &dlq, N - want).await;
    let line = std::fs::read_to_string(&audit).expect("audit log");
    let entry: serde_json::Value = serde_json::from_str(line.trim()).expect("one audit line");
    assert_eq!(entry["result"], "ok", "{line}");
    assert_eq!(entry["counts"]["predicate"], PRED, "{line}");
    assert_eq!(entry["counts"]["moved"], want, "{line}");
    assert_eq!(entry["counts"]["matched"], want, "{line}");
    assert_eq!(entry["counts"]["examined"], N, "{line}");
    check_split(&ch, &dlq, &drain(&ch, &to).await, want).await;
    cleanup(&ch, &[&dlq, &to]).await;
}

/// `max` caps the matching messages moved: the first ones in queue order, the rest stay.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL and QDECK_TEST_RABBITMQ_MGMT"]
async fn rabbitmq_one_pass_honours_max() {
    let (b, ch, conn) = setup().await;
    let (dlq, to) = (uniq("opmax"), uniq("opmaxto"));
    declare(&ch, &dlq, None).await;
    declare(&ch, &to, None).await;
    fill(&conn, &dlq).await;
    wait_count(b.as_ref(), &dlq, N).await;
    let r = b
        .filtered_redrive()
        .expect("one pass")
        .redrive_matching(
            &request(&dlq, &to, Some(300)),
            &filter(),
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_eq!((r.moved, r.failed, r.matched), (300, 0, Some(300)), "{r:?}");
    wait_count(b.as_ref(), &to, 300).await;
    wait_count(b.as_ref(), &dlq, N - 300).await;
    let moved = drain(&ch, &to).await;
    let first: Vec<u64> = (0..N).filter(|&s| matches(s)).take(300).collect();
    assert_eq!(moved.keys().copied().collect::<Vec<_>>(), first);
    check_split(&ch, &dlq, &moved, 300).await;
    cleanup(&ch, &[&dlq, &to]).await;
}

/// Cancelled once some have moved (a rate limit keeps the pass going for seconds): what moved is in the target once, everything else is back
/// in the DLQ, nothing lost or doubled.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL and QDECK_TEST_RABBITMQ_MGMT"]
async fn rabbitmq_one_pass_cancelled_midway_loses_nothing() {
    let (b, ch, conn) = setup().await;
    let (dlq, to) = (uniq("opcan"), uniq("opcanto"));
    declare(&ch, &dlq, None).await;
    declare(&ch, &to, None).await;
    fill(&conn, &dlq).await;
    wait_count(b.as_ref(), &dlq, N).await;
    let (progress, mut rx) = OpProgress::new();
    let run = {
        let mut req = request(&dlq, &to, None);
        req.rate = Some(qdeck_model::rate::Rate::fixed(400.0));
        let (b, p): (Arc<dyn Backend>, _) = (b.clone(), progress.clone());
        tokio::spawn(async move {
            qdeck_backend::filtered_redrive_of(b.as_ref())?
                .redrive_matching(&req, &filter(), &p)
                .await
        })
    };
    while rx.borrow().done == 0 {
        if rx.changed().await.is_err() {
            break;
        }
    }
    progress.cancel();
    let r = run.await.expect("task").expect("redrive");
    assert!(r.cancelled, "{r:?}");
    assert_eq!((r.failed, r.possibly_duplicated), (0, 0), "{r:?}");
    assert!(r.moved > 0 && r.moved < N / EVERY, "stopped mid-way: {r:?}");
    wait_count(b.as_ref(), &to, r.moved).await;
    wait_count(b.as_ref(), &dlq, N - r.moved).await;
    check_split(&ch, &dlq, &drain(&ch, &to).await, r.moved).await;
    cleanup(&ch, &[&dlq, &to]).await;
}
