//! Service Bus over AMQP 1.0 against the AMQP stand-in (`scripts/sb_standin.sh`, built on
//! python-qpid-proton and held to Microsoft's client by tests/servicebus_amqp_scene.rs), with
//! Microsoft's own `azure-servicebus` client making the scenes and reading back what qdeck did
//! (tests/fixtures/sb_amqp_client/sb_client.py). Verified against the stand-in, not Azure.
//!
//! Needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON (a Python with azure-servicebus and
//! python-qpid-proton); `.ci/run` sets both. Each test starts its own stand-in on a free port.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
mod contract;
#[path = "servicebus_amqp_long/mod.rs"]
mod long_run;
#[path = "servicebus_standin/mod.rs"]
mod rest_standin;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qdeck_backend::{build_with, Backend, BackendError, OpProgress};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::{Profile, ProfileKind, SbTransport, ServicebusSettings};
use qdeck_model::domain::*;
use serde_json::Value as Json;

use common::sb_standin::{free_port, SbStandin};

/// The stand-in, with the profile and backend qdeck reaches it with.
pub struct Standin(SbStandin);

impl std::ops::Deref for Standin {
    type Target = SbStandin;
    fn deref(&self) -> &SbStandin {
        &self.0
    }
}

impl Standin {
    /// Start with these `--queue` specs (`NAME[,max-delivery=N][,sessions][,lock=S]`).
    pub fn start(queues: &[String]) -> Standin {
        Self::start_with_faults(queues, "")
    }

    /// Start with QDECK_SB_STANDIN_FAULT set to `faults` (see faults.py; "" for none).
    pub fn start_with_faults(queues: &[String], faults: &str) -> Standin {
        let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
        Standin(SbStandin::launch(&queues, &[], faults))
    }

    pub fn profile(&self, name: &str) -> Profile {
        Profile {
            name: name.into(),
            kind: ProfileKind::Servicebus(ServicebusSettings {
                connection_string_env: "QDECK_TEST_SB_CS".into(),
                topics: Some(false),
                transport: Some(SbTransport::Amqp),
                management_url: Some(self.mgmt.clone()),
                ..Default::default()
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

    pub async fn backend_with(&self, cs: &str) -> Result<Arc<dyn Backend>, BackendError> {
        let secrets = SecretMap::new().with("QDECK_TEST_SB_CS", cs);
        build_with(&self.profile("sb-amqp"), &secrets).await
    }

    pub async fn backend(&self) -> Arc<dyn Backend> {
        self.backend_with(&self.conn).await.expect("backend")
    }
}

/// Every message of `queue`'s DLQ back to where it came from, `window` at a time.
fn redrive_all(queue: &str, window: Option<u32>) -> RedriveRequest {
    RedriveRequest {
        source: dlq(queue),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window,
    }
}

fn q(s: &str) -> QueueId {
    QueueId::new(s)
}

fn dlq(s: &str) -> QueueId {
    QueueId::new(format!("{s}/$DeadLetterQueue"))
}

fn req(max: usize) -> BrowseRequest {
    BrowseRequest {
        cursor: None,
        max,
        force: false,
    }
}

// --- the contract suite on the AMQP path -------------------------------------------------

/// Queues made at start: the stand-in takes its queues on the command line, so each scene
/// takes the next one of a pool.
const POOL: usize = 6;

struct AmqpFixture {
    s: Standin,
    backend: Arc<dyn Backend>,
    next: Mutex<usize>,
}

impl AmqpFixture {
    async fn setup() -> Self {
        let specs: Vec<String> = (0..POOL)
            .map(|i| format!("pool{i},max-delivery=10,lock=30"))
            .collect();
        let s = Standin::start(&specs);
        let backend = s.backend().await;
        AmqpFixture {
            s,
            backend,
            next: Mutex::new(0),
        }
    }

    fn take(&self) -> String {
        let mut n = self.next.lock().unwrap();
        assert!(*n < POOL, "the scene needs more than {POOL} queues");
        *n += 1;
        format!("pool{}", *n - 1)
    }
}

impl contract::Fixture for AmqpFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let name = self.take();
        if dead > 0 {
            let got = self.s.client(&["dead", &name, tag, &dead.to_string()]);
            assert_eq!(got["dead"], dead, "{got}");
        }
        let msgs = (0..ready)
            .map(|i| OutgoingMessage {
                body: format!("{tag} ready {i}").into_bytes(),
                ..Default::default()
            })
            .collect();
        let sent = self
            .backend
            .sender()
            .expect("this backend publishes")
            .send_many(&q(&name), msgs)
            .await;
        assert!(sent.iter().all(Result::is_ok), "{sent:?}");
        contract::Scene {
            tag: tag.to_string(),
            src: q(&name),
            dlq: dlq(&name),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, _tag: &str) -> QueueId {
        q(&self.take())
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        let tag = format!("{}-late", scene.tag);
        self.s
            .client(&["dead", scene.src.as_str(), &tag, &n.to_string()]);
    }

    /// The stand-in lives and dies with the fixture.
    async fn cleanup(&self) {}
}

contract_tests!(setup = AmqpFixture::setup(), ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton");

// --- AMQP-specific behaviour ---------------------------------------------------------------

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn peek_leaves_delivery_counts_and_locks_alone() {
    let s = Standin::start(&["jobs,max-delivery=2,lock=30".into()]);
    let b = s.backend().await;
    assert_eq!(b.capabilities().browse, BrowseEffect::None);
    let sent = b
        .sender()
        .unwrap()
        .send_many(
            &q("jobs"),
            (0..5)
                .map(|i| OutgoingMessage::text(format!("job {i}"), &[("n", "x")]))
                .collect(),
        )
        .await;
    assert!(sent.iter().all(Result::is_ok));
    // Five peeks of an active queue whose MaxDeliveryCount is 2: a lock-and-unlock browse
    // would have dead-lettered every message by the third.
    let mut first = Vec::new();
    for round in 0..5 {
        let page = b.browse(&q("jobs"), &req(10)).await.unwrap();
        assert_eq!(page.messages.len(), 5, "round {round}");
        let counts: Vec<Option<u64>> = page.messages.iter().map(|m| m.receive_count).collect();
        if round == 0 {
            first = counts;
        } else {
            assert_eq!(counts, first, "delivery counts changed by a peek");
        }
    }
    assert_eq!(b.count(&q("jobs")).await.unwrap().ready, 5);
    assert_eq!(b.count(&dlq("jobs")).await.unwrap().ready, 0);
    // Microsoft's client receives each message at once (nothing is locked) and on its first
    // delivery.
    let got = s.client(&["read", "jobs", "5"]);
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "{got}");
    for m in msgs {
        assert!(m["delivery_count"].as_u64().unwrap_or(0) <= 1, "{m}");
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn peek_pages_through_a_dead_letter_queue_by_sequence_number() {
    let s = Standin::start(&["deep,max-delivery=10".into()]);
    let b = s.backend().await;
    s.client(&["dead", "deep", "deep", "120"]);
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = b
            .browse(
                &dlq("deep"),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 50,
                    force: false,
                },
            )
            .await
            .unwrap();
        assert!(page.messages.len() <= 50);
        seen.extend(page.messages);
        match page.next {
            Some(c) if !seen.is_empty() => cursor = Some(c),
            _ => break,
        }
    }
    assert_eq!(seen.len(), 120);
    let seqs: Vec<i64> = seen.iter().map(|m| m.seq.unwrap()).collect();
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(seqs, sorted, "in sequence order, each once");
    let m = &seen[0];
    let dl = m.dead_letter.as_ref().unwrap();
    assert_eq!(dl.reason.as_deref(), Some("MaxDeliveryCountExceeded"));
    assert_eq!(dl.origin, Some(q("deep")));
    assert_eq!(
        m.field_text("ContentType").as_deref(),
        Some("application/json")
    );
    assert_eq!(m.field_text("Label").as_deref(), Some("order-created"));
    assert_eq!(
        m.headers
            .iter()
            .find(|(k, _)| k == "attempt")
            .map(|(_, v)| v.clone()),
        // Python's client sends a small int as an AMQP int.
        Some(Value::I32(3))
    );
    assert_eq!(b.count(&dlq("deep")).await.unwrap().ready, 120);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn a_wrong_key_a_foreign_token_and_an_unreachable_host_are_one_line_errors() {
    let s = Standin::start(&["q1".into()]);
    let wrong = s.conn.replace("SharedAccessKey=", "SharedAccessKey=AAAA");
    let b = s.backend_with(&wrong).await.expect("built lazily");
    let e = b.browse(&q("q1"), &req(5)).await.unwrap_err();
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    let text = e.to_string();
    assert!(!text.contains('\n') && text.contains("rejected"), "{text}");
    assert!(!text.contains("AAAA"), "the key is not echoed: {text}");

    // A token for another entity: the broker refuses to put it for q1's audience. (A key
    // without the Send or Listen right is refused at the link instead, naming the claim:
    // long_run::a_missing_claim_is_named_in_one_line_by_the_cli.)
    let key = s
        .conn
        .split("SharedAccessKey=")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let endpoint = s.conn.split(';').next().unwrap();
    let host = endpoint
        .trim_start_matches("Endpoint=sb://")
        .trim_end_matches('/');
    let token = qdeck_backend::servicebus::connstr::sas_token(
        &format!("sb://{host}/elsewhere"),
        "RootManageSharedAccessKey",
        key,
        qdeck_backend::servicebus::connstr::unix_now() + 600,
    );
    let scoped = format!("{endpoint};SharedAccessSignature={token};UseDevelopmentEmulator=true");
    let b = s.backend_with(&scoped).await.expect("built lazily");
    let e = b
        .sender()
        .unwrap()
        .send(&q("q1"), OutgoingMessage::text("x", &[]))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    assert!(
        !text.contains('\n') && text.contains("q1") && text.contains("$cbs"),
        "{text}"
    );
    assert!(!text.contains("sig="), "the token is not echoed: {text}");

    let port = free_port();
    let dead = s.conn.replace(
        &s.conn[s.conn.find("127.0.0.1:").unwrap()..s.conn.find(';').unwrap()],
        &format!("127.0.0.1:{port}"),
    );
    let b = s.backend_with(&dead).await.expect("built lazily");
    let e = b.browse(&q("q1"), &req(5)).await.unwrap_err();
    assert!(matches!(e, BackendError::Unreachable(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        !text.contains('\n') && text.contains(&port.to_string()),
        "{text}"
    );
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn scheduled_messages_are_listed_and_one_is_cancelled() {
    let s = Standin::start(&["later".into()]);
    let b = s.backend().await;
    let got = s.client(&["schedule", "later", "3", "3600"]);
    let seqs: Vec<i64> = got["sequence_numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 3, "{got}");
    let page = b
        .scheduled()
        .unwrap()
        .browse_scheduled(&q("later"), &req(10))
        .await
        .unwrap();
    let ids: Vec<String> = page.messages.iter().map(|m| m.id.clone()).collect();
    let want: Vec<String> = seqs.iter().map(i64::to_string).collect();
    assert_eq!(ids, want, "listed under their sequence numbers");
    for m in &page.messages {
        assert!(m.field_text("ScheduledEnqueueTimeUtc").is_some(), "{m:?}");
        assert_eq!(m.field_text("State").as_deref(), Some("Scheduled"));
        assert!(m.field_text("due-at").is_some());
    }
    let r = b
        .scheduled()
        .unwrap()
        .cancel_scheduled(&q("later"), &want[1], &OpProgress::detached())
        .await
        .unwrap();
    assert_eq!(r.deleted, 1);
    let left: Vec<String> = b
        .scheduled()
        .unwrap()
        .browse_scheduled(&q("later"), &req(10))
        .await
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(left, vec![want[0].clone(), want[2].clone()]);
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn redriven_copies_read_back_the_same_with_microsofts_client() {
    let s = Standin::start(&["orders,max-delivery=10".into()]);
    let b = s.backend().await;
    s.client(&["dead", "orders", "fid", "4"]);
    let peeked = b.browse(&dlq("orders"), &req(10)).await.unwrap().messages;
    assert_eq!(peeked.len(), 4);
    let report = b
        .redrive(&redrive_all("orders", None), &OpProgress::detached())
        .await
        .unwrap();
    assert_eq!(
        (report.moved, report.failed, report.possibly_duplicated),
        (4, 0, 0),
        "{report:?}"
    );
    let got = s.client(&["read", "orders", "4"]);
    let msgs = got["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4, "{got}");
    for m in msgs {
        let id = m["message_id"].as_str().unwrap();
        let i: usize = id.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(m["body"], format!("{{\"order\": {i}}}"), "{m}");
        assert_eq!(m["content_type"], "application/json");
        assert_eq!(m["correlation_id"], format!("corr-{i}"));
        assert_eq!(m["subject"], "order-created");
        assert_eq!(
            m["session_id"],
            format!("s{}", i % 2),
            "SessionId kept: {m}"
        );
        let p = &m["application_properties"];
        assert_eq!(
            p["tenant"],
            serde_json::json!(["str", format!("t{}", i % 3)]),
            "{m}"
        );
        assert_eq!(p["attempt"], serde_json::json!(["int", 3]), "{m}");
        assert_eq!(p["ratio"], serde_json::json!(["float", 0.5]), "{m}");
        assert_eq!(
            p["urgent"],
            serde_json::json!(["bool", i.is_multiple_of(2)]),
            "{m}"
        );
        assert_eq!(p["x-qdeck-redriven"], serde_json::json!(["int", 1]), "{m}");
        assert!(
            p.get("DeadLetterReason").is_none(),
            "the dead-letter record stays behind: {m}"
        );
    }
    assert_eq!(b.count(&dlq("orders")).await.unwrap().ready, 0);
}

/// `qdeck peek --scheduled` and `qdeck cancel-scheduled` as a user runs them: the listing shows
/// sequence numbers; cancelling needs access = "full" (a "redrive" profile is refused and
/// audited), asks for confirmation unless `-y`, and leaves one audit line.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn cli_cancel_scheduled_is_tier_full_confirmed_and_audited() {
    let s = Standin::start(&["later".into()]);
    let got = s.client(&["schedule", "later", "2", "3600"]);
    let seq = got["sequence_numbers"][0].as_i64().unwrap().to_string();
    let env = common::cli_env::CliEnv::new();
    let profile = |name: &str, access: &str| {
        format!(
            "[[profiles]]\nname = \"{name}\"\nkind = \"servicebus\"\nconnection_string_env = \"QDECK_SB_CS\"\ntransport = \"amqp\"\nmanagement_url = \"{}\"\ntopics = false\naccess = \"{access}\"\n",
            s.mgmt
        )
    };
    let cfg = env.dir.path().join("config/qdeck/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "default_profile = \"ops\"\n{}{}",
            profile("ops", "full"),
            profile("oncall", "redrive")
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        env.qdeck()
            .env("QDECK_SB_CS", &s.conn)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["peek", "later", "--scheduled", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Json> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], seq.as_str());

    let refused = run(&["-p", "oncall", "cancel-scheduled", "later", &seq, "-y"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("full"), "{err}");

    let done = run(&["cancel-scheduled", "later", &seq, "-y"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let out = run(&["peek", "later", "--scheduled", "-o", "json"]);
    let listed: Vec<Json> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), 1, "one cancelled, one left");
    assert_ne!(listed[0]["id"], seq.as_str());

    let audit = std::fs::read_to_string(env.dir.path().join("state/qdeck/audit.log")).unwrap();
    let lines: Vec<Json> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cancel = lines
        .iter()
        .find(|l| l.to_string().contains("cancel_scheduled") && l["profile"] == "ops")
        .unwrap_or_else(|| panic!("an audit line for the cancel: {audit}"));
    assert!(cancel.to_string().contains(&seq), "{cancel}");
    assert!(
        lines.iter().any(|l| l["profile"] == "oncall"),
        "the refusal is audited too: {audit}"
    );
}

/// A session-enabled queue is no longer refused: its sessions are listed with their counts
/// and state, one session is peeked alone, `--where session = …` picks by SessionId, and a
/// purge empties it session by session.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn session_queues_are_browsed_listed_and_purged() {
    let s = Standin::start(&["chats,sessions".into()]);
    let b = s.backend().await;
    s.client(&["sessions", "chats", "a=2,b=3"]);
    let info = b.describe(&q("chats")).await.unwrap();
    assert_eq!(b.capabilities_for(&info).browse, BrowseEffect::None);
    let all = b.browse(&q("chats"), &req(10)).await.unwrap().messages;
    assert_eq!(all.len(), 5);
    let pred = qdeck_engine::triage::predicate::Predicate::parse(r#"session = "b""#).unwrap();
    let ctx = qdeck_engine::triage::predicate::EvalContext {
        now_ms: now_ms(),
        signature: Default::default(),
    };
    assert_eq!(all.iter().filter(|m| pred.matches(m, &ctx)).count(), 3);
    let sessions = qdeck_backend::sessions_of(b.as_ref()).unwrap();
    let list = sessions.sessions(&q("chats")).await.unwrap();
    let got: Vec<(String, Option<u64>)> = list.iter().map(|x| (x.id.clone(), x.messages)).collect();
    assert_eq!(got, vec![("a".into(), Some(2)), ("b".into(), Some(3))]);
    assert_eq!(list[0].state, b"st-a".to_vec());
    let only_b = sessions
        .browse_session(&q("chats"), "b", &req(10))
        .await
        .unwrap()
        .messages;
    assert_eq!(only_b.len(), 3);
    assert!(only_b.iter().all(|m| m.key.as_deref() == Some("b")));
    let r = b.purge(&q("chats"), &OpProgress::detached()).await.unwrap();
    assert_eq!(r.purged, Some(5), "{r:?}");
    assert!(b
        .browse(&q("chats"), &req(10))
        .await
        .unwrap()
        .messages
        .is_empty());
}

/// Deferred messages show in a peek with their state, and a chosen one is completed (taken by
/// sequence number: no receiver gets it otherwise).
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn deferred_messages_are_listed_and_completed_by_sequence_number() {
    let s = Standin::start(&["work".into()]);
    let b = s.backend().await;
    let got = s.client(&["defer", "work", "2"]);
    let seqs: Vec<String> = got["sequence_numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap().to_string())
        .collect();
    let page = b.browse(&q("work"), &req(10)).await.unwrap().messages;
    assert_eq!(page.len(), 2);
    assert!(page
        .iter()
        .all(|m| m.field_text("State").as_deref() == Some("Deferred")));
    // Deleting chosen messages of an active queue is refused (it would raise the others'
    // delivery counts), except when every one is deferred: those are taken by number alone.
    let d = b.deleter().unwrap();
    let r = d
        .delete_ids(&q("work"), &[seqs[0].clone()], &OpProgress::detached())
        .await
        .unwrap();
    assert_eq!((r.deleted, r.missing), (1, 0), "{r:?}");
    let left = b.browse(&q("work"), &req(10)).await.unwrap().messages;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].seq.unwrap().to_string(), seqs[1]);
}

/// Benchmark, not a check (run by hand; figures on stderr): peeking 5,000 dead letters with
/// qdeck over AMQP, with Microsoft's client's `peek_messages` loop on the same stand-in, and
/// today's REST browse of the same number on the REST stand-in (which stops at its first 500:
/// its time is given for those and per message).
///
/// `QDECK_TEST_SB_AMQP=1 QDECK_TEST_PYTHON=… cargo test --release --test servicebus_amqp -- --ignored manual_peek_benchmark --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "manual benchmark: needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON"]
async fn manual_peek_benchmark() {
    const N: usize = 5_000;
    let s = Standin::start(&["bench,max-delivery=10".into()]);
    let b = s.backend().await;
    let seeded = s.client(&["dead", "bench", "bench", &N.to_string()]);
    assert_eq!(seeded["dead"], N);

    let started = std::time::Instant::now();
    let mut seen = 0usize;
    let mut cursor = None;
    while seen < N {
        let page = b
            .browse(
                &dlq("bench"),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 1000,
                    force: false,
                },
            )
            .await
            .unwrap();
        seen += page.messages.len();
        match page.next {
            Some(c) if !page.messages.is_empty() => cursor = Some(c),
            _ => break,
        }
    }
    let qdeck_secs = started.elapsed().as_secs_f64();
    assert_eq!(seen, N);
    let py = s.client(&["peek-bench", "bench", &N.to_string()]);
    let py_secs = py["seconds"].as_f64().unwrap();
    assert_eq!(py["seen"], N);

    let rest = rest_standin::StandIn::start().await;
    rest.create_queue("bench", 10, 30);
    for i in 0..N {
        rest.seed_dlq(
            "bench",
            rest_standin::new_msg(format!("{{\"order\":{i}}}").as_bytes()),
            "Poison",
        );
    }
    let rb = common::servicebus_backend("rest", &rest.manage_conn_str(), Some(false))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest_seen = 0usize;
    let mut cursor = None;
    loop {
        let page = rb
            .browse(
                &dlq("bench"),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 1000,
                    force: false,
                },
            )
            .await;
        let Ok(page) = page else { break };
        rest_seen += page.messages.len();
        match page.next {
            Some(c) if !page.messages.is_empty() => cursor = Some(c),
            _ => break,
        }
    }
    let rest_secs = started.elapsed().as_secs_f64();
    let per = |secs: f64, n: usize| secs / n as f64 * 1000.0;
    eprintln!(
        "peek of {N} DLQ messages: qdeck AMQP {qdeck_secs:.2} s ({:.3} ms/msg); azure-servicebus peek_messages {py_secs:.2} s ({:.3} ms/msg); \
         qdeck REST browse reached {rest_seen} in {rest_secs:.2} s ({:.3} ms/msg)",
        per(qdeck_secs, N),
        per(py_secs, N),
        per(rest_secs, rest_seen.max(1)),
    );
    eprintln!(
        "ratios: python/qdeck-amqp {:.2}x; rest-per-msg/amqp-per-msg {:.2}x",
        py_secs / qdeck_secs,
        per(rest_secs, rest_seen.max(1)) / per(qdeck_secs, N)
    );

    // Redrive: qdeck's 5,000 back to their origin; Microsoft's client doing receive → send →
    // complete on another 5,000.
    let started = std::time::Instant::now();
    let report = b
        .redrive(&redrive_all("bench", None), &OpProgress::detached())
        .await
        .unwrap();
    let qdeck_redrive = started.elapsed().as_secs_f64();
    assert_eq!(report.moved, N as u64, "{report:?}");
    drop(s);
    let s = Standin::start(&["benchp,max-delivery=10".into()]);
    s.client(&["dead", "benchp", "benchp", &N.to_string()]);
    let py = s.client(&["redrive-bench", "benchp", &N.to_string()]);
    assert_eq!(py["moved"], N);
    let py_redrive = py["seconds"].as_f64().unwrap();
    eprintln!(
        "redrive of {N}: qdeck AMQP {qdeck_redrive:.2} s ({:.0} msg/s); azure-servicebus receive→send→complete {py_redrive:.2} s ({:.0} msg/s); qdeck rate / python rate {:.2}x",
        N as f64 / qdeck_redrive,
        N as f64 / py_redrive,
        py_redrive / qdeck_redrive
    );
}

/// The transfer dead-letter queue becomes a row while it holds messages; it is peeked and
/// redriven like the ordinary one.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn the_transfer_dead_letter_queue_is_a_row_while_it_holds_messages() {
    let s = Standin::start(&["fwd".into()]);
    let b = s.backend().await;
    let tdlq = q("fwd/$Transfer/$DeadLetterQueue");
    let listed = |l: &[QueueInfo]| l.iter().any(|i| i.id == tdlq);
    assert!(
        !listed(&b.list_queues().await.unwrap()),
        "no row while empty"
    );
    let sent = b
        .sender()
        .unwrap()
        .send_many(
            &q("fwd"),
            (0..3)
                .map(|i| OutgoingMessage::text(format!("m{i}"), &[]))
                .collect(),
        )
        .await;
    assert!(sent.iter().all(Result::is_ok));
    // Nothing on the AMQP side puts messages there: the stand-in's test hook does.
    let key = s
        .conn
        .split("SharedAccessKey=")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let token = qdeck_backend::servicebus::connstr::sas_token(
        &s.mgmt,
        "RootManageSharedAccessKey",
        key,
        qdeck_backend::servicebus::connstr::unix_now() + 600,
    );
    qdeck_backend::tls::install_provider();
    let moved = reqwest::Client::new()
        .post(format!(
            "{}/$standin/transfer-dead-letter?entity=fwd&count=2",
            s.mgmt.trim_end_matches('/')
        ))
        .header("Authorization", token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(moved.trim(), "2");
    let list = b.list_queues().await.unwrap();
    let row = list.iter().find(|i| i.id == tdlq).expect("a row now");
    assert!(row.is_dlq);
    assert_eq!(row.dlq_sources, vec![q("fwd")]);
    assert_eq!(b.count(&tdlq).await.unwrap().ready, 2);
    let peeked = b.browse(&tdlq, &req(10)).await.unwrap().messages;
    assert_eq!(peeked.len(), 2);
    let report = b
        .redrive(
            &RedriveRequest {
                source: tdlq.clone(),
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
    assert_eq!(report.moved, 2, "{report:?}");
    assert_eq!(b.count(&q("fwd")).await.unwrap().ready, 3);
}

/// Every message of a DLQ, by id, over every page (a peek sees locked messages too).
/// The CLI's config: one profile `sb` on the stand-in, its connection string in QDECK_SB_CS.
fn write_cli_config(env: &common::cli_env::CliEnv, s: &Standin) {
    let cfg = env.dir.path().join("config/qdeck/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "default_profile = \"sb\"\n[[profiles]]\nname = \"sb\"\nkind = \"servicebus\"\nconnection_string_env = \"QDECK_SB_CS\"\nmanagement_url = \"{}\"\ntopics = false\n",
            s.mgmt
        ),
    )
    .unwrap();
}

async fn ids_in(b: &dyn Backend, queue: &QueueId) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = b
            .browse(
                queue,
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 500,
                    force: false,
                },
            )
            .await
            .unwrap();
        let n = page.messages.len();
        out.extend(page.messages.into_iter().map(|m| m.id));
        match page.next {
            Some(c) if n > 0 => cursor = Some(c),
            _ => return out,
        }
    }
}

/// kill -9 of `qdeck redrive` half-way, three times: every dead letter is afterwards in the
/// DLQ, in the origin, or (copied but not yet completed, at most one window) in both; none
/// is lost. The locks the killed process held expire and its messages come back.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn kill_9_during_a_redrive_loses_nothing() {
    const N: usize = 600;
    let s = Standin::start(&["crash,max-delivery=10,lock=2".into()]);
    let b = s.backend().await;
    s.client(&["dead", "crash", "crash", &N.to_string()]);
    let env = common::cli_env::CliEnv::new();
    write_cli_config(&env, &s);
    let all: std::collections::BTreeSet<String> = (0..N).map(|i| format!("crash-{i}")).collect();
    for round in 0..3 {
        let mut child = env
            .process()
            .env("QDECK_SB_CS", &s.conn)
            .args([
                "redrive",
                "crash/$DeadLetterQueue",
                "--rate",
                "150",
                "--yes",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        // SIGKILL: the process gets no chance to abandon or finish anything.
        child.kill().unwrap();
        child.wait().unwrap();
        // Locks of the killed receiver run out (LockDuration 2 s) before counting.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let in_dlq = ids_in(b.as_ref(), &dlq("crash")).await;
        let in_origin = ids_in(b.as_ref(), &q("crash")).await;
        let seen: std::collections::BTreeSet<String> =
            in_dlq.iter().chain(in_origin.iter()).cloned().collect();
        let lost: Vec<&String> = all.difference(&seen).collect();
        assert!(lost.is_empty(), "round {round}: lost {lost:?}");
        let both = in_dlq.iter().filter(|i| in_origin.contains(i)).count();
        eprintln!(
            "round {round}: DLQ {}, origin {}, in both (duplicated by the kill) {both}",
            in_dlq.len(),
            in_origin.len()
        );
        assert!(
            !in_origin.is_empty(),
            "round {round}: the redrive got going"
        );
        assert!(
            both <= 100 * (round + 1),
            "at most one window per kill: {both}"
        );
    }
}

/// The reasons scan and a `--where` dry run read the active queue and its DLQ by peek: they
/// group and count every message, and no delivery count moves.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn reasons_and_where_dry_runs_peek() {
    let s = Standin::start(&["triage,max-delivery=10".into()]);
    let b = s.backend().await;
    s.client(&["dead", "triage", "poison", "3", "PoisonMessage"]);
    s.client(&["dead", "triage", "late", "2", "TTLExpired"]);
    let counts = |page: Vec<Message>| page.iter().map(|m| m.receive_count).collect::<Vec<_>>();
    let before = counts(b.browse(&dlq("triage"), &req(50)).await.unwrap().messages);
    let env = common::cli_env::CliEnv::new();
    write_cli_config(&env, &s);
    let run = |args: &[&str]| {
        let out = env
            .qdeck()
            .env("QDECK_SB_CS", &s.conn)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let v: Json =
        serde_json::from_slice(&run(&["reasons", "triage/$DeadLetterQueue", "-o", "json"]))
            .unwrap();
    let mut groups: Vec<(String, u64)> = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["signature"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(groups.len(), 2, "{v}");
    assert!(
        groups[0].0.starts_with("PoisonMessage") && groups[0].1 == 3,
        "{groups:?}"
    );
    assert!(
        groups[1].0.starts_with("TTLExpired") && groups[1].1 == 2,
        "{groups:?}"
    );
    let dry = run(&[
        "redrive",
        "triage/$DeadLetterQueue",
        "--where",
        "reason = \"TTLExpired\"",
        "--dry-run",
        "-o",
        "json",
    ]);
    let dry: Json = serde_json::from_slice(&dry).unwrap();
    assert_eq!(dry["count"], 2, "{dry}");
    assert_eq!(dry["selection"]["scanned"], 5, "{dry}");
    assert_eq!(dry["selection"]["matched"], 2, "{dry}");
    let after = counts(b.browse(&dlq("triage"), &req(50)).await.unwrap().messages);
    assert_eq!(before, after, "the scans changed delivery counts");
    assert_eq!(b.count(&dlq("triage")).await.unwrap().ready, 5);
}

/// `qdeck copy` between session-enabled queues keeps each message's SessionId: Microsoft's
/// client, accepting one session at a time on the target, receives exactly that session's
/// messages; the source is left as it was (a copy peeks, it takes nothing).
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn cli_copy_between_session_queues_keeps_each_session() {
    let s = Standin::start(&[
        "talks,sessions".into(),
        "talks-copy,sessions".into(),
        "plain".into(),
    ]);
    s.client(&["sessions", "talks", "a=2,b=3"]);
    let env = common::cli_env::CliEnv::new();
    write_cli_config(&env, &s);
    let out = env
        .qdeck()
        .env("QDECK_SB_CS", &s.conn)
        .args(["copy", "talks", "--to", "talks-copy", "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (sid, n) in [("a", 2), ("b", 3)] {
        let got = s.client(&["read", "talks-copy", "10", sid]);
        let msgs = got["messages"].as_array().unwrap();
        let mut bodies: Vec<&str> = msgs.iter().map(|m| m["body"].as_str().unwrap()).collect();
        bodies.sort_unstable();
        let want: Vec<String> = (0..n).map(|i| format!("{sid}-{i}")).collect();
        assert_eq!(bodies, want, "session {sid} on the target");
        assert!(msgs.iter().all(|m| m["session_id"] == sid), "{msgs:?}");
    }
    let b = s.backend().await;
    assert_eq!(
        ids_in(b.as_ref(), &q("talks")).await.len(),
        5,
        "the source kept all five"
    );

    // Dead letters without a SessionId cannot go to a session-enabled queue: the broker's
    // refusal is said as one (its condition and text), not as an unreachable broker.
    s.client(&["dead", "plain", "nosession", "1"]);
    let out = env
        .qdeck()
        .env("QDECK_SB_CS", &s.conn)
        .args(["copy", "plain/$DeadLetterQueue", "--to", "talks", "--yes"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("refused") && err.contains("SessionId was not set"),
        "{err}"
    );
    assert!(
        !err.contains("unreachable") && !err.contains("Symbol("),
        "{err}"
    );
}
