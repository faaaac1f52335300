//! The Service Bus AMQP stand-in (scripts/sb_standin.sh, tests/fixtures/servicebus_amqp) held to
//! Microsoft's own client: `azure-servicebus` from PyPI plays a scene against it
//! (tests/fixtures/servicebus_amqp/scene.py) and checks each step against what Microsoft
//! documents. The stand-in's management API is then read through qdeck's REST backend, which
//! must see the counts the scene left.
//!
//! Needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON, a Python with `python-qpid-proton` and
//! `azure-servicebus` (.ci/run sets both).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use qdeck_model::domain::QueueId;
use serde_json::Value as Json;

/// The steps scene.py plays, in order; each must be reported and pass.
const STEPS: &[&str] = &[
    "wrong_key_refused",
    "missing_claims_refused",
    "send_and_peek",
    "peek_leaves_delivery_count",
    "complete_removes",
    "renew_lock",
    "lock_expiry_redelivers",
    "schedule_and_cancel",
    "schedule_becomes_active",
    "defer_and_receive_by_sequence",
    "dead_letter_with_reason",
    "max_delivery_count_to_dlq",
    "sessions",
    "session_lock_expires",
    "topic_fan_out",
    "topic_schedule",
    "transfer_dead_letter_queue",
    "receive_and_delete",
    "leave_figures",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scene_script() -> PathBuf {
    root().join("tests/fixtures/servicebus_amqp/scene.py")
}

fn python() -> String {
    common::broker_var(
        "QDECK_TEST_SB_AMQP",
        "set to 1 to check the AMQP stand-in with azure-servicebus",
    );
    let py = common::broker_var(
        "QDECK_TEST_PYTHON",
        "a Python with python-qpid-proton and azure-servicebus",
    );
    let ok = Command::new(&py)
        .args(["-c", "import proton, azure.servicebus"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        common::skip(&format!(
            "{py} cannot import proton and azure.servicebus (pip install python-qpid-proton azure-servicebus)"
        ));
    }
    py
}

/// A port whose successor is free too (the management API listens on PORT+1).
fn free_port_pair() -> u16 {
    loop {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if port < u16::MAX && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// A running `scripts/sb_standin.sh`, killed on drop.
struct StandIn {
    child: Child,
    conn_str: String,
    management: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl StandIn {
    fn start(py: &str, fault: Option<&str>) -> StandIn {
        let out = Command::new(py)
            .arg(scene_script())
            .arg("--entities")
            .output()
            .expect("scene.py --entities");
        let entities: Vec<String> = serde_json::from_slice(&out.stdout).expect("entity list");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("standin.log");
        let mut cmd = Command::new(root().join("scripts/sb_standin.sh"));
        cmd.arg(free_port_pair().to_string())
            .args(&entities)
            .env("QDECK_TEST_PYTHON", py)
            .env_remove("QDECK_SB_STANDIN_FAULT")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(f) = fault {
            cmd.env("QDECK_SB_STANDIN_FAULT", f);
        }
        let mut child = cmd.spawn().expect("start scripts/sb_standin.sh");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let line = || {
            rx.recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| {
                    panic!(
                        "the stand-in printed no line within 30 s: {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    )
                })
        };
        let conn_str = line();
        let management = line();
        assert!(
            conn_str.starts_with("Endpoint=sb://127.0.0.1:")
                && conn_str.contains(";SharedAccessKeyName=RootManageSharedAccessKey;")
                && conn_str.ends_with(";UseDevelopmentEmulator=true;"),
            "line 1 is not the emulator connection string: {conn_str}"
        );
        let management = management
            .strip_prefix("management=")
            .unwrap_or_else(|| panic!("line 2 is not management=URL: {management}"))
            .to_string();
        StandIn {
            child,
            conn_str,
            management,
            log,
            _dir: dir,
        }
    }

    /// The connection string pointed at the management API, for qdeck's REST backend.
    fn management_conn_str(&self) -> String {
        let host_port = self.management.trim_start_matches("http://");
        let rest = self.conn_str.split_once(';').unwrap().1;
        format!("Endpoint=sb://{host_port}/;{rest}")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Run scene.py; its exit success and the JSON line of each step (and the summary).
fn run_scene(py: &str, s: &StandIn) -> (bool, Vec<Json>) {
    let out = Command::new(py)
        .arg(scene_script())
        .arg(&s.conn_str)
        .arg(&s.management)
        .output()
        .expect("run scene.py");
    let lines: Vec<Json> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    for l in &lines {
        if let Some(step) = l["step"].as_str() {
            let ok = if l["ok"].as_bool() == Some(true) {
                "ok  "
            } else {
                "FAIL"
            };
            println!("{ok} {step}: {}", l["detail"].as_str().unwrap_or(""));
        }
    }
    if !out.status.success() {
        println!(
            "scene stderr:\n{}\nstand-in log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            s.log()
        );
    }
    (out.status.success(), lines)
}

fn failed_steps(lines: &[Json]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["ok"].as_bool() == Some(false))
        .filter_map(|l| l["step"].as_str().map(str::to_string))
        .collect()
}

/// `step: detail` of each failed step, for an assertion message.
fn failures(lines: &[Json]) -> String {
    lines
        .iter()
        .filter(|l| l["ok"].as_bool() == Some(false))
        .map(|l| {
            format!(
                "{}: {}",
                l["step"].as_str().unwrap_or("?"),
                l["detail"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with python-qpid-proton and azure-servicebus"]
async fn microsofts_client_gets_what_microsoft_documents_from_the_stand_in() {
    let py = python();
    let s = StandIn::start(&py, None);
    let (ok, lines) = run_scene(&py, &s);
    let reported: Vec<&str> = lines.iter().filter_map(|l| l["step"].as_str()).collect();
    assert_eq!(reported, STEPS, "the scene did not report every step");
    assert!(
        failed_steps(&lines).is_empty(),
        "failed steps:\n{}",
        failures(&lines)
    );
    assert!(ok, "scene.py exited with failure");

    // The figures qdeck reads come from the same messages: scene-figures was left with two
    // active, one scheduled and one dead-lettered message.
    let b = common::servicebus_backend("sb-amqp", &s.management_conn_str(), None)
        .await
        .expect("REST backend on the stand-in's management API");
    let id = QueueId::new("scene-figures");
    let batch = b.stats(std::slice::from_ref(&id)).await.expect("stats");
    let st = batch
        .stats
        .iter()
        .find(|x| x.id == id)
        .expect("scene-figures in the stats");
    assert_eq!(
        (st.depth, st.delayed, st.dlq_depth),
        (Some(2), Some(1), Some(1)),
        "figures of scene-figures"
    );
    let names: Vec<String> = b
        .list_queues()
        .await
        .expect("list queues")
        .into_iter()
        .map(|q| q.id.to_string())
        .collect();
    for q in ["scene-basic", "scene-maxdc", "scene-sess", "scene-figures"] {
        assert!(names.iter().any(|n| n == q), "{q} not listed in {names:?}");
    }
}

#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with python-qpid-proton and azure-servicebus"]
fn the_scene_fails_on_a_stand_in_whose_peek_counts_as_a_delivery() {
    let py = python();
    let s = StandIn::start(&py, Some("peek-bumps-delivery-count"));
    let (ok, lines) = run_scene(&py, &s);
    assert!(
        !ok,
        "the scene passed a stand-in whose peek raises DeliveryCount"
    );
    let failed = failed_steps(&lines);
    assert!(
        failed.iter().any(|f| f == "peek_leaves_delivery_count"),
        "the peek step did not catch the fault; failed: {failed:?}"
    );
}

#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with python-qpid-proton and azure-servicebus"]
fn a_wrong_management_key_is_refused() {
    let py = python();
    let s = StandIn::start(&py, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let wrong = s
        .management_conn_str()
        .replace("SharedAccessKey=", "SharedAccessKey=d3Jvbmcta2V5LXZhbHVl");
    let err = rt.block_on(async {
        let b = common::servicebus_backend("sb-amqp", &wrong, None).await?;
        b.list_queues().await
    });
    let e = err.expect_err("a wrong key listed the queues");
    assert!(
        e.to_string().contains("401") || e.to_string().to_lowercase().contains("unauthor"),
        "not an auth error: {e}"
    );
}

#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with python-qpid-proton and azure-servicebus"]
fn the_script_says_in_one_line_what_is_wrong() {
    let py = python();
    let script = root().join("scripts/sb_standin.sh");
    let bad = Command::new(&script)
        .args(["5999", "--queue", "orders,bogus"])
        .env("QDECK_TEST_PYTHON", &py)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "a bad option was accepted");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.contains("bad option 'bogus'"), "{err}");

    // A port already taken: a one-line error naming it, not a traceback.
    let s = StandIn::start(&py, None);
    let port = s.conn_str["Endpoint=sb://127.0.0.1:".len()..]
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let taken = Command::new(&script)
        .args([port.as_str(), "--queue", "x", "--management-port", "0"])
        .env("QDECK_TEST_PYTHON", &py)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&taken.stderr);
    assert!(
        !taken.status.success(),
        "a second stand-in started on a taken port"
    );
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.contains(&port), "{err}");

    let missing = Command::new(&script)
        .arg("5999")
        .env("QDECK_TEST_PYTHON", "/nonexistent/python")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(err.contains("pip install python-qpid-proton"), "{err}");
}

/// GET `path` from the management API with `Authorization: token`: (status, body).
fn management_get(s: &StandIn, path: &str, token: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let host = s.management.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(host).unwrap();
    write!(
        conn,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with python-qpid-proton and azure-servicebus"]
fn the_management_api_checks_tokens_as_azure_does() {
    use qdeck_backend::servicebus::connstr::{sas_token, unix_now};
    let py = python();
    let s = StandIn::start(&py, None);
    let key = s
        .conn_str
        .split(";SharedAccessKey=")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap()
        .to_string();
    let uri = format!("{}/", s.management);
    let path = "$Resources/Queues?api-version=2021-05";
    let root = "RootManageSharedAccessKey";
    let good = sas_token(&uri, root, &key, unix_now() + 300);
    let (status, body) = management_get(&s, path, &good);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("<title type=\"text\">scene-basic</title>"),
        "{body}"
    );

    let cases = [
        (
            "expired",
            sas_token(&uri, root, &key, unix_now() - 60),
            "ExpiredToken",
        ),
        (
            "wrong key",
            sas_token(&uri, root, "d3Jvbmc=", unix_now() + 300),
            "InvalidSignature",
        ),
        (
            "unknown key name",
            sas_token(&uri, "Nobody", &key, unix_now() + 300),
            "InvalidSignature",
        ),
        (
            "Listen-only policy",
            sas_token(
                &uri,
                "ListenOnly",
                "cWRlY2stc2Itc3RhbmRpbi1saXN0ZW4tb25seQ==",
                unix_now() + 300,
            ),
            "Manage,EntityRead claims required",
        ),
        (
            "another entity's token",
            sas_token(&format!("{uri}other-queue"), root, &key, unix_now() + 300),
            "InvalidAudience",
        ),
        ("no token", String::new(), "MalformedToken"),
    ];
    for (what, token, says) in cases {
        let (status, body) = management_get(&s, path, &token);
        assert_eq!(status, 401, "{what}: {body}");
        assert!(body.contains(says), "{what}: {body}");
    }
}
