//! SQS backend tests.
//!
//! Most run on moto (`pip install 'moto[server]'`, `moto_server -H 127.0.0.1 -p 5055`) and read
//! its address from `QDECK_TEST_SQS_ENDPOINT` (e.g. `http://127.0.0.1:5055`). They are marked
//! `#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]`: `cargo test` lists them as ignored, and
//! `cargo test -- --include-ignored --skip manual_` runs them and fails when the variable is
//! missing. `manual_*` tests are child processes and figures run by scripts.
//!
//! moto does not implement StartMessageMoveTask / ListMessageMoveTasks / CancelMessageMoveTask
//! (it answers 500), so the native move-task path is tested against a small local HTTP stand-in
//! in this file (`move_task_*`) that answers with the documented AWS JSON 1.0 shapes. Those
//! tests need no broker and always run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
mod contract;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName};
use qdeck_backend::{self as backend, Backend, BackendError, OpProgress};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::{Profile, ProfileKind, SqsSettings};
use qdeck_model::domain::*;

/// moto's keys (it takes any): handed to the backends built here, never set in the
/// environment the test threads share.
fn moto_keys() -> SecretMap {
    SecretMap::new()
        .with("AWS_ACCESS_KEY_ID", "testing")
        .with("AWS_SECRET_ACCESS_KEY", "testing")
}

/// The moto endpoint of a test marked `#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]`: such a
/// test runs only when asked for (`--include-ignored`), and then a missing broker fails it.
fn require_endpoint() -> String {
    common::broker_var(
        "QDECK_TEST_SQS_ENDPOINT",
        "start moto (moto_server -H 127.0.0.1 -p 5055) and set it to http://127.0.0.1:5055",
    )
}

fn prefix() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("qd{}", &u[..10])
}

fn profile(ep: &str, prefix: &str) -> Profile {
    Profile {
        name: "sqs-test".to_string(),
        kind: ProfileKind::Sqs(SqsSettings {
            regions: vec!["us-east-1".to_string()],
            endpoint_url: Some(ep.to_string()),
            queue_prefix: Some(prefix.to_string()),
            ..SqsSettings::default()
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

async fn qdeck(ep: &str, prefix: &str) -> Arc<dyn Backend> {
    backend::build_with(&profile(ep, prefix), &moto_keys())
        .await
        .expect("build sqs backend")
}

struct Raw {
    sqs: aws_sdk_sqs::Client,
    ep: String,
}

async fn raw(ep: &str) -> Raw {
    let conf = aws_config::defaults(BehaviorVersion::latest())
        .http_client(qdeck_backend::tls::aws_https_client())
        .region(Region::new("us-east-1"))
        .endpoint_url(ep)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "testing", "testing", None, None, "moto",
        ))
        .load()
        .await;
    Raw {
        sqs: aws_sdk_sqs::Client::new(&conf),
        ep: ep.to_string(),
    }
}

impl Raw {
    async fn create(&self, name: &str, attrs: &[(QueueAttributeName, String)]) -> String {
        let mut r = self.sqs.create_queue().queue_name(name);
        for (k, v) in attrs {
            r = r.attributes(k.clone(), v.clone());
        }
        r.send()
            .await
            .expect("create queue")
            .queue_url()
            .expect("url")
            .to_string()
    }

    async fn arn(&self, url: &str) -> String {
        self.sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("attrs")
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .expect("arn")
    }

    /// A source queue dead-lettering into a DLQ after `max` receives. Returns (src url, dlq url).
    async fn pair(&self, src: &str, dlq: &str, max: u32, fifo: bool) -> (String, String) {
        let fifo_attr = |v: &mut Vec<(QueueAttributeName, String)>| {
            if fifo {
                v.push((QueueAttributeName::FifoQueue, "true".to_string()));
            }
        };
        let mut da = vec![];
        fifo_attr(&mut da);
        let dlq_url = self.create(dlq, &da).await;
        let dlq_arn = self.arn(&dlq_url).await;
        let mut sa = vec![(
            QueueAttributeName::RedrivePolicy,
            format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{max}"}}"#),
        )];
        fifo_attr(&mut sa);
        (self.create(src, &sa).await, dlq_url)
    }

    async fn send(&self, url: &str, body: &str, group: Option<&str>) {
        let mut r = self
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(body)
            .message_attributes(
                "origin",
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("test")
                    .build()
                    .expect("attr"),
            );
        if let Some(g) = group {
            r = r
                .message_group_id(g)
                .message_deduplication_id(uuid::Uuid::new_v4().to_string());
        }
        r.send().await.expect("send");
    }

    /// Receive once with visibility 0 (the receive count goes up; moto dead-letters here).
    async fn receive_once(&self, url: &str, n: i32) -> usize {
        self.sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(n)
            .visibility_timeout(0)
            .send()
            .await
            .expect("receive")
            .messages()
            .len()
    }
}

async fn stats_of(b: &Arc<dyn Backend>, ids: &[&str]) -> HashMap<String, QueueStats> {
    let q: Vec<QueueId> = ids.iter().map(|s| QueueId::new(*s)).collect();
    let batch = b.stats(&q).await.expect("stats");
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);
    batch
        .stats
        .into_iter()
        .map(|s| (s.id.0.clone(), s))
        .collect()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn list_and_stats_match_what_was_put_in_with_dlq_links() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 2, false)
        .await;
    let fifo = r
        .create(
            &format!("{p}-f.fifo"),
            &[(QueueAttributeName::FifoQueue, "true".to_string())],
        )
        .await;
    for i in 0..5 {
        r.send(&src, &format!("m{i}"), None).await;
    }
    for i in 0..3 {
        r.send(&fifo, &format!("f{i}"), Some(&format!("g{i}")))
            .await;
    }
    // One FIFO message in flight.
    let got = r
        .sqs
        .receive_message()
        .queue_url(&fifo)
        .max_number_of_messages(1)
        .visibility_timeout(300)
        .send()
        .await
        .expect("receive");
    assert_eq!(got.messages().len(), 1);

    let b = qdeck(&ep, &p).await;
    let list = b.list_queues().await.expect("list");
    let names: Vec<&str> = list.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(
        names,
        vec![
            format!("{p}-dlq").as_str(),
            format!("{p}-f.fifo").as_str(),
            format!("{p}-src").as_str()
        ]
    );
    let by: HashMap<&str, &QueueInfo> = list.iter().map(|q| (q.id.as_str(), q)).collect();
    let s = by[format!("{p}-src").as_str()];
    assert_eq!(s.dlq, Some(QueueId(format!("{p}-dlq"))));
    assert_eq!(s.settings.max_receives, Some(2));
    let d = by[format!("{p}-dlq").as_str()];
    assert!(d.is_dlq);
    assert_eq!(d.dlq_sources, vec![QueueId(format!("{p}-src"))]);
    assert_eq!(by[format!("{p}-f.fifo").as_str()].kind, QueueKind::Fifo);

    let ids = [
        format!("{p}-src"),
        format!("{p}-dlq"),
        format!("{p}-f.fifo"),
    ];
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let st = stats_of(&b, &ids).await;
    assert_eq!(st[ids[0]].depth, Some(5));
    assert_eq!(st[ids[0]].in_flight, Some(0));
    assert_eq!(st[ids[0]].dlq_depth, Some(0));
    assert_eq!(st[ids[2]].depth, Some(2));
    assert_eq!(st[ids[2]].in_flight, Some(1));
    assert_eq!(st[ids[1]].depth, Some(0));

    // A refresh (list + stats) of N queues costs N GetQueueAttributes + 1 ListQueues.
    let calls = b.api_calls().snapshot();
    assert_eq!(calls.get("sqs:ListQueues"), Some(&1));
    assert_eq!(calls.get("sqs:GetQueueAttributes"), Some(&3));

    // A poison message dead-letters after maxReceiveCount (2) failed receives.
    let poison_src = r
        .pair(&format!("{p}-psrc"), &format!("{p}-pdlq"), 2, false)
        .await;
    r.send(&poison_src.0, "poison", None).await;
    for _ in 0..3 {
        r.receive_once(&poison_src.0, 1).await;
    }
    let st = stats_of(&b, &[&format!("{p}-psrc"), &format!("{p}-pdlq")]).await;
    assert_eq!(st[&format!("{p}-psrc")].depth, Some(0));
    assert_eq!(st[&format!("{p}-pdlq")].depth, Some(1));
    let _ = dlq;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn unknown_queue_goes_to_errors_not_the_whole_batch() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    r.create(&format!("{p}-a"), &[]).await;
    let b = qdeck(&ep, &p).await;
    let batch = b
        .stats(&[QueueId(format!("{p}-a")), QueueId(format!("{p}-gone"))])
        .await
        .expect("stats");
    assert_eq!(batch.stats.len(), 1);
    assert_eq!(batch.errors.len(), 1);
    assert_eq!(batch.errors[0].0, QueueId(format!("{p}-gone")));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn scheduled_listing_is_refused_with_the_reason_and_the_count() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    r.create(&format!("{p}-d"), &[]).await;
    let b = qdeck(&ep, &p).await;
    let q = QueueId(format!("{p}-d"));
    b.sender()
        .expect("this backend publishes")
        .send(
            &q,
            OutgoingMessage {
                body: b"later".to_vec(),
                key: None,
                delay: Some(Duration::from_secs(600)),
                ..Default::default()
            },
        )
        .await
        .expect("send delayed");
    match qdeck_backend::scheduled_of(&*b, &q).await.map(|_| ()) {
        Err(BackendError::Unsupported(why)) => {
            assert!(why.contains("SQS cannot list delayed messages"), "{why}");
            assert!(why.contains("ApproximateNumberOfMessagesDelayed"), "{why}");
            assert!(why.ends_with("(1 now)"), "the count comes along: {why}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn browse_refuses_near_max_receive_and_never_dead_letters() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 2, false)
        .await;
    r.send(&src, "once-failed", None).await;
    // A worker already failed it once: one more receive puts it at maxReceiveCount.
    assert_eq!(r.receive_once(&src, 1).await, 1);
    let b = qdeck(&ep, &p).await;
    let src_id = QueueId(format!("{p}-src"));
    let dlq_id = QueueId(format!("{p}-dlq"));
    let err = b
        .browse(
            &src_id,
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .expect_err("browse must be refused");
    assert!(err.liftable_by_force(), "{err:?}");
    assert!(err.to_string().contains("dead-letters after 2"), "{err}");
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(
        st[src_id.as_str()].depth,
        Some(1),
        "message still in source"
    );
    assert_eq!(st[dlq_id.as_str()].depth, Some(0), "nothing dead-lettered");
    assert!(matches!(
        b.capabilities().browse,
        BrowseEffect::SideEffect(_)
    ));

    // The DLQ itself has no redrive policy: browsing it is allowed and gives messages back.
    r.send(&dlq, "dead-one", None).await;
    let page = b
        .browse(
            &dlq_id,
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .expect("browse dlq");
    assert_eq!(page.messages.len(), 1);
    let m = &page.messages[0];
    assert_eq!(m.body, b"dead-one");
    assert_eq!(m.receive_count, Some(1));
    // System attributes are metadata; message attributes typed headers.
    assert!(m.meta.iter().any(|(k, _)| k == "ApproximateReceiveCount"));
    assert!(m.meta.iter().any(|(k, _)| k == "SentTimestamp"));
    assert!(m
        .headers
        .iter()
        .any(|(k, v)| k == "origin" && v.as_str() == Some("test")));
    assert!(page
        .effect_note
        .as_deref()
        .unwrap_or("")
        .contains("receive count +1"));
    // The origin is inferred from the only source queue.
    assert_eq!(
        m.dead_letter.as_ref().and_then(|d| d.origin.clone()),
        Some(src_id.clone())
    );
    // Visible again right away.
    assert_eq!(r.receive_once(&dlq, 10).await, 1);

    // Forced browse works and says the message is now at its limit; still not dead-lettered.
    let page = b
        .browse(
            &src_id,
            &BrowseRequest {
                max: 10,
                force: true,
                ..Default::default()
            },
        )
        .await
        .expect("forced browse");
    assert_eq!(page.messages.len(), 1);
    assert!(
        page.effect_note
            .as_deref()
            .unwrap_or("")
            .contains("maxReceiveCount"),
        "{:?}",
        page.effect_note
    );
    let st = stats_of(&b, &[src_id.as_str()]).await;
    assert_eq!(st[src_id.as_str()].depth, Some(1));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn client_side_redrive_moves_everything_and_loses_nothing() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    let n = 25;
    for i in 0..n {
        r.send(&dlq, &format!("dead {i}"), None).await;
    }
    let b = qdeck(&ep, &p).await;
    b.list_queues().await.expect("list");
    let src_id = QueueId(format!("{p}-src"));
    let dlq_id = QueueId(format!("{p}-dlq"));
    let (progress, rx) = OpProgress::new();
    let report = b
        .redrive(
            &RedriveRequest {
                source: dlq_id.clone(),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &progress,
        )
        .await
        .expect("redrive");
    // moto has no StartMessageMoveTask (500): the backend falls back and says so.
    assert!(report.mode.starts_with("client-side"), "{}", report.mode);
    assert!(
        report.mode.contains("StartMessageMoveTask"),
        "{}",
        report.mode
    );
    assert_eq!(report.moved, n);
    assert_eq!(report.failed, 0);
    assert_eq!(report.possibly_duplicated, 0);
    assert_eq!(rx.borrow().done, n);
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(st[src_id.as_str()].depth, Some(n), "all back in the source");
    assert_eq!(st[dlq_id.as_str()].depth, Some(0));
    assert_eq!(st[dlq_id.as_str()].in_flight, Some(0));
    // Attributes were copied.
    let back = r
        .sqs
        .receive_message()
        .queue_url(&_src)
        .message_attribute_names("All")
        .visibility_timeout(0)
        .send()
        .await
        .expect("receive");
    let m = &back.messages()[0];
    assert_eq!(
        m.message_attributes()
            .and_then(|a| a.get("origin"))
            .and_then(|v| v.string_value()),
        Some("test")
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn client_side_redrive_respects_max_and_cancel() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    for i in 0..12 {
        r.send(&dlq, &format!("dead {i}"), None).await;
    }
    let b = qdeck(&ep, &p).await;
    b.list_queues().await.expect("list");
    let src_id = QueueId(format!("{p}-src"));
    let dlq_id = QueueId(format!("{p}-dlq"));
    let req = RedriveRequest {
        source: dlq_id.clone(),
        target: RedriveTarget::Queue(src_id.clone()),
        max: Some(7),
        rate: Some(qdeck_model::rate::Rate::fixed(1000.0)),
        only_ids: None,
        window: None,
    };
    let report = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive");
    assert_eq!(report.moved, 7);
    assert!(report.mode.contains("count limit"), "{}", report.mode);
    // Cancelled before it starts: nothing moves, nothing is lost.
    let progress = OpProgress::detached();
    progress.cancel();
    let report = b
        .redrive(&RedriveRequest { max: None, ..req }, &progress)
        .await
        .expect("redrive");
    assert!(report.cancelled);
    assert_eq!(report.moved, 0);
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(
        st[src_id.as_str()].depth.unwrap_or(0) + st[dlq_id.as_str()].depth.unwrap_or(0),
        12,
        "nothing lost"
    );
    assert_eq!(st[src_id.as_str()].depth, Some(7));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn fifo_redrive_keeps_groups_and_counts() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, dlq) = r
        .pair(&format!("{p}-src.fifo"), &format!("{p}-dlq.fifo"), 3, true)
        .await;
    for i in 0..6 {
        r.send(&dlq, &format!("dead {i}"), Some(&format!("g{}", i % 2)))
            .await;
    }
    let b = qdeck(&ep, &p).await;
    b.list_queues().await.expect("list");
    let src_id = QueueId(format!("{p}-src.fifo"));
    let dlq_id = QueueId(format!("{p}-dlq.fifo"));
    let report = b
        .redrive(
            &RedriveRequest {
                source: dlq_id.clone(),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_eq!(report.moved + report.possibly_duplicated, 6, "{report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(st[src_id.as_str()].depth, Some(6));
    assert_eq!(st[dlq_id.as_str()].depth, Some(0));
    let got = r
        .sqs
        .receive_message()
        .queue_url(&src)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive");
    for m in got.messages() {
        let g = m
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId))
            .cloned()
            .unwrap_or_default();
        assert!(g == "g0" || g == "g1", "group kept: {g}");
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn purge_and_its_cooldown() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let q = r.create(&format!("{p}-q"), &[]).await;
    for i in 0..3 {
        r.send(&q, &format!("m{i}"), None).await;
    }
    let b = qdeck(&ep, &p).await;
    let id = QueueId(format!("{p}-q"));
    let rep = b.purge(&id, &OpProgress::detached()).await.expect("purge");
    assert!(
        rep.note.as_deref().unwrap_or("").contains("about 3"),
        "{rep:?}"
    );
    assert_eq!(b.capabilities().purge_cooldown_secs, Some(60));
    // The same backend knows it purged: refused locally with the time left.
    let err = b
        .purge(&id, &OpProgress::detached())
        .await
        .expect_err("cooldown");
    assert!(matches!(err, BackendError::Refused(_)), "{err}");
    assert!(err.to_string().contains("try again in"), "{err}");
    // Another qdeck (another process) hits SQS's own PurgeQueueInProgress.
    let other = qdeck(&ep, &p).await;
    let err = other
        .purge(&id, &OpProgress::detached())
        .await
        .expect_err("broker cooldown");
    assert!(matches!(err, BackendError::Refused(_)), "{err}");
    assert!(err.to_string().contains("PurgeQueueInProgress"), "{err}");
    let st = stats_of(&b, &[id.as_str()]).await;
    assert_eq!(st[id.as_str()].depth, Some(0));
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn age_comes_from_seeded_cloudwatch_data_on_its_own_cadence() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let name = format!("{p}-aged");
    let url = r.create(&name, &[]).await;
    // Age is read only for a queue that holds a message.
    r.send(&url, "old one", None).await;
    // aws-sdk-cloudwatch speaks only RPC v2 CBOR, which moto lacks: seed over AWS JSON 1.0
    // (moto does not check signatures).
    let when = chrono::Utc::now().timestamp() - 120;
    let put = serde_json::json!({
        "Namespace": "AWS/SQS",
        "MetricData": [{
            "MetricName": "ApproximateAgeOfOldestMessage",
            "Dimensions": [{"Name": "QueueName", "Value": name}],
            "Timestamp": when,
            "Value": 321.0,
            "Unit": "Seconds"
        }]
    });
    let resp = http_client()
        .post(&r.ep)
        .header("content-type", "application/x-amz-json-1.0")
        .header(
            "x-amz-target",
            "GraniteServiceVersion20100801.PutMetricData",
        )
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/monitoring/aws4_request, \
             SignedHeaders=host, Signature=0",
        )
        .body(put.to_string())
        .send()
        .await
        .expect("put metric");
    assert!(resp.status().is_success(), "{}", resp.status());
    let b = qdeck(&ep, &p).await;
    assert!(matches!(b.capabilities().age, AgeSource::Metric(_)));
    let st = stats_of(&b, &[&name]).await;
    assert_eq!(st[&name].oldest_age_secs, Some(321.0));
    let note = st[&name].age_note.clone().unwrap_or_default();
    assert!(
        note.contains("CloudWatch") && note.contains("old"),
        "{note}"
    );
    // A second refresh inside the age interval reuses the cached value: no new metric call.
    let st = stats_of(&b, &[&name]).await;
    assert_eq!(st[&name].oldest_age_secs, Some(321.0));
    let calls = b.api_calls().snapshot();
    assert_eq!(calls.get("cloudwatch:GetMetricData"), Some(&1));
    assert_eq!(calls.get("billing:cloudwatch-metrics"), Some(&1));
    let cost = qdeck_backend::sqs::estimated_cost_usd(&calls);
    assert!(cost > 0.0);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn cloudwatch_age_is_read_only_for_dlqs_and_the_fullest_queues() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 5, false)
        .await;
    r.send(&dlq, "dead", None).await;
    for _ in 0..3 {
        r.send(&src, "waiting", None).await;
    }
    let full = r.create(&format!("{p}-full"), &[]).await;
    for _ in 0..5 {
        r.send(&full, "waiting", None).await;
    }
    r.create(&format!("{p}-empty"), &[]).await;
    let settings = SqsSettings {
        regions: vec!["us-east-1".to_string()],
        endpoint_url: Some(ep.clone()),
        queue_prefix: Some(p.clone()),
        age_worst_n: Some(1),
        ..SqsSettings::default()
    };
    let b = backend::build_with(
        &Profile {
            kind: ProfileKind::Sqs(settings),
            ..profile(&ep, &p)
        },
        &moto_keys(),
    )
    .await
    .expect("build");
    let ids: Vec<QueueId> = b
        .list_queues()
        .await
        .expect("list")
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(ids.len(), 4);
    let before = b.api_calls().snapshot();
    let batch = b.stats(&ids).await.expect("stats");
    let after = b.api_calls().snapshot();
    let billed = after
        .get("billing:cloudwatch-metrics")
        .copied()
        .unwrap_or(0)
        - before
            .get("billing:cloudwatch-metrics")
            .copied()
            .unwrap_or(0);
    assert_eq!(
        billed, 2,
        "the DLQ and the one fullest queue, not src or the empty one"
    );
    let note = |n: &str| {
        batch
            .stats
            .iter()
            .find(|s| s.id.as_str() == format!("{p}-{n}"))
            .and_then(|s| s.age_note.clone())
            .unwrap_or_default()
    };
    assert!(note("src").contains("age_worst_n"), "{}", note("src"));
    assert!(note("empty").contains("empty"), "{}", note("empty"));
    assert!(!note("full").contains("age_worst_n"), "{}", note("full"));
    assert!(!note("dlq").contains("age_worst_n"), "{}", note("dlq"));
}

#[tokio::test]
async fn unreachable_endpoint_is_reported_as_such() {
    // Port 9 on loopback: nothing listens there.
    let b = qdeck("http://127.0.0.1:9", "x").await;
    let err = b.list_queues().await.expect_err("unreachable");
    assert!(matches!(err, BackendError::Unreachable(_)), "{err:?}");
    assert!(!err.to_string().contains('\n'));
}

// ---------------------------------------------------------------------------------------
// Move task against a local HTTP stand-in (moto does not implement it).
// Shapes from the AWS API reference (AWS JSON 1.0, X-Amz-Target: AmazonSQS.<Action>):
//   StartMessageMoveTask {SourceArn, DestinationArn?, MaxNumberOfMessagesPerSecond?} → {TaskHandle}
//   ListMessageMoveTasks {SourceArn, MaxResults} → {Results:[{TaskHandle?, Status, SourceArn,
//     ApproximateNumberOfMessagesMoved, ApproximateNumberOfMessagesToMove, StartedTimestamp, …}]}
//   CancelMessageMoveTask {TaskHandle} → {ApproximateNumberOfMessagesMoved}
// ---------------------------------------------------------------------------------------

type Seen = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// Serve SQS JSON calls with `answer(action, body, n_th call of that action)`.
async fn stand_in(
    answer: impl Fn(&str, &serde_json::Value, usize) -> (u16, serde_json::Value) + Send + Sync + 'static,
) -> (String, Seen) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen2.clone();
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    // Read one request (headers + Content-Length body), answer, repeat.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.trim()
                                .eq_ignore_ascii_case(name)
                                .then(|| v.trim().to_string())
                        })
                    };
                    let len: usize = header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                    let body: serde_json::Value =
                        serde_json::from_slice(&buf[head_end..head_end + len])
                            .unwrap_or(serde_json::Value::Null);
                    buf.drain(..head_end + len);
                    let action = header("x-amz-target")
                        .unwrap_or_default()
                        .trim_start_matches("AmazonSQS.")
                        .to_string();
                    let nth = {
                        let mut s = seen.lock().unwrap();
                        let n = s.iter().filter(|(a, _)| *a == action).count();
                        s.push((action.clone(), body.clone()));
                        n
                    };
                    let (status, out) = answer(&action, &body, nth);
                    let text = out.to_string();
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.0\r\n\
                         x-amzn-RequestId: 1\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), seen)
}

const DLQ_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:orders-dlq";

fn common(action: &str, ep_queue: &str) -> Option<serde_json::Value> {
    match action {
        "GetQueueUrl" => Some(serde_json::json!({ "QueueUrl": ep_queue })),
        "GetQueueAttributes" => Some(serde_json::json!({ "Attributes": {
            "QueueArn": DLQ_ARN,
            "ApproximateNumberOfMessages": "10",
            "ApproximateNumberOfMessagesNotVisible": "0",
            "ApproximateNumberOfMessagesDelayed": "0"
        }})),
        _ => None,
    }
}

#[tokio::test]
async fn move_task_runs_natively_and_reports_progress() {
    let (ep, seen) = stand_in(|action, _body, nth| {
        if let Some(v) = common(action, "http://x/123456789012/orders-dlq") {
            return (200, v);
        }
        match action {
            "StartMessageMoveTask" => (200, serde_json::json!({ "TaskHandle": "handle-1" })),
            "ListMessageMoveTasks" if nth == 0 => (
                200,
                // An older finished task is listed too: it must not be taken for ours.
                serde_json::json!({ "Results": [{
                    "Status": "COMPLETED", "SourceArn": DLQ_ARN,
                    "ApproximateNumberOfMessagesMoved": 99,
                    "ApproximateNumberOfMessagesToMove": 99,
                    "StartedTimestamp": 1700000000000i64 }, {
                    "TaskHandle": "handle-1", "Status": "RUNNING", "SourceArn": DLQ_ARN,
                    "MaxNumberOfMessagesPerSecond": 50,
                    "ApproximateNumberOfMessagesMoved": 4,
                    "ApproximateNumberOfMessagesToMove": 10,
                    "StartedTimestamp": chrono::Utc::now().timestamp_millis() }]}),
            ),
            "ListMessageMoveTasks" => (
                200,
                serde_json::json!({ "Results": [{
                    "Status": "COMPLETED", "SourceArn": DLQ_ARN,
                    "ApproximateNumberOfMessagesMoved": 10,
                    "ApproximateNumberOfMessagesToMove": 10,
                    "StartedTimestamp": chrono::Utc::now().timestamp_millis() }]}),
            ),
            _ => (
                400,
                serde_json::json!({ "__type": "InvalidAction", "message": action }),
            ),
        }
    })
    .await;
    let b = qdeck(&ep, "orders").await;
    let (progress, rx) = OpProgress::new();
    let report = b
        .redrive(
            &RedriveRequest {
                source: QueueId::new("orders-dlq"),
                target: RedriveTarget::Origin,
                max: None,
                rate: Some(qdeck_model::rate::Rate::fixed(50.0)),
                only_ids: None,
                window: None,
            },
            &progress,
        )
        .await
        .expect("redrive");
    assert_eq!(report.mode, "move task (StartMessageMoveTask)");
    assert_eq!(report.moved, 10);
    assert_eq!(report.failed, 0);
    assert!(!report.cancelled);
    assert_eq!(rx.borrow().done, 10);
    assert_eq!(rx.borrow().total, Some(10));
    let seen = seen.lock().unwrap().clone();
    let start = seen
        .iter()
        .find(|(a, _)| a == "StartMessageMoveTask")
        .expect("start sent");
    assert_eq!(start.1["SourceArn"], DLQ_ARN);
    assert_eq!(start.1["MaxNumberOfMessagesPerSecond"], 50);
    // No DestinationArn: each message goes back to its source queue.
    assert!(start.1.get("DestinationArn").is_none());
    let list = seen
        .iter()
        .find(|(a, _)| a == "ListMessageMoveTasks")
        .expect("list sent");
    assert_eq!(list.1["SourceArn"], DLQ_ARN);
    assert!(
        !seen.iter().any(|(a, _)| a == "ReceiveMessage"),
        "no client-side copy"
    );
    let calls = b.api_calls().snapshot();
    assert_eq!(calls.get("sqs:StartMessageMoveTask"), Some(&1));
    assert_eq!(calls.get("sqs:ListMessageMoveTasks"), Some(&2));
}

#[tokio::test]
async fn move_task_cancel_sends_cancel_with_the_handle() {
    let progress = OpProgress::detached();
    let p2 = progress.clone();
    let (ep, seen) = stand_in(move |action, _body, nth| {
        if let Some(v) = common(action, "http://x/123456789012/orders-dlq") {
            return (200, v);
        }
        match action {
            "StartMessageMoveTask" => (200, serde_json::json!({ "TaskHandle": "handle-2" })),
            "CancelMessageMoveTask" => (
                200,
                serde_json::json!({ "ApproximateNumberOfMessagesMoved": 3 }),
            ),
            "ListMessageMoveTasks" if nth == 0 => {
                // The user presses cancel while the task runs.
                p2.cancel();
                (
                    200,
                    serde_json::json!({ "Results": [{
                        "TaskHandle": "handle-2", "Status": "RUNNING", "SourceArn": DLQ_ARN,
                        "ApproximateNumberOfMessagesMoved": 2,
                        "ApproximateNumberOfMessagesToMove": 10,
                        "StartedTimestamp": chrono::Utc::now().timestamp_millis() }]}),
                )
            }
            "ListMessageMoveTasks" => (
                200,
                serde_json::json!({ "Results": [{
                    "Status": "CANCELLED", "SourceArn": DLQ_ARN,
                    "ApproximateNumberOfMessagesMoved": 3,
                    "ApproximateNumberOfMessagesToMove": 10,
                    "StartedTimestamp": chrono::Utc::now().timestamp_millis() }]}),
            ),
            _ => (
                400,
                serde_json::json!({ "__type": "InvalidAction", "message": action }),
            ),
        }
    })
    .await;
    let b = qdeck(&ep, "orders").await;
    let report = b
        .redrive(
            &RedriveRequest {
                source: QueueId::new("orders-dlq"),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &progress,
        )
        .await
        .expect("redrive");
    assert!(report.cancelled);
    assert_eq!(report.moved, 3);
    let seen = seen.lock().unwrap().clone();
    let cancel = seen
        .iter()
        .find(|(a, _)| a == "CancelMessageMoveTask")
        .expect("cancel sent");
    assert_eq!(cancel.1["TaskHandle"], "handle-2");
}

#[tokio::test]
async fn move_task_500_falls_back_to_client_side_and_says_so() {
    // Like moto: the move-task actions answer 500; the queue is empty so client-side ends fast.
    let (ep, seen) = stand_in(|action, _body, _nth| {
        if let Some(v) = common(action, "http://x/123456789012/orders-dlq") {
            return (200, v);
        }
        match action {
            "ReceiveMessage" => (200, serde_json::json!({ "Messages": [] })),
            "StartMessageMoveTask" => (
                500,
                serde_json::json!({ "__type": "InternalFailure", "message": "not implemented" }),
            ),
            _ => (
                400,
                serde_json::json!({ "__type": "InvalidAction", "message": action }),
            ),
        }
    })
    .await;
    let b = qdeck(&ep, "orders").await;
    let report = b
        .redrive(
            &RedriveRequest {
                source: QueueId::new("orders-dlq"),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert!(report.mode.starts_with("client-side"), "{}", report.mode);
    assert!(report.mode.contains("HTTP 500"), "{}", report.mode);
    assert_eq!(report.moved, 0);
    let seen = seen.lock().unwrap().clone();
    // Not retried: one start attempt.
    assert_eq!(
        seen.iter()
            .filter(|(a, _)| a == "StartMessageMoveTask")
            .count(),
        1
    );
}

// ---------------------------------------------------------------------------------------
// Call budget (run by scripts/sqs_calls.sh; ignored in normal runs, prints figures, asserts
// only the documented budget: N GetQueueAttributes + ⌈N/1000⌉ ListQueues per full refresh,
// plus ⌈M/500⌉ GetMetricData for the M queues whose age is read (none here: they are empty);
// client-side redrive ≤ 0.31 calls per message moved).
// ---------------------------------------------------------------------------------------

fn diff(
    after: &std::collections::BTreeMap<String, u64>,
    before: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

fn calls_only(m: &std::collections::BTreeMap<String, u64>) -> u64 {
    m.iter()
        .filter(|(k, _)| !k.starts_with("billing:"))
        .map(|(_, v)| *v)
        .sum()
}

#[tokio::test]
#[ignore = "call budget figures; run scripts/sqs_calls.sh"]
async fn manual_call_budget_on_moto() {
    use futures::StreamExt;
    let ep = require_endpoint();
    let n: usize = std::env::var("QDECK_SQS_CALLS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let m: u64 = std::env::var("QDECK_SQS_CALLS_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    futures::stream::iter((0..n.saturating_sub(2)).map(|i| {
        let r = &r;
        let p = &p;
        async move {
            r.create(&format!("{p}-q{i:05}"), &[]).await;
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<_>>()
    .await;

    let b = qdeck(&ep, &p).await;
    let t0 = b.api_calls().snapshot();
    let refresh_clock = std::time::Instant::now();
    let list = b.list_queues().await.expect("list");
    assert_eq!(list.len(), n);
    let ids: Vec<QueueId> = list.iter().map(|q| q.id.clone()).collect();
    let batch = b.stats(&ids).await.expect("stats");
    assert_eq!(batch.stats.len(), n, "{:?}", batch.errors.first());
    let full = diff(&b.api_calls().snapshot(), &t0);
    println!(
        "N = {n} queues; full refresh took {:.2} s on this moto (16 calls in flight)",
        refresh_clock.elapsed().as_secs_f64()
    );
    println!("full refresh (list + stats + age sweep): {full:?}");
    assert_eq!(full.get("sqs:GetQueueAttributes"), Some(&(n as u64)));
    assert_eq!(full.get("sqs:ListQueues"), Some(&(n as u64).div_ceil(1000)));
    // The queues are empty: their age is not worth a billed metric.
    assert_eq!(full.get("cloudwatch:GetMetricData"), None);
    let t1 = b.api_calls().snapshot();
    b.stats(&ids).await.expect("stats");
    let again = diff(&b.api_calls().snapshot(), &t1);
    println!("next refresh inside the age interval (stats only): {again:?}");
    let per_refresh = std::collections::BTreeMap::from([
        ("sqs:GetQueueAttributes".to_string(), n as u64 * 120),
        (
            "sqs:ListQueues".to_string(),
            (n as u64).div_ceil(1000) * 120,
        ),
        (
            "cloudwatch:GetMetricData".to_string(),
            (n as u64).div_ceil(500) * 30,
        ),
        ("billing:cloudwatch-metrics".to_string(), n as u64 * 30),
    ]);
    println!(
        "estimated cost: refresh every 30 s + age every 120 s = ${:.4}/hour (${:.2}/30 days)",
        qdeck_backend::sqs::estimated_cost_per_hour(&per_refresh, Duration::from_secs(3600)),
        qdeck_backend::sqs::estimated_cost_per_hour(&per_refresh, Duration::from_secs(3600))
            * 24.0
            * 30.0
    );

    // Client-side redrive of m messages.
    let mut sent = 0u64;
    while sent < m {
        let k = (m - sent).min(10);
        let entries: Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry> = (0..k)
            .map(|i| {
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(format!("dead {}", sent + i))
                    .build()
                    .expect("entry")
            })
            .collect();
        r.sqs
            .send_message_batch()
            .queue_url(&dlq)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send batch");
        sent += k;
    }
    let dlq_id = QueueId(format!("{p}-dlq"));
    let src_id = QueueId(format!("{p}-src"));
    b.stats(std::slice::from_ref(&dlq_id)).await.expect("stats");
    let t2 = b.api_calls().snapshot();
    let clock = std::time::Instant::now();
    let rep = b
        .redrive(
            &RedriveRequest {
                source: dlq_id.clone(),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    let took = clock.elapsed();
    let used = diff(&b.api_calls().snapshot(), &t2);
    assert_eq!(rep.moved, m, "{rep:?}");
    println!(
        "redrive took {:.2} s on this moto ({:.0} messages/s; figure only, not asserted)",
        took.as_secs_f64(),
        m as f64 / took.as_secs_f64().max(1e-9)
    );
    let total = calls_only(&used);
    let copy_calls = total - used.get("sqs:StartMessageMoveTask").copied().unwrap_or(0);
    println!("redrive of {m} messages ({}): {used:?}", rep.mode);
    println!(
        "calls per message moved: {:.3} including the refused StartMessageMoveTask, {:.3} for the copy itself",
        total as f64 / m as f64,
        copy_calls as f64 / m as f64
    );
    assert!(copy_calls as f64 / m as f64 <= 0.31);
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(st[src_id.as_str()].depth, Some(m), "nothing lost");
    assert_eq!(st[dlq_id.as_str()].depth, Some(0));

    // Reference in the same go: one copy loop (a rate, however high, means one loop).
    let clock = std::time::Instant::now();
    let back = b
        .redrive(
            &RedriveRequest {
                source: src_id.clone(),
                target: RedriveTarget::Queue(dlq_id.clone()),
                max: None,
                rate: Some(qdeck_model::rate::Rate::fixed(1e9)),
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive back");
    let one_loop = clock.elapsed();
    assert_eq!(back.moved, m, "{back:?}");
    println!(
        "one copy loop: {:.2} s; {} loops were {:.2}x faster (same moto, same go)",
        one_loop.as_secs_f64(),
        4,
        one_loop.as_secs_f64() / took.as_secs_f64().max(1e-9)
    );
}

/// A stand-in answer for GetQueueUrl that echoes the queue name into the URL.
fn url_for(body: &serde_json::Value) -> serde_json::Value {
    let name = body["QueueName"].as_str().unwrap_or("q");
    serde_json::json!({ "QueueUrl": format!("http://x/123456789012/{name}") })
}

#[tokio::test]
async fn client_side_deletes_only_confirmed_copies_and_reports_stale_receipts() {
    let (ep, seen) = stand_in(|action, body, nth| match action {
        "GetQueueUrl" => (200, url_for(body)),
        "GetQueueAttributes" => (
            200,
            serde_json::json!({ "Attributes": {
                "QueueArn": format!("arn:aws:sqs:us-east-1:123456789012:{}",
                    body["QueueUrl"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("")),
                "ApproximateNumberOfMessages": "3" }}),
        ),
        "ReceiveMessage" if nth == 0 => (
            200,
            serde_json::json!({ "Messages": [
                { "MessageId": "m-1", "ReceiptHandle": "rh-1", "Body": "one",
                  "Attributes": { "ApproximateReceiveCount": "1" } },
                { "MessageId": "m-2", "ReceiptHandle": "rh-2", "Body": "two",
                  "Attributes": { "ApproximateReceiveCount": "1" } },
                { "MessageId": "m-3", "ReceiptHandle": "rh-3", "Body": "three",
                  "Attributes": { "ApproximateReceiveCount": "1" } }
            ]}),
        ),
        "ReceiveMessage" => (200, serde_json::json!({ "Messages": [] })),
        "SendMessageBatch" => (
            200,
            serde_json::json!({
                "Successful": [
                    { "Id": "m0", "MessageId": "n-1", "MD5OfMessageBody": "x" },
                    { "Id": "m1", "MessageId": "n-2", "MD5OfMessageBody": "x" }
                ],
                "Failed": [
                    { "Id": "m2", "SenderFault": true, "Code": "InvalidParameterValue",
                      "Message": "rejected" }
                ]
            }),
        ),
        "DeleteMessageBatch" => (
            200,
            serde_json::json!({
                "Successful": [ { "Id": "m0" } ],
                "Failed": [ { "Id": "m1", "SenderFault": true,
                              "Code": "ReceiptHandleIsInvalid", "Message": "stale" } ]
            }),
        ),
        "ChangeMessageVisibilityBatch" => (
            200,
            serde_json::json!({ "Successful": [ { "Id": "v0" } ], "Failed": [] }),
        ),
        _ => (
            400,
            serde_json::json!({ "__type": "com.amazonaws.sqs#UnsupportedOperation", "message": action }),
        ),
    })
    .await;
    let b = qdeck(&ep, "x").await;
    let report = b
        .redrive(
            &RedriveRequest {
                source: QueueId::new("dlq"),
                target: RedriveTarget::Queue(QueueId::new("work")),
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_eq!(report.moved, 1, "{report:?}");
    assert_eq!(
        report.possibly_duplicated, 1,
        "stale receipt: copy exists, original may return"
    );
    assert_eq!(report.failed, 1, "copy refused: original kept");
    assert!(report.mode.starts_with("client-side"), "{}", report.mode);
    let seen = seen.lock().unwrap().clone();
    // The delete names only the two messages whose copy the broker confirmed.
    let del = seen
        .iter()
        .find(|(a, _)| a == "DeleteMessageBatch")
        .expect("delete sent");
    let handles: Vec<&str> = del.1["Entries"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|e| e["ReceiptHandle"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(handles, vec!["rh-1", "rh-2"]);
    // The refused one is made visible again at the end.
    let vis = seen
        .iter()
        .find(|(a, _)| a == "ChangeMessageVisibilityBatch")
        .expect("release sent");
    assert_eq!(vis.1["Entries"][0]["ReceiptHandle"], "rh-3");
    assert_eq!(vis.1["Entries"][0]["VisibilityTimeout"], 0);
    // Sends went to the target queue's URL.
    let send = seen
        .iter()
        .find(|(a, _)| a == "SendMessageBatch")
        .expect("send sent");
    assert_eq!(send.1["QueueUrl"], "http://x/123456789012/work");
}

#[tokio::test]
async fn access_denied_on_one_queue_goes_to_errors_and_throttling_is_named() {
    let (ep, seen) = stand_in(|action, body, _nth| match action {
        "GetQueueUrl" => (200, url_for(body)),
        "GetQueueAttributes" if body["QueueUrl"].as_str().unwrap_or("").ends_with("/secret") => (
            400,
            serde_json::json!({ "__type": "com.amazon.coral.service#AccessDeniedException",
                                "message": "not allowed" }),
        ),
        "GetQueueAttributes" if body["QueueUrl"].as_str().unwrap_or("").ends_with("/badkey") => (
            403,
            serde_json::json!({ "__type": "com.amazon.coral.service#InvalidClientTokenId",
                                "message": "The security token included in the request is invalid" }),
        ),
        "GetQueueAttributes" => (
            200,
            serde_json::json!({ "Attributes": {
                "ApproximateNumberOfMessages": "4",
                "ApproximateNumberOfMessagesNotVisible": "1",
                "ApproximateNumberOfMessagesDelayed": "0",
                "RedrivePolicy": "{not json" }}),
        ),
        "ListQueues" => (
            400,
            serde_json::json!({ "__type": "com.amazonaws.sqs#RequestThrottled",
                                "message": "slow down" }),
        ),
        _ => (
            400,
            serde_json::json!({ "__type": "InvalidAction", "message": action }),
        ),
    })
    .await;
    let settings = SqsSettings {
        regions: vec!["us-east-1".to_string()],
        endpoint_url: Some(ep.clone()),
        cloudwatch: Some(false),
        ..SqsSettings::default()
    };
    let b = backend::build_with(
        &Profile {
            kind: ProfileKind::Sqs(settings),
            ..profile(&ep, "x")
        },
        &moto_keys(),
    )
    .await
    .expect("build");
    let batch = b
        .stats(&[QueueId::new("open"), QueueId::new("secret")])
        .await
        .expect("stats as a whole succeeds");
    assert_eq!(batch.stats.len(), 1);
    assert_eq!(batch.stats[0].depth, Some(4));
    assert_eq!(batch.stats[0].in_flight, Some(1));
    assert_eq!(batch.errors.len(), 1);
    assert_eq!(batch.errors[0].0, QueueId::new("secret"));
    assert_eq!(batch.errors[0].1.kind, QueueErrorKind::Permission);
    assert!(
        batch.errors[0].1.message.contains("sqs:GetQueueAttributes"),
        "the missing right is named: {}",
        batch.errors[0].1
    );
    // Authorization (a right is missing) and authentication (the key is refused) differ.
    match b.describe(&QueueId::new("secret")).await {
        Err(BackendError::Forbidden { right, .. }) => {
            assert_eq!(right.as_deref(), Some("sqs:GetQueueAttributes"));
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    let err = b
        .describe(&QueueId::new("badkey"))
        .await
        .expect_err("bad key");
    assert!(matches!(err, BackendError::Auth(_)), "{err:?}");
    // Malformed RedrivePolicy: the queue is browsable only with force, nothing panics.
    let err = b
        .browse(
            &QueueId::new("open"),
            &BrowseRequest {
                max: 1,
                ..Default::default()
            },
        )
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("RedrivePolicy"), "{err}");
    let err = b.list_queues().await.expect_err("throttled");
    assert!(matches!(err, BackendError::Throttled { .. }), "{err:?}");
    assert!(err.is_transient());
    // The SDK backed off and retried; every attempt is billed, so every attempt is counted.
    let attempts = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(a, _)| a == "ListQueues")
        .count() as u64;
    assert!(attempts > 1, "retried");
    assert_eq!(
        b.api_calls().snapshot().get("sqs:ListQueues"),
        Some(&attempts)
    );
}

/// Runs itself in a child process with no AWS credentials anywhere (the chain reads process
/// env and files, so it cannot share this process).
#[test]
fn no_credentials_names_the_chain_tried() {
    if std::env::var_os("QDECK_SQS_NO_CREDS_CHILD").is_some() {
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("exe");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "--exact",
        "manual_no_credentials_child",
        "--ignored",
        "--nocapture",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .env("HOME", home.path())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("QDECK_SQS_NO_CREDS_CHILD", "1")
        .output()
        .expect("run child");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("test manual_no_credentials_child ... ok"),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "child process of no_credentials_names_the_chain_tried"]
async fn manual_no_credentials_child() {
    if std::env::var_os("QDECK_SQS_NO_CREDS_CHILD").is_none() {
        return;
    }
    // The environment (stripped of AWS_* by the parent), not `moto_keys`: the SDK's chain.
    let b = backend::build(&profile("http://127.0.0.1:9", "x"))
        .await
        .expect("build sqs backend");
    let err = b.list_queues().await.expect_err("no credentials");
    println!("error: {err}");
    assert!(matches!(err, BackendError::Auth(_)), "{err:?}");
    let t = err.to_string();
    assert!(
        t.contains("environment") && t.contains("instance metadata"),
        "{t}"
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn redrive_of_selected_messages_moves_only_those() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    for i in 0..5 {
        r.send(&dlq, &format!("dead {i}"), None).await;
    }
    let b = qdeck(&ep, &p).await;
    let src_id = QueueId(format!("{p}-src"));
    let dlq_id = QueueId(format!("{p}-dlq"));
    let page = b
        .browse(
            &dlq_id,
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .expect("browse");
    assert_eq!(page.messages.len(), 5);
    let pick: Vec<String> = page.messages.iter().take(2).map(|m| m.id.clone()).collect();
    let report = b
        .redrive(
            &RedriveRequest {
                source: dlq_id.clone(),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: Some(pick),
                window: None,
            },
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_eq!(report.moved, 2, "{report:?}");
    assert!(report.mode.contains("selected"), "{}", report.mode);
    let st = stats_of(&b, &[src_id.as_str(), dlq_id.as_str()]).await;
    assert_eq!(st[src_id.as_str()].depth, Some(2));
    assert_eq!(
        st[dlq_id.as_str()].depth,
        Some(3),
        "the others are visible again"
    );
    assert_eq!(st[dlq_id.as_str()].in_flight, Some(0));
}

/// Bodies and message attributes of everything in `url`, read with a long visibility so
/// each message is seen once.
async fn drain(r: &Raw, url: &str) -> Vec<(String, HashMap<String, String>)> {
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let got = r
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(300)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        if got.messages().is_empty() {
            empty += 1;
            continue;
        }
        empty = 0;
        for m in got.messages() {
            let attrs = m
                .message_attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.clone(), v.string_value().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default();
            out.push((m.body().unwrap_or("").to_string(), attrs));
        }
    }
    out
}

/// Safety item 2 on SQS: a consumer rejects every redriven message (maxReceiveCount 1), so
/// each copy dead-letters again during the run. The run recognises its own copies by the
/// run id it stamps on them, ends, and moves exactly what the DLQ held; nothing is lost.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn redrive_ends_while_its_copies_dead_letter_again() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 1, false)
        .await;
    const N: usize = 15;
    for i in 0..N {
        r.send(&dlq, &format!("poison {i}"), None).await;
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poison = {
        let (sqs, src, stop) = (r.sqs.clone(), src.clone(), stop.clone());
        tokio::spawn(async move {
            // Receive and give back at once (visibility 0): a rejection. moto dead-letters a
            // message on the receive after its count reached maxReceiveCount.
            let mut rejected = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(o) = sqs
                    .receive_message()
                    .queue_url(&src)
                    .max_number_of_messages(10)
                    .visibility_timeout(0)
                    .send()
                    .await
                {
                    rejected += o.messages().len();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            rejected
        })
    };
    let b = qdeck(&ep, &p).await;
    let req = RedriveRequest {
        source: QueueId(format!("{p}-dlq")),
        target: RedriveTarget::Origin,
        max: None,
        // Batches of 5 a second: the consumer sends each batch back before the next.
        rate: Some(qdeck_model::rate::Rate::fixed(5.0)),
        only_ids: None,
        window: None,
    };
    let rep = tokio::time::timeout(
        Duration::from_secs(120),
        b.redrive(&req, &OpProgress::detached()),
    )
    .await
    .expect("the redrive ends")
    .expect("redrive");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rejected = poison.await.expect("consumer task");
    println!("report: {rep:?}; consumer rejected {rejected}");
    assert_eq!(rep.moved, N as u64, "{rep:?}");
    assert!(rejected > 0, "the consumer rejected redriven messages");
    let mut all = drain(&r, &src).await;
    all.extend(drain(&r, &dlq).await);
    let mut bodies: Vec<String> = all.iter().map(|(b, _)| b.clone()).collect();
    bodies.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("poison {i}")).collect();
    want.sort();
    assert_eq!(bodies, want, "every message in src or dlq exactly once");
    for (body, attrs) in &all {
        assert!(
            attrs
                .get("x-qdeck-redrive-run")
                .is_some_and(|v| !v.is_empty()),
            "{body}: {attrs:?}"
        );
        assert_eq!(attrs.get("x-qdeck-redriven").map(String::as_str), Some("1"));
        assert!(attrs.contains_key("x-qdeck-redriven-at"), "{attrs:?}");
        assert_eq!(attrs.get("origin").map(String::as_str), Some("test"));
    }
}

/// Engine item "describe(queue) on the contract": one queue among 200 is described and its
/// figures read in at most 3 SQS calls (GetQueueUrl, GetQueueAttributes,
/// ListDeadLetterSourceQueues; the attributes serve the stats that follow).
#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn describe_and_stats_of_one_queue_among_200_make_at_most_3_calls() {
    use futures::StreamExt;
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, dlq_url) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    r.send(&dlq_url, "dead", None).await;
    let urls: Vec<String> = futures::stream::iter(0..198)
        .map(|i| {
            let (r, p) = (&r, &p);
            async move { r.create(&format!("{p}-q{i:03}"), &[]).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let b = qdeck(&ep, &p).await;
    let dlq = QueueId(format!("{p}-dlq"));
    let before = b.api_calls().snapshot();
    let info = b.describe(&dlq).await.expect("describe");
    let st = stats_of(&b, &[dlq.as_str()]).await;
    let used = diff(&b.api_calls().snapshot(), &before);
    let sqs: u64 = used
        .iter()
        .filter(|(k, _)| k.starts_with("sqs:"))
        .map(|(_, v)| *v)
        .sum();
    println!("describe + stats of 1 queue among 200: {sqs} SQS calls; all counters {used:?}");
    assert!(info.is_dlq, "{info:?}");
    assert_eq!(info.dlq_sources, vec![QueueId(format!("{p}-src"))]);
    assert_eq!(st[dlq.as_str()].depth, Some(1));
    assert!(sqs <= 3, "{used:?}");
    assert_eq!(used.get("sqs:ListQueues"), None, "no listing: {used:?}");
    // SQS counts are approximate: the engine is told so.
    assert!(!b.count(&dlq).await.expect("count").exact);
    for u in urls {
        let _ = r.sqs.delete_queue().queue_url(u).send().await;
    }
}

/// Loss trial: `qdeck redrive` killed with SIGKILL at a random moment, QDECK_TRIALS times
/// (default 5). Afterwards every original message is in the DLQ or its source queue, maybe
/// twice (a copy whose original was not yet deleted), never missing. Holds are shortened to
/// 10 s (QDECK_SQS_REDRIVE_HOLD_SECS) so messages the dead process held come back in time.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn redrive_killed_at_random_moments_never_loses_a_message() {
    let ep = require_endpoint();
    let trials: usize = std::env::var("QDECK_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let r = raw(&ep).await;
    let home = tempfile::tempdir().expect("temp dir");
    const N: usize = 60;
    let mut duplicated = 0usize;
    for trial in 0..trials {
        let p = prefix();
        let (src, dlq) = r
            .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
            .await;
        for i in 0..N {
            r.send(&dlq, &format!("m{i}"), None).await;
        }
        let config = home.path().join(format!("config{trial}.toml"));
        std::fs::write(
            &config,
            format!(
                "default_profile = \"moto\"\n[[profiles]]\nname = \"moto\"\nkind = \"sqs\"\n\
                 regions = [\"us-east-1\"]\nendpoint_url = \"{ep}\"\nqueue_prefix = \"{p}\"\n\
                 cloudwatch = false\n"
            ),
        )
        .expect("config");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_qdeck"))
            .args(["redrive", &format!("{p}-dlq"), "--yes", "--rate", "20"])
            .env("QDECK_CONFIG", &config)
            .env("HOME", home.path())
            .env("XDG_STATE_HOME", home.path().join("state"))
            .env("QDECK_SQS_REDRIVE_HOLD_SECS", "10")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn qdeck");
        let delay = random_ms(3000);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let _ = child.kill();
        let status = child.wait().expect("wait");
        // Held messages come back after the hold.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let mut bodies: Vec<String> = drain(&r, &src).await.into_iter().map(|m| m.0).collect();
        bodies.extend(drain(&r, &dlq).await.into_iter().map(|m| m.0));
        let mut seen: HashMap<String, usize> = HashMap::new();
        for b in &bodies {
            *seen.entry(b.clone()).or_default() += 1;
        }
        let missing: Vec<String> = (0..N)
            .map(|i| format!("m{i}"))
            .filter(|b| !seen.contains_key(b))
            .collect();
        let dup = seen.values().filter(|n| **n > 1).count();
        duplicated += dup;
        println!(
            "trial {trial}: killed after {delay} ms ({status}); {} in src+dlq, {dup} duplicated, {} missing",
            bodies.len(),
            missing.len()
        );
        assert!(missing.is_empty(), "trial {trial}: lost {missing:?}");
        assert_eq!(seen.len(), N, "trial {trial}: unexpected bodies");
        for u in [&src, &dlq] {
            let _ = r.sqs.delete_queue().queue_url(u).send().await;
        }
    }
    println!("{trials} trials: none lost, {duplicated} duplicated in all");
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

/// The shared backend contract on moto: moto dead-letters lazily on the receive after the
/// receive count reaches maxReceiveCount, so receives with visibility 0 send the messages over.
/// Each test gets its own queue prefix (the backend lists only that prefix).
struct SqsFixture {
    raw: Raw,
    prefix: String,
    backend: Arc<dyn Backend>,
    /// Queue URLs to delete afterwards.
    created: Mutex<Vec<String>>,
    urls: Mutex<HashMap<QueueId, String>>,
}

impl SqsFixture {
    async fn setup() -> Self {
        let ep = require_endpoint();
        let prefix = prefix();
        SqsFixture {
            raw: raw(&ep).await,
            backend: qdeck(&ep, &prefix).await,
            prefix,
            created: Mutex::new(Vec::new()),
            urls: Mutex::new(HashMap::new()),
        }
    }

    fn remember(&self, id: &QueueId, url: &str) {
        self.created.lock().unwrap().push(url.to_string());
        self.urls
            .lock()
            .unwrap()
            .insert(id.clone(), url.to_string());
    }

    fn url(&self, id: &QueueId) -> String {
        self.urls.lock().unwrap()[id].clone()
    }

    async fn visible(&self, url: &str) -> usize {
        self.raw
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .expect("attrs")
            .attributes()
            .and_then(|a| {
                a.get(&QueueAttributeName::ApproximateNumberOfMessages)
                    .cloned()
            })
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    }
}

impl contract::Fixture for SqsFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let (src, dlq) = (
            format!("{}-{tag}-src", self.prefix),
            format!("{}-{tag}-dlq", self.prefix),
        );
        let (src_url, dlq_url) = self.raw.pair(&src, &dlq, 1, false).await;
        let (src_id, dlq_id) = (QueueId::new(src), QueueId::new(dlq));
        self.remember(&src_id, &src_url);
        self.remember(&dlq_id, &dlq_url);
        for i in 0..dead {
            self.raw
                .send(&src_url, &format!("{tag} dead {i}"), None)
                .await;
        }
        for _ in 0..50 {
            if self.visible(&dlq_url).await >= dead {
                break;
            }
            self.raw.receive_once(&src_url, 10).await;
        }
        assert_eq!(self.visible(&dlq_url).await, dead, "dead-lettered by moto");
        assert_eq!(self.visible(&src_url).await, 0, "source drained");
        for i in 0..ready {
            self.raw
                .send(&src_url, &format!("{tag} ready {i}"), None)
                .await;
        }
        contract::Scene {
            tag: tag.to_string(),
            src: src_id,
            dlq: dlq_id,
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        let name = format!("{}-{tag}", self.prefix);
        let url = self.raw.create(&name, &[]).await;
        let id = QueueId::new(name);
        self.remember(&id, &url);
        id
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        let url = self.url(&scene.dlq);
        for i in 0..n {
            self.raw
                .send(&url, &format!("{} late {i}", scene.tag), None)
                .await;
        }
    }

    async fn cleanup(&self) {
        let urls = std::mem::take(&mut *self.created.lock().unwrap());
        for url in urls {
            let _ = self.raw.sqs.delete_queue().queue_url(url).send().await;
        }
    }
}

contract_tests!(
    setup = SqsFixture::setup(),
    ignore = "needs QDECK_TEST_SQS_ENDPOINT",
);

/// `ls PATTERN` on SQS: the pattern's literal prefix narrows ListQueues (QueueNamePrefix,
/// inside the profile's own prefix), and attributes (one call per queue) are read only for
/// the queues that match.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn pattern_narrows_the_listing_before_any_attribute_is_read() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (_src, _dlq) = r
        .pair(&format!("{p}-orders"), &format!("{p}-zdlq"), 3, false)
        .await;
    for n in ["orders-2", "mail-1", "mail-2"] {
        r.create(&format!("{p}-{n}"), &[]).await;
    }
    let b = qdeck(&ep, &p).await;
    let attrs = |b: &Arc<dyn Backend>| {
        b.api_calls()
            .snapshot()
            .get("sqs:GetQueueAttributes")
            .copied()
            .unwrap_or(0)
    };
    let re = regex::Regex::new(&format!("^{p}-orders")).unwrap();
    let got = b
        .list_queues_matching(&qdeck_backend::QueueFilter::new(re))
        .await
        .unwrap();
    let mut names: Vec<&str> = got.iter().map(|q| q.id.as_str()).collect();
    names.sort();
    assert_eq!(names, [format!("{p}-orders"), format!("{p}-orders-2")]);
    assert_eq!(attrs(&b), 2, "attributes of the two matches only");
    let src = got
        .iter()
        .find(|q| q.id.as_str() == format!("{p}-orders"))
        .unwrap();
    assert_eq!(
        src.dlq.as_ref().map(|d| d.as_str().to_string()),
        Some(format!("{p}-zdlq"))
    );
    // A pattern outside the profile's prefix cannot match anything: no call at all.
    let before = b.api_calls().total();
    let none = b
        .list_queues_matching(&qdeck_backend::QueueFilter::new(
            regex::Regex::new("^elsewhere").unwrap(),
        ))
        .await
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(b.api_calls().total(), before);
    // An unanchored pattern is filtered here, with the same answer as the whole listing.
    let all = b.list_queues().await.unwrap();
    let re = regex::Regex::new("mail").unwrap();
    let got = b
        .list_queues_matching(&qdeck_backend::QueueFilter::new(re.clone()))
        .await
        .unwrap();
    assert_eq!(
        got.len(),
        all.iter().filter(|q| re.is_match(q.id.as_str())).count()
    );
    assert_eq!(got.len(), 2);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn delete_ids_removes_only_the_chosen_messages() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let url = r.create(&format!("{p}-del"), &[]).await;
    for i in 0..10 {
        r.send(&url, &format!("m{i}"), None).await;
    }
    let b = qdeck(&ep, &p).await;
    assert!(b.deleter().is_some());
    let id = QueueId(format!("{p}-del"));
    let page = b
        .browse(
            &id,
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .expect("browse");
    assert_eq!(page.messages.len(), 10);
    let chosen: Vec<&Message> = page.messages.iter().skip(1).step_by(4).collect();
    assert_eq!(chosen.len(), 3);
    let mut ids: Vec<String> = chosen.iter().map(|m| m.id.clone()).collect();
    ids.push("00000000-0000-0000-0000-000000000000".to_string());
    let rep = b
        .deleter()
        .expect("deletes by id")
        .delete_ids(&id, &ids, &OpProgress::detached())
        .await
        .expect("delete_ids");
    assert_eq!((rep.deleted, rep.missing, rep.leased), (3, 1, 0), "{rep:?}");
    assert!(!rep.cancelled);
    let st = stats_of(&b, &[id.as_str()]).await;
    assert_eq!(
        st[id.as_str()].depth,
        Some(7),
        "the others are visible again"
    );
    assert_eq!(st[id.as_str()].in_flight, Some(0));
    let left: Vec<String> = drain(&r, &url).await.into_iter().map(|(b, _)| b).collect();
    assert_eq!(left.len(), 7);
    for m in chosen {
        let body = String::from_utf8_lossy(&m.body).to_string();
        assert!(!left.contains(&body), "{body} was deleted");
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn delete_ids_refuses_a_queue_that_dead_letters() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    let (src, _dlq) = r
        .pair(&format!("{p}-src"), &format!("{p}-dlq"), 3, false)
        .await;
    r.send(&src, "keep", None).await;
    let b = qdeck(&ep, &p).await;
    let info = b
        .describe(&QueueId(format!("{p}-src")))
        .await
        .expect("describe");
    assert!(
        b.deleter()
            .expect("deletes by id")
            .delete_refusal(&info)
            .is_some(),
        "edit and purge --where stop up front"
    );
    let err = b
        .deleter()
        .expect("deletes by id")
        .delete_ids(
            &QueueId(format!("{p}-src")),
            &["x".to_string()],
            &OpProgress::detached(),
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, BackendError::Refused(_)), "{err}");
    assert_eq!(
        drain(&r, &src).await.len(),
        1,
        "nothing received or deleted"
    );
}

/// A plain reqwest client; qdeck's build has no TLS provider of reqwest's own, so install it.
fn http_client() -> reqwest::Client {
    qdeck_backend::tls::install_provider();
    reqwest::Client::new()
}

/// `send_many` on SQS: ten messages a SendMessageBatch call (no SendMessage), a body SQS
/// cannot carry (not UTF-8) answered alone without stopping the others, and on a FIFO queue
/// every message arrives with its group.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn send_many_batches_ten_a_call_and_refuses_only_the_bad_entry() {
    let ep = require_endpoint();
    let p = prefix();
    let r = raw(&ep).await;
    r.create(&format!("{p}-batch"), &[]).await;
    r.create(
        &format!("{p}-batch.fifo"),
        &[(QueueAttributeName::FifoQueue, "true".to_string())],
    )
    .await;
    let b = qdeck(&ep, &p).await;
    let msg = |i: usize| OutgoingMessage {
        body: format!("batch {i}").into_bytes(),
        key: Some(format!("g{}", i % 3)),
        headers: vec![("x-seq".to_string(), i.to_string().into())],
        ..Default::default()
    };
    let mut msgs: Vec<OutgoingMessage> = (0..25).map(msg).collect();
    msgs[12].body = vec![0xff, 0xfe, 0x00];
    let q = QueueId::new(format!("{p}-batch"));
    let before = b.api_calls().snapshot();
    let answers = b
        .sender()
        .expect("this backend publishes")
        .send_many(&q, msgs)
        .await;
    assert_eq!(answers.len(), 25, "one answer per message");
    for (i, a) in answers.iter().enumerate() {
        match (i, a) {
            (12, Err(BackendError::Invalid(why))) => assert!(why.contains("UTF-8"), "{why}"),
            (12, other) => panic!("the binary body was not refused: {other:?}"),
            (_, Ok(Some(_))) => {}
            (_, other) => panic!("message {i}: {other:?}"),
        }
    }
    let after = b.api_calls().snapshot();
    let calls =
        |op: &str| after.get(op).copied().unwrap_or(0) - before.get(op).copied().unwrap_or(0);
    assert_eq!(
        calls("sqs:SendMessageBatch"),
        3,
        "24 entries, ten a call: {after:?}"
    );
    assert_eq!(calls("sqs:SendMessage"), 0, "{after:?}");
    assert_eq!(b.count(&q).await.expect("count").ready, 24);

    let fifo = QueueId::new(format!("{p}-batch.fifo"));
    let answers = b
        .sender()
        .expect("this backend publishes")
        .send_many(&fifo, (0..12).map(msg).collect())
        .await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(b.count(&fifo).await.expect("count").ready, 12);
}
