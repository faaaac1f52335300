//! `qdeck demo`: run the workload without the console and print a one-line summary every few
//! seconds, until the duration ends or Ctrl-C.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DemoConfig, DemoHandle, ORDERS, PAYMENTS, REPORTS};
use qdeck_backend::local::{LocalBackend, LocalHandle};
use qdeck_backend::Backend;
use qdeck_model::domain::QueueStats;

const EVERY: Duration = Duration::from_secs(3);

/// Run the demo workload on `local` and print a summary line every 3 s. Stops after
/// `duration` (forever when `None`) or on Ctrl-C; workers return their leases before it ends.
pub async fn run_headless(
    local: Arc<LocalBackend>,
    cfg: DemoConfig,
    duration: Option<Duration>,
) -> anyhow::Result<()> {
    let per_worker = cfg.per_worker_rate;
    let handle = {
        let local = local.clone();
        tokio::task::spawn_blocking(move || DemoHandle::start(local, cfg)).await??
    };
    println!(
        "demo on {}: {} worker(s) at {per_worker}/s each, {}/s into {ORDERS}; Ctrl-C stops",
        local.path().display(),
        handle.workers(),
        handle.produce_rate(),
    );
    let backend = LocalHandle(local.clone());
    let started = Instant::now();
    let mut prev: Option<(Instant, Vec<QueueStats>)> = backend
        .stats(&[])
        .await
        .ok()
        .map(|b| (Instant::now(), b.stats));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(end, ctrl_c);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                match backend.stats(&[]).await {
                    Ok(batch) => {
                        let now = Instant::now();
                        let since = prev.as_ref().map(|(t, s)| (now - *t, s.as_slice()));
                        println!("{}", summary(started.elapsed(), &batch.stats, since, &handle));
                        prev = Some((now, batch.stats));
                    }
                    Err(e) => println!("{:>5}s  stats unavailable: {e}", started.elapsed().as_secs()),
                }
            }
            _ = &mut end => break,
            r = &mut ctrl_c => {
                if let Err(e) = r {
                    anyhow::bail!("cannot listen for Ctrl-C: {e}");
                }
                break;
            }
        }
    }
    let counters = {
        let c = handle.counters();
        (
            c.produced.load(Ordering::Relaxed),
            c.processed.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed),
            c.crashed.load(Ordering::Relaxed),
        )
    };
    // Stopping joins the worker threads (each returns its lease): off the async runtime.
    tokio::task::spawn_blocking(move || drop(handle)).await?;
    println!(
        "demo stopped after {}s: produced {}, processed {}, failed attempts {}, crashes {}; leases returned",
        started.elapsed().as_secs(),
        counters.0,
        counters.1,
        counters.2,
        counters.3
    );
    Ok(())
}

fn find<'a>(stats: &'a [QueueStats], name: &str) -> Option<&'a QueueStats> {
    stats.iter().find(|s| s.id.as_str() == name)
}

fn num(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// Messages per second between two counter readings.
fn rate(now: Option<u64>, before: Option<u64>, dt: Duration) -> Option<f64> {
    let secs = dt.as_secs_f64();
    match (now, before) {
        (Some(a), Some(b)) if secs > 0.0 && a >= b => Some((a - b) as f64 / secs),
        _ => None,
    }
}

/// One summary line: the orders backlog with its rates and the workers it needs, then the
/// other two queues and the demo's own counters.
fn summary(
    elapsed: Duration,
    stats: &[QueueStats],
    since: Option<(Duration, &[QueueStats])>,
    handle: &DemoHandle,
) -> String {
    let before: HashMap<&str, &QueueStats> = since
        .map(|(_, s)| s.iter().map(|q| (q.id.as_str(), q)).collect())
        .unwrap_or_default();
    let dt = since.map(|(d, _)| d).unwrap_or_default();
    let mut line = format!("{:>5}s", elapsed.as_secs());
    let workers = handle.workers();
    if let Some(o) = find(stats, ORDERS) {
        let prev = before.get(ORDERS);
        let inr = rate(o.enqueued_total, prev.and_then(|p| p.enqueued_total), dt);
        let outr = rate(o.completed_total, prev.and_then(|p| p.completed_total), dt);
        let trend = match (o.depth, prev.and_then(|p| p.depth)) {
            (Some(a), Some(b)) if dt > Duration::ZERO => {
                format!(" ({:+.1}/s)", (a as f64 - b as f64) / dt.as_secs_f64())
            }
            _ => String::new(),
        };
        let fmt_rate = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.1}/s"));
        let per = handle.per_worker_rate();
        let need = inr
            .filter(|_| per > 0.0)
            .map(|r| format!(", need {}", (r / per).ceil() as u64))
            .unwrap_or_default();
        line.push_str(&format!(
            "  {ORDERS}: depth {}{trend} in-flight {} dlq {} | in {} done {} | workers {workers}{need}",
            num(o.depth),
            num(o.in_flight),
            num(o.dlq_depth),
            fmt_rate(inr),
            fmt_rate(outr),
        ));
    }
    for name in [PAYMENTS, REPORTS] {
        if let Some(q) = find(stats, name) {
            line.push_str(&format!(
                " | {name}: depth {} in-flight {}",
                num(q.depth),
                num(q.in_flight)
            ));
            if q.dlq_depth.is_some() {
                line.push_str(&format!(" dlq {}", num(q.dlq_depth)));
            }
        }
    }
    let c = handle.counters();
    line.push_str(&format!(
        " | crashes {} order-violations {}",
        c.crashed.load(Ordering::Relaxed),
        c.order_violations.load(Ordering::Relaxed)
    ));
    let errors = c.errors.load(Ordering::Relaxed);
    if errors > 0 {
        line.push_str(&format!(" | broker errors {errors}"));
    }
    line
}
