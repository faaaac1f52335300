//! Exit codes (documented in the README): the verdict → exit code mapping that the CLI's
//! commands and the console's quit share, next to the verdict → audit result mapping
//! (`ops::Verdict::audit_result`). Here in the engine so the console never needs the CLI.

use qdeck_backend::BackendError;

use crate::ops::{Outcome, Verdict};

pub const OK: u8 = 0;
/// The operation failed (the broker refused it or an unexpected error happened).
pub const FAILED: u8 = 1;
/// Bad usage or bad configuration.
pub const USAGE: u8 = 2;
/// Partly done: some messages moved, some failed.
pub const PARTIAL: u8 = 3;
/// Unknown queue.
pub const NOT_FOUND: u8 = 4;
/// Refused: read-only profile, confirmation missing, purge cooldown, unsafe browse.
pub const REFUSED: u8 = 5;
/// Broker unreachable, credentials rejected or throttled.
pub const UNAVAILABLE: u8 = 6;
/// Local broker file corrupt, locked or unreadable.
pub const STORAGE: u8 = 7;
/// Interrupted (Ctrl-C).
pub const INTERRUPTED: u8 = 130;

/// The exit code of a finished operation: the console's quit and every command take it from
/// the one verdict, so an operation cannot exit 0 on one path and 3 on another.
pub fn of_verdict(v: Verdict) -> u8 {
    match v {
        Verdict::Ok => OK,
        Verdict::Partial => PARTIAL,
        Verdict::Failed => FAILED,
        Verdict::Cancelled => INTERRUPTED,
    }
}

/// `of_verdict`, except that an operation its error ended before doing anything exits with
/// that error's own code (unknown queue 4, refused 5, unreachable 6…), which says more than 1.
pub fn of_outcome(o: &Outcome) -> u8 {
    match o {
        Outcome::Failed { error, .. } if o.verdict() == Verdict::Failed => of_error(error),
        _ => of_verdict(o.verdict()),
    }
}

/// The exit code a backend error maps to.
pub fn of_error(e: &BackendError) -> u8 {
    match e {
        BackendError::NotFound(_) => NOT_FOUND,
        BackendError::Auth(_)
        | BackendError::Forbidden { .. }
        | BackendError::Unreachable(_)
        | BackendError::Throttled { .. } => UNAVAILABLE,
        BackendError::Refused(_) | BackendError::RefusedUnlessForced(_) => REFUSED,
        BackendError::Invalid(_) => USAGE,
        BackendError::Storage(_) => STORAGE,
        BackendError::Unsupported(_) | BackendError::Protocol(_) | BackendError::Other(_) => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_verdict_has_its_documented_code() {
        assert_eq!(of_verdict(Verdict::Ok), OK);
        assert_eq!(of_verdict(Verdict::Partial), PARTIAL);
        assert_eq!(of_verdict(Verdict::Failed), FAILED);
        assert_eq!(of_verdict(Verdict::Cancelled), INTERRUPTED);
    }

    /// An error before any work keeps its own code, one after some work is partial.
    #[test]
    fn an_outcome_ended_by_an_error_exits_with_its_code_or_partial() {
        let failed = |done| Outcome::Failed {
            error: BackendError::Unreachable("connection refused".into()),
            progress: qdeck_backend::ProgressState {
                done,
                ..Default::default()
            },
        };
        assert_eq!(of_outcome(&failed(0)), UNAVAILABLE);
        assert_eq!(of_outcome(&failed(3)), PARTIAL);
    }
}
