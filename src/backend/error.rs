use std::time::Duration;

/// Errors every backend maps its failures into. Messages are one line, carry no secrets, and
/// say what to do where that is known. The CLI maps each variant to an exit code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    #[error("{0}")]
    NotFound(String),
    #[error("not authorised: {0}")]
    Auth(String),
    #[error("broker unreachable: {0}")]
    Unreachable(String),
    #[error("throttled by the broker: {msg}")]
    Throttled {
        msg: String,
        retry_after: Option<Duration>,
    },
    #[error("not supported by this broker: {0}")]
    Unsupported(String),
    /// Refused to protect messages or because of a rule (browse that could dead-letter,
    /// purge cooldown, read-only).
    #[error("refused: {0}")]
    Refused(String),
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The local store is unreadable, corrupt or locked.
    #[error("storage error: {0}")]
    Storage(String),
    #[error("{0}")]
    Other(String),
}

impl BackendError {
    /// Transient errors are worth retrying with backoff.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            BackendError::Unreachable(_) | BackendError::Throttled { .. }
        )
    }
}
