//! The demo workload on the local broker: producers, competing workers, poison messages,
//! crashing workers and an ordered keyed stream, so every panel of the console moves.
//!
//! Three queues:
//! - `orders` (DLQ `orders.dlq`, max_receives 3): producers at `produce_rate`, N competing
//!   workers at `per_worker_rate` each. A share of messages is poison (always fails → DLQ
//!   after 3 receives); a share of receives "crash" the worker (the lease is dropped and
//!   expires, the worker restarts under a new id). With the defaults (10/s in, 4/s per
//!   worker) one worker loses ground and three drain the backlog — the seeds' arithmetic.
//! - `payments` (key policy `ordered`, DLQ `payments.dlq`, max_receives 4): a keyed stream
//!   over a few accounts, two workers, some transient failures that hold their key until the
//!   retry succeeds; workers check that each account's messages complete in sequence.
//! - `reports`: a quiet queue with a trickle of work and one worker.
//!
//! Everything runs on plain threads over the blocking broker API, so the demo needs no
//! runtime. Dropping the [`DemoHandle`] stops every thread; workers return their leases.

mod headless;
pub mod newcomer;
mod producer;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qdeck_backend::local::{KeyPolicy, LocalBackend, QueueOptions};

pub use headless::run_headless;

/// The demo's main queue and its DLQ.
pub const ORDERS: &str = "orders";
pub const ORDERS_DLQ: &str = "orders.dlq";
/// The keyed, ordered stream.
pub const PAYMENTS: &str = "payments";
pub const PAYMENTS_DLQ: &str = "payments.dlq";
/// The quiet queue.
pub const REPORTS: &str = "reports";

/// Most `orders` workers `add_worker` will start.
pub const MAX_WORKERS: usize = 64;

/// Rates and shares of the demo workload.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Messages per second produced onto the main queue.
    pub produce_rate: f64,
    /// Workers at start.
    pub workers: usize,
    /// Messages per second one worker completes.
    pub per_worker_rate: f64,
    /// Share of messages that always fail (they end in the DLQ).
    pub poison_share: f64,
    /// Share of receives after which the worker "crashes" (its lease expires).
    pub crash_share: f64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            produce_rate: 10.0,
            workers: 1,
            per_worker_rate: 4.0,
            poison_share: 0.02,
            crash_share: 0.002,
        }
    }
}

impl DemoConfig {
    fn validate(&self) -> anyhow::Result<()> {
        let ok_rate = |r: f64| r.is_finite() && (0.0..=100_000.0).contains(&r);
        let ok_share = |s: f64| s.is_finite() && (0.0..=1.0).contains(&s);
        if !ok_rate(self.produce_rate) {
            anyhow::bail!("demo produce rate must be between 0 and 100000 per second");
        }
        if !ok_rate(self.per_worker_rate) || self.per_worker_rate == 0.0 {
            anyhow::bail!("demo per-worker rate must be above 0 and at most 100000 per second");
        }
        if !ok_share(self.poison_share) || !ok_share(self.crash_share) {
            anyhow::bail!("demo poison and crash shares must be between 0 and 1");
        }
        if self.workers > MAX_WORKERS {
            anyhow::bail!("demo workers must be at most {MAX_WORKERS}");
        }
        Ok(())
    }
}

/// Counters the demo keeps about itself (the broker keeps the rest).
#[derive(Debug, Default)]
pub struct DemoCounters {
    pub produced: AtomicU64,
    pub processed: AtomicU64,
    pub failed: AtomicU64,
    pub crashed: AtomicU64,
    /// Ordered-stream messages completed out of sequence for their key (should stay 0).
    pub order_violations: AtomicU64,
    /// Broker calls that failed (e.g. the file was locked too long).
    pub errors: AtomicU64,
}

/// What the threads share.
pub(crate) struct Shared {
    pub local: Arc<LocalBackend>,
    pub cfg: DemoConfig,
    /// `produce_rate` as f64 bits, changeable while running.
    pub produce_rate: AtomicU64,
    pub stop: AtomicBool,
    pub counters: DemoCounters,
    pub next_worker: AtomicUsize,
    pub last_error: Mutex<Option<String>>,
    /// Last payment sequence completed per `run/account` (the ordered-stream check).
    pub payments_seq: Mutex<std::collections::HashMap<String, u64>>,
}

impl Shared {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn error(&self, e: impl std::fmt::Display) {
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut l) = self.last_error.lock() {
            *l = Some(e.to_string());
        }
        tracing::warn!("demo: {e}");
    }
}

/// Sleep up to `d`, waking early when `stop` (or the demo) stops. False when stopped.
pub(crate) fn nap(shared: &Shared, own: Option<&AtomicBool>, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if shared.stopped() || own.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

struct WorkerSlot {
    stop: Arc<AtomicBool>,
    join: JoinHandle<()>,
}

/// A running demo; dropping it stops the threads (workers return their leases).
pub struct DemoHandle {
    shared: Arc<Shared>,
    background: Vec<JoinHandle<()>>,
    workers: Mutex<Vec<WorkerSlot>>,
    /// Removed workers still finishing (returning their lease); joined on drop.
    retiring: Mutex<Vec<JoinHandle<()>>>,
}

impl DemoHandle {
    /// Start the workload on the demo's queues (`queues`, created through the gate first).
    pub fn start(local: Arc<LocalBackend>, cfg: DemoConfig) -> anyhow::Result<DemoHandle> {
        cfg.validate()?;
        let shared = Arc::new(Shared {
            local,
            produce_rate: AtomicU64::new(cfg.produce_rate.to_bits()),
            cfg: cfg.clone(),
            stop: AtomicBool::new(false),
            counters: DemoCounters::default(),
            next_worker: AtomicUsize::new(1),
            last_error: Mutex::new(None),
            payments_seq: Mutex::new(Default::default()),
        });
        let mut background = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("demo-{name}"))
                .spawn(f)
                .map_err(|e| anyhow::anyhow!("cannot start demo thread: {e}"))
        };
        let s = shared.clone();
        background.push(spawn(
            "orders-producer",
            Box::new(move || producer::orders(&s)),
        )?);
        let s = shared.clone();
        background.push(spawn(
            "payments-producer",
            Box::new(move || producer::payments(&s)),
        )?);
        let s = shared.clone();
        background.push(spawn(
            "reports-producer",
            Box::new(move || producer::reports(&s)),
        )?);
        for i in 1..=2 {
            let s = shared.clone();
            background.push(spawn(
                "payments-worker",
                Box::new(move || worker::payments(&s, i)),
            )?);
        }
        let s = shared.clone();
        background.push(spawn(
            "reports-worker",
            Box::new(move || worker::reports(&s)),
        )?);
        let handle = DemoHandle {
            shared,
            background,
            workers: Mutex::new(Vec::new()),
            retiring: Mutex::new(Vec::new()),
        };
        for _ in 0..cfg.workers {
            handle.add_worker();
        }
        Ok(handle)
    }

    /// Start one more competing worker on `orders` (up to [`MAX_WORKERS`]).
    pub fn add_worker(&self) {
        let Ok(mut ws) = self.workers.lock() else {
            return;
        };
        if ws.len() >= MAX_WORKERS || self.shared.stopped() {
            return;
        }
        let n = self.shared.next_worker.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (self.shared.clone(), stop.clone());
        match std::thread::Builder::new()
            .name(format!("demo-orders-w{n}"))
            .spawn(move || worker::orders(&s, n, &st))
        {
            Ok(join) => ws.push(WorkerSlot { stop, join }),
            Err(e) => self.shared.error(format!("cannot start a worker: {e}")),
        }
    }

    /// Stop the newest `orders` worker; it returns its lease first.
    pub fn remove_worker(&self) {
        let slot = match self.workers.lock() {
            Ok(mut ws) => ws.pop(),
            Err(_) => None,
        };
        if let Some(slot) = slot {
            slot.stop.store(true, Ordering::Relaxed);
            // Do not wait here (the console's thread calls this); the thread exits within
            // one nap slice and one broker call, and `drop` joins it.
            if let Ok(mut r) = self.retiring.lock() {
                r.retain(|j| !j.is_finished());
                r.push(slot.join);
            }
        }
    }

    /// Competing workers running on `orders`.
    pub fn workers(&self) -> usize {
        self.workers.lock().map_or(0, |w| w.len())
    }

    /// Messages per second produced onto `orders`.
    pub fn produce_rate(&self) -> f64 {
        f64::from_bits(self.shared.produce_rate.load(Ordering::Relaxed))
    }

    /// Change the `orders` arrival rate (clamped to 0..=100000 per second).
    pub fn set_produce_rate(&self, rate: f64) {
        let r = if rate.is_finite() {
            rate.clamp(0.0, 100_000.0)
        } else {
            0.0
        };
        self.shared
            .produce_rate
            .store(r.to_bits(), Ordering::Relaxed);
    }

    /// Per-worker processing rate on `orders`.
    pub fn per_worker_rate(&self) -> f64 {
        self.shared.cfg.per_worker_rate
    }

    pub fn counters(&self) -> &DemoCounters {
        &self.shared.counters
    }

    /// The last broker error a demo thread hit, if any.
    pub fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().ok().and_then(|l| l.clone())
    }
}

impl Drop for DemoHandle {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let workers = match self.workers.get_mut() {
            Ok(ws) => std::mem::take(ws),
            Err(e) => std::mem::take(e.into_inner()),
        };
        for w in workers {
            w.stop.store(true, Ordering::Relaxed);
            let _ = w.join.join();
        }
        let retiring = match self.retiring.get_mut() {
            Ok(r) => std::mem::take(r),
            Err(e) => std::mem::take(e.into_inner()),
        };
        for t in retiring.into_iter().chain(self.background.drain(..)) {
            let _ = t.join();
        }
    }
}

/// The demo's own queues and their settings, created through the gate (`ops::plan_demo_setup`)
/// before `DemoHandle::start`: settings are reset, messages kept.
pub fn queues() -> Vec<(String, QueueOptions)> {
    vec![
        (
            ORDERS.to_string(),
            QueueOptions {
                lease: Duration::from_secs(10),
                max_receives: Some(3),
                dlq: Some(ORDERS_DLQ.to_string()),
                key_policy: KeyPolicy::Parallel,
            },
        ),
        (
            PAYMENTS.to_string(),
            QueueOptions {
                lease: Duration::from_secs(10),
                max_receives: Some(4),
                dlq: Some(PAYMENTS_DLQ.to_string()),
                key_policy: KeyPolicy::Ordered,
            },
        ),
        (
            REPORTS.to_string(),
            QueueOptions {
                lease: Duration::from_secs(30),
                ..Default::default()
            },
        ),
    ]
}
