//! Fidelity: a message published by the broker's own client library comes out of every qdeck
//! path that sends it again (export → import, copy, copy to another profile, move, edit,
//! redrive, redrive --where) as it went in, read back with that same library: the body byte
//! for byte, every property and header with its type, no broker metadata re-sent, and only
//! the documented `x-qdeck-*` stamps added.
//!
//! RabbitMQ through pika, SQS through boto3 against moto. Ignored unless asked for; CI runs
//! them with QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT, QDECK_TEST_SQS_ENDPOINT and
//! QDECK_TEST_PYTHON (a Python with pika and boto3).

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
