//! Waiting for another process's lock. SQLite's stock busy handler sleeps 1, 2, 5, 10, 15…
//! ms between tries; our write transactions last about a millisecond, so with several worker
//! processes most of that sleep is the lock sitting free. This handler polls at 50 µs, then
//! 250 µs, then 1 ms, and gives up after the connection's timeout (SQLITE_BUSY → "database is
//! locked" as `BackendError::Storage`).

use std::cell::Cell;
use std::time::Duration;

pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

thread_local! {
    /// Timeout of the connection this thread holds (set when its mutex is taken).
    static TIMEOUT_MS: Cell<u64> = const { Cell::new(DEFAULT_TIMEOUT_MS) };
}

pub fn set_timeout_ms(ms: u64) {
    TIMEOUT_MS.with(|t| t.set(ms));
}

/// Microseconds slept before try `attempt` (0-based) and the sleep before the next one.
fn schedule(attempt: u64) -> (u64, u64) {
    let fast = attempt.min(20);
    let mid = attempt.saturating_sub(20).min(80);
    let slow = attempt.saturating_sub(100);
    let spent = fast * 50 + mid * 250 + slow * 1000;
    let next = match attempt {
        0..20 => 50,
        20..100 => 250,
        _ => 1000,
    };
    (spent, next)
}

/// SQLite busy handler: true to try again, false to fail with SQLITE_BUSY.
pub fn wait(attempt: i32) -> bool {
    let (spent_us, next_us) = schedule(attempt.max(0) as u64);
    let limit_us = TIMEOUT_MS.with(std::cell::Cell::get).saturating_mul(1000);
    if spent_us >= limit_us {
        return false;
    }
    std::thread::sleep(Duration::from_micros(next_us));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_grows_and_adds_up() {
        assert_eq!(schedule(0), (0, 50));
        assert_eq!(schedule(20), (1000, 250));
        assert_eq!(schedule(100), (21_000, 1000));
        assert_eq!(schedule(110), (31_000, 1000));
    }
}
