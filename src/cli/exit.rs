//! Exit codes (documented in the README) and the error type commands return.

use qdeck_backend::BackendError;
use qdeck_engine::ops::Outcome;
use qdeck_model::config::ConfigError;
use qdeck_model::domain::QueueId;

// The codes and the verdict → code mapping are the engine's, shared with the console.
pub use qdeck_engine::exit::{
    of_outcome, of_verdict, FAILED, INTERRUPTED, NOT_FOUND, OK, PARTIAL, REFUSED, STORAGE,
    UNAVAILABLE, USAGE,
};

/// An error with the exit code it maps to. Its message is one line for stderr.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
    /// The command already printed its report (which carries the error): with `-o json`
    /// nothing more goes to stdout, so the answer stays one JSON document.
    pub reported: bool,
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            reported: false,
        }
    }

    /// A failure whose report the command has printed already (a partial import or copy).
    pub fn after_report(code: u8, message: impl Into<String>) -> Self {
        CliError {
            reported: true,
            ..Self::new(code, message)
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<BackendError> for CliError {
    fn from(e: BackendError) -> Self {
        CliError::new(
            qdeck_engine::exit::of_error(&e),
            qdeck_model::config::redact::redact(&e.to_string()),
        )
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::new(USAGE, qdeck_model::config::redact::redact(&e.0))
    }
}

pub type CliResult = Result<u8, CliError>;

/// The error a failed operation ends its command with. Nothing done: the error alone, with
/// its own code (unknown queue 4, refused 5, unreachable 6…). Some work done before it: the
/// summary with its counts, exit 3 — what moved stays moved, and the user must hear it.
pub fn of_failed(outcome: &Outcome, queue: &QueueId) -> Option<CliError> {
    let Outcome::Failed { error, progress } = outcome else {
        return None;
    };
    Some(if progress.done == 0 {
        CliError::from(error.clone())
    } else {
        CliError::new(of_outcome(outcome), outcome.summary(queue))
    })
}

/// A command's plan ended as another operation than the one it planned: a defect, and never
/// a success (exit 1, the outcome named so the report can be acted on).
pub fn unexpected(planned: &str, outcome: &Outcome) -> CliError {
    CliError::new(
        FAILED,
        format!(
            "internal error: the {planned} ended as another operation ({}); please report it",
            outcome.line()
        ),
    )
}

/// The same for a plan that came back as another operation than the one asked for.
pub fn unexpected_plan(planned: &str, got: &qdeck_engine::ops::Planned) -> CliError {
    CliError::new(
        FAILED,
        format!(
            "internal error: the {planned} was planned as another operation ({}); please report it",
            got.describe()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The console's quit and the CLI give one code per outcome (the mapping itself is
    /// tested in `qdeck_engine::exit`).
    #[test]
    fn the_console_quit_and_the_cli_share_the_code_of_an_outcome() {
        let failed = qdeck_engine::ops::Outcome::Failed {
            error: BackendError::Unreachable("connection refused".into()),
            progress: qdeck_backend::ProgressState::default(),
        };
        assert_eq!(of_outcome(&failed), UNAVAILABLE);
        let quit = crate::tui::state::OpSummary::of(&failed, "x");
        assert_eq!(quit.exit_code, UNAVAILABLE);
    }

    /// A failure after some work is partial (3) and says what was done; before any, the
    /// error's own code; an outcome of another kind than planned is a failure, never 0.
    #[test]
    fn failed_and_unexpected_outcomes_never_exit_zero() {
        let q = QueueId::new("orders.dlq");
        let failed = |done| Outcome::Failed {
            error: BackendError::NotFound("orders".into()),
            progress: qdeck_backend::ProgressState {
                done,
                ..Default::default()
            },
        };
        assert_eq!(of_failed(&failed(0), &q).unwrap().code, NOT_FOUND);
        let partial = of_failed(&failed(2), &q).unwrap();
        assert_eq!(partial.code, PARTIAL);
        assert!(
            partial.message.contains("orders.dlq"),
            "{}",
            partial.message
        );
        assert!(of_failed(&Outcome::Sent { id: None }, &q).is_none());
        let odd = unexpected("import", &Outcome::Sent { id: None });
        assert_eq!(odd.code, FAILED);
        assert!(odd.message.contains("import"), "{}", odd.message);
    }
}
