use std::time::Duration;

/// Errors every backend maps its failures into. Messages are one line, carry no secrets, and
/// say what to do where that is known. The CLI maps each variant to an exit code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    #[error("{0}")]
    NotFound(String),
    /// Authentication failed: wrong or expired credentials.
    #[error("not authorised: {0}")]
    Auth(String),
    /// Authenticated, but the identity lacks a right; `right` names it where known
    /// ("configure on vhost /", "Manage claim", "sqs:ReceiveMessage").
    #[error("{msg}")]
    Forbidden { msg: String, right: Option<String> },
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
    /// The broker answered something qdeck could not understand.
    #[error("unexpected answer from the broker: {0}")]
    Protocol(String),
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

    /// How long the broker asked us to wait, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BackendError::Throttled { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A missing right, named.
    pub fn forbidden(msg: impl Into<String>, right: Option<&str>) -> BackendError {
        BackendError::Forbidden {
            msg: msg.into(),
            right: right.map(str::to_string),
        }
    }
}
