//! Demo workers over the blocking broker API: receive one message under a lease, "work" for
//! 1/rate seconds, then acknowledge, fail (nack with a retry delay) or crash (drop the lease
//! so it expires). A stopping worker returns what it holds (visibility 0).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::RngExt;

use super::producer::{POISON_HEADER, RUN_HEADER, SEQ_HEADER};
use super::{nap, Shared, ORDERS, PAYMENTS, REPORTS};
use qdeck_backend::local::Leased;

const IDLE_POLL: Duration = Duration::from_millis(250);
const RETRY_DELAY: Duration = Duration::from_secs(1);
const ERROR_PAUSE: Duration = Duration::from_secs(1);
/// How long a crashed worker takes to come back (under a new id).
const RESTART: Duration = Duration::from_millis(500);

enum Outcome {
    Ack,
    Fail(Duration),
    /// Rejected at once (malformed input): no work time spent.
    Reject(Duration),
    /// Dies halfway through the work, holding the lease.
    Crash,
}

impl Outcome {
    /// Share of the per-message work time this outcome spends.
    fn work_share(&self) -> f64 {
        match self {
            Outcome::Ack | Outcome::Fail(_) => 1.0,
            Outcome::Reject(_) => 0.0,
            Outcome::Crash => 0.5,
        }
    }
}

fn header<'a>(m: &'a Leased, name: &str) -> Option<&'a str> {
    m.headers
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_str())
}

fn is_poison(m: &Leased) -> bool {
    header(m, POISON_HEADER) == Some("true")
}

/// One worker's loop on `queue`. `decide` says what will happen to a message when it
/// arrives; the worker then spends its share of the work time and carries it out.
/// Returns when the demo or `own` stops.
fn run(
    shared: &Shared,
    queue: &str,
    base_id: &str,
    own: Option<&AtomicBool>,
    per_message: Duration,
    mut decide: impl FnMut(&Leased) -> Outcome,
) {
    let mut generation = 1u32;
    let id_of = |g: u32| {
        if g == 1 {
            base_id.to_string()
        } else {
            format!("{base_id}.{g}")
        }
    };
    let mut id = id_of(generation);
    loop {
        if !nap(shared, own, Duration::ZERO) {
            break;
        }
        let started = Instant::now();
        let got = match shared.local.receive(queue, &id, 1, None) {
            Ok(got) => got,
            Err(e) => {
                shared.error(format!("{id} receiving from {queue}: {e}"));
                nap(shared, own, ERROR_PAUSE);
                continue;
            }
        };
        let Some(m) = got.into_iter().next() else {
            nap(shared, own, IDLE_POLL);
            continue;
        };
        let outcome = decide(&m);
        // The work itself; paced from the start of the receive so the rate holds.
        let work = per_message.mul_f64(outcome.work_share());
        if !nap(shared, own, work.saturating_sub(started.elapsed())) {
            break;
        }
        let receipt = [m.receipt.clone()];
        let result = match outcome {
            Outcome::Ack => shared.local.ack(queue, &id, &receipt).map(|n| {
                shared
                    .counters
                    .processed
                    .fetch_add(n as u64, Ordering::Relaxed);
            }),
            Outcome::Fail(retry) | Outcome::Reject(retry) => {
                shared.local.nack(queue, &id, &receipt, retry).map(|n| {
                    shared
                        .counters
                        .failed
                        .fetch_add(n as u64, Ordering::Relaxed);
                })
            }
            Outcome::Crash => {
                // Walk away mid-message: the lease stays with the dead id until it expires.
                shared.counters.crashed.fetch_add(1, Ordering::Relaxed);
                tracing::info!("demo: {id} crashed holding message {}", m.id);
                generation += 1;
                id = id_of(generation);
                nap(shared, own, RESTART);
                Ok(())
            }
        };
        if let Err(e) = result {
            shared.error(format!("{id} on {queue}: {e}"));
            nap(shared, own, ERROR_PAUSE);
        }
    }
    if let Err(e) = shared.local.release_worker(&id) {
        shared.error(format!("{id} returning its lease: {e}"));
    }
}

fn period(rate: f64) -> Duration {
    Duration::from_secs_f64(1.0 / rate.max(0.001))
}

/// A competing worker on `orders`.
pub(super) fn orders(shared: &Shared, n: usize, own: &AtomicBool) {
    let mut rng = rand::rng();
    let crash = shared.cfg.crash_share;
    run(
        shared,
        ORDERS,
        &format!("orders-w{n}"),
        Some(own),
        period(shared.cfg.per_worker_rate),
        |m| {
            if rng.random::<f64>() < crash {
                Outcome::Crash
            } else if is_poison(m) {
                Outcome::Reject(RETRY_DELAY)
            } else {
                Outcome::Ack
            }
        },
    );
}

/// A worker on the ordered `payments` stream: 10% transient failures (retried after 2 s,
/// holding the account's later payments), poison payments die after 4 receives. Checks that
/// each account's payments complete in sequence.
pub(super) fn payments(shared: &Shared, n: usize) {
    let mut rng = rand::rng();
    run(
        shared,
        PAYMENTS,
        &format!("payments-w{n}"),
        None,
        period(2.5),
        |m| {
            if is_poison(m) {
                return Outcome::Reject(Duration::from_secs(2));
            }
            if rng.random::<f64>() < 0.10 {
                return Outcome::Fail(Duration::from_secs(2));
            }
            // Checked before the work and the ack: the ordered policy leases an account's
            // next payment only after this one is acknowledged, so check order is completion
            // order.
            if let (Some(key), Some(seq), Some(run)) = (
                m.key.as_deref(),
                header(m, SEQ_HEADER).and_then(|s| s.parse::<u64>().ok()),
                header(m, RUN_HEADER),
            ) {
                if let Ok(mut done) = shared.payments_seq.lock() {
                    let last = done.entry(format!("{run}/{key}")).or_insert(0);
                    if seq <= *last {
                        shared
                            .counters
                            .order_violations
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    *last = seq;
                }
            }
            Outcome::Ack
        },
    );
}

/// The one worker on the quiet `reports` queue.
pub(super) fn reports(shared: &Shared) {
    run(shared, REPORTS, "reports-w1", None, period(1.0), |_| {
        Outcome::Ack
    });
}
