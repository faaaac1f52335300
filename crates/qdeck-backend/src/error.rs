use std::time::Duration;

use qdeck_model::domain::{QueueError, QueueErrorKind};

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
    /// Refused to protect messages or because of a rule that `--force` cannot lift (purge
    /// cooldown, read-only, a limit of the broker or of qdeck such as RabbitMQ's browse window).
    #[error("refused: {0}")]
    Refused(String),
    /// Refused because of what the action could do to the messages (a browse that could push
    /// them toward their DLQ), which the user may accept: `--force` / `:force` lifts it. Its
    /// own variant so that advice to force follows from the type, never from the wording.
    #[error("refused: {0}")]
    RefusedUnlessForced(String),
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

/// One queue's failure in a `StatsBatch`, by the error's variant.
impl From<&BackendError> for QueueError {
    fn from(e: &BackendError) -> Self {
        let kind = match e {
            BackendError::NotFound(_) => QueueErrorKind::NotFound,
            BackendError::Auth(_) => QueueErrorKind::Auth,
            BackendError::Forbidden { .. } => QueueErrorKind::Permission,
            BackendError::Unreachable(_) => QueueErrorKind::Unreachable,
            BackendError::Throttled { .. } => QueueErrorKind::Throttled,
            BackendError::Unsupported(_)
            | BackendError::Refused(_)
            | BackendError::RefusedUnlessForced(_)
            | BackendError::Invalid(_)
            | BackendError::Storage(_)
            | BackendError::Protocol(_)
            | BackendError::Other(_) => QueueErrorKind::Other,
        };
        // Other's words are the variant's whole Display ("unexpected answer from the
        // broker: …"), which its kind cannot say again; the other kinds say theirs.
        let message = match kind {
            QueueErrorKind::Other => e.to_string(),
            _ => e.message().to_string(),
        };
        QueueError::new(kind, message)
    }
}

impl From<BackendError> for QueueError {
    fn from(e: BackendError) -> Self {
        QueueError::from(&e)
    }
}

/// A queue's failure as the error a call on that queue gives (`count` from its figures).
impl From<QueueError> for BackendError {
    fn from(e: QueueError) -> Self {
        let m = e.message;
        match e.kind {
            QueueErrorKind::NotFound => BackendError::NotFound(m),
            QueueErrorKind::Auth => BackendError::Auth(m),
            QueueErrorKind::Permission => BackendError::Forbidden {
                msg: m,
                right: None,
            },
            QueueErrorKind::Unreachable => BackendError::Unreachable(m),
            QueueErrorKind::Timeout => BackendError::Unreachable(format!("timed out: {m}")),
            QueueErrorKind::Throttled => BackendError::Throttled {
                msg: m,
                retry_after: None,
            },
            QueueErrorKind::Other => BackendError::Other(m),
        }
    }
}

/// A missing secret or a bad setting found while building a backend.
impl From<qdeck_model::config::ConfigError> for BackendError {
    fn from(e: qdeck_model::config::ConfigError) -> Self {
        BackendError::Invalid(e.0)
    }
}

impl BackendError {
    /// Transient errors are worth retrying with backoff.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            BackendError::Unreachable(_) | BackendError::Throttled { .. }
        )
    }

    /// Whether repeating the action with `--force` (`:force` in the console) would go ahead.
    pub fn liftable_by_force(&self) -> bool {
        matches!(self, BackendError::RefusedUnlessForced(_))
    }

    /// The same error with `what` (the profile, the step) in front of its message; the
    /// variant, and so the exit code and any force advice, is kept.
    pub fn context(self, what: impl std::fmt::Display) -> BackendError {
        let p = |m: String| format!("{what}: {m}");
        match self {
            BackendError::NotFound(m) => BackendError::NotFound(p(m)),
            BackendError::Auth(m) => BackendError::Auth(p(m)),
            BackendError::Forbidden { msg, right } => {
                BackendError::Forbidden { msg: p(msg), right }
            }
            BackendError::Unreachable(m) => BackendError::Unreachable(p(m)),
            BackendError::Throttled { msg, retry_after } => BackendError::Throttled {
                msg: p(msg),
                retry_after,
            },
            BackendError::Unsupported(m) => BackendError::Unsupported(p(m)),
            BackendError::Refused(m) => BackendError::Refused(p(m)),
            BackendError::RefusedUnlessForced(m) => BackendError::RefusedUnlessForced(p(m)),
            BackendError::Invalid(m) => BackendError::Invalid(p(m)),
            BackendError::Storage(m) => BackendError::Storage(p(m)),
            BackendError::Protocol(m) => BackendError::Protocol(p(m)),
            BackendError::Other(m) => BackendError::Other(p(m)),
        }
    }

    /// How long the broker asked us to wait, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BackendError::Throttled { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The message without the words the variant's Display puts before it.
    pub fn message(&self) -> &str {
        match self {
            BackendError::NotFound(m)
            | BackendError::Auth(m)
            | BackendError::Unreachable(m)
            | BackendError::Unsupported(m)
            | BackendError::Refused(m)
            | BackendError::RefusedUnlessForced(m)
            | BackendError::Invalid(m)
            | BackendError::Storage(m)
            | BackendError::Protocol(m)
            | BackendError::Other(m)
            | BackendError::Forbidden { msg: m, .. }
            | BackendError::Throttled { msg: m, .. } => m,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant lands in its kind, and a queue's error read back as a call's error keeps
    /// its variant and prints as it did (no "not authorised: not authorised: …").
    #[test]
    fn a_queue_error_keeps_the_kind_and_the_words_of_its_backend_error() {
        let cases = [
            (
                BackendError::NotFound("no queue q".into()),
                QueueErrorKind::NotFound,
            ),
            (BackendError::Auth("bad key".into()), QueueErrorKind::Auth),
            (
                BackendError::forbidden("lacks sqs:GetQueueAttributes", Some("sqs:X")),
                QueueErrorKind::Permission,
            ),
            (
                BackendError::Unreachable("refused".into()),
                QueueErrorKind::Unreachable,
            ),
            (
                BackendError::Throttled {
                    msg: "slow down".into(),
                    retry_after: None,
                },
                QueueErrorKind::Throttled,
            ),
            (BackendError::Protocol("odd".into()), QueueErrorKind::Other),
        ];
        for (e, kind) in cases {
            let q = QueueError::from(&e);
            assert_eq!(q.kind, kind, "{e:?}");
            assert_eq!(q.to_string(), e.to_string(), "{e:?}");
            let back = BackendError::from(q);
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.is_transient(), e.is_transient(), "{e:?}");
            assert_eq!(kind.is_transient(), e.is_transient(), "{e:?}");
        }
    }
}
