//! qdeck's side of scripts/bench_kafka.sh: one lag poll of every group and topic under a prefix,
//! as the console's poller makes it (list, then the figures of every row), counted per Kafka API
//! and timed warm. The script sets up the scene and runs the Java reference in the same go.
//!
//! Needs QDECK_TEST_KAFKA_BOOTSTRAP and QDECK_BENCH_KAFKA_PREFIX (the scene's name prefix).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark asserts by unwrapping

mod common;

use std::collections::BTreeMap;
use std::time::Instant;

use qdeck_model::config::{KafkaSettings, Profile, ProfileKind};

/// Calls of one poll by API, and the poll's wall time in ms.
async fn one_poll(b: &dyn qdeck_backend::Backend) -> (BTreeMap<String, u64>, f64, usize, i64) {
    let before = b.api_calls().snapshot();
    let t0 = Instant::now();
    let rows = b.list_queues().await.expect("list");
    let ids: Vec<_> = rows.iter().map(|r| r.id.clone()).collect();
    let batch = b.stats(&ids).await.expect("stats");
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);
    let lag: i64 = rows
        .iter()
        .filter(|r| r.id.as_str().contains('@'))
        .filter_map(|r| batch.stats.iter().find(|s| s.id == r.id))
        .filter_map(|s| s.depth.map(|d| d as i64))
        .sum();
    let after = b.api_calls().snapshot();
    let calls = after
        .into_iter()
        .map(|(k, v)| {
            let was = before.get(&k).copied().unwrap_or(0);
            (k, v - was)
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    (calls, ms, rows.len(), lag)
}

#[tokio::test]
#[ignore = "benchmark: run by scripts/bench_kafka.sh"]
async fn manual_kafka_poll_benchmark() {
    let bs = common::broker_var("QDECK_TEST_KAFKA_BOOTSTRAP", "scripts/kafka_up.sh");
    let prefix = common::broker_var("QDECK_BENCH_KAFKA_PREFIX", "scripts/bench_kafka.sh");
    let rounds: usize = std::env::var("QDECK_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let profile = Profile {
        name: "kafka-bench".into(),
        kind: ProfileKind::Kafka(KafkaSettings {
            bootstrap_servers: bs,
            topics: Some(format!("^{prefix}")),
            groups: Some(format!("^{prefix}")),
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
    let b = qdeck_backend::build(&profile).await.expect("build");
    // Warm: connections open, metadata known, as in a console that has polled before.
    let (first_calls, first_ms, _, _) = one_poll(b.as_ref()).await;
    let (_, _, _, _) = one_poll(b.as_ref()).await;
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..rounds {
        let (calls, ms, rows, lag) = one_poll(b.as_ref()).await;
        times.push(ms);
        last = Some((calls, rows, lag));
    }
    times.sort_by(f64::total_cmp);
    let (calls, rows, lag) = last.unwrap();
    let total: u64 = calls.values().sum();
    println!(
        "{}",
        serde_json::json!({
            "rows": rows,
            "lag": lag,
            "first_poll_ms": first_ms,
            "first_poll_calls": first_calls,
            "warm_poll_median_ms": times[rounds / 2],
            "warm_poll_calls": calls,
            "warm_poll_requests": total,
        })
    );
}
