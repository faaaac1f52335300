//! Redis backend (BullMQ, Sidekiq) against a real Redis and the real libraries.
//!
//! Needs QDECK_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379) and QDECK_TEST_NODE_FIXTURES (the
//! folder tests/fixtures/redis after `npm ci`, where BullMQ is installed). The Sidekiq tests
//! also need `ruby` with Debian's ruby-sidekiq and ruby-redis. Each test owns one database
//! number (2..15, see `db_for`) and flushes only that one; BullMQ tests also use a unique
//! key prefix.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod contract;

mod common;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::redis_db::{db_url, flush, raw, redis_url};
use qdeck_backend::{build, Backend, BackendError, OpProgress};
use qdeck_model::config::{Profile, ProfileKind, RedisSettings};
use qdeck_model::domain::*;
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    let dir = PathBuf::from(common::broker_var(
        "QDECK_TEST_NODE_FIXTURES",
        "tests/fixtures/redis with node_modules (npm ci)",
    ));
    assert!(
        dir.join("node_modules/bullmq").is_dir(),
        "{} has no node_modules/bullmq: run npm ci there",
        dir.display()
    );
    dir
}

fn uniq(tag: &str) -> String {
    format!("{tag}{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

fn settings(db: u32, prefix: Option<&str>) -> RedisSettings {
    RedisSettings {
        url: Some(redis_url()),
        db: Some(db as i64),
        prefix: prefix.map(str::to_string),
        ..Default::default()
    }
}

async fn backend(s: RedisSettings) -> Arc<dyn Backend> {
    let p = Profile {
        name: "redis-test".into(),
        kind: ProfileKind::Redis(s),
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

/// Run one BullMQ scene command to completion; its JSON answer.
fn node(db: u32, prefix: &str, queue: &str, args: &[&str]) -> Json {
    let dir = fixtures();
    let out = Command::new("node")
        .current_dir(&dir)
        .arg("bullmq_scene.js")
        .arg(args[0])
        .arg(db_url(db))
        .arg(prefix)
        .arg(queue)
        .args(&args[1..])
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "node {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out.stdout)
}

fn ruby_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redis/sidekiq_scene.rb")
}

fn ruby(db: u32, queue: &str, args: &[&str], env: &[(&str, &str)]) -> Json {
    let out = Command::new("ruby")
        .arg(ruby_script())
        .arg(args[0])
        .arg(queue)
        .args(&args[1..])
        .env("REDIS_URL", db_url(db))
        .envs(env.iter().copied())
        .output()
        .expect("run ruby (Debian: ruby-sidekiq ruby-redis)");
    assert!(
        out.status.success(),
        "ruby {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out.stdout)
}

fn last_json(stdout: &[u8]) -> Json {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| panic!("no JSON answer in {text:?}"))
}

/// A long-running scene (a worker holding a job) that answers commands on stdin.
struct Live {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Live {
    fn start(mut cmd: Command) -> Live {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start scene");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut l = Live {
            child,
            stdin,
            stdout,
        };
        let ready = l.read();
        assert_eq!(ready["ready"], Json::Bool(true), "scene not ready: {ready}");
        l
    }

    fn read(&mut self) -> Json {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read scene");
            assert!(n > 0, "scene ended early");
            if line.starts_with('{') || line.starts_with('[') {
                return serde_json::from_str(&line).expect("scene JSON");
            }
        }
    }

    fn ask(&mut self, what: &str) -> Json {
        writeln!(self.stdin, "{what}").expect("write scene");
        self.stdin.flush().ok();
        self.read()
    }

    fn stop(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        std::thread::sleep(Duration::from_millis(500));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn figures(b: &dyn Backend, q: &str) -> QueueStats {
    let id = QueueId::new(q);
    let batch = b.stats(std::slice::from_ref(&id)).await.expect("stats");
    assert!(batch.errors.is_empty(), "stats errors: {:?}", batch.errors);
    batch.stats.into_iter().next().expect("figures")
}

fn n(v: &Json, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

async fn redrive_all(b: &dyn Backend, source: &str) -> RedriveReport {
    let (progress, _rx) = OpProgress::new();
    b.redrive(
        &RedriveRequest {
            source: QueueId::new(source),
            target: RedriveTarget::Origin,
            max: None,
            rate: None,
            only_ids: None,
            window: None,
        },
        &progress,
    )
    .await
    .expect("redrive")
}

// ---------------------------------------------------------------------------------------
// The shared contract, once per library. Both libraries retry a job into its own queue (the
// one in its payload), so the behaviours that redrive to a named queue do not apply; the test
// after the suites checks that such a request is refused with the reason.

/// Redrive to a named queue, and the behaviours built on it.
const NAMED_TARGET: &str = "BullMQ and Sidekiq retry a job into its own queue";

/// BullMQ scenes share database 2; each fixture has its own key prefix and deletes only its
/// keys, so cases run in parallel.
struct BullFixture {
    backend: Arc<dyn Backend>,
    prefix: String,
}

impl BullFixture {
    async fn setup() -> BullFixture {
        let _ = fixtures();
        let prefix = uniq("qc");
        BullFixture {
            backend: backend(settings(2, Some(&prefix))).await,
            prefix,
        }
    }
}

impl contract::Fixture for BullFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let q = tag.to_string();
        let (r, d) = (ready.to_string(), dead.to_string());
        node(2, &self.prefix, &q, &["contract", &r, &d]);
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(q.clone()),
            dlq: QueueId::new(format!("{q}/failed")),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, _tag: &str) -> QueueId {
        panic!("{NAMED_TARGET}: no behaviour that needs a plain target runs here")
    }

    async fn add_dead(&self, _scene: &contract::Scene, _n: usize) {
        panic!("{NAMED_TARGET}: no behaviour that adds dead letters runs here")
    }

    async fn cleanup(&self) {
        let mut c = raw(2).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
            .query_async(&mut c)
            .await
            .expect("keys");
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut c)
                .await
                .expect("del");
        }
    }
}

mod bullmq_contract {
    use super::*;
    contract_tests!(
        setup = BullFixture::setup(),
        ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES",
        not_applicable = {
            redrive_to_a_named_queue: "each job is retried into its own queue",
            redrive_honours_max: "its second half redrives to a named queue",
            redrive_moves_at_most_the_count_at_start: "redrives to a named queue",
            redrive_declared_native_receives_nothing: "redrives to a named queue",
            send_many_delivers_every_message_once: "jobs are added with the library's own client",
            send_many_to_a_missing_queue_sends_nothing: "jobs are added with the library's own client",
        },
    );
}

/// Sidekiq's dead set and counters are global to a database, so Sidekiq cases take database 3
/// one at a time.
static SIDEKIQ_DB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct SidekiqFixture {
    backend: Arc<dyn Backend>,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl SidekiqFixture {
    async fn setup() -> SidekiqFixture {
        let turn = SIDEKIQ_DB.lock().await;
        flush(3).await;
        SidekiqFixture {
            backend: backend(settings(3, None)).await,
            _turn: turn,
        }
    }
}

impl contract::Fixture for SidekiqFixture {
    fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let q = tag.to_string();
        let (r, d) = (ready.to_string(), dead.to_string());
        ruby(3, &q, &["contract", &r, &d], &[]);
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(q),
            dlq: QueueId::new("dead"),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, _tag: &str) -> QueueId {
        panic!("{NAMED_TARGET}: no behaviour that needs a plain target runs here")
    }

    async fn add_dead(&self, _scene: &contract::Scene, _n: usize) {
        panic!("{NAMED_TARGET}: no behaviour that adds dead letters runs here")
    }

    async fn cleanup(&self) {
        flush(3).await;
    }
}

mod sidekiq_contract {
    use super::*;
    contract_tests!(
        setup = SidekiqFixture::setup(),
        ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq",
        not_applicable = {
            redrive_to_a_named_queue: "each job is retried into its own queue",
            redrive_honours_max: "its second half redrives to a named queue",
            redrive_moves_at_most_the_count_at_start: "redrives to a named queue",
            redrive_declared_native_receives_nothing: "redrives to a named queue",
            send_many_delivers_every_message_once: "jobs are added with the library's own client",
            send_many_to_a_missing_queue_sends_nothing: "jobs are added with the library's own client",
        },
    );
}

/// What the contract cannot ask of these libraries is refused with the reason, and changes
/// nothing.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL, QDECK_TEST_NODE_FIXTURES and ruby-sidekiq"]
async fn redrive_to_another_queue_is_refused_with_the_reason() {
    use contract::Fixture;
    let bull = BullFixture::setup().await;
    let s = bull.scene("refuse", 0, 2).await;
    node(2, &bull.prefix, "other", &["waiting", "1"]);
    let sk = SidekiqFixture::setup().await;
    let k = sk.scene("refuse", 0, 2).await;
    ruby(3, "other", &["contract", "1", "0"], &[]);
    for (b, s) in [(bull.backend(), &s), (sk.backend(), &k)] {
        let req = RedriveRequest {
            source: s.dlq.clone(),
            target: RedriveTarget::Queue(QueueId::new("other")),
            max: None,
            rate: None,
            only_ids: None,
            window: None,
        };
        match b.redrive(&req, &OpProgress::detached()).await {
            Err(BackendError::Unsupported(why)) => {
                assert!(why.contains("own queue"), "{why}");
            }
            other => panic!("redrive of {} to another queue: {other:?}", s.dlq),
        }
        let left = b.count(&s.dlq).await.expect("count").ready;
        assert_eq!(left, 2, "nothing moved from {}", s.dlq);
        // Sending (one or a batch) is the library's own client's job: the backend has no
        // sender, and the refusal says why.
        assert!(
            b.sender().is_none(),
            "a Redis job queue takes no messages from qdeck"
        );
        match qdeck_backend::sender_of(b) {
            Err(BackendError::Unsupported(why)) => assert!(why.contains("own client"), "{why}"),
            Err(other) => panic!("sender_of for {}: {other:?}", s.dlq),
            Ok(_) => panic!("sender_of for {}: a sender", s.dlq),
        }
        assert_eq!(b.count(&s.dlq).await.expect("count").ready, 2);
    }
    bull.cleanup().await;
    sk.cleanup().await;
}

// ---------------------------------------------------------------------------------------
// Figures equal the libraries' own.

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_figures_equal_get_job_counts() {
    let db = 4;
    flush(db).await;
    let prefix = uniq("qd");
    let q = uniq("fig");
    let mut cmd = Command::new("node");
    cmd.current_dir(fixtures())
        .arg("bullmq_scene.js")
        .arg("figures")
        .arg(db_url(db))
        .arg(&prefix)
        .arg(&q);
    let mut live = Live::start(cmd);
    let b = backend(settings(db, Some(&prefix))).await;
    b.list_queues().await.expect("list");
    let mut last = String::new();
    let mut equal = false;
    // A job may move between the two reads; the scene is quiet, so a retry settles it.
    for _ in 0..5 {
        let before = live.ask("counts");
        let s = figures(b.as_ref(), &q).await;
        let f = figures(b.as_ref(), &format!("{q}/failed")).await;
        let after = live.ask("counts");
        let want = (
            Some(n(&after, "waiting") + n(&after, "prioritized")),
            Some(n(&after, "active")),
            Some(n(&after, "delayed")),
            Some(n(&after, "failed")),
        );
        let got = (s.depth, s.in_flight, s.delayed, s.dlq_depth);
        last = format!("qdeck {got:?} vs getJobCounts {after}");
        if before == after && got == want && f.depth == Some(n(&after, "failed")) {
            equal = true;
            assert!(s.oldest_age_secs.is_some(), "age of the oldest waiting job");
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(equal, "figures differ: {last}");
    // The scene is what it says: 3 waiting, 2 prioritized, 1 active, 2 delayed, 2 failed.
    let s = figures(b.as_ref(), &q).await;
    assert_eq!(
        (s.depth, s.in_flight, s.delayed, s.dlq_depth),
        (Some(5), Some(1), Some(2), Some(2))
    );
    // The two delayed jobs, soonest first, each with its due time.
    let qid = QueueId::new(q.clone());
    let req = BrowseRequest {
        cursor: None,
        max: 10,
        force: false,
    };
    let delayed = b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&qid, &req)
        .await
        .expect("delayed jobs");
    let due: Vec<i64> = delayed
        .messages
        .iter()
        .map(|m| {
            let at = m.field_text("due-at").expect("due-at");
            chrono::DateTime::parse_from_rfc3339(&at)
                .unwrap()
                .timestamp_millis()
        })
        .collect();
    assert_eq!(due.len(), 2, "{delayed:?}");
    // The scene delays them by an hour.
    assert!(
        due[0] <= due[1] && due[0] > now_ms() + 3_000_000 && due[1] < now_ms() + 7_200_000,
        "{due:?}"
    );

    // Workers: the ones BullMQ's getWorkers finds.
    let theirs = live.ask("workers");
    let ours = b
        .consumers(&QueueId::new(q.clone()))
        .await
        .expect("consumers");
    assert_eq!(
        ours.len(),
        theirs.as_array().map_or(0, Vec::len),
        "{ours:?} vs {theirs}"
    );
    assert!(ours.iter().any(|c| c.tag == "qdeck-figures"), "{ours:?}");
    assert!(ours.iter().all(|c| c.peer.is_some()));
    live.stop();
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_figures_equal_sidekiq_api() {
    let db = 5;
    flush(db).await;
    let q = uniq("fig");
    let mut cmd = Command::new("ruby");
    cmd.arg(ruby_script())
        .arg("figures")
        .arg(&q)
        .env("REDIS_URL", db_url(db));
    let mut live = Live::start(cmd);
    let b = backend(settings(db, None)).await;
    b.list_queues().await.expect("list");
    let mut last = String::new();
    let mut equal = false;
    for _ in 0..5 {
        let before = live.ask("stats");
        let s = figures(b.as_ref(), &q).await;
        let dead = figures(b.as_ref(), "dead").await;
        let retry = figures(b.as_ref(), "retry").await;
        let sched = figures(b.as_ref(), "scheduled").await;
        let after = live.ask("stats");
        let got = (
            s.depth,
            retry.delayed,
            dead.depth,
            sched.delayed,
            s.completed_total,
            s.dead_lettered_total,
            s.dlq_depth,
        );
        let want = (
            Some(n(&after, "queue_size")),
            Some(n(&after, "retry_size")),
            Some(n(&after, "dead_size")),
            Some(n(&after, "scheduled_size")),
            Some(n(&after, "processed")),
            Some(n(&after, "failed")),
            Some(n(&after, "dead_size")),
        );
        last = format!("qdeck {got:?} vs Sidekiq {after}");
        // Latency grows by itself; every other figure must hold still across the reads.
        let steady = |j: &Json| {
            let mut j = j.clone();
            j.as_object_mut().map(|o| o.remove("queue_latency"));
            j
        };
        if steady(&before) == steady(&after) && got == want {
            equal = true;
            let lat = after["queue_latency"].as_f64().unwrap_or(0.0);
            let age = s.oldest_age_secs.expect("age of oldest");
            assert!(
                (age - lat).abs() < 2.0,
                "age {age} vs Sidekiq latency {lat}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(equal, "figures differ: {last}");
    let s = figures(b.as_ref(), &q).await;
    assert_eq!(s.depth, Some(3));
    // Every scheduled job is listed, with its due time; a plain queue points at `scheduled`.
    let req = BrowseRequest {
        cursor: None,
        max: 1000,
        force: false,
    };
    let sched = b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&QueueId::new("scheduled"), &req)
        .await
        .expect("scheduled jobs");
    let want = n(&live.ask("stats"), "scheduled_size") as usize;
    assert_eq!(sched.messages.len(), want);
    assert!(sched
        .messages
        .iter()
        .all(|m| m.field_text("due-at").is_some_and(|v| !v.is_empty())));
    match b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&QueueId::new(q.clone()), &req)
        .await
    {
        Err(BackendError::Unsupported(why)) => assert!(why.contains("`scheduled`"), "{why}"),
        other => panic!("expected a pointer to `scheduled`, got {other:?}"),
    }

    // The process holding the slow job: busy, with its job, as Sidekiq::ProcessSet says.
    let st = live.ask("stats");
    let procs = st["processes"].as_array().cloned().unwrap_or_default();
    let ours = b
        .consumers(&QueueId::new(q.clone()))
        .await
        .expect("consumers");
    assert_eq!(ours.len(), procs.len(), "{ours:?} vs {procs:?}");
    let p = &ours[0];
    assert_eq!(p.tag, procs[0]["identity"].as_str().unwrap_or(""));
    assert_eq!(p.holding, Some(1));
    assert_eq!(p.prefetch, Some(1), "concurrency");
    assert!(
        p.state.starts_with("busy") && p.state.contains("QdeckJob"),
        "{}",
        p.state
    );
    live.stop();

    // A process whose heartbeat stopped (killed: no clean shutdown) is gone, not busy.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = raw(db).await;
    let ident = p.tag.clone();
    let old = (now_ms() as f64 / 1000.0) - 120.0;
    let _: () = redis::cmd("HSET")
        .arg(&ident)
        .arg("beat")
        .arg(old)
        .query_async(&mut c)
        .await
        .expect("hset");
    let ours = b
        .consumers(&QueueId::new(q.clone()))
        .await
        .expect("consumers");
    assert!(
        ours.iter()
            .all(|c| c.state.starts_with("gone") && c.holding == Some(0)),
        "{ours:?}"
    );
    flush(db).await;
}

// ---------------------------------------------------------------------------------------
// Redrive: a real worker completes every retried job, once.

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_redrive_then_a_real_worker_completes_all() {
    let db = 6;
    flush(db).await;
    let (prefix, q) = (uniq("qd"), uniq("rd"));
    let count = 25u64;
    node(db, &prefix, &q, &["failed", &count.to_string()]);
    let failed: HashSet<String> = node(db, &prefix, &q, &["ids"])["failed"]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert_eq!(failed.len() as u64, count);
    let b = backend(settings(db, Some(&prefix))).await;
    let report = redrive_all(b.as_ref(), &format!("{q}/failed")).await;
    assert_eq!((report.moved, report.failed), (count, 0), "{report:?}");
    let c = node(db, &prefix, &q, &["counts"]);
    assert_eq!((n(&c, "waiting"), n(&c, "failed")), (count, 0), "{c}");
    let w = node(db, &prefix, &q, &["work", &count.to_string()]);
    let done: Vec<String> = w["done"]
        .as_array()
        .expect("done")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let uniq_done: HashSet<String> = done.iter().cloned().collect();
    assert_eq!(done.len(), uniq_done.len(), "a job ran twice: {done:?}");
    assert_eq!(uniq_done, failed, "every retried job completed, none lost");
    assert_eq!(n(&w["counts"], "completed"), count);
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_redrive_then_a_real_process_completes_all() {
    let db = 7;
    flush(db).await;
    let q = uniq("rd");
    let count = 12u64;
    ruby(db, &q, &["dead", &count.to_string()], &[]);
    let ids = ruby(db, &q, &["ids"], &[]);
    let dead: HashSet<String> = ids["dead"]
        .as_array()
        .expect("dead")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert_eq!(dead.len() as u64, count);
    let b = backend(settings(db, None)).await;
    // Browse first: each dead job names its origin queue from its payload, and nothing moves.
    let page = b
        .browse(
            &QueueId::new("dead"),
            &BrowseRequest {
                cursor: None,
                max: 100,
                force: false,
            },
        )
        .await
        .expect("browse");
    assert_eq!(page.messages.len() as u64, count);
    for m in &page.messages {
        let dl = m.dead_letter.as_ref().expect("dead letter info");
        assert_eq!(
            dl.origin.as_ref().map(qdeck_model::domain::QueueId::as_str),
            Some(q.as_str())
        );
        assert_eq!(dl.reason.as_deref(), Some("RuntimeError"));
        assert_eq!(m.field_text("class").as_deref(), Some("QdeckJob"));
    }
    let report = redrive_all(b.as_ref(), "dead").await;
    assert_eq!((report.moved, report.failed), (count, 0), "{report:?}");
    let st = ruby(db, &q, &["stats"], &[]);
    assert_eq!(
        (n(&st, "dead_size"), n(&st, "queue_size")),
        (0, count),
        "{st}"
    );
    let w = ruby(db, &q, &["work", &count.to_string()], &[]);
    let done: Vec<String> = w["done"]
        .as_array()
        .expect("done")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let uniq_done: HashSet<String> = done.iter().cloned().collect();
    assert_eq!(done.len(), uniq_done.len(), "a job ran twice: {done:?}");
    assert_eq!(uniq_done, dead, "every retried job completed, none lost");
    flush(db).await;
}

// ---------------------------------------------------------------------------------------
// Browse and purge.

async fn job_keys(db: u32, prefix: &str, q: &str) -> BTreeMap<String, ()> {
    let mut c = raw(db).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:{q}:*"))
        .query_async(&mut c)
        .await
        .expect("keys");
    let fixed = [
        "wait",
        "paused",
        "meta",
        "id",
        "events",
        "failed",
        "completed",
        "active",
        "delayed",
        "prioritized",
        "marker",
        "stalled-check",
        "pc",
        "stalled",
    ];
    keys.into_iter()
        .filter(|k| {
            let rest = &k[prefix.len() + q.len() + 2..];
            !fixed.contains(&rest) && !rest.starts_with("metrics")
        })
        .map(|k| (k, ()))
        .collect()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_browse_is_read_only_and_purge_leaves_no_orphans() {
    let db = 8;
    flush(db).await;
    let (prefix, q) = (uniq("qd"), uniq("pg"));
    node(db, &prefix, &q, &["failed", "6", "2"]);
    node(db, &prefix, &q, &["waiting", "30"]);
    let b = backend(settings(db, Some(&prefix))).await;
    let before_keys = job_keys(db, &prefix, &q).await;
    assert_eq!(before_keys.len(), 36, "{before_keys:?}");

    // Browse the failed set: reason, stack trace, attempts, data; nothing changes.
    let mut c = raw(db).await;
    let dump_before: Vec<Vec<u8>> = redis::cmd("DUMP")
        .arg(format!("{prefix}:{q}:failed"))
        .query_async(&mut c)
        .await
        .map(|v: Vec<u8>| vec![v])
        .expect("dump");
    let page = b
        .browse(
            &QueueId::new(format!("{q}/failed")),
            &BrowseRequest {
                cursor: None,
                max: 4,
                force: false,
            },
        )
        .await
        .expect("browse");
    assert_eq!(page.messages.len(), 4);
    assert!(page.next.is_some());
    let m = &page.messages[0];
    let h: BTreeMap<_, _> = m.text_fields().into_iter().collect();
    assert_eq!(
        h.get("attempts made").map(String::as_str),
        Some("2"),
        "{h:?}"
    );
    assert!(
        h.get("failed reason")
            .is_some_and(|r| r.starts_with("boom")),
        "{h:?}"
    );
    assert!(
        h.get("stack trace")
            .is_some_and(|s| s.contains("Error: boom")),
        "{h:?}"
    );
    assert!(
        String::from_utf8_lossy(&m.body).contains("\"i\""),
        "data as JSON"
    );
    assert_eq!(
        m.dead_letter.as_ref().and_then(|d| d.origin.clone()),
        Some(QueueId::new(q.clone()))
    );
    let rest = b
        .browse(
            &QueueId::new(format!("{q}/failed")),
            &BrowseRequest {
                cursor: page.next.clone(),
                max: 4,
                force: false,
            },
        )
        .await
        .expect("browse 2");
    assert_eq!(rest.messages.len(), 2);
    let waiting = b
        .browse(
            &QueueId::new(q.clone()),
            &BrowseRequest {
                cursor: None,
                max: 50,
                force: false,
            },
        )
        .await
        .expect("browse wait");
    assert_eq!(waiting.messages.len(), 30);
    assert!(waiting.messages[0].body.windows(3).any(|w| w == b"\"i\""));
    let dump_after: Vec<Vec<u8>> = redis::cmd("DUMP")
        .arg(format!("{prefix}:{q}:failed"))
        .query_async(&mut c)
        .await
        .map(|v: Vec<u8>| vec![v])
        .expect("dump");
    assert_eq!(dump_before, dump_after, "browse changed the failed set");
    assert_eq!(
        job_keys(db, &prefix, &q).await,
        before_keys,
        "browse changed job keys"
    );

    // Drain: the 30 waiting jobs and their hashes go; the failed ones stay whole.
    let (p, _rx) = OpProgress::new();
    let r = b.purge(&QueueId::new(q.clone()), &p).await.expect("purge");
    assert_eq!(r.purged, Some(30));
    let c1 = node(db, &prefix, &q, &["counts"]);
    assert_eq!((n(&c1, "waiting"), n(&c1, "failed")), (0, 6), "{c1}");
    assert_eq!(
        job_keys(db, &prefix, &q).await.len(),
        6,
        "no orphan job hash after drain"
    );
    // Clean of the failed set: nothing left.
    let r = b
        .purge(&QueueId::new(format!("{q}/failed")), &p)
        .await
        .expect("clean failed");
    assert_eq!(r.purged, Some(6));
    let c2 = node(db, &prefix, &q, &["counts"]);
    assert_eq!(n(&c2, "failed"), 0, "{c2}");
    assert!(
        job_keys(db, &prefix, &q).await.is_empty(),
        "no orphan job hash after clean"
    );
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_purge_clears_queue_and_morgue() {
    let db = 9;
    flush(db).await;
    let q = uniq("pg");
    ruby(db, &q, &["contract", "4", "3"], &[]);
    let b = backend(settings(db, None)).await;
    let (p, _rx) = OpProgress::new();
    assert_eq!(
        b.purge(&QueueId::new(q.clone()), &p)
            .await
            .expect("purge")
            .purged,
        Some(4)
    );
    assert_eq!(
        b.purge(&QueueId::new("dead"), &p)
            .await
            .expect("purge dead")
            .purged,
        Some(3)
    );
    let st = ruby(db, &q, &["stats"], &[]);
    assert_eq!((n(&st, "queue_size"), n(&st, "dead_size")), (0, 0), "{st}");
    flush(db).await;
}

// ---------------------------------------------------------------------------------------
// Deleting chosen jobs (purge --where, move, edit).

/// The first 100 messages of `q`, by a browse.
async fn first_page(b: &dyn Backend, q: &str) -> Vec<Message> {
    b.browse(
        &QueueId::new(q),
        &BrowseRequest {
            cursor: None,
            max: 100,
            force: false,
        },
    )
    .await
    .expect("browse")
    .messages
}

async fn ids_in(b: &dyn Backend, q: &str) -> Vec<String> {
    first_page(b, q).await.into_iter().map(|m| m.id).collect()
}

/// Every message carries the redrive stamp once, and the reasons grouper counts them all as
/// back after a redrive.
fn assert_stamped_once(messages: &[Message]) {
    let mut g = qdeck_engine::triage::Grouper::new(Default::default());
    for m in messages {
        let h: BTreeMap<_, _> = m.text_fields().into_iter().collect();
        assert_eq!(
            h.get("x-qdeck-redriven").map(String::as_str),
            Some("1"),
            "{h:?}"
        );
        assert!(h.contains_key("x-qdeck-redriven-at"), "{h:?}");
        g.add(m);
    }
    let redriven: u64 = g.groups().iter().map(|g| g.redriven).sum();
    assert_eq!(redriven, messages.len() as u64);
}

/// Chosen failed BullMQ jobs go with their hashes, the others stay whole, an id gone since the
/// browse is counted missing; a waiting queue is refused (a worker may take the job meanwhile).
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_delete_ids_removes_exactly_the_chosen_failed_jobs() {
    let db = 13;
    flush(db).await;
    let (prefix, q) = (uniq("qd"), uniq("del"));
    node(db, &prefix, &q, &["failed", "6", "1"]);
    node(db, &prefix, &q, &["waiting", "3"]);
    let b = backend(settings(db, Some(&prefix))).await;
    assert!(b.deleter().is_some());
    let failed = format!("{q}/failed");
    let ids = ids_in(b.as_ref(), &failed).await;
    assert_eq!(ids.len(), 6);
    let chosen = vec![ids[1].clone(), ids[4].clone(), "no-such-job".to_string()];
    let r = b
        .deleter()
        .expect("deletes by id")
        .delete_ids(
            &QueueId::new(failed.clone()),
            &chosen,
            &OpProgress::detached(),
        )
        .await
        .expect("delete_ids");
    assert_eq!((r.deleted, r.missing), (2, 1), "{r:?}");
    let mut left = ids_in(b.as_ref(), &failed).await;
    left.sort();
    let mut want: Vec<String> = ids
        .iter()
        .filter(|i| !chosen.contains(i))
        .cloned()
        .collect();
    want.sort();
    assert_eq!(left, want);
    let c = node(db, &prefix, &q, &["counts"]);
    assert_eq!((n(&c, "failed"), n(&c, "waiting")), (4, 3), "{c}");
    assert_eq!(
        job_keys(db, &prefix, &q).await.len(),
        7,
        "the chosen jobs' hashes went with them, no others"
    );
    let waiting = b
        .deleter()
        .expect("deletes by id")
        .delete_ids(
            &QueueId::new(q.clone()),
            &ids_in(b.as_ref(), &q).await,
            &OpProgress::detached(),
        )
        .await;
    assert!(
        matches!(&waiting, Err(BackendError::Refused(m)) if m.contains("failed, dead, retry or schedule")),
        "{waiting:?}"
    );
    assert_eq!(n(&node(db, &prefix, &q, &["counts"]), "waiting"), 3);
    flush(db).await;
}

/// `qdeck purge DEAD --where` on Sidekiq's dead set: exactly the matching jobs go, through the
/// CLI's scan, confirmation and audit; the rest of the morgue is untouched. Then the rest are
/// redriven and die again: their payloads carry qdeck's stamp, which the reasons view counts.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_purge_where_then_redrive_stamps_what_dies_again() {
    let db = 14;
    flush(db).await;
    let q = uniq("pw");
    ruby(db, &q, &["contract", "0", "5"], &[]);
    let b = backend(settings(db, None)).await;
    let before = ids_in(b.as_ref(), "dead").await;
    assert_eq!(before.len(), 5);
    let victim = before[2].clone();
    let dir = tempfile::tempdir().expect("tempdir");
    cli_config(&dir, db, None);
    let out = common::qdeck(dir.path())
        .args([
            "purge",
            "dead",
            "--where",
            &format!("id = \"{victim}\""),
            "-y",
            "-o",
            "json",
        ])
        .output()
        .expect("run qdeck");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Json = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["deleted"], 1, "{r}");
    let mut after = ids_in(b.as_ref(), "dead").await;
    after.sort();
    let mut want: Vec<String> = before.into_iter().filter(|i| *i != victim).collect();
    want.sort();
    assert_eq!(after, want);
    assert_eq!(n(&ruby(db, &q, &["stats"], &[]), "dead_size"), 4);

    let r = redrive_all(b.as_ref(), "dead").await;
    assert_eq!(r.moved, 4, "{r:?}");
    let st = ruby(db, &q, &["refail", "4"], &[]);
    assert_eq!(n(&st, "dead_size"), 4, "{st}");
    let dead = first_page(b.as_ref(), "dead").await;
    assert_eq!(dead.len(), 4);
    assert_stamped_once(&dead);
    flush(db).await;
}

/// `qdeck cancel-scheduled scheduled JID` takes exactly that job out of Sidekiq's scheduled
/// set before it is due; an unknown jid changes nothing (exit 4).
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_cancel_scheduled_removes_exactly_that_job() {
    let db = 15;
    flush(db).await;
    let q = uniq("cs");
    ruby(db, &q, &["schedule", "3"], &[]);
    let b = backend(settings(db, None)).await;
    let req = BrowseRequest {
        cursor: None,
        max: 10,
        force: false,
    };
    let before: Vec<String> = b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&QueueId::new("scheduled"), &req)
        .await
        .expect("scheduled jobs")
        .messages
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(before.len(), 3);
    let dir = tempfile::tempdir().expect("tempdir");
    cli_config(&dir, db, None);
    let run = |id: &str| {
        common::qdeck(dir.path())
            .args(["cancel-scheduled", "scheduled", id, "-y"])
            .output()
            .expect("run qdeck")
    };
    let out = run(&before[1]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run("no-such-jid");
    assert_eq!(out.status.code(), Some(4));
    let after: Vec<String> = b
        .scheduled()
        .expect("lists scheduled")
        .browse_scheduled(&QueueId::new("scheduled"), &req)
        .await
        .expect("scheduled jobs")
        .messages
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(after, vec![before[0].clone(), before[2].clone()]);
    assert_eq!(n(&ruby(db, &q, &["stats"], &[]), "scheduled_size"), 2);
    flush(db).await;
}

/// Redriven BullMQ jobs carry qdeck's stamp in their hash (fields BullMQ does not read); when
/// a worker with the bug still there fails them again, browse shows the stamp and the reasons
/// view counts the group as back after a redrive.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_redriven_jobs_are_stamped_and_marked_when_they_fail_again() {
    let (prefix, q) = (uniq("qs"), uniq("st"));
    node(2, &prefix, &q, &["failed", "4"]);
    let b = backend(settings(2, Some(&prefix))).await;
    let failed = format!("{q}/failed");
    let r = redrive_all(b.as_ref(), &failed).await;
    assert_eq!(r.moved, 4, "{r:?}");
    let c = node(2, &prefix, &q, &["refail", "4"]);
    assert_eq!(n(&c, "failed"), 4, "{c}");
    let again = first_page(b.as_ref(), &failed).await;
    assert_eq!(again.len(), 4);
    assert_stamped_once(&again);
    node(2, &prefix, &q, &["obliterate"]);
}

// ---------------------------------------------------------------------------------------
// Versions qdeck was not tested with are read-only, with the version named.

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn untested_bullmq_version_is_read_only() {
    let db = 10;
    flush(db).await;
    let (prefix, q) = (uniq("qd"), uniq("ver"));
    node(db, &prefix, &q, &["failed", "2"]);
    let mut c = raw(db).await;
    let _: () = redis::cmd("HSET")
        .arg(format!("{prefix}:{q}:meta"))
        .arg("version")
        .arg("bullmq:9.1.0")
        .query_async(&mut c)
        .await
        .expect("hset");
    let b = backend(settings(db, Some(&prefix))).await;
    let list = b.list_queues().await.expect("list");
    let failed = list
        .iter()
        .find(|i| i.id.as_str() == format!("{q}/failed"))
        .expect("listed");
    let caps = b.capabilities_for(failed);
    match &caps.redrive {
        RedriveMode::Unsupported(why) => assert!(why.contains("bullmq:9.1.0"), "{why}"),
        other => panic!("redrive allowed on an untested version: {other:?}"),
    }
    let (p, _rx) = OpProgress::new();
    let err = b
        .redrive(
            &RedriveRequest {
                source: failed.id.clone(),
                target: RedriveTarget::Origin,
                max: None,
                rate: None,
                only_ids: None,
                window: None,
            },
            &p,
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, BackendError::Refused(_)), "{err}");
    assert!(matches!(
        b.purge(&QueueId::new(q.clone()), &p).await,
        Err(BackendError::Refused(_))
    ));
    // Reading still works.
    assert_eq!(
        figures(b.as_ref(), &format!("{q}/failed")).await.depth,
        Some(2)
    );
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL"]
async fn url_with_password_in_the_profile_is_refused() {
    let mut s = settings(0, None);
    s.url = Some("redis://user:secret@127.0.0.1:6379".into());
    let p = Profile {
        name: "x".into(),
        kind: ProfileKind::Redis(s),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    };
    let err = build(&p).await.err().expect("refused");
    assert!(matches!(err, BackendError::Invalid(_)));
    assert!(!err.to_string().contains("secret"));
}

// ---------------------------------------------------------------------------------------
// kill -9 of `qdeck redrive` at random moments: every job stays in exactly one place.

fn trials() -> usize {
    std::env::var("QDECK_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

fn cli_config(dir: &tempfile::TempDir, db: u32, prefix: Option<&str>) -> PathBuf {
    let path = dir.path().join("config.toml");
    let mut text = format!(
        "[[profiles]]\nname = \"jobs\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {db}\n",
        redis_url()
    );
    if let Some(p) = prefix {
        text.push_str(&format!("prefix = \"{p}\"\n"));
    }
    std::fs::write(&path, text).expect("write config");
    path
}

/// Start `qdeck redrive SOURCE -y` slowly (small batches, a rate) and kill -9 it after a
/// random delay.
fn kill_redrive(config: &PathBuf, source: &str, total_ms: u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_qdeck"))
        .arg("--config")
        .arg(config)
        .arg("-p")
        .arg("jobs")
        .arg("redrive")
        .arg(source)
        .arg("--window")
        .arg("3")
        .arg("--rate")
        .arg("300")
        .arg("-y")
        .env("XDG_STATE_HOME", config.parent().expect("dir"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start qdeck");
    let wait = rand::random_range(0..total_ms);
    std::thread::sleep(Duration::from_millis(wait));
    // SIGKILL: no chance to clean up.
    let _ = child.kill();
    let _ = child.wait();
}

fn id_list(v: &Json, k: &str) -> Vec<String> {
    v[k].as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn bullmq_redrive_survives_kill_9() {
    let db = 11;
    flush(db).await;
    let prefix = uniq("qd");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cli_config(&dir, db, Some(&prefix));
    let count = 150;
    for round in 0..trials() {
        let q = uniq("kill");
        node(db, &prefix, &q, &["failed", &count.to_string()]);
        let all: HashSet<String> = id_list(&node(db, &prefix, &q, &["ids"]), "failed")
            .into_iter()
            .collect();
        assert_eq!(all.len(), count);
        kill_redrive(&config, &format!("{q}/failed"), 600);
        let ids = node(db, &prefix, &q, &["ids"]);
        let mut seen: Vec<String> = Vec::new();
        for state in [
            "failed",
            "wait",
            "prioritized",
            "completed",
            "active",
            "delayed",
        ] {
            seen.extend(id_list(&ids, state));
        }
        let set: HashSet<String> = seen.iter().cloned().collect();
        assert_eq!(
            seen.len(),
            set.len(),
            "round {round}: a job is in two places: {ids}"
        );
        assert_eq!(set, all, "round {round}: a job was lost: {ids}");
        eprintln!(
            "round {round}: {} failed, {} waiting after kill",
            id_list(&ids, "failed").len(),
            id_list(&ids, "wait").len()
        );
    }
    flush(db).await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn sidekiq_redrive_survives_kill_9() {
    let db = 12;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cli_config(&dir, db, None);
    let count = 100;
    for round in 0..trials() {
        flush(db).await;
        let q = uniq("kill");
        ruby(db, &q, &["dead", &count.to_string()], &[]);
        let all: HashSet<String> = id_list(&ruby(db, &q, &["ids"], &[]), "dead")
            .into_iter()
            .collect();
        assert_eq!(all.len(), count);
        kill_redrive(&config, "dead", 400);
        let ids = ruby(db, &q, &["ids"], &[]);
        let mut seen: Vec<String> = Vec::new();
        for state in ["dead", "queue", "done"] {
            seen.extend(id_list(&ids, state));
        }
        let set: HashSet<String> = seen.iter().cloned().collect();
        assert_eq!(
            seen.len(),
            set.len(),
            "round {round}: a job is in two places: {ids}"
        );
        assert_eq!(set, all, "round {round}: a job was lost: {ids}");
        eprintln!(
            "round {round}: {} dead, {} queued after kill",
            id_list(&ids, "dead").len(),
            id_list(&ids, "queue").len()
        );
    }
    flush(db).await;
}

// ---------------------------------------------------------------------------------------
// Benchmarks, run by scripts/bench_redis.sh (they print figures, assert no timing).

/// Refresh of every queue under BENCH_PREFIX: commands and round trips per refresh, time.
#[tokio::test]
#[ignore = "benchmark: scripts/bench_redis.sh"]
async fn manual_bench_redis_refresh() {
    let db: u32 = std::env::var("BENCH_DB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let prefix = std::env::var("BENCH_PREFIX").expect("BENCH_PREFIX");
    let b = backend(settings(db, Some(&prefix))).await;
    let ids: Vec<QueueId> = b
        .list_queues()
        .await
        .expect("list")
        .into_iter()
        .filter(|q| !q.is_dlq)
        .map(|q| q.id)
        .collect();
    b.stats(&ids).await.expect("warm-up (loads the script)");
    let calls_before = b.api_calls().snapshot();
    let mut info = raw(db).await;
    let stat = |s: String| -> u64 {
        s.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let rounds = 10;
    let before: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut info)
        .await
        .expect("info");
    let t0 = std::time::Instant::now();
    for _ in 0..rounds {
        let batch = b.stats(&ids).await.expect("stats");
        assert_eq!(batch.stats.len(), ids.len());
    }
    let ms = t0.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
    let after: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut info)
        .await
        .expect("info");
    let calls_after = b.api_calls().snapshot();
    let trips = calls_after.get("pipeline").copied().unwrap_or(0)
        - calls_before.get("pipeline").copied().unwrap_or(0);
    // The INFO call itself is one command.
    let cmds = (stat(after) - stat(before)).saturating_sub(1);
    println!(
        "BENCH refresh queues={} ms_per_refresh={ms:.2} round_trips_per_refresh={} commands_per_refresh={}",
        ids.len(),
        trips as f64 / rounds as f64,
        cmds as f64 / rounds as f64
    );
}

/// First page of a big failed set.
#[tokio::test]
#[ignore = "benchmark: scripts/bench_redis.sh"]
async fn manual_bench_redis_browse_failed() {
    let db: u32 = std::env::var("BENCH_DB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let prefix = std::env::var("BENCH_PREFIX").expect("BENCH_PREFIX");
    let q = std::env::var("BENCH_QUEUE").expect("BENCH_QUEUE");
    let b = backend(settings(db, Some(&prefix))).await;
    let id = QueueId::new(format!("{q}/failed"));
    let depth = figures(b.as_ref(), id.as_str()).await.depth;
    let t0 = std::time::Instant::now();
    let page = b
        .browse(
            &id,
            &BrowseRequest {
                cursor: None,
                max: 50,
                force: false,
            },
        )
        .await
        .expect("browse");
    let first = t0.elapsed().as_secs_f64() * 1000.0;
    println!(
        "BENCH browse failed_set={} first_page_jobs={} first_page_ms={first:.2}",
        depth.unwrap_or(0),
        page.messages.len()
    );
}

/// Sidekiq dead jobs as Sidekiq stores them (a sorted set of JSON payloads), written
/// directly: the rate test needs jobs to move, not a Sidekiq process.
async fn plant_sidekiq_dead(db: u32, queue: &str, n: usize) {
    let mut c = raw(db).await;
    let now = chrono::Utc::now().timestamp() as f64;
    for i in 0..n {
        let job = serde_json::json!({
            "class": "QdeckJob", "args": ["fail", i], "queue": queue, "retry": 0,
            "jid": format!("{:024x}", i + 1), "created_at": now, "enqueued_at": now,
            "failed_at": now, "error_class": "RuntimeError", "error_message": "boom",
        });
        let _: () = redis::cmd("ZADD")
            .arg("dead")
            .arg(now + i as f64)
            .arg(job.to_string())
            .query_async(&mut c)
            .await
            .expect("zadd dead");
    }
}

async fn zcard(db: u32, key: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query_async(&mut raw(db).await)
        .await
        .expect("zcard")
}

/// Redis used to turn a bad rate into no limit at all. A bad rate now never reaches it (the
/// CLI refuses it, with the one wording, before anything moves) and a good one paces it:
/// 5 jobs at 2/s go in batches of at most one second's worth, so they take 2 s, where
/// without a rate they take milliseconds.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL"]
async fn sidekiq_redrive_honours_a_rate_and_a_bad_one_is_refused() {
    let _turn = SIDEKIQ_DB.lock().await;
    flush(3).await;
    plant_sidekiq_dead(3, "rated", 5).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cli_config(&dir, 3, None);
    for bad in ["0", "-1", "NaN", "abc"] {
        let out = Command::new(env!("CARGO_BIN_EXE_qdeck"))
            .arg("--config")
            .arg(&config)
            .args(["-p", "jobs", "redrive", "dead", "-y"])
            .arg(format!("--rate={bad}"))
            .env("XDG_STATE_HOME", dir.path())
            .output()
            .expect("run qdeck");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--rate={bad}: {err}");
        assert!(err.contains(qdeck_model::rate::RATE_RULE), "{err}");
    }
    assert_eq!(zcard(3, "dead").await, 5, "a refused rate moved nothing");

    let b = backend(settings(3, None)).await;
    let req = RedriveRequest {
        source: QueueId::new("dead"),
        target: RedriveTarget::Origin,
        max: None,
        rate: Some(qdeck_model::rate::Rate::fixed(2.0)),
        only_ids: None,
        window: None,
    };
    let started = std::time::Instant::now();
    let rep = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive");
    let took = started.elapsed();
    assert_eq!((rep.moved, rep.failed), (5, 0), "{rep:?}");
    assert_eq!(zcard(3, "dead").await, 0);
    assert!(
        took >= Duration::from_millis(1900),
        "5 jobs at 2/s took {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    flush(3).await;
}

/// A redriven Sidekiq job's `enqueued_at` keeps the unit its own times are in: integer
/// milliseconds for a job Sidekiq 8 wrote, float seconds for one an earlier version wrote
/// (Sidekiq reads it back in the unit it writes; seconds read as ms put the job in 1970).
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL"]
async fn sidekiq_redrive_keeps_enqueued_at_in_the_jobs_own_unit() {
    let _turn = SIDEKIQ_DB.lock().await;
    flush(3).await;
    let mut c = raw(3).await;
    let secs = chrono::Utc::now().timestamp() as f64 - 60.0;
    let ms = (secs * 1000.0) as i64;
    for (jid, queue, at) in [
        ("a00000000000000000000001", "unit_ms", serde_json::json!(ms)),
        (
            "a00000000000000000000002",
            "unit_s",
            serde_json::json!(secs + 0.25),
        ),
    ] {
        let job = serde_json::json!({
            "class": "QdeckJob", "args": [1], "queue": queue, "retry": 0, "jid": jid,
            "created_at": at, "enqueued_at": at, "failed_at": at,
            "error_class": "RuntimeError", "error_message": "boom",
        });
        let _: () = redis::cmd("ZADD")
            .arg("dead")
            .arg(secs)
            .arg(job.to_string())
            .query_async(&mut c)
            .await
            .expect("zadd dead");
    }
    let b = backend(settings(3, None)).await;
    let rep = redrive_all(b.as_ref(), "dead").await;
    assert_eq!(rep.moved, 2, "{rep:?}");
    let now_s = chrono::Utc::now().timestamp() as f64;
    for (queue, in_ms) in [("unit_ms", true), ("unit_s", false)] {
        let raw_job: String = redis::cmd("LINDEX")
            .arg(format!("queue:{queue}"))
            .arg(0)
            .query_async(&mut c)
            .await
            .expect("lindex");
        let job: serde_json::Value = serde_json::from_str(&raw_job).unwrap();
        let enq = &job["enqueued_at"];
        if in_ms {
            let v = enq
                .as_i64()
                .unwrap_or_else(|| panic!("not integer ms: {raw_job}"));
            assert!((v as f64 / 1000.0 - now_s).abs() < 600.0, "{raw_job}");
        } else {
            let v = enq.as_f64().unwrap();
            assert!((v - now_s).abs() < 600.0, "not seconds: {raw_job}");
        }
    }
}
