//! Why one queue's figures could not be read, by kind: the poller, the store, the console and
//! the CLI decide by the kind (which word, which marker, which exit), and only show the text.

use serde::{Deserialize, Serialize};

/// What kind of failure kept a queue's figures away. The layer above maps its own error
/// type into it by variant, never by the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueErrorKind {
    /// The broker (or the part of it that holds this queue) did not answer.
    Unreachable,
    /// The credentials were refused.
    Auth,
    /// The queue (or what its figures come from: a stream, a consumer) is not there.
    NotFound,
    /// The identity lacks a right to read this queue's figures.
    Permission,
    /// The broker asked to slow down.
    Throttled,
    /// The answer did not come in time.
    Timeout,
    /// Anything else (an answer qdeck could not read, a broker limit).
    Other,
}

impl QueueErrorKind {
    /// A few words for the kind, shown before the broker's message.
    pub fn words(self) -> &'static str {
        match self {
            QueueErrorKind::Unreachable => "unreachable",
            QueueErrorKind::Auth => "not authorised",
            QueueErrorKind::NotFound => "not found",
            QueueErrorKind::Permission => "no permission",
            QueueErrorKind::Throttled => "throttled",
            QueueErrorKind::Timeout => "timed out",
            QueueErrorKind::Other => "error",
        }
    }

    /// Whether polling again soon may succeed (the network or the broker's load), as opposed
    /// to something that waits for a person (a key, a right, a queue to exist).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            QueueErrorKind::Unreachable | QueueErrorKind::Throttled | QueueErrorKind::Timeout
        )
    }
}

/// One queue's failure: its kind and the broker's one-line message (redacted, as every
/// backend error is). It prints as the backend error it came from did ("not authorised: …").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueError {
    pub kind: QueueErrorKind,
    pub message: String,
}

impl QueueError {
    pub fn new(kind: QueueErrorKind, message: impl Into<String>) -> QueueError {
        QueueError {
            kind,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> QueueError {
        QueueError::new(QueueErrorKind::NotFound, message)
    }
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.message;
        match self.kind {
            QueueErrorKind::Auth => write!(f, "not authorised: {m}"),
            QueueErrorKind::Unreachable => write!(f, "broker unreachable: {m}"),
            QueueErrorKind::Throttled => write!(f, "throttled by the broker: {m}"),
            QueueErrorKind::Timeout => write!(f, "timed out: {m}"),
            QueueErrorKind::NotFound | QueueErrorKind::Permission | QueueErrorKind::Other => {
                f.write_str(m)
            }
        }
    }
}
