//! Demo producers: each sends on a 100 ms tick whatever its rate has earned since the last
//! tick, in one batch (one short transaction).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::RngExt;

use super::{nap, Shared, ORDERS, PAYMENTS, REPORTS};
use qdeck_model::domain::{OutgoingMessage, Value};

const TICK: Duration = Duration::from_millis(100);

/// Header the demo workers read to decide a message always fails.
pub(crate) const POISON_HEADER: &str = "x-demo-poison";
/// Header carrying a payment's sequence number within its account.
pub(crate) const SEQ_HEADER: &str = "x-demo-seq";
/// Header naming the producer run, so sequences from an earlier demo run are told apart.
pub(crate) const RUN_HEADER: &str = "x-demo-run";

const SKUS: [&str; 6] = ["kettle", "lamp", "chair", "desk", "monitor", "keyboard"];
const ACCOUNTS: usize = 6;

/// Run `make` for every message earned at `rate()` per second until the demo stops.
fn paced(
    shared: &Shared,
    queue: &str,
    rate: impl Fn() -> f64,
    mut make: impl FnMut(u64) -> OutgoingMessage,
) {
    let mut credit = 0.0f64;
    let mut last = Instant::now();
    let mut n = 0u64;
    while nap(shared, None, TICK) {
        let now = Instant::now();
        // Cap the credit so a stall (locked file, suspended laptop) is not paid back in a burst.
        credit = (credit + rate() * (now - last).as_secs_f64()).min(rate().max(1.0) * 2.0);
        last = now;
        let due = credit.floor() as usize;
        if due == 0 {
            continue;
        }
        let batch: Vec<OutgoingMessage> = (0..due)
            .map(|_| {
                n += 1;
                make(n)
            })
            .collect();
        match shared.local.send_batch(queue, &batch) {
            Ok(sent) => {
                credit -= sent as f64;
                shared
                    .counters
                    .produced
                    .fetch_add(sent as u64, Ordering::Relaxed);
            }
            Err(e) => {
                shared.error(format!("sending to {queue}: {e}"));
                credit = 0.0;
                nap(shared, None, Duration::from_secs(1));
            }
        }
    }
}

pub(super) fn orders(shared: &Shared) {
    let mut rng = rand::rng();
    let poison = shared.cfg.poison_share;
    paced(
        shared,
        ORDERS,
        || f64::from_bits(shared.produce_rate.load(Ordering::Relaxed)),
        |n| {
            let sku = SKUS[rng.random_range(0..SKUS.len())];
            let qty = rng.random_range(1..5u32);
            if rng.random::<f64>() < poison {
                OutgoingMessage {
                    body: format!(
                        r#"{{"order":{n},"sku":"{sku}","qty":{qty},"amount":"NaN","note":"malformed amount: the handler always rejects it"}}"#
                    )
                    .into_bytes(),
                    headers: vec![
                        ("content-type".into(), Value::str("application/json")),
                        (POISON_HEADER.into(), Value::str("true")),
                    ],
                    ..Default::default()
                }
            } else {
                OutgoingMessage {
                    body: format!(
                        r#"{{"order":{n},"sku":"{sku}","qty":{qty},"amount":{}.{:02}}}"#,
                        rng.random_range(5..500u32),
                        rng.random_range(0..100u32)
                    )
                    .into_bytes(),
                    headers: vec![("content-type".into(), Value::str("application/json"))],
                    ..Default::default()
                }
            }
        },
    );
}

/// Payments for a handful of accounts, keyed by account, numbered per account.
pub(super) fn payments(shared: &Shared) {
    let mut rng = rand::rng();
    let mut seq = [0u64; ACCOUNTS];
    let run = format!("{:08x}", rng.random::<u32>());
    paced(
        shared,
        PAYMENTS,
        || 3.0,
        |_| {
            let a = rng.random_range(0..ACCOUNTS);
            seq[a] += 1;
            let account = format!("acct-{}", a + 1);
            let poison = rng.random::<f64>() < 0.01;
            let mut headers = vec![
                ("content-type".to_string(), Value::str("application/json")),
                (SEQ_HEADER.to_string(), Value::str(seq[a].to_string())),
                (RUN_HEADER.to_string(), Value::str(run.clone())),
            ];
            if poison {
                headers.push((POISON_HEADER.into(), Value::str("true")));
            }
            OutgoingMessage {
                body: format!(
                    r#"{{"account":"{account}","seq":{},"status":"{}"}}"#,
                    seq[a],
                    ["authorised", "captured", "settled", "refunded"][rng.random_range(0..4)]
                )
                .into_bytes(),
                key: Some(account),
                headers,
                ..Default::default()
            }
        },
    );
}

/// A trickle: one report request every 20 s.
pub(super) fn reports(shared: &Shared) {
    paced(
        shared,
        REPORTS,
        || 0.05,
        |n| OutgoingMessage {
            body: format!(r#"{{"report":"daily-sales","run":{n}}}"#).into_bytes(),
            headers: vec![("content-type".into(), Value::str("application/json"))],
            ..Default::default()
        },
    );
}
