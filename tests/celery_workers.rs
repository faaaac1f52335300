//! Celery workers through Celery's own remote control, against real `celery worker` processes
//! (tests/fixtures/celery/celery_workers.py) on Redis and RabbitMQ: what qdeck shows per
//! worker equals what Celery's `app.control.inspect()` answers in the same test, a worker
//! that never answers (a solo pool busy with a task) costs one timeout and a note, and the
//! queue's in-flight figure counts the tasks the workers hold.
//!
//! Needs QDECK_TEST_PYTHON (celery[redis]), QDECK_TEST_REDIS_URL, QDECK_TEST_AMQP_URL and
//! QDECK_TEST_RABBITMQ_MGMT (.ci/run sets them). A worker's mailbox is per Redis database,
//! so the Redis cases own database 3 (no other test uses it), one at a time; on RabbitMQ
//! queue and worker names are unique per run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::celery::{inspect, python, redis_url, run_script, wait_for, Flower, Rmq, Worker};
use qdeck_backend::celery::workers::{CeleryWorker, WorkerReport};
use qdeck_backend::{build, Backend};
use qdeck_model::config::{Profile, ProfileKind, RedisSettings};
use qdeck_model::domain::*;
use serde_json::Value as Json;

const DB: u32 = 3;
static DB_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// A broadcast on RabbitMQ reaches every worker of the vhost: one RabbitMQ case at a time.
static RMQ_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn broker() -> String {
    format!("{}/{DB}", redis_url())
}

async fn flush() {
    let mut c = redis::Client::open(broker())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to QDECK_TEST_REDIS_URL");
    let _: () = redis::cmd("FLUSHDB").query_async(&mut c).await.unwrap();
}

/// A config dir whose one profile `p` is Celery on this file's Redis database.
fn celery_redis_config() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[[profiles]]\nname = \"p\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {DB}\nflavors = [\"celery\"]\n",
            redis_url()
        ),
    )
    .unwrap();
    dir
}

fn profile(name: &str, kind: ProfileKind) -> Profile {
    Profile {
        name: name.into(),
        kind,
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    }
}

async fn redis_backend() -> Arc<dyn Backend> {
    let p = profile(
        "celery-workers",
        ProfileKind::Redis(RedisSettings {
            url: Some(redis_url()),
            db: Some(i64::from(DB)),
            flavors: Some(vec!["celery".into()]),
            ..Default::default()
        }),
    );
    build(&p).await.expect("build redis backend")
}

/// The RabbitMQ backend, its password given as a secret (never through the environment).
async fn rmq_backend(rmq: &Rmq) -> Arc<dyn Backend> {
    let s = qdeck_model::config::RabbitmqSettings {
        amqp_url: Some(rmq.bare.clone()),
        management_url: Some(rmq.mgmt.clone()),
        username: Some(rmq.user.clone()),
        password_env: Some("QDECK_TEST_CELERY_RMQ_PASSWORD".into()),
        ..Default::default()
    };
    let secrets = qdeck_model::config::secret::SecretMap::new()
        .with("QDECK_TEST_CELERY_RMQ_PASSWORD", &rmq.password);
    qdeck_backend::build_with(&profile("celery-rmq", ProfileKind::Rabbitmq(s)), &secrets)
        .await
        .expect("backend")
}

fn ids(v: &Json) -> BTreeSet<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    t.get("request")
                        .unwrap_or(t)
                        .get("id")
                        .and_then(Json::as_str)
                        .unwrap()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn task_ids(tasks: &[qdeck_backend::celery::workers::WorkerTask]) -> BTreeSet<String> {
    tasks.iter().map(|t| t.id.clone()).collect()
}

fn worker<'a>(rep: &'a WorkerReport, host: &str) -> &'a CeleryWorker {
    rep.workers
        .iter()
        .find(|w| w.hostname == host)
        .unwrap_or_else(|| panic!("no worker {host} in {rep:?}"))
}

/// qdeck's view of `host` equals Celery's inspect answer for it, field by field.
fn assert_same(rep: &WorkerReport, celery: &Json, host: &str) {
    let w = worker(rep, host);
    let s = &celery["stats"][host];
    assert!(w.answered, "{w:?}");
    assert_eq!(w.pid, s["pid"].as_u64());
    assert_eq!(w.prefetch_count, s["prefetch_count"].as_u64());
    assert_eq!(w.concurrency, s["pool"]["max-concurrency"].as_u64());
    let totals: BTreeMap<String, u64> = s["total"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(w.processed, totals);
    assert_eq!(task_ids(&w.active), ids(&celery["active"][host]));
    assert_eq!(task_ids(&w.reserved), ids(&celery["reserved"][host]));
    assert_eq!(task_ids(&w.scheduled), ids(&celery["scheduled"][host]));
    let queues: Vec<String> = celery["active_queues"][host]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(w.queues, queues);
}

fn sent(answer: &Json) -> BTreeSet<String> {
    answer["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect()
}

fn counts(celery: &Json, host: &str) -> (usize, usize, usize) {
    let n = |k: &str| celery[k][host].as_array().map_or(0, Vec::len);
    (n("active"), n("reserved"), n("scheduled"))
}

/// Two workers on Redis, one busy on a threads pool and one solo pool stuck in a long task:
/// qdeck's one broadcast finds the first exactly as `inspect()` does, lists the second as
/// silent with a note after one timeout, and counts the tasks held in the queue's figures,
/// in `qdeck consumers` and in its JSON.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_workers_on_redis_match_celery_inspect() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let url = broker();
    let (wt, ws) = ("wt@qdeck-test", "ws@qdeck-test");
    let _threads = Worker::start(&url, wt, "threads", 2, "cw-tasks");
    let _solo = Worker::start(&url, ws, "solo", 1, "cw-solo");
    wait_for(&url, &[wt, ws], |_| true);
    let running = sent(&run_script(
        "celery_workers.py",
        &["send", &url, "cw-tasks", "sleep", "3"],
    ));
    let later = sent(&run_script(
        "celery_workers.py",
        &["send", &url, "cw-tasks", "eta", "1"],
    ));
    wait_for(&url, &[wt], |c| counts(c, wt) == (2, 1, 1));
    run_script("celery_workers.py", &["send", &url, "cw-solo", "long", "1"]);
    // The solo pool runs the task in its only thread: from now on it reads no mailbox.
    std::thread::sleep(Duration::from_millis(1500));
    let celery = inspect(&url);
    assert!(celery["stats"].get(ws).is_none(), "{celery}");

    let b = redis_backend().await;
    let t0 = Instant::now();
    let rep = qdeck_backend::celery_of(b.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    let took = t0.elapsed();
    assert_same(&rep, &celery, wt);
    let w = worker(&rep, wt);
    assert_eq!(w.pool.as_deref(), Some("threads"));
    let held: BTreeSet<String> = task_ids(&w.active)
        .into_iter()
        .chain(task_ids(&w.reserved))
        .collect();
    assert_eq!(held, running);
    assert_eq!(task_ids(&w.scheduled), later);
    assert!(w
        .active
        .iter()
        .all(|t| t.name == "qdeck.sleep" && t.runtime_secs.is_some()));
    // The silent worker: one timeout, no hang, a note that names it.
    let silent = worker(&rep, ws);
    assert!(!silent.answered);
    assert!(rep.notes.iter().any(|n| n.contains(ws)), "{:?}", rep.notes);
    assert!(took < Duration::from_secs(4), "{took:?}");

    // Consumers of the queue: the worker with everything it holds from it.
    let list = b
        .consumers(&QueueId::new("cw-tasks"))
        .await
        .expect("consumers");
    let c = list.iter().find(|c| c.tag == wt).expect("worker listed");
    let (a, r, s) = counts(&celery, wt);
    assert_eq!(c.holding, Some((a + r + s) as u64));
    assert_eq!(c.status, WorkerState::Busy);
    assert_eq!(
        c.prefetch,
        celery["stats"][wt]["prefetch_count"]
            .as_u64()
            .map(|p| p as u32)
    );
    let q = list
        .iter()
        .find(|c| c.tag == ws)
        .expect("silent worker listed");
    assert_eq!(q.status, WorkerState::Unknown);
    // In flight: the unacked entries (reserved) plus the tasks acknowledged when they
    // started; delayed: the eta task the worker holds until due.
    let st = b.stats(&[QueueId::new("cw-tasks")]).await.expect("stats");
    assert_eq!(st.stats[0].in_flight, Some((a + r) as u64));
    assert_eq!(st.stats[0].delayed, Some(s as u64));

    // The CLI's JSON carries Celery's own description of the worker.
    let dir = celery_redis_config();
    let mut cmd = common::qdeck(dir.path());
    cmd.args(["consumers", "cw-tasks", "-o", "json"]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let row = v
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tag"] == wt)
        .expect("worker in JSON");
    assert_eq!(row["celery"]["pid"], celery["stats"][wt]["pid"]);
    assert_eq!(row["celery"]["active"].as_array().unwrap().len(), 2);
    drop((_threads, _solo));
    flush().await;
}

/// On RabbitMQ the worker's AMQP consumer of the queue is shown as the Celery worker (matched
/// by the connection that also consumes its mailbox), with the same figures `inspect()`
/// gives; the in-flight figure counts the tasks it started.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON with celery"]
async fn celery_workers_on_rabbitmq_match_celery_inspect() {
    let _g = RMQ_LOCK.lock().await;
    let rmq = Rmq::from_env();
    let _ = python();
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let queue = format!("qdeck-test-cw-{tag}");
    let host = format!("wr-{tag}@qdeck-test");
    let url = rmq.kombu_url.clone();
    let _w = Worker::start(&url, &host, "threads", 2, &queue);
    wait_for(&url, &[&host], |_| true);
    let running = sent(&run_script(
        "celery_workers.py",
        &["send", &url, &queue, "sleep", "3"],
    ));
    wait_for(&url, &[&host], |c| counts(c, &host) == (2, 1, 0));
    let celery = inspect(&url);

    let b = rmq_backend(&rmq).await;
    let rep = qdeck_backend::celery_of(b.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert_same(&rep, &celery, &host);
    let w = worker(&rep, &host);
    let held: BTreeSet<String> = task_ids(&w.active)
        .into_iter()
        .chain(task_ids(&w.reserved))
        .collect();
    assert_eq!(held, running);

    let list = b.consumers(&QueueId::new(&queue)).await.expect("consumers");
    assert_eq!(list.len(), 1, "{list:?}");
    let c = &list[0];
    assert_eq!(c.tag, host);
    assert_eq!(c.holding, Some(3));
    let peer = c.peer.as_deref().unwrap_or("");
    assert!(peer.contains("pid") && peer.contains("channel"), "{peer}");
    assert!(peer.contains("threads ×2"), "{peer}");
    assert_eq!(c.state, "busy ×2");
    // The management API's unacknowledged count lags a few seconds; the worker's reserved
    // task is there once it caught up, and the two started ones are added from the answer.
    let mut in_flight = None;
    for _ in 0..40 {
        let st = b.stats(&[QueueId::new(&queue)]).await.expect("stats");
        in_flight = st.stats[0].in_flight;
        if in_flight == Some(3) {
            break;
        }
        b.consumers(&QueueId::new(&queue)).await.expect("consumers");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(in_flight, Some(3));
    drop(_w);
    run_script("celery_scene.py", &["delete", &url, &queue]);
}

/// Celery's failed tasks in a Redis result backend: a real worker fails tasks and stores
/// their results; qdeck lists the FAILURE results as `celery-results/failed` with the count,
/// ids and tracebacks Celery's AsyncResult reads, groups them by task and exception, and
/// refuses to redrive or purge them (a result holds no message).
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_failure_results_are_a_read_only_failed_view() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let url = broker();
    let host = "wf@qdeck-test";
    let _w = Worker::start_with(&url, Some(&url), host, "threads", 2, "cw-fail");
    wait_for(&url, &[host], |_| true);
    let failed = sent(&run_script(
        "celery_workers.py",
        &["send", &url, "cw-fail", "fail", "3", &url],
    ));
    let fine = sent(&run_script(
        "celery_workers.py",
        &["send", &url, "cw-fail", "add", "2", &url],
    ));
    let all: Vec<&str> = failed
        .iter()
        .chain(fine.iter())
        .map(String::as_str)
        .collect();
    let mut args = vec!["results", url.as_str()];
    args.extend(all.iter().copied());
    let mut celery = Json::Null;
    for _ in 0..40 {
        celery = run_script("celery_workers.py", &args);
        if all
            .iter()
            .all(|i| matches!(celery[*i]["state"].as_str(), Some("FAILURE" | "SUCCESS")))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let celery_failed: BTreeSet<String> = all
        .iter()
        .filter(|i| celery[**i]["state"] == "FAILURE")
        .map(|i| (*i).to_string())
        .collect();
    assert_eq!(celery_failed, failed, "{celery}");

    let b = redis_backend().await;
    let list = b.list_queues().await.expect("list");
    let info = list
        .iter()
        .find(|q| q.id.as_str() == "celery-results/failed")
        .expect("failed results listed");
    let caps = b.capabilities_for(info);
    assert!(
        matches!(&caps.redrive, RedriveMode::Unsupported(r) if r.contains("nothing to resend"))
    );
    let st = b
        .stats(&[QueueId::new("celery-results/failed")])
        .await
        .expect("stats");
    assert_eq!(st.stats[0].depth, Some(failed.len() as u64));
    let page = b
        .browse(
            &QueueId::new("celery-results/failed"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: false,
            },
        )
        .await
        .expect("browse");
    let ids: BTreeSet<String> = page.messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids, failed);
    for m in &page.messages {
        let tb = m
            .meta
            .iter()
            .find(|(k, _)| k == "traceback")
            .and_then(|(_, v)| v.as_str())
            .expect("traceback");
        assert_eq!(Some(tb), celery[m.id.as_str()]["traceback"].as_str());
        let t = qdeck_backend::celery::decode(m).expect("decoded as its task");
        assert_eq!(t.task, "qdeck.fail");
    }

    // The CLI: reasons group by task and exception; redrive and purge are refused.
    let dir = celery_redis_config();
    let mut cmd = common::qdeck(dir.path());
    cmd.args(["reasons", "celery-results/failed", "-o", "json"]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    assert_eq!(
        groups[0]["signature"],
        "qdeck.fail: ValueError: card <n> declined"
    );
    assert_eq!(groups[0]["count"], failed.len() as u64);
    for action in [
        &["redrive", "celery-results/failed", "-y"][..],
        &["purge", "celery-results/failed", "-y"],
    ] {
        let mut cmd = common::qdeck(dir.path());
        cmd.args(action);
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{action:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("nothing to resend"), "{action:?}: {err}");
    }
    // Still there.
    let st = b
        .stats(&[QueueId::new("celery-results/failed")])
        .await
        .expect("stats");
    assert_eq!(st.stats[0].depth, Some(failed.len() as u64));
    drop(_w);
    flush().await;
}

/// qdeck's workers equal Flower's `/api/workers` (the hostnames, each pid, active tasks and
/// consumed queues); qdeck's depth of a queue equals Flower's `/api/queues/length`.
/// Flower's view: every worker (no task lists), then `host` alone with its tasks (Flower 2.x
/// fetches task lists only for one worker).
async fn flower_workers(flower: &Flower, host: &str) -> (Json, Json) {
    let all = flower.get("/api/workers?refresh=1").await.expect("workers");
    let one = flower
        .get(&format!(
            "/api/workers?refresh=1&workername={}",
            urlencoding::encode(host)
        ))
        .await
        .expect("one worker");
    (all, one)
}

fn assert_agrees_with_flower(rep: &WorkerReport, (workers, one): &(Json, Json), host: &str) {
    let answered: BTreeSet<String> = rep
        .workers
        .iter()
        .filter(|w| w.answered)
        .map(|w| w.hostname.clone())
        .collect();
    let flower: BTreeSet<String> = workers.as_object().unwrap().keys().cloned().collect();
    assert_eq!(answered, flower);
    let w = worker(rep, host);
    let f = &one[host];
    assert_eq!(w.pid, f["stats"]["pid"].as_u64());
    assert_eq!(
        w.concurrency,
        f["stats"]["pool"]["max-concurrency"].as_u64()
    );
    assert_eq!(task_ids(&w.active), ids(&f["active"]));
    assert_eq!(task_ids(&w.reserved), ids(&f["reserved"]));
    let queues: Vec<String> = f["active_queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(w.queues, queues);
}

fn flower_length(lengths: &Json, queue: &str) -> Option<u64> {
    lengths["active_queues"]
        .as_array()?
        .iter()
        .find(|q| q["name"] == queue)?["messages"]
        .as_u64()
}

/// Flower run against the same Redis: its workers and queue length are qdeck's.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery and flower"]
async fn celery_on_redis_agrees_with_flower() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let url = broker();
    let host = "wfl@qdeck-test";
    let _w = Worker::start(&url, host, "threads", 2, "cw-flower");
    wait_for(&url, &[host], |_| true);
    run_script(
        "celery_workers.py",
        &["send", &url, "cw-flower", "sleep", "20"],
    );
    wait_for(&url, &[host], |c| counts(c, host).0 == 2);
    let flower = Flower::start(&url, None).await;
    let workers = flower_workers(&flower, host).await;
    let lengths = flower.get("/api/queues/length").await.expect("lengths");
    let b = redis_backend().await;
    let rep = qdeck_backend::celery_of(b.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert_agrees_with_flower(&rep, &workers, host);
    let st = b.stats(&[QueueId::new("cw-flower")]).await.expect("stats");
    assert!(st.stats[0].depth.unwrap() > 0, "{:?}", st.stats[0]);
    assert_eq!(st.stats[0].depth, flower_length(&lengths, "cw-flower"));
    drop((flower, _w));
    flush().await;
}

/// Flower run against the same RabbitMQ (queue lengths from the management API, as qdeck's):
/// its workers are qdeck's, and its length (ready plus unacknowledged) is qdeck's depth plus
/// the broker's part of the in-flight figure.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON with celery and flower"]
async fn celery_on_rabbitmq_agrees_with_flower() {
    let _g = RMQ_LOCK.lock().await;
    let rmq = Rmq::from_env();
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let queue = format!("qdeck-test-cwf-{tag}");
    let host = format!("wrf-{tag}@qdeck-test");
    let url = rmq.kombu_url.clone();
    let _w = Worker::start(&url, &host, "threads", 2, &queue);
    wait_for(&url, &[&host], |_| true);
    run_script("celery_workers.py", &["send", &url, &queue, "sleep", "20"]);
    wait_for(&url, &[&host], |c| counts(c, &host).0 == 2);
    let mgmt = rmq.mgmt.trim_end_matches('/');
    let (scheme, rest) = mgmt.split_once("://").unwrap();
    let api = format!("{scheme}://{}:{}@{rest}/api/", rmq.user, rmq.password);
    let flower = Flower::start(&url, Some(&api)).await;
    let workers = flower_workers(&flower, &host).await;
    let b = rmq_backend(&rmq).await;
    let rep = qdeck_backend::celery_of(b.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert_agrees_with_flower(&rep, &workers, &host);
    // Both read the management API, whose figures lag a few seconds: compare once they agree
    // with the tasks sent (20 = 2 started and acknowledged + the rest ready or unacked).
    let (mut ours, mut theirs) = (None, None);
    for _ in 0..40 {
        let lengths = flower.get("/api/queues/length").await.expect("lengths");
        theirs = flower_length(&lengths, &queue);
        let rep = qdeck_backend::celery_of(b.as_ref())
            .unwrap()
            .workers()
            .await
            .expect("discover");
        let st = b.stats(&[QueueId::new(&queue)]).await.expect("stats");
        let s = &st.stats[0];
        ours = Some(s.depth.unwrap_or(0) + s.in_flight.unwrap_or(0) - rep.acked_held(&queue));
        if ours == theirs && theirs == Some(18) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(ours, theirs);
    assert_eq!(theirs, Some(18));
    drop((flower, _w));
    run_script("celery_scene.py", &["delete", &url, &queue]);
}

/// Wall time of one run of `cmd`, best of `n`.
fn best_of(n: usize, mut run: impl FnMut()) -> Duration {
    (0..n)
        .map(|_| {
            let t0 = Instant::now();
            run();
            t0.elapsed()
        })
        .min()
        .unwrap()
}

/// Benchmark, run by hand (`cargo test --test celery_workers manual_ -- --ignored --nocapture`):
/// 20 Celery workers on Redis (database 3); qdeck's discovery (one broadcast of stats,
/// active, reserved, scheduled and active_queues) against `celery inspect stats` (stats alone),
/// both as commands (`qdeck consumers` vs `celery inspect stats`) and inside the process
/// (`Backend::celery_workers` vs `app.control.inspect().stats()`), best of 5 each, same run.
#[tokio::test]
#[ignore = "benchmark: run by hand"]
async fn manual_celery_worker_discovery_20_workers() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let url = broker();
    let n = 20;
    let hosts: Vec<String> = (0..n).map(|i| format!("wb{i}@qdeck-bench")).collect();
    let _workers: Vec<Worker> = hosts
        .iter()
        .map(|h| Worker::start(&url, h, "solo", 1, "cw-bench"))
        .collect();
    let refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    wait_for(&url, &refs, |_| true);
    let b = redis_backend().await;
    let rep = qdeck_backend::celery_of(b.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert_eq!(rep.workers.iter().filter(|w| w.answered).count(), n);

    let mut ours = Duration::MAX;
    for _ in 0..5 {
        // Past the reuse window: every round is a broadcast.
        tokio::time::sleep(Duration::from_millis(3100)).await;
        let t0 = Instant::now();
        let rep = qdeck_backend::celery_of(b.as_ref())
            .unwrap()
            .workers()
            .await
            .expect("discover");
        ours = ours.min(t0.elapsed());
        assert_eq!(rep.workers.iter().filter(|w| w.answered).count(), n);
    }
    let theirs = (0..5)
        .map(|_| {
            let v = run_script("celery_workers.py", &["bench", &url]);
            assert_eq!(v["workers"].as_u64(), Some(n as u64));
            Duration::from_secs_f64(v["ms"].as_f64().unwrap() / 1000.0)
        })
        .min()
        .unwrap();

    let dir = celery_redis_config();
    let cli_ours = best_of(5, || {
        let mut c = common::qdeck(dir.path());
        c.args(["consumers", "cw-bench", "-o", "json"]);
        let out = c.output().unwrap();
        assert!(out.status.success());
        let v: Json = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v.as_array().unwrap().len(), n);
    });
    let py = python();
    let cli_theirs = best_of(5, || {
        let out = std::process::Command::new(&py)
            .args(["-m", "celery", "-A", "celery_workers", "inspect", "stats"])
            .current_dir(common::celery::fixtures())
            .env("QDECK_CELERY_BROKER", &url)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{n} nodes online")), "{text}");
    });
    println!(
        "celery worker discovery, {n} workers on Redis: in process qdeck {:.1} ms (one broadcast, 5 commands) vs inspect().stats() {:.1} ms: ratio {:.3}; as commands `qdeck consumers` {:.1} ms vs `celery inspect stats` {:.1} ms: ratio {:.3}",
        ours.as_secs_f64() * 1000.0,
        theirs.as_secs_f64() * 1000.0,
        ours.as_secs_f64() / theirs.as_secs_f64(),
        cli_ours.as_secs_f64() * 1000.0,
        cli_theirs.as_secs_f64() * 1000.0,
        cli_ours.as_secs_f64() / cli_theirs.as_secs_f64(),
    );
    drop(_workers);
    flush().await;
}

/// The console's workers view lists Celery workers as it lists RabbitMQ consumers: the
/// hostname, pid, pool, what runs and for how long, what it holds; broker text is escaped.
#[test]
fn console_workers_view_shows_celery_workers() {
    use common::console::*;
    use qdeck::tui::{update, Action};
    use qdeck_backend::celery::workers::WorkerTask;
    let mut st = populated();
    update(&mut st, key('g'));
    update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    let busy = CeleryWorker {
        hostname: "w1@billing-7".into(),
        answered: true,
        pid: Some(4242),
        pool: Some("threads".into()),
        concurrency: Some(2),
        prefetch_count: Some(8),
        processed_total: Some(1200),
        active: vec![WorkerTask {
            id: "3f2a9c1e-0000".into(),
            name: "qdeck.sleep".into(),
            runtime_secs: Some(12.5),
            ..Default::default()
        }],
        queues: vec![q.as_str().to_string()],
        ..Default::default()
    };
    let silent = CeleryWorker {
        hostname: "w2@\u{1b}[2Jhost".into(),
        notes: vec!["did not answer within 1.5 s".into()],
        ..Default::default()
    };
    let report = WorkerReport {
        workers: vec![busy, silent],
        at_ms: st.now_ms,
        ..Default::default()
    };
    let consumers = report.consumers(&q, q.as_str());
    update(
        &mut st,
        Action::Consumers {
            queue: q,
            result: Ok(consumers),
        },
    );
    let screen = text(&draw(&st, 160, 14));
    assert!(screen.contains("w1@billing-7"), "{screen}");
    assert!(screen.contains("pid 4242"), "{screen}");
    assert!(screen.contains("threads ×2"), "{screen}");
    assert!(
        screen.contains("running qdeck.sleep 3f2a9c1e 12.5s"),
        "{screen}"
    );
    assert!(screen.contains("busy ×1"), "{screen}");
    assert!(screen.contains("no answer"), "{screen}");
    assert!(screen.contains("did not answer"), "{screen}");
    assert!(!screen.contains('\u{1b}'), "{screen}");
}

/// With no worker a discovery answers at once with a note (PUBLISH reached nobody); with one,
/// qdeck's reply binding and reply list are gone once it has its answers.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_remote_control_on_redis_leaves_nothing_behind() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let t0 = Instant::now();
    let rep = qdeck_backend::celery_of(redis_backend().await.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert!(rep.workers.is_empty());
    assert!(
        rep.notes
            .iter()
            .any(|n| n.contains("no Celery worker listens")),
        "{:?}",
        rep.notes
    );

    let url = broker();
    let host = "wl@qdeck-test";
    let _w = Worker::start(&url, host, "threads", 1, "cw-leave");
    wait_for(&url, &[host], |_| true);
    let mut c = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let bindings = "_kombu.binding.reply.celery.pidbox";
    let before: Vec<String> = redis::cmd("SMEMBERS")
        .arg(bindings)
        .query_async(&mut c)
        .await
        .unwrap();
    let lists_before: Vec<String> = redis::cmd("KEYS")
        .arg("*.reply.celery.pidbox*")
        .query_async(&mut c)
        .await
        .unwrap();
    let rep = qdeck_backend::celery_of(redis_backend().await.as_ref())
        .unwrap()
        .workers()
        .await
        .expect("discover");
    assert!(worker(&rep, host).answered);
    let after: Vec<String> = redis::cmd("SMEMBERS")
        .arg(bindings)
        .query_async(&mut c)
        .await
        .unwrap();
    let lists_after: Vec<String> = redis::cmd("KEYS")
        .arg("*.reply.celery.pidbox*")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        before.into_iter().collect::<BTreeSet<_>>(),
        after.into_iter().collect::<BTreeSet<_>>()
    );
    assert_eq!(
        lists_before.into_iter().collect::<BTreeSet<_>>(),
        lists_after.into_iter().collect::<BTreeSet<_>>()
    );
    drop(_w);
    flush().await;
}

/// `worker-control revoke` at tier `full`: confirmed by `--yes`, sent through Celery's
/// remote control, the worker reports the task revoked (Celery's own `revoked()` agrees),
/// and the audit log has the line; below `full` it is refused before anything is sent, and
/// audited as refused.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn worker_control_revoke_is_gated_sent_and_audited() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let url = broker();
    let host = "wc@qdeck-test";
    let _w = Worker::start(&url, host, "threads", 1, "cw-ctl");
    wait_for(&url, &[host], |_| true);
    let later = sent(&run_script(
        "celery_workers.py",
        &["send", &url, "cw-ctl", "eta", "1"],
    ));
    let id = later.iter().next().unwrap().clone();
    wait_for(&url, &[host], |c| counts(c, host).2 == 1);
    let profile = |access: &str| {
        format!(
            "[[profiles]]\nname = \"p\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {DB}\nflavors = [\"celery\"]\naccess = \"{access}\"\n",
            redis_url()
        )
    };
    let audit = |dir: &std::path::Path| -> Vec<Json> {
        std::fs::read_to_string(dir.join("state/qdeck/audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };

    let low = tempfile::tempdir().unwrap();
    std::fs::write(low.path().join("config.toml"), profile("redrive")).unwrap();
    let mut c = common::qdeck(low.path());
    c.args(["worker-control", "revoke", &id, "-y"]);
    let out = c.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = audit(low.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["action"], "worker-control");
    assert_eq!(lines[0]["result"], "refused");
    assert!(inspect(&url)["revoked"][host]
        .as_array()
        .is_none_or(Vec::is_empty));

    let full = tempfile::tempdir().unwrap();
    std::fs::write(full.path().join("config.toml"), profile("full")).unwrap();
    let mut c = common::qdeck(full.path());
    c.args(["worker-control", "revoke", &id, "-y", "-o", "json"]);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let w = &v["workers"][0];
    assert_eq!(w["hostname"], host);
    assert!(w["notes"][0].as_str().unwrap().starts_with("ok"), "{v}");
    let revoked = ids(&inspect(&url)["revoked"][host]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| serde_json::json!({"id": i}))
        .collect::<Json>());
    assert_eq!(revoked, later);
    let lines = audit(full.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["action"], "worker-control");
    assert_eq!(lines[0]["result"], "ok");
    drop(_w);
    flush().await;
}
