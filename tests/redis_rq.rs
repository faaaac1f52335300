//! RQ (python-rq 2.x) on the Redis backend, against a scene RQ itself makes: jobs enqueued
//! by `rq`, run by RQ's own workers, some failing (tests/fixtures/rq).
//!
//! Needs QDECK_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) and QDECK_TEST_PYTHON, a Python
//! with `rq` installed (.ci/run sets both). RQ's key names are fixed (no prefix setting), so
//! each test owns a database, flushed at its start: 8, 9 and 11..15, and the contract cases take
//! database 10 one at a time. tests/redis.rs uses those numbers too, but it is another test
//! binary and cargo runs test binaries one after the other.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod contract;

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redis_db::{db_url, flush, raw, redis_url};
use qdeck_backend::{build, Backend, OpProgress};
use qdeck_model::config::{Profile, ProfileKind, RedisSettings};
use qdeck_model::domain::*;
use serde_json::Value as Json;

fn python() -> String {
    let py = common::broker_var("QDECK_TEST_PYTHON", "a Python with rq installed");
    let ok = Command::new(&py)
        .args(["-c", "import rq"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        common::skip(&format!("{py} cannot import rq (pip install 'rq>=2,<3')"));
    }
    py
}

fn scene_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rq/rq_scene.py")
}

/// Run one scene command; its JSON answer.
fn scene(db: u32, args: &[&str], env: &[(&str, &str)]) -> Json {
    let out = Command::new(python())
        .arg(scene_script())
        .arg(args[0])
        .arg(db_url(db))
        .args(&args[1..])
        .envs(env.iter().copied())
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "rq scene {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| panic!("no JSON answer in {text:?}"))
}

async fn backend(db: u32, flavors: Option<&[&str]>) -> Arc<dyn Backend> {
    let p = Profile {
        name: "rq-test".into(),
        kind: ProfileKind::Redis(RedisSettings {
            url: Some(redis_url()),
            db: Some(db as i64),
            flavors: flavors.map(|f| f.iter().map(ToString::to_string).collect()),
            ..Default::default()
        }),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    };
    build(&p).await.expect("build redis backend")
}

async fn figures(b: &dyn Backend, q: &str) -> QueueStats {
    let batch = b.stats(&[QueueId::new(q)]).await.expect("stats");
    assert!(batch.errors.is_empty(), "{q}: {:?}", batch.errors);
    batch.stats.into_iter().next().expect("figures")
}

async fn page(b: &dyn Backend, q: &str) -> Vec<Message> {
    let req = BrowseRequest {
        max: 100,
        ..Default::default()
    };
    b.browse(&QueueId::new(q), &req)
        .await
        .expect("browse")
        .messages
}

fn meta<'a>(m: &'a Message, k: &str) -> Option<&'a str> {
    m.meta
        .iter()
        .find(|(name, _)| name == k)
        .and_then(|(_, v)| v.as_str())
}

fn n(v: &Json, q: &str, k: &str) -> u64 {
    v[q][k]
        .as_u64()
        .unwrap_or_else(|| panic!("no {q}.{k} in {v}"))
}

async fn redrive_all(b: &dyn Backend, source: &str) -> RedriveReport {
    let (progress, _rx) = OpProgress::new();
    let req = RedriveRequest {
        source: QueueId::new(source),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    b.redrive(&req, &progress).await.expect("redrive")
}

fn progress() -> OpProgress {
    OpProgress::detached()
}

/// qdeck's figures for each queue and its failed registry equal what RQ reports.
async fn assert_figures_agree(b: &dyn Backend, rq: &Json) {
    for q in ["emails", "reports"] {
        let st = figures(b, q).await;
        assert_eq!(st.depth, Some(n(rq, q, "len")), "{q} depth = len(Queue)");
        assert_eq!(st.in_flight, Some(n(rq, q, "started")), "{q} started");
        assert_eq!(
            st.delayed,
            Some(n(rq, q, "scheduled") + n(rq, q, "deferred")),
            "{q} delayed = scheduled + deferred"
        );
        assert_eq!(
            st.dlq_depth,
            Some(n(rq, q, "failed")),
            "{q} = FailedJobRegistry.count"
        );
        assert_eq!(st.oldest_age_secs.is_some(), n(rq, q, "len") > 0, "{q} age");
        let f = figures(b, &format!("{q}/failed")).await;
        assert_eq!(f.depth, Some(n(rq, q, "failed")), "{q}/failed depth");
        assert_eq!(f.oldest_age_secs.is_some(), n(rq, q, "failed") > 0);
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_figures_equal_rq_and_redrive_then_a_fixed_worker_completes_every_job_once() {
    let db = 13;
    flush(db).await;
    scene(db, &["enqueue", "6"], &[]);
    let b = backend(db, None).await;
    let ids: Vec<String> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id.to_string())
        .collect();
    assert_eq!(
        ids,
        ["emails", "emails/failed", "reports", "reports/failed"],
        "RQ detected by its key schema"
    );
    let rq = scene(db, &["counts"], &[]);
    assert_eq!(n(&rq, "emails", "len"), 6);
    assert_figures_agree(b.as_ref(), &rq).await;

    // RQ's own workers run every job: multiples of three fail.
    scene(db, &["work"], &[]);
    let rq = scene(db, &["counts"], &[]);
    assert_eq!(n(&rq, "emails", "failed"), 2);
    assert_eq!(n(&rq, "reports", "failed"), 2);
    assert_figures_agree(b.as_ref(), &rq).await;

    // The failed registry, browsed: the exception as the reason, the pickled call never
    // decoded, the JSON one shown.
    let failed = page(b.as_ref(), "emails/failed").await;
    assert_eq!(failed.len(), 2);
    let mut reasons: Vec<String> = failed
        .iter()
        .map(|m| m.dead_letter.as_ref().unwrap().reason.clone().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "rq_jobs.PoisonError: order 3 rejected: multiple of three",
            "rq_jobs.PoisonError: order 6 rejected: multiple of three"
        ]
    );
    for m in &failed {
        let dl = m.dead_letter.as_ref().unwrap();
        assert_eq!(dl.origin, Some(QueueId::new("emails")));
        assert!(dl.at_ms.is_some(), "ended_at");
        assert!(
            meta(m, "payload").unwrap().starts_with("pickled data, "),
            "{:?}",
            m.meta
        );
        assert!(m.body.is_empty(), "a pickle is never shown decoded");
        assert!(meta(m, "description").unwrap().starts_with("rq_jobs.work("));
        assert!(meta(m, "traceback (full)")
            .unwrap()
            .contains("Traceback (most recent call last)"));
        assert!(meta(m, "started").is_some() && meta(m, "ended").is_some());
    }
    let json_failed = page(b.as_ref(), "reports/failed").await;
    assert_eq!(json_failed.len(), 2);
    for m in &json_failed {
        assert_eq!(meta(m, "function"), Some("rq_jobs.work"));
        let body: Json = serde_json::from_slice(&m.body).expect("JSON call");
        assert_eq!(body[0], "rq_jobs.work");
        assert!(body[2][0].as_u64().unwrap().is_multiple_of(3), "{body}");
    }
    // RQ's scheduled registry is the queue's scheduled view, soonest first.
    let req = BrowseRequest {
        max: 10,
        ..Default::default()
    };
    let due = b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&QueueId::new("emails"), &req)
        .await
        .expect("scheduled")
        .messages;
    let described: Vec<_> = due.iter().map(|m| meta(m, "description")).collect();
    assert_eq!(
        described,
        [Some("rq_jobs.work(1000)"), Some("rq_jobs.work(1001)")]
    );
    assert!(due.iter().all(|m| meta(m, "due-at").is_some()));
    // Browsing changed nothing.
    assert_eq!(scene(db, &["counts"], &[]), rq);

    // Redrive = RQ's requeue: every failed job goes back to its origin queue.
    for q in ["emails", "reports"] {
        let report = redrive_all(b.as_ref(), &format!("{q}/failed")).await;
        assert_eq!((report.moved, report.failed), (2, 0), "{q}: {report:?}");
    }
    let rq = scene(db, &["counts"], &[]);
    assert_eq!(n(&rq, "emails", "failed"), 0);
    assert_eq!(n(&rq, "emails", "len"), 2);
    assert_eq!(n(&rq, "reports", "len"), 2);
    assert_figures_agree(b.as_ref(), &rq).await;
    let queued = page(b.as_ref(), "emails").await;
    for m in &queued {
        assert_eq!(meta(m, "status"), Some("queued"));
        assert_eq!(
            meta(m, "started"),
            None,
            "started_at cleared as RQ's requeue does"
        );
        assert_eq!(meta(m, "x-qdeck-redriven"), Some("1"));
    }

    // A fixed worker completes every job: none lost, none run twice.
    scene(db, &["work"], &[("QDECK_RQ_FIXED", "1")]);
    let rq = scene(db, &["counts"], &[]);
    assert_figures_agree(b.as_ref(), &rq).await;
    assert_eq!(n(&rq, "emails", "len") + n(&rq, "emails", "failed"), 0);
    let runs: BTreeMap<String, u64> =
        serde_json::from_value(scene(db, &["runs"], &[])).expect("runs");
    let want: BTreeMap<String, u64> = ["emails", "reports"]
        .iter()
        .flat_map(|q| (1..=6).map(move |i| (format!("{q}:{i}"), 1)))
        .collect();
    assert_eq!(runs, want);
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_malformed_job_hashes_give_notes_and_an_untested_version_is_read_only() {
    let db = 14;
    flush(db).await;
    scene(db, &["enqueue", "2"], &[]);
    let mut c = raw(db).await;
    // At the head of the queue: a job hash with a status and nothing else, and an id whose
    // hash is gone; in the failed registry a job naming no origin and one with garbage data.
    let _: () = redis::pipe()
        .hset("rq:job:bare", "status", "queued")
        .lpush("rq:queue:emails", "gone")
        .lpush("rq:queue:emails", "bare")
        .hset("rq:job:noorigin", "status", "failed")
        .zadd("rq:failed:emails", "noorigin", 1)
        .hset_multiple(
            "rq:job:garbage",
            &[
                ("origin", &b"emails"[..]),
                ("data", &b"\x78\x9c\x01\x02garbage"[..]),
                ("exc_info", &b"\xff\xfe not a traceback"[..]),
            ],
        )
        .zadd("rq:failed:emails", "garbage", 2)
        // A results key of another type than RQ's stream.
        .set("rq:results:garbage", "not a stream")
        .query_async(&mut c)
        .await
        .unwrap();
    let b = backend(db, Some(&["rq"])).await;
    let st = figures(b.as_ref(), "emails").await;
    assert_eq!(st.depth, Some(4));
    assert_eq!(st.oldest_age_secs, None);
    assert!(
        st.age_note.as_deref().unwrap().contains("bare"),
        "{:?}",
        st.age_note
    );

    let msgs = page(b.as_ref(), "emails").await;
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[0].id, "bare");
    assert!(meta(&msgs[0], "payload").unwrap().contains("no data field"));
    assert!(msgs[0]
        .meta
        .iter()
        .any(|(k, v)| k == "note" && v.as_str().unwrap().contains("no origin")));
    assert_eq!(msgs[1].id, "gone");
    assert!(meta(&msgs[1], "note").unwrap().contains("gone"));
    // The jobs RQ enqueued are pickled: described, never decoded.
    assert!(meta(&msgs[2], "payload")
        .unwrap()
        .starts_with("pickled data, "));
    assert_eq!(meta(&msgs[2], "description"), Some("rq_jobs.work(1)"));

    let failed = page(b.as_ref(), "emails/failed").await;
    assert_eq!(failed.len(), 2);
    assert!(meta(&failed[1], "payload")
        .unwrap()
        .contains("unknown serialisation"));
    // A job without an origin cannot be requeued: it stays, counted as not moved.
    let report = redrive_all(b.as_ref(), "emails/failed").await;
    assert_eq!((report.moved, report.failed), (1, 1), "{report:?}");
    let left: Vec<String> = redis::cmd("ZRANGE")
        .arg("rq:failed:emails")
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left, ["noorigin"]);
    let tail: Vec<String> = redis::cmd("LRANGE")
        .arg("rq:queue:emails")
        .arg(-1)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        tail,
        ["garbage"],
        "requeued at the back of its origin queue"
    );

    // A worker of an RQ major version qdeck was not tested with makes the queues read-only.
    let _: () = redis::pipe()
        .hset("rq:worker:future", "version", "3.0.0")
        .sadd("rq:workers", "rq:worker:future")
        .query_async(&mut c)
        .await
        .unwrap();
    let b = backend(db, None).await;
    b.list_queues().await.unwrap();
    let (progress, _rx) = OpProgress::new();
    let req = RedriveRequest {
        source: QueueId::new("emails/failed"),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let refused = b.redrive(&req, &progress).await.unwrap_err().to_string();
    assert!(refused.contains("RQ 3.0.0"), "{refused}");
    flush(db).await;
}

async fn exists(c: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> u64 {
    redis::cmd("EXISTS").arg(keys).query_async(c).await.unwrap()
}

fn job_keys(id: &str) -> Vec<String> {
    vec![
        format!("rq:job:{id}"),
        format!("rq:results:{id}"),
        format!("rq:job:{id}:dependents"),
    ]
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_purge_and_delete_leave_no_orphan_job_keys() {
    let db = 15;
    flush(db).await;
    scene(db, &["enqueue", "6"], &[]);
    scene(db, &["work"], &[]);
    let b = backend(db, None).await;
    let mut c = raw(db).await;
    let failed: Vec<String> = redis::cmd("ZRANGE")
        .arg("rq:failed:emails")
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(failed.len(), 2);
    assert!(
        exists(&mut c, &job_keys(&failed[0])).await >= 2,
        "hash and results"
    );

    // Delete one chosen failed job: it and its keys go, the other stays.
    let del = b.deleter().unwrap();
    let report = del
        .delete_ids(
            &QueueId::new("emails/failed"),
            &[failed[0].clone(), "not-there".into()],
            &progress(),
        )
        .await
        .unwrap();
    assert_eq!((report.deleted, report.missing), (1, 1));
    assert_eq!(exists(&mut c, &job_keys(&failed[0])).await, 0);
    assert!(exists(&mut c, &job_keys(&failed[1])).await >= 2);
    // Chosen jobs are never deleted from a queue a worker takes from.
    let refused = del.delete_refusal(&b.describe(&QueueId::new("emails")).await.unwrap());
    assert!(refused.is_some());

    // Purge the failed registry: no job hash or result left behind.
    let p = b
        .purge(&QueueId::new("emails/failed"), &progress())
        .await
        .unwrap();
    assert_eq!(p.purged, Some(1));
    assert_eq!(exists(&mut c, &job_keys(&failed[1])).await, 0);
    assert_eq!(
        scene(db, &["counts"], &[])["emails"]["failed"],
        Json::from(0)
    );

    // Purge a queue (as Queue#empty): its jobs' hashes go with it.
    scene(db, &["enqueue", "3"], &[]);
    let queued: Vec<String> = redis::cmd("LRANGE")
        .arg("rq:queue:reports")
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(queued.len(), 3);
    let p = b
        .purge(&QueueId::new("reports"), &progress())
        .await
        .unwrap();
    assert_eq!(p.purged, Some(3));
    for id in &queued {
        assert_eq!(exists(&mut c, &job_keys(id)).await, 0, "{id}");
    }
    assert_eq!(scene(db, &["counts"], &[])["reports"]["len"], Json::from(0));
    flush(db).await;
}

/// A worker RQ runs in a scene process, holding a slow job until told to quit.
struct Holder {
    child: Child,
    stdin: ChildStdin,
}

impl Holder {
    fn start(db: u32, name: &str) -> (Holder, String) {
        let mut child = Command::new(python())
            .arg(scene_script())
            .args(["hold", &db_url(db), name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start worker scene");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "scene ended early");
            if line.starts_with('{') {
                break;
            }
        }
        let ready: Json = serde_json::from_str(&line).unwrap();
        let job = ready["job"].as_str().unwrap().to_string();
        (Holder { child, stdin }, job)
    }

    fn stop(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        std::thread::sleep(Duration::from_millis(300));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_workers_show_the_busy_worker_with_its_job_and_a_gone_one() {
    let db = 12;
    flush(db).await;
    let (holder, job) = Holder::start(db, "qdeck-w1");
    let b = backend(db, None).await;
    let q = QueueId::new("emails");
    let deadline = Instant::now() + Duration::from_secs(30);
    let busy = loop {
        b.list_queues().await.unwrap();
        let ws = b.consumers(&q).await.unwrap_or_default();
        if let Some(w) = ws.into_iter().find(|w| w.status == WorkerState::Busy) {
            break w;
        }
        assert!(Instant::now() < deadline, "no busy RQ worker seen");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(busy.tag, "qdeck-w1");
    assert!(busy.peer.as_deref().unwrap().contains(" pid "), "{busy:?}");
    assert!(busy.state.contains(&job), "{}", busy.state);
    assert!(busy.state.contains("queues emails"), "{}", busy.state);
    assert_eq!(busy.holding, Some(1));
    assert_eq!(busy.processed, None, "no job finished yet");
    assert!(busy.last_seen_ms.is_some());
    let st = figures(b.as_ref(), "emails").await;
    assert_eq!(st.in_flight, Some(1), "the started registry holds the job");
    // The failed registry lists the workers of its origin queue.
    let on_failed = b.consumers(&QueueId::new("emails/failed")).await.unwrap();
    assert_eq!(on_failed.len(), 1);
    holder.stop();

    // A worker whose hash expired (heartbeat stopped) while still registered shows gone.
    let mut c = raw(db).await;
    let _: () = redis::cmd("DEL")
        .arg("rq:worker:qdeck-w1")
        .query_async(&mut c)
        .await
        .unwrap();
    let ws = b.consumers(&q).await.unwrap();
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].status, WorkerState::Gone);
    assert_eq!(ws[0].holding, Some(0));
    flush(db).await;
}

/// The CLI's redrive of an RQ failed registry goes through the engine's path: `--where` picks
/// jobs by their exception, `--max` and `--rate` bound the rest, each run is audited, and a
/// fixed worker then completes every job once.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_cli_redrive_where_and_max_are_audited() {
    let db = 11;
    flush(db).await;
    scene(db, &["enqueue", "6"], &[]);
    scene(db, &["work"], &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[[profiles]]\nname = \"jobs\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {db}\nflavors = [\"rq\"]\n",
            redis_url()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| -> Json {
        let out = common::qdeck(dir.path())
            .args(args)
            .args(["-y", "-o", "json"])
            .output()
            .expect("run qdeck");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let r = run(&[
        "redrive",
        "emails/failed",
        "--where",
        "reason ~ \"order 6 rejected\"",
    ]);
    assert_eq!(r["moved"], 1, "{r}");
    let b = backend(db, None).await;
    let left = page(b.as_ref(), "emails/failed").await;
    assert_eq!(left.len(), 1);
    assert_eq!(meta(&left[0], "description"), Some("rq_jobs.work(3)"));
    let queued = page(b.as_ref(), "emails").await;
    assert_eq!(meta(&queued[0], "description"), Some("rq_jobs.work(6)"));

    let r = run(&["redrive", "emails/failed", "--max", "1", "--rate", "5"]);
    assert_eq!(r["moved"], 1, "{r}");
    let rq = scene(db, &["counts"], &[]);
    assert_eq!(
        (n(&rq, "emails", "failed"), n(&rq, "emails", "len")),
        (0, 2)
    );
    let audit = std::fs::read_to_string(dir.path().join("state/qdeck/audit.log")).expect("audit");
    let lines: Vec<Json> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit JSON"))
        .collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert!(lines
        .iter()
        .all(|l| l.to_string().contains("emails/failed")));

    scene(db, &["work"], &[("QDECK_RQ_FIXED", "1")]);
    let runs: BTreeMap<String, u64> =
        serde_json::from_value(scene(db, &["runs"], &[])).expect("runs");
    assert_eq!(runs.get("emails:3"), Some(&1));
    assert_eq!(runs.get("emails:6"), Some(&1));
    assert!(runs.values().all(|v| *v == 1), "{runs:?}");
    flush(db).await;
}

// ---------------------------------------------------------------------------------------
// The shared backend contract on RQ. RQ requeues a job to its origin queue, so the behaviours
// that redrive to a named queue do not apply.

/// RQ's keys are the same in every scene: contract cases take database 10 one at a time.
static CONTRACT_DB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const CONTRACT: u32 = 10;

struct RqFixture {
    backend: Arc<dyn Backend>,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl RqFixture {
    async fn setup() -> RqFixture {
        let turn = CONTRACT_DB.lock().await;
        let _ = python();
        flush(CONTRACT).await;
        RqFixture {
            backend: backend(CONTRACT, None).await,
            _turn: turn,
        }
    }
}

impl contract::Fixture for RqFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let (r, d) = (ready.to_string(), dead.to_string());
        let made = scene(CONTRACT, &["contract", tag, &r, &d], &[]);
        assert_eq!(made["failed"], Json::from(dead), "{made}");
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(tag),
            dlq: QueueId::new(format!("{tag}/failed")),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, _tag: &str) -> QueueId {
        panic!("RQ requeues to the origin queue: no behaviour that needs a plain target runs here")
    }

    async fn add_dead(&self, _scene: &contract::Scene, _n: usize) {
        panic!("RQ requeues to the origin queue: no behaviour that adds dead letters runs here")
    }

    async fn cleanup(&self) {
        flush(CONTRACT).await;
    }
}

mod rq_contract {
    use super::*;
    contract_tests!(
        setup = RqFixture::setup(),
        ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq",
        not_applicable = {
            redrive_to_a_named_queue: "each job is requeued to its origin queue",
            redrive_honours_max: "its second half redrives to a named queue",
            redrive_moves_at_most_the_count_at_start: "redrives to a named queue",
            redrive_declared_native_receives_nothing: "redrives to a named queue",
            send_many_delivers_every_message_once: "jobs are added with RQ's own client",
            send_many_to_a_missing_queue_sends_nothing: "jobs are added with RQ's own client",
        },
    );
}

/// `qdeck redrive` killed with SIGKILL at random moments, several times over: every job is in
/// the failed registry or in its queue, none in both, none twice, none lost (each batch is
/// one Lua script, which Redis applies whole or not at all).
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_redrive_survives_kill_9() {
    let db = 9;
    flush(db).await;
    let total = 200usize;
    scene(db, &["contract", "kq", "0", &total.to_string()], &[]);
    let mut c = raw(db).await;
    let zrange = |c: &mut redis::aio::MultiplexedConnection| {
        let mut c = c.clone();
        async move {
            let v: Vec<String> = redis::cmd("ZRANGE")
                .arg("rq:failed:kq")
                .arg(0)
                .arg(-1)
                .query_async(&mut c)
                .await
                .unwrap();
            v
        }
    };
    let mut all = zrange(&mut c).await;
    all.sort();
    assert_eq!(all.len(), total);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[profiles]]\nname = \"jobs\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {db}\n",
            redis_url()
        ),
    )
    .unwrap();
    let trials: usize = std::env::var("QDECK_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let mut queued_at_end = 0;
    for trial in 0..trials {
        let mut child = Command::new(env!("CARGO_BIN_EXE_qdeck"))
            .arg("--config")
            .arg(&config)
            .args(["-p", "jobs", "redrive", "kq/failed", "--window", "3"])
            .args(["--rate", "300", "-y"])
            .env("XDG_STATE_HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start qdeck");
        std::thread::sleep(Duration::from_millis(rand::random_range(0..400)));
        let _ = child.kill();
        let _ = child.wait();
        let failed = zrange(&mut c).await;
        let queued: Vec<String> = redis::cmd("LRANGE")
            .arg("rq:queue:kq")
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .unwrap();
        let mut both: Vec<String> = failed.iter().chain(queued.iter()).cloned().collect();
        both.sort();
        assert_eq!(
            both,
            all,
            "trial {trial}: {} failed + {} queued must be every job exactly once",
            failed.len(),
            queued.len()
        );
        queued_at_end = queued.len();
    }
    assert!(
        queued_at_end > 0,
        "the killed runs moved nothing: no trial at all"
    );
    flush(db).await;
}

/// RQ and another job library in one database: RQ ids carry `rq/` (Sidekiq's `sidekiq/`), and
/// a failed job's origin and its redrive follow the prefixed ids.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with rq"]
async fn rq_beside_sidekiq_has_prefixed_ids() {
    let db = 8;
    flush(db).await;
    scene(db, &["enqueue", "3"], &[]);
    scene(db, &["work"], &[]);
    let _: () = redis::cmd("SADD")
        .arg("queues")
        .arg("default")
        .query_async(&mut raw(db).await)
        .await
        .unwrap();
    let b = backend(db, None).await;
    let ids: Vec<String> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id.to_string())
        .collect();
    for want in [
        "rq/emails",
        "rq/emails/failed",
        "rq/reports",
        "sidekiq/default",
    ] {
        assert!(ids.iter().any(|i| i == want), "{want} in {ids:?}");
    }
    assert!(!ids.iter().any(|i| i == "emails"), "{ids:?}");
    let st = figures(b.as_ref(), "rq/emails").await;
    assert_eq!(st.dlq_depth, Some(1));
    let failed = page(b.as_ref(), "rq/emails/failed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].dead_letter.as_ref().unwrap().origin,
        Some(QueueId::new("rq/emails"))
    );
    let report = redrive_all(b.as_ref(), "rq/emails/failed").await;
    assert_eq!(report.moved, 1, "{report:?}");
    assert_eq!(figures(b.as_ref(), "rq/emails").await.depth, Some(1));
    flush(db).await;
}
