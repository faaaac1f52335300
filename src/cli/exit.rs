//! Exit codes (documented in the README) and the error type commands return.

use qdeck_backend::BackendError;
use qdeck_model::config::ConfigError;

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
}
