//! Alert rules end to end on the embedded broker: `qdeck watch` prints each transition once,
//! hooks receive them once (across a restart of `watch`), failing hooks are logged without
//! stopping the next transition, and bad rules are config errors that name their key.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::path::PathBuf;

use common::cli_env::CliEnv as Env;
use serde_json::Value;

impl Env {
    fn config(&self, text: &str) -> PathBuf {
        let p = self.dir.path().join("config/qdeck/config.toml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn ok(&self, args: &[&str]) {
        let out = self.qdeck().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `watch` for `secs`, as JSON lines; (transitions, stderr).
    fn watch(&self, secs: f64, extra: &[&str]) -> (Vec<Value>, String) {
        let d = format!("{secs}s");
        let mut args = vec!["watch", "-o", "json", "--duration", &d];
        args.extend_from_slice(extra);
        let out = self.qdeck().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "watch failed: {stderr}");
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        (lines, stderr)
    }

    fn hook_file(&self) -> PathBuf {
        self.dir.path().join("hook.jsonl")
    }

    fn hooked(&self) -> Vec<Value> {
        std::fs::read_to_string(self.hook_file())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

const RULES: &str = r#"
[ui]
refresh_secs = 0.2

[[alerts]]
name = "dlq-not-empty"
kinds = ["dlq"]
when = "depth > 0"
for = "600ms"
severity = "critical"
summary = "{queue} holds {depth} dead letters"
"#;

fn states(v: &[Value]) -> Vec<(String, String)> {
    v.iter()
        .map(|t| {
            (
                t["state"].as_str().unwrap().to_string(),
                t["queue"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn watch_fires_once_and_resolves_once_across_a_restart() {
    let e = Env::new();
    e.config(RULES);
    e.ok(&["create", "orders", "--dlq", "orders.dlq"]);
    e.ok(&["send", "orders.dlq", "poison 1"]);
    e.ok(&["send", "orders.dlq", "poison 2"]);
    let hook = format!("cat >> '{}'", e.hook_file().display());

    let (lines, stderr) = e.watch(2.5, &["--hook-cmd", &hook]);
    assert_eq!(
        states(&lines),
        [("firing".into(), "orders.dlq".into())],
        "{stderr}"
    );
    let t = &lines[0];
    assert_eq!(t["rule"], "dlq-not-empty");
    assert_eq!(t["severity"], "critical");
    assert_eq!(t["profile"], "local");
    assert_eq!(t["summary"], "orders.dlq holds 2 dead letters");
    // The source queue is no DLQ: the rule's kinds keep it out.
    assert_eq!(states(&e.hooked()), states(&lines));

    // Restarted while the condition still holds: nothing fires again.
    let (lines, _) = e.watch(1.5, &["--hook-cmd", &hook]);
    assert!(lines.is_empty(), "fired again after a restart: {lines:?}");

    e.ok(&["purge", "orders.dlq", "-y"]);
    let (lines, _) = e.watch(1.5, &["--hook-cmd", &hook]);
    assert_eq!(states(&lines), [("resolved".into(), "orders.dlq".into())]);
    let hooked = e.hooked();
    assert_eq!(
        states(&hooked),
        [
            ("firing".into(), "orders.dlq".into()),
            ("resolved".into(), "orders.dlq".into())
        ]
    );
    assert_eq!(hooked[1]["firing_since"], hooked[0]["at"]);
}

#[test]
fn a_blip_shorter_than_for_does_not_fire() {
    let e = Env::new();
    e.config(&RULES.replace("600ms", "30s"));
    e.ok(&["create", "orders", "--dlq", "orders.dlq"]);
    e.ok(&["send", "orders.dlq", "poison"]);
    let (lines, _) = e.watch(1.5, &[]);
    assert!(lines.is_empty(), "{lines:?}");
}

#[test]
fn a_failing_hook_is_retried_and_logged_and_a_hanging_one_is_killed() {
    let e = Env::new();
    e.config(&RULES.replace("600ms", "0s"));
    e.ok(&["create", "a", "--dlq", "a.dlq"]);
    e.ok(&["create", "b", "--dlq", "b.dlq"]);
    e.ok(&["send", "a.dlq", "x"]);
    e.ok(&["send", "b.dlq", "y"]);
    // Records each try, then fails: every transition is tried twice, none is dropped.
    let hook = format!("cat >> '{}'; exit 1", e.hook_file().display());
    let (lines, stderr) = e.watch(4.0, &["--hook-cmd", &hook, "--hook-tries", "2"]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let mut tried: Vec<String> = e
        .hooked()
        .iter()
        .map(|t| t["queue"].as_str().unwrap().to_string())
        .collect();
    tried.sort();
    assert_eq!(tried, ["a.dlq", "a.dlq", "b.dlq", "b.dlq"], "{stderr}");
    assert_eq!(stderr.matches("failed, try 1 of 2").count(), 2, "{stderr}");
    assert_eq!(stderr.matches("failed, try 2 of 2").count(), 2, "{stderr}");

    // A hook that hangs is killed at its timeout; the watcher goes on and exits on time.
    let e2 = Env::new();
    e2.config(&RULES.replace("600ms", "0s"));
    e2.ok(&["create", "a", "--dlq", "a.dlq"]);
    e2.ok(&["send", "a.dlq", "x"]);
    let started = std::time::Instant::now();
    let (lines, stderr) = e2.watch(
        1.5,
        &[
            "--hook-cmd",
            "sleep 30",
            "--hook-timeout",
            "300ms",
            "--hook-tries",
            "1",
        ],
    );
    assert_eq!(lines.len(), 1);
    assert!(
        stderr.contains("did not finish within 0.3s (killed)"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_profile_that_cannot_be_opened_fires_its_health_rule_once() {
    let e = Env::new();
    e.config(
        r#"
[ui]
refresh_secs = 0.2

[[profiles]]
name = "broken"
kind = "local"
path = "/proc/qdeck-no-such-dir/local.db"

[[alerts]]
name = "down"
when = "unreachable"
"#,
    );
    let (lines, _) = e.watch(1.5, &[]);
    assert_eq!(states(&lines), [("firing".into(), String::new())]);
    assert_eq!(lines[0]["profile"], "broken");
    assert!(lines[0]["summary"]
        .as_str()
        .unwrap()
        .starts_with("broken: unreachable true"));
}

#[test]
fn bad_rules_are_config_errors_that_name_the_key() {
    let e = Env::new();
    let cases = [
        (
            "when = \"dlq_size > 1\"",
            "alerts[0].when: column 1: unknown figure \"dlq_size\"",
        ),
        (
            "when = \"depth > 5m\"",
            "alerts[0].when: column 9: depth is a count or a rate",
        ),
        (
            "when = \"depth > 1\"\nfor = \"soon\"",
            "alerts[0].for = \"soon\" is not a duration",
        ),
        (
            "when = \"depth > 1\"\nseverity = \"page\"",
            "alerts[0].severity = \"page\"",
        ),
        (
            "when = \"depth > 1\"\nqueues = \"(\"",
            "alerts[0].queues = \"(\" is not a regular expression",
        ),
        (
            "when = \"depth > 1\"\nkinds = [\"dql\"]",
            "alerts[0].kinds has \"dql\"",
        ),
        (
            "when = \"depth > 1\"\nsummary = \"{deepth}\"",
            "unknown placeholder {deepth}",
        ),
        ("when = \"depth > 1\"\nwhen2 = 1", "unknown field `when2`"),
    ];
    for (body, want) in cases {
        let path = e.config(&format!("[[alerts]]\nname = \"r\"\n{body}\n"));
        let out = e
            .qdeck()
            .args(["config", "validate", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert!(stderr.contains(want), "{body}: want {want:?} in {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
    let path = e.config("[[alerts]]\nname = \"r\"\nwhen = \"depth > 1\"\n[[alerts]]\nname = \"r\"\nwhen = \"age > 1m\"\n");
    let out = e
        .qdeck()
        .args(["config", "validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("alerts[1].name \"r\" is used twice"));
    // Without rules, watch says what to add.
    e.config("");
    let out = e
        .qdeck()
        .args(["watch", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("add [[alerts]]"));
}

/// Accepts HTTP requests on a loopback port, answers 200 and hands each body over.
fn webhook_sink() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .unwrap();
            let _ = tx.send(String::from_utf8(body).unwrap());
        }
    });
    (url, rx)
}

#[test]
fn webhooks_post_slack_text_and_a_refusing_url_is_logged() {
    let e = Env::new();
    e.config(&RULES.replace("600ms", "0s"));
    e.ok(&["create", "orders", "--dlq", "orders.dlq"]);
    e.ok(&["send", "orders.dlq", "poison"]);
    let (url, bodies) = webhook_sink();
    let mut cmd = e.qdeck();
    cmd.env("QDECK_TEST_HOOK", &url).args([
        "watch",
        "--duration",
        "1.5s",
        "--hook-url-env",
        "QDECK_TEST_HOOK",
        "--hook-format",
        "slack",
    ]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: Value = serde_json::from_str(
        &bodies
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["text"],
        "[FIRING] critical dlq-not-empty local/orders.dlq: orders.dlq holds 1 dead letters"
    );
    assert!(bodies.try_recv().is_err(), "one transition, one POST");

    // A URL that refuses: logged per try, watch goes on and ends on time.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = e
        .qdeck()
        .env("QDECK_TEST_HOOK", format!("http://127.0.0.1:{port}/"))
        .args([
            "watch",
            "--duration",
            "2.5s",
            "--state",
            "/proc/qdeck-no-such-dir/state.json",
            "--hook-url-env",
            "QDECK_TEST_HOOK",
            "--hook-tries",
            "2",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("failed, try 2 of 2: POST failed: connection refused"),
        "{stderr}"
    );
    // The state cannot be saved there: said once, not per poll.
    assert_eq!(
        stderr.matches("cannot save the alert state").count(),
        1,
        "{stderr}"
    );
    // Without the variable, a clear usage error.
    let out = e
        .qdeck()
        .args(["watch", "--hook-url-env", "QDECK_NOT_SET"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("QDECK_NOT_SET: the variable is not set"));
}

/// Dead letters written into `orders.dlq` every 100 ms until dropped, so its growth never
/// pauses between two polls however loaded the machine is (the demo's own poison messages
/// arrive in bursts, after three receives each, and once left a whole watch without growth).
struct DeadLetterFeed {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl DeadLetterFeed {
    fn start(e: &Env) -> Self {
        use std::sync::atomic::Ordering;
        let b = e.local();
        let _ = b.create_queue("orders.dlq", &qdeck_backend::local::QueueOptions::default());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut sent = 0;
            while !flag.load(Ordering::Relaxed) {
                let m = qdeck_model::domain::OutgoingMessage {
                    body: format!("poison {sent}").into_bytes(),
                    ..Default::default()
                };
                if b.send_sync("orders.dlq", &m).is_ok() {
                    sent += 1;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            sent
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the feed; how many dead letters it wrote.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap())
    }
}

#[test]
fn watch_beside_the_demo_fires_dlq_growing_once_and_resolves_after_a_purge() {
    let e = Env::new();
    e.config(
        r#"
[ui]
refresh_secs = 0.5

[[alerts]]
name = "dlq-growing"
kinds = ["dlq"]
queues = '^orders\.dlq$'
when = "dlq_growth > 0"
for = "1s"
"#,
    );
    let hook = format!("cat >> '{}'", e.hook_file().display());
    // The demo runs beside the watch (its workers, poison messages and lease losses are the
    // load the rule must see through); the feed makes the growth steady.
    let feed = DeadLetterFeed::start(&e);
    let mut demo = e
        .process()
        .args([
            "demo",
            "--rate",
            "20",
            "--workers",
            "6",
            "--per-worker",
            "10",
            "--duration",
            "60s",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (lines, stderr) = e.watch(8.0, &["--hook-cmd", &hook]);
    let _ = demo.kill();
    let _ = demo.wait();
    let fed = feed.stop();
    assert_eq!(
        states(&lines),
        [("firing".into(), "orders.dlq".into())],
        "{fed} dead letters fed; {stderr}"
    );
    // Restarted after the purge: the saved state knows the rule fired, so it resolves once
    // (its first poll cannot know the growth: unknown is neither firing nor resolved).
    e.ok(&["purge", "orders.dlq", "-y"]);
    let (lines, _) = e.watch(6.0, &["--hook-cmd", &hook]);
    assert_eq!(states(&lines), [("resolved".into(), "orders.dlq".into())]);
    assert_eq!(
        states(&e.hooked()),
        [
            ("firing".into(), "orders.dlq".into()),
            ("resolved".into(), "orders.dlq".into())
        ]
    );
}

#[test]
fn notify_is_global_with_a_per_profile_override() {
    let c = qdeck_model::config::parse_str(
        "[notify]\nbell = true\n\n[[profiles]]\nname = \"quiet\"\nkind = \"local\"\nnotify = { bell = false, desktop = false }\n\n[[profiles]]\nname = \"loud\"\nkind = \"local\"\n",
    )
    .unwrap();
    assert!(c.notify.bell && !c.notify.desktop);
    assert_eq!(c.profiles[0].notify.as_ref().map(|n| n.bell), Some(false));
    assert!(c.profiles[1].notify.is_none());
    let bad = qdeck_model::config::parse_str("[notify]\nring = true\n").unwrap_err();
    assert!(bad.to_string().contains("unknown field `ring`"), "{bad}");
}

/// A loopback "webhook" that answers each request with bytes that are not HTTP, so the POST
/// fails inside the HTTP client (whose errors name the URL they were for).
fn garbage_sink() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"\x00\x01 not http at all\r\n\r\n");
        }
    });
    format!("http://{addr}")
}

/// Every file under `dir`, as lossy text: the log, the state, the audit, whatever was written.
fn all_files(dir: &std::path::Path, out: &mut Vec<(PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, String::from_utf8_lossy(&b).into_owned()));
        }
    }
}

/// A Slack-style webhook URL carries its token in the path: at trace logging, through a POST
/// that succeeds and one that fails inside the HTTP client, it appears in no output, no log
/// and no file qdeck writes.
#[test]
fn a_webhook_url_never_leaks_at_trace_logging() {
    const TOKEN: &str = "xQdEcKsEcReTtOkEn42";
    let e = Env::new();
    e.config(&RULES.replace("600ms", "0s"));
    e.ok(&["create", "orders", "--dlq", "orders.dlq"]);
    e.ok(&["send", "orders.dlq", "poison"]);
    let (ok_url, bodies) = webhook_sink();
    let slack_path = format!("/services/T00000000/B00000000/{TOKEN}");
    let mut outputs = Vec::new();
    // Each run keeps its own alert state, so each fires its transition (and its hook).
    for (run, base, tries) in [
        (1, ok_url.trim_end_matches("/hook").to_string(), "1"),
        (2, garbage_sink(), "2"),
    ] {
        let state = e.dir.path().join(format!("state-{run}.json"));
        let out = e
            .qdeck()
            .env("QDECK_LOG", "trace")
            .env("RUST_LOG", "trace")
            .env("QDECK_TEST_HOOK", format!("{base}{slack_path}"))
            .args([
                "watch",
                "--duration",
                "1.5s",
                "--hook-url-env",
                "QDECK_TEST_HOOK",
                "--hook-format",
                "slack",
                "--hook-tries",
                tries,
                "--state",
                state.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        outputs.push(stderr);
    }
    // Both hooks ran: one delivered, one failed and said so.
    bodies
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(outputs[3].contains("POST failed"), "{}", outputs[3]);
    let mut files = Vec::new();
    all_files(e.dir.path(), &mut files);
    let log = files
        .iter()
        .find(|(p, _)| p.ends_with("qdeck.log"))
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "trace logging was not on: {log}"
    );
    for o in &outputs {
        assert!(!o.contains(TOKEN), "leaked to output: {o}");
    }
    for (p, text) in &files {
        assert!(!text.contains(TOKEN), "leaked to {}", p.display());
    }
}
