//! Local broker throughput: acknowledged 1 KB messages per second with 4 worker processes on
//! one SQLite file versus 1 process, from one run. Each worker process loops `receive(batch)`
//! → `ack(batch)` (two short transactions per batch) until the queue is empty.
//!
//! Run: `cargo bench --bench local_broker` (release). Knobs (env): QDECK_BENCH_MESSAGES
//! (default 40000), QDECK_BENCH_BATCH (default 100), QDECK_BENCH_PROCS (default "1,4").
//! The binary re-executes itself for the worker processes (QDECK_BENCH_CHILD set).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use qdeck_backend::local::{LocalBackend, QueueOptions};
use qdeck_model::domain::OutgoingMessage;

const QUEUE: &str = "bench";

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn unix_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn main() {
    if let Ok(db) = std::env::var("QDECK_BENCH_CHILD") {
        if let Err(e) = child(Path::new(&db)) {
            eprintln!("bench worker failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    // `cargo test --benches` runs bench binaries with no `--bench`: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("local_broker bench: run with `cargo bench --bench local_broker`");
        return;
    }
    let n = env_num("QDECK_BENCH_MESSAGES", 40_000);
    let batch = env_num("QDECK_BENCH_BATCH", 100);
    let procs: Vec<usize> = std::env::var("QDECK_BENCH_PROCS")
        .unwrap_or_else(|_| "1,4".to_string())
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .filter(|p| *p > 0)
        .collect();
    println!("local broker: {n} messages of 1 KB, receive/ack batches of {batch}");
    let mut results = Vec::new();
    for p in procs {
        match run(p, n, batch) {
            Ok(rate) => {
                println!("  {p} worker process(es): {rate:>9.0} acked msgs/s");
                results.push((p, rate));
            }
            Err(e) => {
                eprintln!("  {p} worker process(es): failed: {e}");
                std::process::exit(1);
            }
        }
    }
    if let (Some((p1, r1)), Some((pn, rn))) = (results.first(), results.last()) {
        if p1 != pn && *r1 > 0.0 {
            println!(
                "  ratio {pn} processes / {p1} process: {:.2}x (target: at least 5000 msgs/s with 4)",
                rn / r1
            );
        }
    }
    let deep = env_num("QDECK_BENCH_DEEP", 100_000);
    if deep > 0 {
        if let Err(e) = deep_queue(deep) {
            eprintln!("  deep queue: failed: {e}");
            std::process::exit(1);
        }
    }
    let queues = env_num("QDECK_BENCH_QUEUES", 10_000);
    if queues > 0 {
        if let Err(e) = many_queues(queues) {
            eprintln!("  {queues} queues: failed: {e}");
            std::process::exit(1);
        }
    }
}

/// `list_queues` and `stats` over many queues (what `qdeck ls -o json` and a console poll
/// cost on the local broker), best of 5.
fn many_queues(n: usize) -> Result<(), String> {
    use qdeck_backend::local::LocalHandle;
    use qdeck_backend::Backend;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let h = LocalHandle::open(&dir.path().join("queues.db")).map_err(|e| e.to_string())?;
    for i in 0..n {
        let opts = QueueOptions {
            dlq: (i % 10 == 0).then(|| format!("queue-{i:05}.dlq")),
            max_receives: (i % 10 == 0).then_some(5),
            ..Default::default()
        };
        h.0.create_queue(&format!("queue-{i:05}"), &opts)
            .map_err(|e| e.to_string())?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let best = |f: &dyn Fn() -> Result<usize, String>| -> Result<(Duration, usize), String> {
        let mut best = Duration::MAX;
        let mut count = 0;
        for _ in 0..5 {
            let t = Instant::now();
            count = f()?;
            best = best.min(t.elapsed());
        }
        Ok((best, count))
    };
    let (list, listed) = best(&|| {
        rt.block_on(h.list_queues())
            .map(|q| q.len())
            .map_err(|e| e.to_string())
    })?;
    let (stats, counted) = best(&|| {
        rt.block_on(h.stats(&[]))
            .map(|s| s.stats.len())
            .map_err(|e| e.to_string())
    })?;
    println!(
        "  {listed} queues: list_queues {:.1} ms, stats(all {counted}) {:.1} ms (target for `ls -o json`: under 200 ms)",
        list.as_secs_f64() * 1e3,
        stats.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Preload `n` messages, run `procs` worker processes until the queue is empty; returns acked
/// messages per second from the first receive to the last ack.
fn run(procs: usize, n: usize, batch: usize) -> Result<f64, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("bench.db");
    let b = LocalBackend::open(&db).map_err(|e| e.to_string())?;
    b.create_queue(
        QUEUE,
        &QueueOptions {
            lease: Duration::from_secs(60),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let body: Vec<u8> = (0..1024u32).map(|i| b'a' + (i % 26) as u8).collect();
    let msgs: Vec<OutgoingMessage> = (0..1000)
        .map(|_| OutgoingMessage {
            body: body.clone(),
            ..Default::default()
        })
        .collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(msgs.len());
        b.send_batch(QUEUE, &msgs[..k]).map_err(|e| e.to_string())?;
        left -= k;
    }
    let go = dir.path().join("go");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    let mut readies: Vec<PathBuf> = Vec::new();
    for i in 0..procs {
        let ready = dir.path().join(format!("ready{i}"));
        let child = Command::new(&exe)
            .env("QDECK_BENCH_CHILD", &db)
            .env("QDECK_BENCH_WORKER", format!("bench-{i}"))
            .env("QDECK_BENCH_READY", &ready)
            .env("QDECK_BENCH_GO", &go)
            .env("QDECK_BENCH_BATCH", batch.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        children.push(child);
        readies.push(ready);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !readies.iter().all(|r| r.exists()) {
        if Instant::now() > deadline {
            return Err("workers did not start".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(&go, b"").map_err(|e| e.to_string())?;
    let (mut total, mut first, mut last) = (0u64, u128::MAX, 0u128);
    for c in children {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("worker exited with {}", out.status));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text
            .split_whitespace()
            .map(|s| s.parse::<u128>().unwrap_or(0));
        let (acked, start, end) = (
            it.next().unwrap_or(0),
            it.next().unwrap_or(0),
            it.next().unwrap_or(0),
        );
        total += acked as u64;
        if acked > 0 {
            first = first.min(start);
            last = last.max(end);
        }
    }
    if total != n as u64 {
        return Err(format!("acked {total} of {n} messages"));
    }
    let left = b
        .receive(QUEUE, "bench-check", 1, None)
        .map_err(|e| e.to_string())?;
    if !left.is_empty() {
        return Err("messages left in the queue after the run".into());
    }
    let secs = (last.saturating_sub(first)) as f64 / 1e6;
    Ok(if secs > 0.0 { total as f64 / secs } else { 0.0 })
}

/// A worker process: receive/ack batches until the queue stays empty; prints
/// `acked first_receive_us last_ack_us`.
fn child(db: &Path) -> Result<(), String> {
    let worker = std::env::var("QDECK_BENCH_WORKER").unwrap_or_else(|_| "bench".into());
    let ready = std::env::var("QDECK_BENCH_READY").map_err(|e| e.to_string())?;
    let go = std::env::var("QDECK_BENCH_GO").map_err(|e| e.to_string())?;
    let batch = env_num("QDECK_BENCH_BATCH", 100);
    let b = LocalBackend::open(db).map_err(|e| e.to_string())?;
    std::fs::write(&ready, b"").map_err(|e| e.to_string())?;
    while !Path::new(&go).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (mut acked, mut first, mut last) = (0usize, 0u128, 0u128);
    let mut empty = 0;
    while empty < 3 {
        let got = b
            .receive(QUEUE, &worker, batch, None)
            .map_err(|e| e.to_string())?;
        if got.is_empty() {
            empty += 1;
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        empty = 0;
        if first == 0 {
            first = unix_us();
        }
        let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
        acked += b
            .ack(QUEUE, &worker, &receipts)
            .map_err(|e| e.to_string())?;
        last = unix_us();
    }
    println!("{acked} {first} {last}");
    Ok(())
}

/// `stats` and a browse page on one queue holding `n` 1 KB messages (a big DLQ): what each
/// console poll costs, best of 5.
fn deep_queue(n: usize) -> Result<(), String> {
    use qdeck_backend::local::LocalHandle;
    use qdeck_backend::Backend;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let h = LocalHandle::open(&dir.path().join("deep.db")).map_err(|e| e.to_string())?;
    h.0.create_queue("deep", &QueueOptions::default())
        .map_err(|e| e.to_string())?;
    let msgs: Vec<OutgoingMessage> = (0..1000)
        .map(|_| OutgoingMessage {
            body: vec![b'x'; 1024],
            ..Default::default()
        })
        .collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(msgs.len());
        h.0.send_batch("deep", &msgs[..k])
            .map_err(|e| e.to_string())?;
        left -= k;
    }
    h.0.receive("deep", "w", 50, None)
        .map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        rt.block_on(h.stats(&[qdeck_model::domain::QueueId::new("deep")]))
            .map_err(|e| e.to_string())?;
        best = best.min(t.elapsed());
    }
    let mut browse = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        rt.block_on(h.browse(
            &qdeck_model::domain::QueueId::new("deep"),
            &qdeck_model::domain::BrowseRequest {
                cursor: Some((n / 2).to_string()),
                max: 100,
                force: false,
            },
        ))
        .map_err(|e| e.to_string())?;
        browse = browse.min(t.elapsed());
    }
    println!(
        "  one queue of {n} messages: stats {:.1} ms, browse 100 from the middle {:.1} ms",
        best.as_secs_f64() * 1e3,
        browse.as_secs_f64() * 1e3
    );
    Ok(())
}
