//! Store benchmark: memory for 10,000 queues with 10 minutes of history each (target: under
//! 100 MB resident), and the cost of one refresh of all of them.
//! Run: cargo bench --bench store

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::time::Instant;

use qdeck_engine::store::Store;
use qdeck_model::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let queues = 10_000usize;
    let history_secs = 600u64;
    let refresh_secs = 2i64;
    let before = rss_kb();
    let mut store = Store::new(history_secs, 240, 600.0);
    let ids: Vec<QueueId> = (0..queues)
        .map(|i| QueueId::new(format!("queue-{i:05}")))
        .collect();
    store.set_queues(
        ids.iter()
            .map(|id| QueueInfo {
                id: id.clone(),
                ..Default::default()
            })
            .collect(),
        qdeck_model::domain::now_ms(),
    );
    let epoch = store.epoch_ms();
    let refreshes = history_secs as i64 / refresh_secs;
    let mut apply_ns = Vec::new();
    for r in 0..refreshes {
        let at = epoch + r * refresh_secs * 1000;
        let batch = StatsBatch {
            stats: ids
                .iter()
                .enumerate()
                .map(|(i, id)| QueueStats {
                    id: id.clone(),
                    at_ms: at,
                    depth: Some((i as u64 * 7 + r as u64) % 1000),
                    in_flight: Some(3),
                    delayed: Some(0),
                    dlq_depth: Some(1),
                    oldest_age_secs: Some(r as f64),
                    enqueued_total: Some(r as u64 * 10),
                    completed_total: Some(r as u64 * 9),
                    consumers: Some(2),
                    ..Default::default()
                })
                .collect(),
            errors: vec![],
        };
        let t = Instant::now();
        store.apply(batch, qdeck_model::domain::now_ms());
        apply_ns.push(t.elapsed().as_nanos() as u64);
    }
    let after = rss_kb();
    let t = Instant::now();
    let mut n = 0;
    for id in ids.iter().take(1000) {
        if store.derived(id).is_some() {
            n += 1;
        }
    }
    let derive_us = t.elapsed().as_micros() as f64 / n as f64;
    apply_ns.sort_unstable();
    let median_ms = apply_ns[apply_ns.len() / 2] as f64 / 1e6;
    println!(
        "store: {queues} queues x {refreshes} refreshes ({history_secs} s at {refresh_secs} s): \
         resident +{:.1} MB (target < 100 MB), history bound {:.1} MB",
        (after.saturating_sub(before)) as f64 / 1024.0,
        store.history_bytes_max() as f64 / 1e6
    );
    println!("store: apply one refresh of {queues} queues: median {median_ms:.2} ms; derive one queue: {derive_us:.1} µs");
}
