//! `qdeck copy` between real brokers, as a user runs it: RabbitMQ → SQS (moto) and SQS → the
//! local broker, each profile from one config file. Ignored unless asked for
//! (`source /work/testenv.sh; cargo test --test copy_brokers -- --include-ignored`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping
#![cfg(all(feature = "rabbitmq", feature = "sqs"))]

mod common;

use std::path::Path;
use std::time::Duration;

use qdeck_backend::Backend;
use qdeck_model::domain::{BrowseRequest, Message, QueueId};
use serde_json::Value;

const PASSWORD_VAR: &str = "QDECK_TEST_COPY_RMQ_PASSWORD";

fn uniq(prefix: &str) -> String {
    format!(
        "qdeck-cp-{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

struct Brokers {
    amqp: String,
    bare_amqp: String,
    mgmt: String,
    user: String,
    password: String,
    sqs: String,
}

fn brokers() -> Brokers {
    let amqp = common::broker_var("QDECK_TEST_AMQP_URL", "RabbitMQ");
    let mgmt = common::broker_var("QDECK_TEST_RABBITMQ_MGMT", "RabbitMQ management");
    let sqs = common::broker_var("QDECK_TEST_SQS_ENDPOINT", "moto");
    let uri: lapin::uri::AMQPUri = amqp.parse().expect("QDECK_TEST_AMQP_URL parses");
    let user = uri.authority.userinfo.username.clone();
    let bare_amqp = format!(
        "amqp://{user}@{}:{}/{}",
        uri.authority.host,
        uri.authority.port,
        urlencoding::encode(&uri.vhost)
    );
    Brokers {
        password: uri.authority.userinfo.password.clone(),
        amqp,
        bare_amqp,
        mgmt,
        user,
        sqs,
    }
}

/// Profiles `rmq`, `aws` (queues under `prefix`) and `lo` (a local broker in `dir`).
fn write_config(dir: &Path, b: &Brokers, prefix: &str) {
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[[profiles]]\nname = \"rmq\"\nkind = \"rabbitmq\"\namqp_url = \"{}\"\n\
             management_url = \"{}\"\nusername = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n\
             [[profiles]]\nname = \"aws\"\nkind = \"sqs\"\nregions = [\"us-east-1\"]\n\
             endpoint_url = \"{}\"\nqueue_prefix = \"{prefix}\"\ncloudwatch = false\n\
             [[profiles]]\nname = \"lo\"\nkind = \"local\"\npath = \"{}\"\n",
            b.bare_amqp,
            b.mgmt,
            b.user,
            b.sqs,
            dir.join("lo.db").display()
        ),
    )
    .unwrap();
}

fn qdeck(dir: &Path, b: &Brokers, args: &[&str]) -> Value {
    let out = assert_cmd::Command::cargo_bin("qdeck")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("QDECK_CONFIG", dir.join("config.toml"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env(PASSWORD_VAR, &b.password)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .args(args)
        .args(["-y", "-o", "json"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn sqs_client(ep: &str) -> aws_sdk_sqs::Client {
    let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(qdeck_backend::tls::aws_https_client())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(ep)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&conf)
}

/// Every message of an SQS queue, received once (long poll) and deleted: body and
/// message attributes (string values).
async fn drain_sqs(
    c: &aws_sdk_sqs::Client,
    url: &str,
    n: usize,
) -> Vec<(Vec<u8>, Vec<(String, String)>)> {
    let mut got = Vec::new();
    for _ in 0..20 {
        if got.len() >= n {
            break;
        }
        let r = c
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        for m in r.messages() {
            let mut attrs: Vec<(String, String)> = m
                .message_attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.clone(), v.string_value().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            attrs.sort();
            got.push((m.body().unwrap_or_default().as_bytes().to_vec(), attrs));
        }
    }
    got
}

fn names_in_report(r: &Value, arrived: bool) -> Vec<String> {
    r["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["to"].is_null() != arrived)
        .map(|h| {
            if arrived {
                h["to"].as_str().unwrap().to_string()
            } else {
                h["name"].as_str().unwrap().to_string()
            }
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_AMQP_URL and QDECK_TEST_SQS_ENDPOINT"]
async fn rabbitmq_to_sqs_copy_keeps_bodies_and_headers_and_names_the_rest() {
    use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
    use lapin::types::{AMQPValue, FieldTable, LongString};
    use lapin::BasicProperties;
    let b = brokers();
    let prefix = format!("cp{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let (src, dst) = (uniq("rmq-src"), format!("{prefix}-dst"));
    let conn = lapin::Connection::connect(&b.amqp, Default::default())
        .await
        .expect("amqp");
    let ch = conn.create_channel().await.unwrap();
    ch.queue_declare(
        src.as_str().into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let bodies = ["{\"order\":1}", "é ✓ \t tabs\nand lines", "plain"];
    for (i, body) in bodies.iter().enumerate() {
        let mut h = FieldTable::default();
        h.insert(
            "x-tenant".into(),
            AMQPValue::LongString(LongString::from(format!("t{i}").as_bytes())),
        );
        let props = BasicProperties::default()
            .with_message_id(format!("mid-{i}").as_str().into())
            .with_content_type("application/json".into())
            .with_headers(h);
        ch.basic_publish(
            "".into(),
            src.as_str().into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            props,
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let sqs = sqs_client(&b.sqs).await;
    let url = sqs
        .create_queue()
        .queue_name(&dst)
        .send()
        .await
        .expect("create queue")
        .queue_url()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &b, &prefix);
    let r = qdeck(
        dir.path(),
        &b,
        &[
            "-p",
            "rmq",
            "copy",
            &src,
            "--to",
            &dst,
            "--to-profile",
            "aws",
        ],
    );
    assert_eq!(
        (r["sent"].as_u64(), r["failed"].as_u64()),
        (Some(3), Some(0)),
        "{r}"
    );
    let carried = names_in_report(&r, true);
    // AMQP properties SQS lacks travel as x-qdeck-* attributes, listed.
    assert!(carried.contains(&"x-qdeck-message_id".to_string()), "{r}");
    assert!(carried.contains(&"x-qdeck-content_type".to_string()), "{r}");
    // The default exchange's empty name cannot be an SQS attribute: listed as dropped.
    assert_eq!(names_in_report(&r, false), vec!["exchange"], "{r}");
    let mut got = drain_sqs(&sqs, &url, 3).await;
    got.sort();
    assert_eq!(got.len(), 3);
    let mut want: Vec<Vec<u8>> = bodies.iter().map(|b| b.as_bytes().to_vec()).collect();
    want.sort();
    assert_eq!(
        got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(),
        want,
        "bodies byte-exact"
    );
    for (body, attrs) in &got {
        let i = bodies
            .iter()
            .position(|b| b.as_bytes() == body.as_slice())
            .unwrap();
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-tenant"), Some(format!("t{i}").as_str()), "{attrs:?}");
        assert_eq!(get("x-qdeck-content_type"), Some("application/json"));
        assert_eq!(get("x-qdeck-message_id"), Some(format!("mid-{i}").as_str()));
        // Every header the report says was renamed is there under its new name.
        for c in &carried {
            assert!(get(c).is_some(), "{c} missing from {attrs:?}");
        }
    }
    // The source was browsed, not consumed (browsed messages are requeued).
    let mut ready = 0;
    for _ in 0..50 {
        let q = ch
            .queue_declare(
                src.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        ready = q.message_count();
        if ready == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready, 3);
    let _ = ch
        .queue_delete(src.as_str().into(), Default::default())
        .await;
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn sqs_to_local_copy_keeps_bodies_and_attributes() {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let b = Brokers {
        sqs: common::broker_var("QDECK_TEST_SQS_ENDPOINT", "moto"),
        amqp: String::new(),
        bare_amqp: "amqp://guest@127.0.0.1:5672/%2f".into(),
        mgmt: "http://127.0.0.1:15672".into(),
        user: "guest".into(),
        password: String::new(),
    };
    let prefix = format!("cp{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let src = format!("{prefix}-src");
    let sqs = sqs_client(&b.sqs).await;
    let url = sqs
        .create_queue()
        .queue_name(&src)
        .send()
        .await
        .expect("create queue")
        .queue_url()
        .unwrap()
        .to_string();
    let bodies = ["{\"a\":[1,2]}", "ünïcödé", "x"];
    for (i, body) in bodies.iter().enumerate() {
        sqs.send_message()
            .queue_url(&url)
            .message_body(*body)
            .message_attributes(
                "x-tenant",
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(format!("t{i}"))
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &b, &prefix);
    let local = qdeck_backend::local::LocalBackend::open(&dir.path().join("lo.db")).unwrap();
    local.create_queue("repro", &Default::default()).unwrap();
    let r = qdeck(
        dir.path(),
        &b,
        &[
            "-p",
            "aws",
            "copy",
            &src,
            "--to",
            "repro",
            "--to-profile",
            "lo",
        ],
    );
    assert_eq!(r["sent"].as_u64(), Some(3), "{r}");
    let h = qdeck_backend::local::LocalHandle::open(&dir.path().join("lo.db")).unwrap();
    let page = h
        .browse(
            &QueueId::new("repro"),
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut msgs: Vec<&Message> = page.messages.iter().collect();
    msgs.sort_by(|a, b| a.body.cmp(&b.body));
    let mut want: Vec<&[u8]> = bodies.iter().map(|b| b.as_bytes()).collect();
    want.sort();
    assert_eq!(
        msgs.iter().map(|m| m.body.as_slice()).collect::<Vec<_>>(),
        want,
        "bodies byte-exact"
    );
    for m in msgs {
        let i = bodies
            .iter()
            .position(|b| b.as_bytes() == m.body.as_slice())
            .unwrap();
        let get = |k: &str| {
            m.headers
                .iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.as_str())
        };
        assert_eq!(
            get("x-tenant"),
            Some(format!("t{i}").as_str()),
            "{:?}",
            m.headers
        );
        // SQS system attributes arrive as data under x-qdeck-*.
        assert!(get("x-qdeck-SentTimestamp").is_some(), "{:?}", m.headers);
    }
    assert!(names_in_report(&r, true).contains(&"x-qdeck-SentTimestamp".to_string()));
}
