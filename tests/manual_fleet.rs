//! Issue 14 benchmark: a fleet of five profiles (three local brokers, RabbitMQ, SQS on a moto
//! server this test starts on its own port), polled by the fleet poller as the console runs
//! it. The refresh interval of each profile is measured while every broker answers, then
//! moto is killed and the same is measured while it is down; the ratio per live profile is
//! printed (target: 1.00 ± 0.10). Figures only, no timing assert: what is asserted is that
//! the dead profile reports an error and the four others keep succeeding.
//!
//! source /work/testenv.sh && cargo test --release --test manual_fleet -- --ignored --nocapture
//! (QDECK_BENCH_PHASE_SECS sets each phase's length, default 60; refresh_secs is 1.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping
#![cfg(all(feature = "rabbitmq", feature = "sqs"))]

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_engine::fleet::{self, FleetRow};

const REFRESH_SECS: f64 = 1.0;
const LIVE: [&str; 4] = ["local-a", "local-b", "local-c", "rabbit"];

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// moto_server on a port found free; started again on another port when a process beside it
/// took that port first (moto then exits), at most three tries.
fn start_moto() -> (Moto, u16) {
    for _ in 0..3 {
        let port = free_port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server on PATH (pip install 'moto[server]')");
        let mut moto = Moto(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
            if moto.0.try_wait().is_ok_and(|s| s.is_some()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(150));
        if moto.0.try_wait().is_ok_and(|s| s.is_none())
            && TcpStream::connect(("127.0.0.1", port)).is_ok()
        {
            return (moto, port);
        }
    }
    panic!("moto_server did not start on a free port in three tries");
}

/// Successful polls per profile (the row's `updated_ms`), and whether the last row of each
/// carried an error, over `secs`.
async fn watch(
    rx: &mut tokio::sync::mpsc::Receiver<FleetRow>,
    secs: f64,
) -> (HashMap<String, Vec<i64>>, HashMap<String, Option<String>>) {
    let mut polls: HashMap<String, Vec<i64>> = HashMap::new();
    let mut last_error: HashMap<String, Option<String>> = HashMap::new();
    let end = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    while let Ok(Some(r)) = tokio::time::timeout_at(end, rx.recv()).await {
        if r.error.is_none() {
            if let Some(t) = r.updated_ms {
                let v = polls.entry(r.profile.clone()).or_default();
                if v.last() != Some(&t) {
                    v.push(t);
                }
            }
        }
        last_error.insert(r.profile.clone(), r.error.clone());
    }
    (polls, last_error)
}

fn mean_interval_ms(t: &[i64]) -> Option<f64> {
    (t.len() >= 3).then(|| (t[t.len() - 1] - t[0]) as f64 / (t.len() - 1) as f64)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: needs RabbitMQ (QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT) and moto_server"]
async fn manual_fleet_one_broker_down() {
    let amqp = std::env::var("QDECK_TEST_AMQP_URL").expect("source /work/testenv.sh");
    let mgmt = std::env::var("QDECK_TEST_RABBITMQ_MGMT").expect("source /work/testenv.sh");
    let uri: lapin::uri::AMQPUri = amqp.parse().expect("QDECK_TEST_AMQP_URL parses");
    let phase: f64 = std::env::var("QDECK_BENCH_PHASE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);

    let (moto, port) = start_moto();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cfg = String::new();
    for (i, name) in ["local-a", "local-b", "local-c"].iter().enumerate() {
        let db = d.join(format!("{name}.db"));
        let h = LocalHandle::open(&db).unwrap();
        // Some hundreds of queues each, so a poll does real work.
        for q in 0..(200 * (i + 1)) {
            h.0.create_queue(&format!("q{q:04}"), &QueueOptions::default())
                .unwrap();
        }
        cfg += &format!(
            "[[profiles]]\nname = \"{name}\"\nkind = \"local\"\npath = {:?}\nrefresh_secs = {REFRESH_SECS}\n",
            db.display().to_string()
        );
    }
    // The password comes with the URL in QDECK_TEST_AMQP_URL, which the fleet reads itself.
    cfg += &format!(
        "[[profiles]]\nname = \"rabbit\"\nkind = \"rabbitmq\"\namqp_url_env = \"QDECK_TEST_AMQP_URL\"\n\
         management_url = \"{mgmt}\"\nusername = \"{}\"\n\
         refresh_secs = {REFRESH_SECS}\n",
        uri.authority.userinfo.username
    );
    cfg += &format!(
        "[[profiles]]\nname = \"sqs\"\nkind = \"sqs\"\nregions = [\"us-east-1\"]\n\
         endpoint_url = \"http://127.0.0.1:{port}\"\nrefresh_secs = {REFRESH_SECS}\n"
    );
    let path = d.join("config.toml");
    std::fs::write(&path, cfg).unwrap();
    let names: Vec<String> = LIVE
        .iter()
        .map(std::string::ToString::to_string)
        .chain(["sqs".to_string()])
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let _fleet = fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(path.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        },
        &names,
        Vec::new(),
        Default::default(),
        tx,
    );
    // Warm up: every profile answered once.
    let (warm, _) = watch(&mut rx, 10.0).await;
    for n in &names {
        assert!(warm.contains_key(n), "{n} never answered: {warm:?}");
    }

    let (up, _) = watch(&mut rx, phase).await;
    drop(moto);
    let killed = Instant::now();
    let (down, errors) = watch(&mut rx, phase).await;

    assert!(
        errors.get("sqs").is_some_and(std::option::Option::is_some),
        "the SQS row reports its dead broker: {errors:?}"
    );
    assert!(
        down.get("sqs").map_or(0, std::vec::Vec::len) <= 1,
        "no successful SQS poll after moto was killed {:?} ago",
        killed.elapsed()
    );
    println!(
        "fleet of 5 (refresh_secs {REFRESH_SECS}), {phase:.0} s with every broker up, then {phase:.0} s with moto killed:"
    );
    let mut worst: f64 = 0.0;
    for n in LIVE {
        assert_eq!(errors.get(n), Some(&None), "{n} stayed healthy");
        let (Some(a), Some(b)) = (
            mean_interval_ms(&up[n]),
            down.get(n).and_then(|v| mean_interval_ms(v)),
        ) else {
            panic!(
                "{n}: too few polls: up {:?}, down {:?}",
                up.get(n),
                down.get(n)
            );
        };
        let ratio = b / a;
        worst = worst.max((ratio - 1.0).abs());
        println!(
            "  {n:<8} refresh interval {a:7.1} ms up, {b:7.1} ms while SQS is down: ratio {ratio:.3} ({} / {} polls)",
            up[n].len(),
            down[n].len()
        );
    }
    println!(
        "worst deviation {:.1} % (target within ±10 %: {})",
        worst * 100.0,
        if worst <= 0.10 { "ok" } else { "MISSED" }
    );
}
