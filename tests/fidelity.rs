//! Fidelity: a message published by the broker's own client library comes out of every qdeck
//! path that sends it again (export → import, copy, copy to another profile, move, edit,
//! redrive, redrive --where) as it went in, read back with that same library: the body byte
//! for byte, every property and header with its type, no broker metadata re-sent, and only
//! the documented `x-qdeck-*` stamps added.
//!
//! RabbitMQ through pika, SQS through boto3 against moto, BullMQ through its Queue API
//! (node), Sidekiq through its Ruby API. Ignored unless asked for; CI runs them with
//! QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT, QDECK_TEST_SQS_ENDPOINT and
//! QDECK_TEST_PYTHON (a Python with pika and boto3), QDECK_TEST_REDIS_URL and
//! QDECK_TEST_NODE_FIXTURES (tests/fixtures/redis after `npm ci`; Sidekiq needs `ruby` with
//! ruby-sidekiq). On Redis qdeck sends no job, so there the sending paths are checked to
//! refuse and leave the job as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A broker test's variable; missing, the test prints the skip notice CI fails on.
fn env(name: &str) -> String {
    common::broker_var(name, "see .ci/run for the fidelity tests' endpoints")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/python")
        .join(name)
}

/// Run a peer script with the test Python; its stdout, one JSON document a line.
fn peer(script: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new(env("QDECK_TEST_PYTHON"))
        .arg(fixture(script))
        .args(args)
        .output()
        .expect("run the peer client");
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn uniq(prefix: &str) -> String {
    format!(
        "qdeck-fid-{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// An editor that changes one byte of the body (`"order": 7` → `"order": 8`).
fn one_byte_editor(dir: &Path) -> PathBuf {
    let p = dir.join("edit.sh");
    std::fs::write(
        &p,
        "#!/bin/sh\nsed -i 's/\"order\": 7/\"order\": 8/' \"$1\"\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

/// `qdeck ARGS` in `dir` with `extra` environment, `-y` for the commands that ask; stdout
/// when it succeeds.
fn qdeck(dir: &Path, extra: &[(&str, &str)], args: &[&str]) -> String {
    let mut c = common::qdeck(dir);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.args(args);
    if !matches!(args[0], "export" | "peek" | "create") {
        c.arg("-y");
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "qdeck {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// ------------------------------------------------------------------------------------------
// RabbitMQ, read back with pika

const RMQ_PASSWORD: &str = "QDECK_TEST_FIDELITY_RMQ_PASSWORD";

struct Rabbit {
    url: String,
    password: String,
}

fn rabbit(dir: &Path) -> Rabbit {
    let url = env("QDECK_TEST_AMQP_URL");
    let mgmt = env("QDECK_TEST_RABBITMQ_MGMT");
    let uri: lapin::uri::AMQPUri = url.parse().expect("QDECK_TEST_AMQP_URL parses");
    let user = uri.authority.userinfo.username.clone();
    let bare = format!(
        "amqp://{user}@{}:{}/{}",
        uri.authority.host,
        uri.authority.port,
        urlencoding::encode(&uri.vhost)
    );
    let profile = |name: &str| {
        format!(
            "name = \"{name}\"\nkind = \"rabbitmq\"\namqp_url = \"{bare}\"\n\
             management_url = \"{mgmt}\"\nusername = \"{user}\"\npassword_env = \"{RMQ_PASSWORD}\"\n"
        )
    };
    common::write_config(dir, "rmq", &[profile("rmq"), profile("rmq2")]);
    Rabbit {
        password: uri.authority.userinfo.password.clone(),
        url,
    }
}

async fn declare(url: &str, queues: &[&str]) -> lapin::Connection {
    let conn = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
        .await
        .expect("connect");
    let ch = conn.create_channel().await.unwrap();
    for q in queues {
        ch.queue_declare(
            (*q).into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .unwrap();
    }
    conn
}

async fn delete_queues(conn: &lapin::Connection, queues: &[&str]) {
    let ch = conn.create_channel().await.unwrap();
    for q in queues {
        ch.queue_delete((*q).into(), Default::default()).await.ok();
    }
}

/// The stamps a client-side redrive adds (a count and a time): checked, then taken out for
/// comparison. The shovel adds none.
fn take_redrive_stamps(m: &mut Value, client_side: bool) {
    let h = m["headers"].as_object_mut().unwrap();
    let count = h.remove("x-qdeck-redriven");
    let at = h.remove("x-qdeck-redriven-at");
    if client_side {
        assert_eq!(count, Some(serde_json::json!({"int": 1})), "{m}");
        assert!(
            at.is_some_and(|v| v["int"].as_i64().unwrap_or(0) > 0),
            "{m}"
        );
    } else {
        assert_eq!((count, at), (None, None), "{m}");
    }
}

/// What every path must give back: the reference message, exactly.
fn assert_same(path: &str, got: &Value, want: &Value) {
    assert_eq!(got["body"], want["body"], "{path}: body");
    assert_eq!(got["properties"], want["properties"], "{path}: properties");
    assert_eq!(got["headers"], want["headers"], "{path}: headers");
    for meta in [
        "exchange",
        "routing-key",
        "redelivered",
        "x-death",
        "x-delivery-count",
    ] {
        assert!(
            got["headers"].get(meta).is_none(),
            "{path}: {meta} re-sent as a header"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT and QDECK_TEST_PYTHON"]
async fn rabbitmq_every_path_keeps_properties_and_typed_headers() {
    let dir = tempfile::tempdir().unwrap();
    let r = rabbit(dir.path());
    let pw = [(RMQ_PASSWORD, r.password.as_str())];
    let t = uniq("rmq");
    let q = |s: &str| format!("{t}-{s}");
    let names: Vec<String> = [
        "exp", "imp", "cp", "cp-to", "xp", "xp-to", "mv", "mv-to", "ed", "ed-to", "rd", "rd-to",
        "wh", "wh-to",
    ]
    .iter()
    .map(|s| q(s))
    .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let conn = declare(&r.url, &refs).await;
    for s in ["exp", "cp", "xp", "mv", "rd", "wh"] {
        peer("amqp_peer.py", &["publish", &r.url, &q(s)]);
    }
    peer("amqp_peer.py", &["publish", &r.url, &q("ed"), "text"]);
    let want = peer("amqp_peer.py", &["expected"]).remove(0);

    let file = dir.path().join("export.jsonl");
    let file_s = file.to_str().unwrap();
    qdeck(dir.path(), &pw, &["export", &q("exp"), "-f", file_s]);
    qdeck(dir.path(), &pw, &["import", &q("imp"), "-f", file_s]);
    qdeck(dir.path(), &pw, &["copy", &q("cp"), "--to", &q("cp-to")]);
    qdeck(
        dir.path(),
        &pw,
        &[
            "copy",
            &q("xp"),
            "--to",
            &q("xp-to"),
            "--to-profile",
            "rmq2",
        ],
    );
    qdeck(dir.path(), &pw, &["move", &q("mv"), "--to", &q("mv-to")]);
    let editor = one_byte_editor(dir.path());
    let editor = editor.to_str().unwrap();
    qdeck(
        dir.path(),
        &[pw[0], ("EDITOR", editor)],
        &["edit", &q("ed"), "msg-fidelity-1", "--to", &q("ed-to")],
    );
    let out = qdeck(
        dir.path(),
        &pw,
        &["redrive", &q("rd"), "--to", &q("rd-to"), "-o", "json"],
    );
    let mode: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let rd_client_side = mode["mode"] == "client-side";
    qdeck(
        dir.path(),
        &pw,
        &[
            "redrive",
            &q("wh"),
            "--to",
            &q("wh-to"),
            "--where",
            r#"header.text = "acme""#,
        ],
    );

    let read = |s: &str| peer("amqp_peer.py", &["read", &r.url, &q(s), "1"]).remove(0);
    for (path, s) in [
        ("export → import", "imp"),
        ("copy", "cp-to"),
        ("copy to another profile", "xp-to"),
        ("move", "mv-to"),
        ("export (the source keeps its message)", "exp"),
        ("copy (the source keeps its message)", "cp"),
    ] {
        assert_same(path, &read(s), &want);
    }
    // The whole-queue redrive goes through the shovel where the plugin is on, the filtered
    // one always client-side.
    for (path, s, client_side) in [
        ("redrive", "rd-to", rd_client_side),
        ("redrive --where", "wh-to", true),
    ] {
        let mut got = read(s);
        take_redrive_stamps(&mut got, client_side);
        assert_same(path, &got, &want);
    }
    let mut want_edit = peer("amqp_peer.py", &["expected", "text"]).remove(0);
    let body = base64_decode(want_edit["body"].as_str().unwrap());
    let edited = String::from_utf8(body)
        .unwrap()
        .replace("\"order\": 7", "\"order\": 8");
    want_edit["body"] = Value::String(base64_encode(edited.as_bytes()));
    assert_same("edit (one byte of the body)", &read("ed-to"), &want_edit);
    delete_queues(&conn, &refs).await;
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

// ------------------------------------------------------------------------------------------
// SQS (moto), read back with boto3

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT and QDECK_TEST_PYTHON"]
async fn sqs_every_path_keeps_typed_attributes_and_the_group() {
    let ep = env("QDECK_TEST_SQS_ENDPOINT");
    let dir = tempfile::tempdir().unwrap();
    let t = uniq("sqs");
    common::write_config(
        dir.path(),
        "aws",
        &[format!(
            "name = \"aws\"\nkind = \"sqs\"\nregions = [\"us-east-1\"]\nendpoint_url = \"{ep}\"\n\
             queue_prefix = \"{t}\"\ncloudwatch = false\n"
        )],
    );
    let aws = [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ];
    let q = |s: &str| format!("{t}-{s}");
    let mut url = std::collections::BTreeMap::new();
    for s in [
        "exp",
        "imp",
        "cp",
        "cp-to",
        "mv",
        "mv-to",
        "ed",
        "ed-to",
        "rd",
        "rd-to",
        "wh",
        "wh-to",
        "f.fifo",
        "f-to.fifo",
    ] {
        let u = peer("sqs_peer.py", &["create", &ep, &q(s)]).remove(0);
        url.insert(s, u.as_str().unwrap().to_string());
    }
    for s in ["exp", "cp", "mv", "ed", "rd", "wh", "f.fifo"] {
        peer("sqs_peer.py", &["publish", &ep, &url[s]]);
    }
    let want = peer("sqs_peer.py", &["expected"]).remove(0);
    let run = |args: &[&str]| qdeck(dir.path(), &aws, args);

    let file = dir.path().join("export.jsonl");
    let file_s = file.to_str().unwrap();
    run(&["export", &q("exp"), "-f", file_s]);
    run(&["import", &q("imp"), "-f", file_s]);
    run(&["copy", &q("cp"), "--to", &q("cp-to")]);
    run(&["copy", &q("f.fifo"), "--to", &q("f-to.fifo")]);
    run(&["move", &q("mv"), "--to", &q("mv-to")]);
    let peeked: Value = serde_json::from_str(&run(&["peek", &q("ed"), "-o", "json"])).unwrap();
    let id = peeked[0]["id"].as_str().expect("a message id").to_string();
    let editor = one_byte_editor(dir.path());
    qdeck(
        dir.path(),
        &[aws[0], aws[1], aws[2], ("EDITOR", editor.to_str().unwrap())],
        &["edit", &q("ed"), &id, "--to", &q("ed-to")],
    );
    run(&["redrive", &q("rd"), "--to", &q("rd-to")]);
    run(&[
        "redrive",
        &q("wh"),
        "--to",
        &q("wh-to"),
        "--where",
        r#"header.text = "acme""#,
    ]);

    let read = |s: &str| peer("sqs_peer.py", &["read", &ep, &url[s], "1"]).remove(0);
    let same = |path: &str, got: &Value, body: &Value| {
        assert_eq!(&got["body"], body, "{path}: body");
        let mut attrs = got["attributes"].clone();
        // A client-side redrive stamps its copies; nothing else is added.
        let h = attrs.as_object_mut().unwrap();
        let stamped = h.remove("x-qdeck-redriven").is_some();
        h.remove("x-qdeck-redriven-at");
        h.remove("x-qdeck-redrive-run");
        assert_eq!(
            attrs, want["attributes"],
            "{path}: attributes (stamped: {stamped})"
        );
    };
    for (path, s) in [
        ("export → import", "imp"),
        ("copy", "cp-to"),
        ("move", "mv-to"),
        ("redrive", "rd-to"),
        ("redrive --where", "wh-to"),
        ("export (the source keeps its message)", "exp"),
        ("copy (the source keeps its message)", "cp"),
    ] {
        same(path, &read(s), &want["body"]);
    }
    let edited = Value::String(
        want["body"]
            .as_str()
            .unwrap()
            .replace("\"order\": 7", "\"order\": 8"),
    );
    same("edit (one byte of the body)", &read("ed-to"), &edited);
    // FIFO: the group travels; the deduplication id is fresh (a kept one could make SQS
    // accept a copy within its 5-minute window without delivering it).
    let f = read("f-to.fifo");
    same("copy between FIFO queues", &f, &want["body"]);
    assert_eq!(f["group"], "g-1", "{f}");
    assert!(f["dedup"].is_string() && f["dedup"] != "d-1", "{f}");
}

// ------------------------------------------------------------------------------------------
// The local broker: typed headers through every path, read back with qdeck's own export

/// The headers of every record in an export file, by body.
fn exported(dir: &Path, queue: &str) -> Vec<(String, Value)> {
    let file = dir.join(format!("{queue}.jsonl"));
    qdeck(dir, &[], &["export", queue, "-f", file.to_str().unwrap()]);
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (
                r["body"].as_str().unwrap().to_string(),
                r["headers"].clone(),
            )
        })
        .collect()
}

#[test]
fn local_every_path_keeps_typed_headers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::write_config(
        d,
        "lo",
        &[common::local_profile("lo", &d.join("lo.db"), "")],
    );
    for q in ["src", "cp", "mv", "ed", "imp"] {
        qdeck(d, &[], &["create", q]);
    }
    let headers = serde_json::json!([
        ["text", "acme"],
        ["n", 7],
        ["w", {"$i32": 7}],
        ["flag", true],
        ["raw", {"$bytes": "AAH+"}],
        ["nested", {"a": {"$u8": 1}, "b": "two"}]
    ]);
    let line = serde_json::json!({"v": 2, "headers": headers, "body": "{\"order\": 7}"});
    let file = d.join("in.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    qdeck(d, &[], &["import", "src", "-f", file.to_str().unwrap()]);
    assert_eq!(
        exported(d, "src"),
        vec![("{\"order\": 7}".into(), headers.clone())]
    );

    qdeck(d, &[], &["copy", "src", "--to", "cp"]);
    assert_eq!(
        exported(d, "cp"),
        vec![("{\"order\": 7}".into(), headers.clone())]
    );
    let again = d.join("src.jsonl");
    qdeck(d, &[], &["import", "imp", "-f", again.to_str().unwrap()]);
    assert_eq!(
        exported(d, "imp"),
        vec![("{\"order\": 7}".into(), headers.clone())]
    );
    qdeck(d, &[], &["move", "cp", "--to", "mv"]);
    assert_eq!(
        exported(d, "mv"),
        vec![("{\"order\": 7}".into(), headers.clone())]
    );
    let editor = one_byte_editor(d);
    let peeked: Value =
        serde_json::from_str(&qdeck(d, &[], &["peek", "src", "-o", "json"])).unwrap();
    let id = peeked[0]["id"].as_str().unwrap().to_string();
    qdeck(
        d,
        &[("EDITOR", editor.to_str().unwrap())],
        &["edit", "src", &id, "--to", "ed"],
    );
    assert_eq!(exported(d, "ed"), vec![("{\"order\": 8}".into(), headers)]);
}

// ------------------------------------------------------------------------------------------
// Redis job queues: BullMQ read back with Queue#getJob, Sidekiq with Sidekiq's API. qdeck
// sends no job (jobs are added with the library's own client, which sets the fields its
// workers expect): import, copy, move and edit must refuse and leave the job as it was;
// export writes the job's data as stored; redrive and redrive --where move the job itself.

/// The database of these tests: tests/redis.rs owns 2..15 and flushes them; 0 is everyone's.
const REDIS_DB: u32 = 1;
/// The two Redis tests share that database (Sidekiq's dead and retry sets are per database)
/// and flush it: one at a time.
static REDIS_DB_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn redis_url() -> String {
    env("QDECK_TEST_REDIS_URL")
        .trim_end_matches('/')
        .to_string()
}

fn redis_db_url() -> String {
    format!("{}/{REDIS_DB}", redis_url())
}

async fn redis_conn() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_db_url())
        .expect("QDECK_TEST_REDIS_URL parses")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to QDECK_TEST_REDIS_URL")
}

async fn flush_redis_db() {
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut redis_conn().await)
        .await
        .unwrap();
}

fn redis_profile(name: &str, flavor: &str, prefix: &str) -> String {
    format!(
        "name = \"{name}\"\nkind = \"redis\"\nurl = \"{}\"\ndb = {REDIS_DB}\n\
         flavors = [\"{flavor}\"]\n{prefix}\n",
        redis_url()
    )
}

fn redis_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/redis")
        .join(name)
}

fn json_lines(what: &str, out: std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: {e}: {l}")))
        .collect()
}

/// tests/fixtures/redis/bullmq_fidelity.js, run where `npm ci` installed BullMQ.
fn bullmq(args: &[&str]) -> Vec<Value> {
    let dir = PathBuf::from(env("QDECK_TEST_NODE_FIXTURES"));
    assert!(
        dir.join("node_modules/bullmq").is_dir(),
        "{} has no node_modules/bullmq: run npm ci there",
        dir.display()
    );
    let out = Command::new("node")
        .current_dir(&dir)
        .arg("bullmq_fidelity.js")
        .args(args)
        .output()
        .expect("run node");
    json_lines(&format!("bullmq_fidelity.js {args:?}"), out)
}

/// tests/fixtures/redis/sidekiq_fidelity.rb on the test database.
fn sidekiq(args: &[&str]) -> Vec<Value> {
    let out = Command::new("ruby")
        .arg(redis_fixture("sidekiq_fidelity.rb"))
        .args(args)
        .env("REDIS_URL", redis_db_url())
        .output()
        .expect("run ruby (Debian: ruby-sidekiq ruby-redis)");
    json_lines(&format!("sidekiq_fidelity.rb {args:?}"), out)
}

/// `qdeck ARGS -y` that must be refused: its exit code and what it printed.
fn qdeck_refused(dir: &Path, extra: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut c = common::qdeck(dir);
    for (k, v) in extra {
        c.env(k, v);
    }
    let out = c.args(args).arg("-y").output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "qdeck {args:?} was not refused: {text}"
    );
    (out.status.code(), text)
}

/// The paths that send a job, each refused with the reason: import, copy, move, edit (the
/// editor changes one byte), and a redrive to a queue other than the job's own.
fn assert_sending_paths_refused(
    dir: &Path,
    dlq: &str,
    id: &str,
    own: &str,
    other: &str,
    other_reason: &str,
) {
    let file = dir.join("export.jsonl");
    let editor = one_byte_editor(dir);
    let editor = [("EDITOR", editor.to_str().unwrap())];
    let send = "not supported by this broker: jobs are added with the job library's own client";
    for (path, extra, args) in [
        (
            "import",
            &[][..],
            vec!["import", own, "-f", file.to_str().unwrap()],
        ),
        ("copy", &[][..], vec!["copy", dlq, "--to", own]),
        ("move", &[][..], vec!["move", dlq, "--to", own]),
        ("edit", &editor[..], vec!["edit", dlq, id, "--to", own]),
    ] {
        let (code, text) = qdeck_refused(dir, extra, &args);
        assert_eq!(code, Some(1), "{path}: {text}");
        assert!(text.contains(send), "{path}: {text}");
        // Refused before anything is read or tried, not after a scan that then fails.
        assert!(!text.contains("sent 0"), "{path}: {text}");
    }
    let (code, text) = qdeck_refused(dir, &[], &["redrive", dlq, "--to", other]);
    assert_eq!(code, Some(1), "redrive --to another queue: {text}");
    assert!(
        text.contains(other_reason),
        "redrive --to another queue: {text}"
    );
}

/// A copy from a Redis DLQ to a local broker profile (another kind): each job arrives with
/// the body `export` writes for it and the job's metadata as `x-qdeck-NAME` text headers, no
/// other header. The records of the local export, by body.
fn copy_to_local(dir: &Path, dlq: &str) -> std::collections::BTreeMap<String, Value> {
    qdeck(dir, &[], &["create", "in", "-p", "lo"]);
    qdeck(dir, &[], &["copy", dlq, "--to", "in", "--to-profile", "lo"]);
    let file = dir.join("local.jsonl");
    qdeck(
        dir,
        &[],
        &["export", "in", "-p", "lo", "-f", file.to_str().unwrap()],
    );
    let mut out = std::collections::BTreeMap::new();
    for l in std::fs::read_to_string(&file).unwrap().lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        for h in r["headers"].as_array().unwrap() {
            let name = h[0].as_str().unwrap();
            assert!(
                name.starts_with("x-qdeck-"),
                "copy to local: header {name}: {r}"
            );
            assert!(h[1].is_string(), "copy to local: header {name}: {r}");
        }
        out.insert(r["body"].as_str().unwrap().to_string(), r);
    }
    out
}

fn header<'a>(record: &'a Value, name: &str) -> Option<&'a str> {
    record["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

/// JSON text without the whitespace between tokens.
fn compact(text: &str) -> String {
    let (mut out, mut in_str, mut esc) = (String::new(), false, false);
    for c in text.chars() {
        if in_str {
            in_str = esc || c != '"';
            esc = !esc && c == '\\';
        } else if c.is_ascii_whitespace() {
            continue;
        } else {
            in_str = c == '"';
        }
        out.push(c);
    }
    out
}

/// The one record of an export file.
fn export_one(dir: &Path, queue: &str, id: &str) -> Value {
    let file = dir.join("export.jsonl");
    qdeck(dir, &[], &["export", queue, "-f", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["id"] == id)
        .collect();
    assert_eq!(records.len(), 1, "{text}");
    let r = records[0].clone();
    assert_eq!(r["headers"], serde_json::json!([]), "export: headers: {r}");
    r
}

fn meta<'a>(record: &'a Value, name: &str) -> Option<&'a str> {
    record["meta"]
        .as_array()?
        .iter()
        .find(|m| m[0] == name)
        .and_then(|m| m[1].as_str())
}

type Hash = std::collections::BTreeMap<String, Vec<u8>>;

async fn job_hash(c: &mut redis::aio::MultiplexedConnection, key: &str) -> Hash {
    redis::cmd("HGETALL").arg(key).query_async(c).await.unwrap()
}

/// A BullMQ job as read back: name, data and opts as added (deep-equal, typed), in `state`.
fn assert_bull_job(path: &str, got: &Value, id: &str, want: &Value, state: &str) {
    assert_eq!(got["id"], id, "{path}: {got}");
    assert_eq!(got["name"], want["name"], "{path}: name");
    assert_eq!(got["data"], want["data"], "{path}: data");
    assert_eq!(got["opts"], want["opts"], "{path}: opts");
    assert_eq!(
        got["priority"], want["opts"]["priority"],
        "{path}: priority"
    );
    assert_eq!(got["state"], state, "{path}: state");
}

/// A redriven job's hash: the failed one without what BullMQ's own retry deletes
/// (finishedOn, processedOn, failedReason), with qdeck's stamp, every other field byte-equal.
fn assert_bull_redriven(path: &str, before: &Hash, after: &Hash) {
    let mut want = before.clone();
    for gone in ["finishedOn", "processedOn", "failedReason"] {
        assert!(want.remove(gone).is_some(), "{path}: {gone} before");
    }
    let mut got = after.clone();
    assert_eq!(
        got.remove("qdeckRedriven").as_deref(),
        Some(&b"1"[..]),
        "{path}"
    );
    let at = got.remove("qdeckRedrivenAt").expect("qdeckRedrivenAt");
    assert!(
        String::from_utf8(at).unwrap().parse::<i64>().unwrap() > 0,
        "{path}"
    );
    assert_eq!(got, want, "{path}: job hash");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_REDIS_URL and QDECK_TEST_NODE_FIXTURES"]
async fn redis_bullmq_every_path_keeps_name_data_and_opts() {
    let url = redis_db_url();
    let _db = REDIS_DB_LOCK.lock().await;
    flush_redis_db().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prefix = uniq("bull");
    common::write_config(
        d,
        "bq",
        &[
            redis_profile("bq", "bullmq", &format!("prefix = \"{prefix}\"")),
            common::local_profile("lo", &d.join("lo.db"), ""),
        ],
    );
    let want = bullmq(&["expected"]).remove(0);
    let fail = |q: &str, other: bool| {
        let mut a = vec!["fail", &url, &prefix, q];
        if other {
            a.push("other");
        }
        for j in bullmq(&a) {
            assert_eq!(j["state"], "failed", "{j}");
        }
    };
    fail("src", false);
    fail("rd", false);
    fail("wh", true);
    let read = |q: &str| bullmq(&["read", &url, &prefix, q]);
    let mut c = redis_conn().await;
    let key = |q: &str, id: &str| format!("{prefix}:{q}:{id}");
    let src_before = job_hash(&mut c, &key("src", "fid-1")).await;
    let rd_before = job_hash(&mut c, &key("rd", "fid-1")).await;
    let wh_before = job_hash(&mut c, &key("wh", "fid-1")).await;

    // export: the data as stored (key order, numbers, escapes), laid out over lines; the
    // name and the failure are metadata, never headers.
    let r = export_one(d, "src/failed", "fid-1");
    let body = r["body"].as_str().unwrap();
    assert_eq!(
        compact(body).as_bytes(),
        &src_before["data"][..],
        "export: body"
    );
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        want["data"],
        "export: body"
    );
    assert_eq!(meta(&r, "name"), Some("invoice.render"), "{r}");
    assert_eq!(r["dead_letter"]["origin"], "src", "{r}");

    assert_sending_paths_refused(
        d,
        "src/failed",
        "fid-1",
        "src",
        "rd",
        "a failed BullMQ job is retried in its own queue",
    );
    let local = copy_to_local(d, "src/failed");
    assert_eq!(local.len(), 1, "copy to local: {local:?}");
    let l = &local[body];
    assert_eq!(header(l, "x-qdeck-name"), Some("invoice.render"), "{l}");
    assert_eq!(header(l, "x-qdeck-dead-letter-origin"), Some("src"), "{l}");
    let src = read("src");
    assert_eq!(src.len(), 1, "{src:?}");
    assert_bull_job(
        "after the refusals and the copy",
        &src[0],
        "fid-1",
        &want,
        "failed",
    );
    assert_eq!(
        job_hash(&mut c, &key("src", "fid-1")).await,
        src_before,
        "after the refusals and the copy: job hash"
    );

    qdeck(d, &[], &["redrive", "rd/failed"]);
    let rd = read("rd");
    assert_eq!(rd.len(), 1, "{rd:?}");
    assert_bull_job("redrive", &rd[0], "fid-1", &want, "prioritized");
    let rd_after = job_hash(&mut c, &key("rd", "fid-1")).await;
    assert_bull_redriven("redrive", &rd_before, &rd_after);

    qdeck(
        d,
        &[],
        &["redrive", "wh/failed", "--where", "json.order = 7"],
    );
    let mut wh = read("wh");
    wh.sort_by_key(|j| j["id"].as_str().unwrap().to_string());
    assert_eq!(wh.len(), 2, "{wh:?}");
    assert_bull_job("redrive --where", &wh[0], "fid-1", &want, "prioritized");
    let wh_after = job_hash(&mut c, &key("wh", "fid-1")).await;
    assert_bull_redriven("redrive --where", &wh_before, &wh_after);
    let mut other = want.clone();
    other["data"]["order"] = 9.into();
    other["opts"]["jobId"] = "fid-2".into();
    assert_bull_job("not matched", &wh[1], "fid-2", &other, "failed");
    flush_redis_db().await;
}

/// A Sidekiq job read back after a redrive: its payload before, but for what Sidekiq's own
/// retry changes (enqueued_at now, retry_count one down) and qdeck's stamp; the args (in
/// Ruby, with their classes) as pushed.
fn assert_sidekiq_redriven(path: &str, got: &Value, before: &Value) {
    assert_eq!(got["where"], "queue", "{path}: {got}");
    assert_eq!(got["typed_args_equal"], true, "{path}: args {got}");
    assert_eq!(got["class"], "FidelityJob", "{path}");
    let (mut g, mut b) = (got["item"].clone(), before["item"].clone());
    let (g, b) = (g.as_object_mut().unwrap(), b.as_object_mut().unwrap());
    assert_eq!(g.remove("qdeck_redriven"), Some(1.into()), "{path}: {got}");
    assert!(
        g.remove("qdeck_redriven_at")
            .and_then(|v| v.as_i64())
            .is_some_and(|v| v > 0),
        "{path}: {got}"
    );
    let enq = |m: &serde_json::Map<String, Value>| m["enqueued_at"].as_f64().unwrap();
    assert!(enq(g) > enq(b), "{path}: enqueued_at");
    g.remove("enqueued_at");
    b.remove("enqueued_at");
    let rc = b["retry_count"].as_i64().unwrap();
    b.insert("retry_count".into(), (rc - 1).into());
    assert_eq!(g, b, "{path}: payload");
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_REDIS_URL and ruby-sidekiq"]
async fn redis_sidekiq_every_path_keeps_class_typed_args_and_payload_keys() {
    let _db = REDIS_DB_LOCK.lock().await;
    flush_redis_db().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::write_config(
        d,
        "sk",
        &[
            redis_profile("sk", "sidekiq", ""),
            common::local_profile("lo", &d.join("lo.db"), ""),
        ],
    );
    let q = |s: &str| format!("fid-{s}");
    // jids are Sidekiq's 24 hex digits.
    let (a, b, r) = (
        "f1de11000000000000000001",
        "f1de11000000000000000002",
        "f1de11000000000000000003",
    );
    let dead_a = sidekiq(&["fail", &q("src"), a]).remove(0);
    let dead_b = sidekiq(&["fail", &q("wh"), b, "9"]).remove(0);
    let retrying = sidekiq(&["fail", &q("rt"), r, "7", "3"]).remove(0);
    for (j, set) in [(&dead_a, "dead"), (&dead_b, "dead"), (&retrying, "retry")] {
        assert_eq!(
            (&j["where"], &j["typed_args_equal"]),
            (&set.into(), &true.into()),
            "{j}"
        );
    }
    let mut c = redis_conn().await;
    let dead_raw: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
        .arg("dead")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut c)
        .await
        .unwrap();

    // export: the args as stored, read back by Ruby with every value's class (an integer
    // past 64 bits stays an Integer); the payload's own keys are metadata, never headers.
    let rec = export_one(d, "dead", a);
    let args_file = d.join("args.json");
    std::fs::write(&args_file, rec["body"].as_str().unwrap()).unwrap();
    let parsed = sidekiq(&["args", args_file.to_str().unwrap()]).remove(0);
    assert_eq!(parsed["typed_args_equal"], true, "export: args {parsed}");
    assert_eq!(meta(&rec, "class"), Some("FidelityJob"), "{rec}");
    assert_eq!(rec["dead_letter"]["origin"], q("src"), "{rec}");

    assert_sending_paths_refused(
        d,
        "dead",
        a,
        &q("src"),
        &q("src"),
        "Sidekiq retries each job to its own queue",
    );
    let local = copy_to_local(d, "dead");
    assert_eq!(local.len(), 2, "copy to local: {local:?}");
    let l = &local[rec["body"].as_str().unwrap()];
    assert_eq!(header(l, "x-qdeck-class"), Some("FidelityJob"), "{l}");
    assert_eq!(
        header(l, "x-qdeck-dead-letter-origin"),
        Some(q("src").as_str()),
        "{l}"
    );
    let after: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
        .arg("dead")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        after, dead_raw,
        "after the refusals and the copy: the dead set"
    );
    let src = sidekiq(&["read", &q("src")]);
    assert!(
        src.iter().all(|j| j["where"] != "queue"),
        "after the refusals: {src:?}"
    );

    qdeck(d, &[], &["redrive", "dead", "--where", "json.7.order = 7"]);
    let src = sidekiq(&["read", &q("src")]);
    let queued: Vec<&Value> = src.iter().filter(|j| j["where"] == "queue").collect();
    assert_eq!(queued.len(), 1, "redrive --where: {src:?}");
    assert_sidekiq_redriven("redrive --where", queued[0], &dead_a);
    let still: Vec<&Value> = src.iter().filter(|j| j["where"] == "dead").collect();
    assert_eq!(still.len(), 1, "redrive --where: {src:?}");
    assert_eq!(still[0]["jid"], b, "not matched");

    qdeck(d, &[], &["redrive", "dead"]);
    qdeck(d, &[], &["redrive", "retry"]);
    for (path, queue, before) in [
        ("redrive (dead set)", q("wh"), &dead_b),
        ("redrive (retry set)", q("rt"), &retrying),
    ] {
        let got = sidekiq(&["read", &queue]);
        assert_eq!(got.len(), 1, "{path}: {got:?}");
        assert_sidekiq_redriven(path, &got[0], before);
    }
    flush_redis_db().await;
}
