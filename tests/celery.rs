//! Celery (5.x, with kombu) on both brokers qdeck reads, against a scene Celery itself makes:
//! tasks sent with `send_task`/`apply_async` (some with a countdown, some with a priority) to a
//! queue no worker consumes (tests/fixtures/celery/celery_scene.py).
//!
//! Needs QDECK_TEST_PYTHON (a Python with `celery[redis]`), QDECK_TEST_REDIS_URL, and for the
//! RabbitMQ case QDECK_TEST_AMQP_URL and QDECK_TEST_RABBITMQ_MGMT (.ci/run sets them all).
//! Celery's Redis keys have fixed names, so the Redis cases own database 0 (no other test
//! uses it), one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

#[path = "celery_contract/mod.rs"]
mod celery_contract;
mod common;
mod contract;

use common::celery::{python, redis_url, run_script, Rmq};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use qdeck_backend::{build, Backend, OpProgress};
use qdeck_model::config::{Profile, ProfileKind, RedisSettings};
use qdeck_model::domain::*;
use serde_json::Value as Json;

const DB: u32 = 0;
static DB_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Run one scene command against `broker`; its JSON answer.
fn scene(cmd: &str, broker: &str, queue: &str) -> Json {
    run_script("celery_scene.py", &[cmd, broker, queue])
}

fn db_url() -> String {
    format!("{}/{DB}", redis_url())
}

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(db_url())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to QDECK_TEST_REDIS_URL")
}

async fn flush() {
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut raw().await)
        .await
        .expect("flushdb");
}

async fn redis_backend(flavors: Option<&[&str]>) -> Arc<dyn Backend> {
    let p = Profile {
        name: "celery-test".into(),
        kind: ProfileKind::Redis(RedisSettings {
            url: Some(redis_url()),
            db: Some(i64::from(DB)),
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

async fn all(b: &dyn Backend, q: &str) -> Vec<Message> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = b
            .browse(
                &QueueId::new(q),
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: 5,
                    force: false,
                },
            )
            .await
            .expect("browse");
        let got = page.messages.len();
        out.extend(page.messages);
        match page.next {
            Some(c) if got > 0 => cursor = Some(c),
            _ => break,
        }
    }
    out
}

/// Task ids by task name, as the scene sent them.
fn sent(answer: &Json) -> BTreeMap<String, BTreeSet<String>> {
    answer["sent"]
        .as_object()
        .expect("sent")
        .iter()
        .map(|(task, ids)| {
            let ids = ids
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_string())
                .collect();
            (task.clone(), ids)
        })
        .collect()
}

/// A config with one profile `p` (its table's lines).
fn config(dir: &Path, profile: &str) {
    std::fs::write(
        dir.join("config.toml"),
        format!("[[profiles]]\nname = \"p\"\n{profile}\n"),
    )
    .unwrap();
}

fn run(cmd: assert_cmd::Command) -> std::process::Output {
    let mut cmd = cmd;
    let out = cmd.output().expect("run qdeck");
    assert!(
        out.status.success(),
        "qdeck failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The task ids `export --where PRED` writes, and their task names.
fn export_where(
    dir: &Path,
    queue: &str,
    pred: &str,
    env: &[(&str, &str)],
) -> (BTreeSet<String>, BTreeSet<String>) {
    let file = dir.join("out.jsonl");
    let mut c = common::qdeck(dir);
    c.args(["export", queue, "-f"])
        .arg(&file)
        .args(["--where", pred])
        .envs(env.iter().copied());
    run(c);
    let text = std::fs::read_to_string(&file).expect("export file");
    let mut ids = BTreeSet::new();
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r = qdeck_engine::triage::transfer::Record::parse_line(line).expect("export line");
        let find = |name: &str| -> String {
            r.headers
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_str().map(str::to_string))
                .unwrap_or_else(|| panic!("no {name} header in {line}"))
        };
        ids.insert(find("id"));
        names.insert(find("task"));
    }
    (ids, names)
}

/// Depth, browse and `--where task` on kombu's Redis transport agree with what Celery sent and
/// what kombu counts; priority lists are part of the queue; mutations are refused.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_on_redis_figures_browse_and_where_task_match_celery() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let answer = scene("send", &db_url(), "work");
    let sent = sent(&answer);
    let kombu_depth = scene("depth", &db_url(), "work")["depth"].as_u64().unwrap();
    assert_eq!(kombu_depth, 12);

    // Found by kombu's binding tables, without being named.
    let b = redis_backend(None).await;
    let list = b.list_queues().await.expect("list");
    let ids: Vec<&str> = list.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, vec!["work"], "{ids:?}");
    let before = b.api_calls().snapshot();
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    let after = b.api_calls().snapshot();
    // Every list, the head of each and the unacked entries: one pipelined round trip.
    let trips = |m: &BTreeMap<String, u64>| m.get("pipeline").copied().unwrap_or(0);
    assert_eq!(trips(&after) - trips(&before), 1);
    assert_eq!(
        after.values().sum::<u64>() - before.values().sum::<u64>(),
        1
    );
    assert!(st.errors.is_empty(), "{:?}", st.errors);
    let st = &st.stats[0];
    assert_eq!(st.depth, Some(kombu_depth));
    assert_eq!(st.in_flight, Some(0));
    // No send time in a Celery message without an eta: unknown, with the reason.
    assert_eq!(st.oldest_age_secs, None);
    assert!(
        st.age_note
            .as_deref()
            .unwrap_or("")
            .contains("no send time"),
        "{:?}",
        st.age_note
    );

    // What qdeck cannot do here is declared: no redrive (no DLQ), no age without an eta.
    // Workers are asked through Celery's remote control: none runs here.
    let caps = b.capabilities_for(&list[0]);
    assert!(
        matches!(&caps.redrive, RedriveMode::Unsupported(r) if r.contains("no dead-letter")),
        "{:?}",
        caps.redrive
    );
    assert!(matches!(caps.age, AgeSource::Unknown(_)), "{:?}", caps.age);
    assert!(matches!(caps.consumers, ConsumerListing::Listed));
    assert!(b
        .consumers(&QueueId::new("work"))
        .await
        .expect("consumers")
        .is_empty());

    // Named explicitly, the same.
    let named = redis_backend(Some(&["celery"])).await;
    let st2 = named.stats(&[QueueId::new("work")]).await.expect("stats");
    assert_eq!(st2.stats[0].depth, Some(kombu_depth));

    let msgs = all(b.as_ref(), "work").await;
    assert_eq!(msgs.len() as u64, kombu_depth);
    let tasks: Vec<_> = msgs
        .iter()
        .map(|m| qdeck_backend::celery::decode(m).expect("a Celery task"))
        .collect();
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for t in &tasks {
        by_name
            .entry(t.task.clone())
            .or_default()
            .insert(t.id.clone().unwrap());
    }
    assert_eq!(by_name, sent);
    // A worker takes the priority-0 list first: the first page holds those, oldest first.
    assert_eq!(tasks[0].task, "billing.charge");
    assert_eq!(tasks[0].args.as_deref(), Some("[100, 'EUR']"));
    assert_eq!(tasks[0].kwargs.as_deref(), Some("{'customer': 'c-0'}"));
    assert_eq!(tasks[0].retries, Some(0));
    assert_eq!(tasks[0].protocol, 2);
    let mail: Vec<_> = tasks.iter().filter(|t| t.task == "mail.send").collect();
    assert!(mail
        .iter()
        .all(|t| t.eta_ms().is_some_and(|e| e > now_ms())));
    // The body is the decoded base64 of kombu's envelope: Celery's [args, kwargs, embed].
    let body: Json = serde_json::from_slice(&msgs[0].body).expect("json body");
    assert_eq!(body[0], serde_json::json!([100, "EUR"]));
    // Priorities 3, 6 and 9 sit in their own lists, after the default one.
    let lists: Vec<String> = msgs
        .iter()
        .filter_map(|m| {
            m.meta
                .iter()
                .find(|(k, _)| k == "redis list")
                .and_then(|(_, v)| v.as_str().map(str::to_string))
        })
        .collect();
    assert_eq!(lists.iter().filter(|l| l.as_str() == "work").count(), 9);
    assert!(lists.contains(&"work\\x06\\x163".to_string()), "{lists:?}");
    assert!(lists.contains(&"work\\x06\\x169".to_string()), "{lists:?}");

    // The CLI: peek shows the tasks, -o json carries a `celery` object, --where task selects
    // exactly the tasks of that name.
    let dir = tempfile::tempdir().unwrap();
    config(
        dir.path(),
        &format!("kind = \"redis\"\nurl = \"{}\"\ndb = {DB}\n", redis_url()),
    );
    let mut c = common::qdeck(dir.path());
    c.args(["peek", "work", "-n", "20"]);
    let table = String::from_utf8_lossy(&run(c).stdout).to_string();
    // Not a terminal: the plain format, one task a line, no heading.
    assert!(
        table.lines().any(|l| l.contains("\tbilling.charge\t")),
        "{table}"
    );
    assert!(table.contains("[100, 'EUR']"), "{table}");
    let mut c = common::qdeck(dir.path());
    c.args(["peek", "work", "-n", "20", "-o", "json"]);
    let v: Json = serde_json::from_slice(&run(c).stdout).expect("json");
    let arr = v.as_array().expect("array");
    assert_eq!(arr.len(), 12);
    assert!(arr.iter().all(|m| m["celery"]["task"].is_string()), "{v}");
    assert_eq!(arr[0]["celery"]["args"], "[100, 'EUR']");
    let (ids, names) = export_where(dir.path(), "work", "task = \"billing.charge\"", &[]);
    assert_eq!(names, BTreeSet::from(["billing.charge".to_string()]));
    assert_eq!(ids, sent["billing.charge"]);
    let (ids, _) = export_where(dir.path(), "work", "task != \"billing.charge\"", &[]);
    assert_eq!(ids.len(), 7);

    // Purge empties every priority list, as `celery purge` does; chosen tasks are refused.
    let err = b
        .deleter()
        .unwrap()
        .delete_refusal(&list[0])
        .expect("chosen tasks refused");
    assert!(err.contains("chosen tasks"), "{err}");
    let rep = b
        .purge(&QueueId::new("work"), &OpProgress::detached())
        .await
        .expect("purge");
    assert_eq!(rep.purged, Some(12));
    assert_eq!(scene("depth", &db_url(), "work")["depth"].as_u64(), Some(0));
    flush().await;
}

/// Messages a worker took and has not acked are kombu's `unacked` entries: qdeck counts them
/// as the queue's in flight, and flags those held past the visibility timeout.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_on_redis_in_flight_is_kombus_unacked() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    scene("send", &db_url(), "work");
    let held = scene("hold", &db_url(), "work");
    assert_eq!(held["held"].as_array().map(Vec::len), Some(2), "{held}");
    let kombu_depth = scene("depth", &db_url(), "work")["depth"].as_u64().unwrap();
    assert_eq!(kombu_depth, 10);
    let b = redis_backend(None).await;
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    let st = &st.stats[0];
    assert_eq!((st.depth, st.in_flight), (Some(kombu_depth), Some(2)));
    assert!(!st.age_note.as_deref().unwrap_or("").contains("restore"));
    // One of them taken two hours ago: past kombu's default visibility timeout.
    let mut c = raw().await;
    let tags: Vec<String> = redis::cmd("ZRANGE")
        .arg("unacked_index")
        .arg(0)
        .arg(0)
        .query_async(&mut c)
        .await
        .unwrap();
    let old = now_ms() as f64 / 1000.0 - 7200.0;
    let _: () = redis::cmd("ZADD")
        .arg("unacked_index")
        .arg(old)
        .arg(&tags[0])
        .query_async(&mut c)
        .await
        .unwrap();
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    let note = st.stats[0].age_note.clone().unwrap_or_default();
    assert!(
        note.contains("1 unacked message(s)") && note.contains("restore"),
        "{note}"
    );
    // Purge takes what waits and leaves what workers hold, as kombu's own purge.
    let rep = b
        .purge(&QueueId::new("work"), &OpProgress::detached())
        .await
        .expect("purge");
    assert_eq!(rep.purged, Some(10));
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    assert_eq!(
        (st.stats[0].depth, st.stats[0].in_flight),
        (Some(0), Some(2))
    );
    let held: u64 = redis::cmd("HLEN")
        .arg("unacked")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(held, 2);
    flush().await;
}

/// A malformed envelope in a Celery list is shown as stored with a note; the figures count it
/// and nothing panics.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_on_redis_malformed_envelope_gets_a_note() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    scene("send", &db_url(), "work");
    let mut c = raw().await;
    for bad in [
        &b"not json at all"[..],
        br#"{"body": 5}"#,
        br#"{"body": "***", "properties": {"body_encoding": "base64"}}"#,
        b"\xff\xfe\x00",
    ] {
        let _: () = redis::cmd("LPUSH")
            .arg("work")
            .arg(bad)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let kombu_depth = scene("depth", &db_url(), "work")["depth"].as_u64().unwrap();
    assert_eq!(kombu_depth, 16);
    let b = redis_backend(None).await;
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    assert_eq!(st.stats[0].depth, Some(16));
    let msgs = all(b.as_ref(), "work").await;
    assert_eq!(msgs.len(), 16);
    let noted: Vec<_> = msgs
        .iter()
        .filter(|m| {
            m.meta.iter().any(|(k, v)| {
                k == "note"
                    && v.as_str()
                        .unwrap_or("")
                        .contains("malformed kombu envelope")
            })
        })
        .collect();
    assert_eq!(noted.len(), 4);
    assert!(noted
        .iter()
        .all(|m| qdeck_backend::celery::decode(m).is_none()));
    // With a malformed envelope at the head of the list, figures still come, age unknown.
    let _: () = redis::cmd("RPUSH")
        .arg("work")
        .arg("{broken")
        .query_async(&mut c)
        .await
        .unwrap();
    let st = b.stats(&[QueueId::new("work")]).await.expect("stats");
    assert_eq!(st.stats[0].depth, Some(17));
    assert_eq!(st.stats[0].oldest_age_secs, None);
    flush().await;
}

/// On RabbitMQ a Celery message is an AMQP message with Celery's headers: qdeck's depth equals
/// what Celery's channel reports, peek decodes the tasks, `--where task` selects by name.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON with celery"]
async fn celery_on_rabbitmq_depth_peek_and_where_task() {
    let rmq = Rmq::from_env();
    let kombu_url = rmq.kombu_url.clone();
    let queue = format!("qdeck-test-celery-{}", uuid::Uuid::new_v4().simple());
    let answer = scene("send", &kombu_url, &queue);
    let sent = sent(&answer);
    let celery_depth = scene("depth", &kombu_url, &queue)["depth"]
        .as_u64()
        .unwrap();
    assert_eq!(celery_depth, 12);

    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &rmq.profile());
    let env = [("QDECK_TEST_CELERY_RMQ_PASSWORD", rmq.password.as_str())];
    // The management API's figures lag publishes by a few seconds.
    let mut depth = None;
    for _ in 0..40 {
        let mut c = common::qdeck(dir.path());
        c.args(["stats", &queue, "-o", "json"]).envs(env);
        let v: Json = serde_json::from_slice(&run(c).stdout).expect("json");
        depth = v["queue"]["depth"].as_u64();
        if depth == Some(celery_depth) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_eq!(depth, Some(celery_depth));

    let mut c = common::qdeck(dir.path());
    c.args(["peek", &queue, "-n", "20", "-o", "json"]).envs(env);
    let v: Json = serde_json::from_slice(&run(c).stdout).expect("json");
    let arr = v.as_array().expect("array");
    assert_eq!(arr.len(), 12);
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in arr {
        let t = &m["celery"];
        by_name
            .entry(t["task"].as_str().expect("task").to_string())
            .or_default()
            .insert(t["id"].as_str().expect("id").to_string());
    }
    assert_eq!(by_name, sent);
    let charge = arr
        .iter()
        .find(|m| m["celery"]["task"] == "billing.charge")
        .unwrap();
    assert_eq!(charge["celery"]["retries"], 0);
    assert!(charge["celery"]["args"].as_str().unwrap().contains("'EUR'"));
    assert!(arr
        .iter()
        .filter(|m| m["celery"]["task"] == "mail.send")
        .all(|m| m["celery"]["eta"].is_string()));

    let (ids, names) = export_where(dir.path(), &queue, "task = \"billing.charge\"", &env);
    assert_eq!(names, BTreeSet::from(["billing.charge".to_string()]));
    assert_eq!(ids, sent["billing.charge"]);
    // Browsing put every message back.
    assert_eq!(
        scene("depth", &kombu_url, &queue)["depth"].as_u64(),
        Some(celery_depth)
    );
    scene("delete", &kombu_url, &queue);
}

/// Celery tasks dead-lettered by RabbitMQ (a task queue with x-dead-letter arguments, tasks
/// rejected without requeue) group by task name plus failure in `qdeck reasons`, each task a
/// message of its own even where two tasks carry the same arguments; `redrive --where task`
/// sends exactly that task's messages back.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON with celery"]
async fn celery_on_rabbitmq_reasons_by_task_and_redrive_by_task() {
    let rmq = Rmq::from_env();
    let queue = format!("qdeck-test-celery-{}", uuid::Uuid::new_v4().simple());
    let answer = scene("deadletter", &rmq.kombu_url, &queue);
    let dlq = answer["dlq"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &rmq.profile());
    let env = [("QDECK_TEST_CELERY_RMQ_PASSWORD", rmq.password.as_str())];
    let mut groups = Vec::new();
    // The management API's figures (the scan's total) lag publishes by a few seconds.
    for _ in 0..40 {
        let mut c = common::qdeck(dir.path());
        c.args(["reasons", &queue, "-o", "json"]).envs(env);
        let v: Json = serde_json::from_slice(&run(c).stdout).expect("json");
        groups = v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["signature"].as_str().unwrap().to_string(),
                    g["count"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>();
        if groups.iter().map(|g| g.1).sum::<u64>() == 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(
        groups[0].0.starts_with("billing.charge: rejected"),
        "{groups:?}"
    );
    assert_eq!(groups[0].1, 2);
    assert!(groups[1].0.starts_with("mail.send: rejected"), "{groups:?}");
    assert_eq!(groups[1].1, 1);

    // The RabbitMQ DLQ is the Celery DLQ: redrive by task name sends exactly those tasks back
    // to the queue they died in, and Celery's own view agrees.
    let mut c = common::qdeck(dir.path());
    c.args([
        "redrive",
        &dlq,
        "--where",
        "task = \"billing.charge\"",
        "-y",
        "-o",
        "json",
    ])
    .envs(env);
    let r: Json = serde_json::from_slice(&run(c).stdout).expect("json");
    assert_eq!(r["moved"], 2, "{r}");
    assert_eq!(
        scene("depth", &rmq.kombu_url, &queue)["depth"].as_u64(),
        Some(2)
    );
    assert_eq!(
        scene("depth", &rmq.kombu_url, &dlq)["depth"].as_u64(),
        Some(1)
    );
    let mut c = common::qdeck(dir.path());
    c.args(["peek", &queue, "-n", "5", "-o", "json"]).envs(env);
    let v: Json = serde_json::from_slice(&run(c).stdout).expect("json");
    let back: BTreeSet<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["celery"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(back, sent(&answer)["billing.charge"]);
    scene("delete", &rmq.kombu_url, &queue);
    scene("delete", &rmq.kombu_url, &dlq);
}

/// The console shows a Celery task by its call in the message list and by its fields in the
/// message's detail.
#[test]
fn console_shows_celery_tasks_by_their_call() {
    use common::console::*;
    use crossterm::event::KeyCode;
    use qdeck::tui::{update, Action};
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('b'));
    let task = Message {
        id: "t-1".into(),
        headers: vec![
            ("lang".into(), "py".into()),
            ("task".into(), "billing.charge".into()),
            ("id".into(), "t-1".into()),
            ("retries".into(), qdeck_model::domain::Value::I64(3)),
            ("argsrepr".into(), "[100, 'EUR']".into()),
            ("kwargsrepr".into(), "{'customer': 'c-0'}".into()),
            ("eta".into(), "2026-12-06T04:37:47+00:00".into()),
        ],
        body: br#"[[100, "EUR"], {"customer": "c-0"}, {}]"#.to_vec(),
        ..Default::default()
    };
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: vec![task],
                next: None,
                effect_note: None,
            }),
        },
    );
    let list = text(&draw(&st, 140, 20));
    assert!(list.contains("billing.charge([100, 'EUR'],"), "{list}");
    update(&mut st, code(KeyCode::Enter));
    let detail = text(&draw(&st, 160, 30));
    assert!(
        detail.contains("celery (protocol 2): task billing.charge"),
        "{detail}"
    );
    assert!(detail.contains("retries 3"), "{detail}");
}

/// Celery's message protocol 1 (`task_protocol = 1`) keeps the task in the JSON body: qdeck
/// reads its name, id and arguments there, and `task = …` selects it.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_protocol_1_tasks_are_read_from_the_body() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let sent = sent(&scene("send_v1", &db_url(), "old"));
    scene("send", &db_url(), "old");
    let b = redis_backend(Some(&["celery"])).await;
    let msgs = all(b.as_ref(), "old").await;
    assert_eq!(msgs.len(), 14);
    let pred = qdeck_engine::triage::predicate::Predicate::parse("task = \"legacy.sync\"").unwrap();
    let ctx = qdeck_engine::triage::predicate::EvalContext::default();
    let picked: Vec<_> = msgs.iter().filter(|m| pred.matches(m, &ctx)).collect();
    assert_eq!(picked.len(), 2);
    let ids: BTreeSet<String> = picked
        .iter()
        .map(|m| {
            let t = qdeck_backend::celery::decode(m).expect("celery");
            assert_eq!(t.protocol, 1);
            assert!(matches!(t.args.as_deref(), Some("[0]" | "[1]")), "{t:?}");
            assert_eq!(t.kwargs.as_deref(), Some(r#"{"full":true}"#));
            t.id.unwrap()
        })
        .collect();
    assert_eq!(ids, sent["legacy.sync"]);
    flush().await;
}

/// Benchmark, run by hand (`cargo test --test celery manual_ -- --ignored --nocapture`):
/// figures of 500 Celery queues on Redis, qdeck's one pipelined round trip against kombu's
/// own `_size` per queue (what Flower's broker view does), best of 5 each, same database.
#[tokio::test]
#[ignore = "benchmark: run by hand"]
async fn manual_celery_redis_figures_500_queues() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    let n = 500;
    let kombu = scene_n("bench", &db_url(), "bq", &n.to_string());
    let b = redis_backend(Some(&["celery"])).await;
    let ids: Vec<QueueId> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(ids.len(), n);
    b.stats(&ids).await.unwrap();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        let st = b.stats(&ids).await.unwrap();
        best = best.min(t0.elapsed().as_secs_f64() * 1000.0);
        let total: u64 = st.stats.iter().filter_map(|s| s.depth).sum();
        assert_eq!(Some(total), kombu["total"].as_u64());
    }
    let kombu_ms = kombu["kombu_ms"].as_f64().unwrap();
    println!(
        "celery figures, {n} queues: qdeck {best:.1} ms (1 round trip), kombu _size {kombu_ms:.1} ms ({n} pipelines): ratio {:.3}",
        best / kombu_ms
    );
    flush().await;
}

fn scene_n(cmd: &str, broker: &str, queue: &str, n: &str) -> Json {
    run_script("celery_scene.py", &[cmd, broker, queue, n])
}

/// Celery and RQ in one database: each library's queues carry its prefix, and the Celery
/// queue's figures still equal kombu's.
#[tokio::test]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery and rq"]
async fn celery_beside_rq_in_one_database_carries_its_prefix() {
    let _g = DB_LOCK.lock().await;
    flush().await;
    scene("send", &db_url(), "work");
    let rq_scene = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rq/rq_scene.py");
    let out = Command::new(python())
        .arg(rq_scene)
        .args(["enqueue", &db_url(), "2"])
        .output()
        .expect("run rq scene");
    assert!(
        out.status.success(),
        "rq scene: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b = redis_backend(None).await;
    let ids: BTreeSet<String> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.id.to_string())
        .collect();
    assert!(ids.contains("celery/work"), "{ids:?}");
    assert!(ids.contains("rq/emails"), "{ids:?}");
    assert!(!ids.contains("work"), "{ids:?}");
    let st = b
        .stats(&[QueueId::new("celery/work")])
        .await
        .expect("stats");
    assert!(st.errors.is_empty(), "{:?}", st.errors);
    assert_eq!(
        st.stats[0].depth,
        scene("depth", &db_url(), "work")["depth"].as_u64()
    );
    flush().await;
}

/// The whole round on RabbitMQ, with a real worker at the end: Celery tasks dead-lettered by
/// the queue's DLX, redriven by qdeck, then run by a fixed `celery worker`. Every task runs
/// exactly once (each leaves its id in a Redis list), and both queues end empty.
#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT, QDECK_TEST_REDIS_URL and QDECK_TEST_PYTHON with celery"]
async fn celery_on_rabbitmq_redriven_tasks_run_once_on_a_fixed_worker() {
    // The record list lives in this file's database.
    let _g = DB_LOCK.lock().await;
    let rmq = Rmq::from_env();
    let _ = python();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let queue = format!("qdeck-test-celery-run-{tag}");
    let record_key = format!("qdeck-test-celery-ran-{tag}");
    let answer = run_script(
        "celery_workers.py",
        &["deadletter", &rmq.kombu_url, &queue, "6"],
    );
    let sent: BTreeSet<String> = answer["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(sent.len(), 6);
    let dlq = answer["dlq"].as_str().unwrap().to_string();

    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &rmq.profile());
    let env = [("QDECK_TEST_CELERY_RMQ_PASSWORD", rmq.password.as_str())];
    let mut c = common::qdeck(dir.path());
    c.args(["redrive", &dlq, "-y", "-o", "json"]).envs(env);
    let r: Json = serde_json::from_slice(&run(c).stdout).expect("json");
    assert_eq!(r["moved"], 6, "{r}");

    let _worker = common::celery::Worker::start_env(
        &rmq.kombu_url,
        &format!("fixed-{}@qdeck-test", &tag[..8]),
        "solo",
        1,
        &queue,
        &[
            ("QDECK_CELERY_DLX_QUEUE", queue.as_str()),
            ("QDECK_CELERY_RECORD", db_url().as_str()),
            ("QDECK_CELERY_RECORD_KEY", record_key.as_str()),
        ],
    );
    let mut con = raw().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut ran: Vec<String> = Vec::new();
    while std::time::Instant::now() < deadline {
        ran = redis::cmd("LRANGE")
            .arg(&record_key)
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
            .unwrap();
        if ran.len() >= sent.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    // A second run of any task would show here a moment later.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let ran: Vec<String> = redis::cmd("LRANGE")
        .arg(&record_key)
        .arg(0)
        .arg(-1)
        .query_async(&mut con)
        .await
        .unwrap_or(ran);
    let once: BTreeSet<String> = ran.iter().cloned().collect();
    assert_eq!(once, sent, "every redriven task ran");
    assert_eq!(ran.len(), sent.len(), "no task ran twice: {ran:?}");
    assert_eq!(
        scene("depth", &rmq.kombu_url, &dlq)["depth"].as_u64(),
        Some(0)
    );
    drop(_worker);
    let _: () = redis::cmd("DEL")
        .arg(&record_key)
        .query_async(&mut con)
        .await
        .unwrap();
    scene("delete", &rmq.kombu_url, &queue);
    scene("delete", &rmq.kombu_url, &dlq);
}

contract_tests!(
    setup = celery_contract::CeleryFixture::setup(),
    ignore =
        "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON with celery",
);
