//! The rate limit of every operation that moves or sends messages (redrive, copy, move,
//! import), in messages per second.
//!
//! A `Rate` is checked once, where it enters qdeck (`--rate` through clap, the console's
//! choices, a deserialised request), so a backend holding one never checks it again and never
//! meets a zero, a negative or a NaN. `Limiter` is the one pacing every backend uses.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The one wording of a bad rate, whatever the front-end.
pub const RATE_RULE: &str = "rate must be a number of messages per second above 0";

/// Messages per second: finite and above 0.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Rate(f64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateError;

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(RATE_RULE)
    }
}

impl std::error::Error for RateError {}

impl Rate {
    /// `const` so that fixed choices (the console's) are checked by the compiler.
    pub const fn new(per_sec: f64) -> Result<Rate, RateError> {
        // Also refuses NaN: every comparison with it is false.
        if per_sec.is_finite() && per_sec > 0.0 {
            Ok(Rate(per_sec))
        } else {
            Err(RateError)
        }
    }

    /// A rate written in the code: a bad one stops the build (in a `const`) or panics.
    pub const fn fixed(per_sec: f64) -> Rate {
        match Rate::new(per_sec) {
            Ok(r) => r,
            Err(_) => panic!("{}", RATE_RULE),
        }
    }

    pub fn per_sec(self) -> f64 {
        self.0
    }

    /// Time between two messages. Rates too small to give a representable gap (below about
    /// 1e-19/s) get the longest one: nothing moves, which is what such a rate means.
    pub fn gap(self) -> Duration {
        Duration::try_from_secs_f64(1.0 / self.0).unwrap_or(Duration::MAX)
    }

    /// How many messages fit in `within`, at least 1 (a batch must move something) and at
    /// most `max`: the batch size that keeps the pace smooth at that granularity.
    pub fn batch(self, within: Duration, max: usize) -> usize {
        let n = (self.0 * within.as_secs_f64()).floor();
        if n >= max as f64 {
            max
        } else {
            (n as usize).clamp(1, max.max(1))
        }
    }
}

impl TryFrom<f64> for Rate {
    type Error = RateError;
    fn try_from(v: f64) -> Result<Rate, RateError> {
        Rate::new(v)
    }
}

impl From<Rate> for f64 {
    fn from(r: Rate) -> f64 {
        r.0
    }
}

impl FromStr for Rate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Rate, RateError> {
        s.trim()
            .parse::<f64>()
            .map_err(|_| RateError)
            .and_then(Rate::new)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Clap's value parser for `--rate`: a bad value is a usage error naming the flag, before
/// any profile is opened or any broker called.
pub fn parse_rate(s: &str) -> Result<Rate, RateError> {
    s.parse()
}

/// Paces messages to a rate: each reservation of `n` messages is due `n` gaps after the
/// previous one. There is no burst credit: a slow stretch (a stalled broker) does not earn a
/// faster catch-up afterwards, so no second ever carries more than the rate plus one batch.
/// Shared by concurrent workers through `&self`. Without a rate it never waits.
#[derive(Debug)]
pub struct Limiter {
    gap: Option<Duration>,
    next: Mutex<Option<Instant>>,
}

impl Limiter {
    pub fn new(rate: Option<Rate>) -> Limiter {
        Limiter {
            gap: rate.map(Rate::gap),
            next: Mutex::new(None),
        }
    }

    /// When the next message may go; `None` without a rate.
    pub fn due(&self) -> Option<Instant> {
        self.gap?;
        let next = *self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(next.unwrap_or_else(Instant::now))
    }

    /// Book `n` messages: the instant they may go (now, or when the previous booking ends).
    pub fn reserve(&self, n: u64) -> Instant {
        let now = Instant::now();
        let Some(gap) = self.gap else { return now };
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = next.map_or(now, |t| t.max(now));
        let span = gap
            .checked_mul(u32::try_from(n).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX);
        *next = Some(
            at.checked_add(span)
                .unwrap_or(at + Duration::from_secs(86_400 * 365)),
        );
        at
    }

    /// Book `n` messages and wait until they may go; returns early when `cancel` fires, so a
    /// slow rate never delays a cancel.
    pub async fn take(&self, n: u64, cancel: &CancellationToken) {
        let at = self.reserve(n);
        if at > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_negative_nan_infinite_and_text_are_refused_with_one_wording() {
        for bad in [
            "0", "-1", "-0.5", "NaN", "nan", "inf", "-inf", "abc", "", "1e400",
        ] {
            let err = bad.parse::<Rate>().expect_err(bad);
            assert_eq!(err.to_string(), RATE_RULE, "{bad:?}");
        }
        for bad in [0.0, -0.0, -3.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(Rate::new(bad), Err(RateError), "{bad}");
        }
    }

    #[test]
    fn fractions_and_large_rates_are_accepted() {
        assert_eq!("0.5".parse::<Rate>().unwrap().per_sec(), 0.5);
        assert_eq!(" 1000 ".parse::<Rate>().unwrap().per_sec(), 1000.0);
        assert_eq!(parse_rate("1e9").unwrap().per_sec(), 1e9);
        assert_eq!(Rate::new(0.5).unwrap().gap(), Duration::from_secs(2));
    }

    #[test]
    fn a_request_with_a_bad_rate_does_not_deserialise() {
        assert_eq!(serde_json::from_str::<Rate>("2.5").unwrap().per_sec(), 2.5);
        assert!(serde_json::from_str::<Rate>("0").is_err());
        assert!(serde_json::from_str::<Rate>("-1").is_err());
        assert_eq!(
            serde_json::to_string(&Rate::new(4.0).unwrap()).unwrap(),
            "4.0"
        );
    }

    #[test]
    fn batches_hold_what_the_window_allows_but_never_nothing() {
        let r = |v| Rate::new(v).unwrap();
        let sec = Duration::from_secs(1);
        assert_eq!(r(0.5).batch(sec, 10), 1);
        assert_eq!(r(2.9).batch(sec, 10), 2);
        assert_eq!(r(1000.0).batch(sec, 10), 10);
        assert_eq!(r(1e300).batch(sec, 10), 10);
        assert_eq!(r(50.0).batch(Duration::from_millis(100), 100), 5);
    }

    #[test]
    fn bookings_are_a_gap_apart_and_a_pause_earns_no_burst() {
        let l = Limiter::new(Some(Rate::new(10.0).unwrap()));
        let t0 = l.reserve(1);
        let t1 = l.reserve(5);
        let t2 = l.reserve(1);
        assert_eq!(t1 - t0, Duration::from_millis(100));
        assert_eq!(t2 - t1, Duration::from_millis(500));
        assert_eq!(l.due(), Some(t2 + Duration::from_millis(100)));
        // Idle well past the last booking: the next two are still a gap apart.
        std::thread::sleep(Duration::from_millis(1000));
        let after_pause = l.reserve(1);
        let again = l.reserve(1);
        assert!(after_pause >= t0 + Duration::from_millis(1000));
        assert_eq!(again - after_pause, Duration::from_millis(100));
    }

    #[test]
    fn without_a_rate_nothing_waits() {
        let l = Limiter::new(None);
        assert_eq!(l.due(), None);
        let before = Instant::now();
        for _ in 0..1000 {
            assert!(l.reserve(100) <= Instant::now());
        }
        assert!(before.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn take_waits_for_the_booking_and_stops_at_a_cancel() {
        let l = Limiter::new(Some(Rate::new(20.0).unwrap()));
        let cancel = CancellationToken::new();
        let t0 = Instant::now();
        for _ in 0..4 {
            l.take(1, &cancel).await;
        }
        // The first goes at once, then one every 50 ms.
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(150), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        cancel.cancel();
        let t1 = Instant::now();
        l.take(1000, &cancel).await;
        l.take(1, &cancel).await;
        assert!(t1.elapsed() < Duration::from_secs(1), "{:?}", t1.elapsed());
    }
}
