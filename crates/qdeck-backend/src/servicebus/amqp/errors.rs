//! One-line, redacted errors from what the broker answered over AMQP: a `$management` or
//! `$cbs` status code with its description, or a link or connection error condition —
//! decided by the types fe2o3 gives, never by the text it prints.

use fe2o3_amqp::types::definitions::{
    AmqpError, Error as AmqpErrorFrame, ErrorCondition, LinkError,
};
use fe2o3_amqp::types::primitives::Symbol;

use super::super::http::required_right;
use super::failure::{AmqpFailure, Failure};
use crate::BackendError;
use qdeck_model::config::redact::redact;
use qdeck_model::sanitize;

/// Broker text as one short, redacted, terminal-safe line.
pub fn one_line(text: &str) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(240)
        .collect();
    sanitize::clean(&redact(one.trim())).into_owned()
}

/// An error for a status code a request answered with (HTTP numbers, as Service Bus uses
/// them on `$management` and `$cbs`).
pub fn classify(status: i32, description: &Option<String>, what: &str) -> BackendError {
    let detail = description.as_deref().map(one_line).unwrap_or_default();
    let sep = if detail.is_empty() { "" } else { ": " };
    match status {
        401 | 403 => unauthorized(&detail, what, status),
        404 => BackendError::NotFound(format!("{what}: not found (status 404){sep}{detail}")),
        410 => BackendError::NotFound(format!(
            "{what}: the lock was lost or the message is gone (status 410){sep}{detail}"
        )),
        429 | 503 => BackendError::Throttled {
            msg: format!("{what}: the broker is busy (status {status}){sep}{detail}"),
            retry_after: None,
        },
        400 | 409 | 413 => BackendError::Invalid(format!("{what}: status {status}{sep}{detail}")),
        500..=599 => BackendError::Unreachable(format!(
            "{what}: server error (status {status}){sep}{detail}"
        )),
        s => BackendError::Protocol(format!("{what}: status {s}{sep}{detail}")),
    }
}

/// A refusal: a missing claim when the broker names one, else a rejected token.
fn unauthorized(detail: &str, what: &str, status: i32) -> BackendError {
    match required_right(detail.as_bytes()) {
        Some(right) => BackendError::forbidden(
            format!("{what}: the key or token is valid but lacks the {right} right (missing '{right}' claim): {detail}"),
            Some(right),
        ),
        None => BackendError::Auth(format!(
            "{what}: the key or token was rejected (status {status}: wrong key or key name, expired token, an Entra ID token the namespace does not accept, or a token for another namespace){}{detail}",
            if detail.is_empty() { "" } else { ": " }
        )),
    }
}

/// Service Bus's own conditions (`com.microsoft:…`), which fe2o3 can only hand over as a
/// `Custom` symbol. Compared whole: these symbols are the protocol, as the AMQP ones are.
mod microsoft {
    pub const SERVER_BUSY: &str = "com.microsoft:server-busy";
    pub const MESSAGE_LOCK_LOST: &str = "com.microsoft:message-lock-lost";
    pub const SESSION_LOCK_LOST: &str = "com.microsoft:session-lock-lost";
    pub const ENTITY_NOT_FOUND: &str = "com.microsoft:entity-not-found";
    pub const MESSAGE_NOT_FOUND: &str = "com.microsoft:message-not-found";
    pub const SESSION_NOT_FOUND: &str = "com.microsoft:session-not-found";
    pub const NOT_FOUND: &str = "com.microsoft:not-found";
    pub const UNAUTHORIZED: &str = "com.microsoft:unauthorized-access";
    /// Refusals: the message or the request cannot be taken as it is (a session entity
    /// without SessionId, a value out of range, a disabled entity); retrying changes nothing.
    pub const REFUSALS: [&str; 4] = [
        "com.microsoft:argument-error",
        "com.microsoft:argument-out-of-range",
        "com.microsoft:entity-disabled",
        "com.microsoft:message-size-exceeded",
    ];
}

/// What a broker's AMQP error condition means for qdeck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meaning {
    Unauthorized,
    NotFound,
    LockLost,
    Busy,
    Refused,
    /// The link, session or connection went away or was forced closed: worth trying again.
    Gone,
}

/// The meaning of a condition, by its type (and, for Service Bus's own, by its symbol).
fn meaning(c: &ErrorCondition) -> Meaning {
    match c {
        ErrorCondition::AmqpError(e) => match e {
            AmqpError::UnauthorizedAccess => Meaning::Unauthorized,
            // The entity was deleted under the link: as gone as one never there.
            AmqpError::NotFound | AmqpError::ResourceDeleted => Meaning::NotFound,
            AmqpError::ResourceLimitExceeded => Meaning::Busy,
            AmqpError::DecodeError
            | AmqpError::NotAllowed
            | AmqpError::InvalidField
            | AmqpError::NotImplemented
            | AmqpError::PreconditionFailed => Meaning::Refused,
            _ => Meaning::Gone,
        },
        ErrorCondition::LinkError(LinkError::MessageSizeExceeded) => Meaning::Refused,
        ErrorCondition::Custom(sym) => match sym.as_str() {
            microsoft::UNAUTHORIZED => Meaning::Unauthorized,
            microsoft::ENTITY_NOT_FOUND
            | microsoft::MESSAGE_NOT_FOUND
            | microsoft::SESSION_NOT_FOUND
            | microsoft::NOT_FOUND => Meaning::NotFound,
            microsoft::SERVER_BUSY => Meaning::Busy,
            microsoft::MESSAGE_LOCK_LOST | microsoft::SESSION_LOCK_LOST => Meaning::LockLost,
            s if microsoft::REFUSALS.contains(&s) => Meaning::Refused,
            _ => Meaning::Gone,
        },
        _ => Meaning::Gone,
    }
}

/// The condition's symbol as it travels (`amqp:not-found`, `com.microsoft:server-busy`).
pub fn symbol(c: &ErrorCondition) -> String {
    let s: Symbol = match c {
        ErrorCondition::AmqpError(e) => e.into(),
        ErrorCondition::LinkError(e) => e.into(),
        ErrorCondition::SessionError(e) => e.into(),
        ErrorCondition::ConnectionError(e) => e.into(),
        ErrorCondition::Custom(s) => s.clone(),
        #[allow(unreachable_patterns)]
        other => return format!("{other:?}"),
    };
    s.0
}

/// An error the broker sent (on a detach, an end, a close or a rejected outcome), by its
/// condition; the line shown is `condition: description`.
pub fn from_condition(e: &AmqpErrorFrame, what: &str) -> BackendError {
    let line = match &e.description {
        Some(d) => one_line(&format!("{}: {d}", symbol(&e.condition))),
        None => one_line(&symbol(&e.condition)),
    };
    match meaning(&e.condition) {
        // The description is read for the claim it names: Service Bus says which right is
        // missing only there.
        Meaning::Unauthorized => unauthorized(&line, what, 401),
        Meaning::NotFound => BackendError::NotFound(format!("{what}: not found: {line}")),
        Meaning::LockLost => BackendError::NotFound(format!("{what}: the lock was lost: {line}")),
        Meaning::Busy => BackendError::Throttled {
            msg: format!("{what}: the broker is busy: {line}"),
            retry_after: None,
        },
        Meaning::Refused => BackendError::Refused(format!("{what}: the broker refused it: {line}")),
        Meaning::Gone => BackendError::Unreachable(format!("{what}: {line}")),
    }
}

/// Any fe2o3 error, by what it carries: the broker's own error where it sent one, else the
/// kind of local failure (see `failure.rs`).
pub fn link_error(e: impl AmqpFailure, what: &str) -> BackendError {
    let line = || one_line(&e.to_string());
    match e.failure() {
        Failure::Remote(err) => from_condition(err, what),
        Failure::Refused => BackendError::Refused(format!("{what}: {}", line())),
        Failure::Protocol => BackendError::Protocol(format!("{what}: {}", line())),
        Failure::Transport => BackendError::Unreachable(format!("{what}: {}", line())),
    }
}

/// A connection that did not open: refused SASL credentials are an auth error, an error the
/// broker closed with is read by its condition, anything else means the endpoint is not
/// reachable as an AMQP broker.
pub fn open_error(e: &fe2o3_amqp::connection::OpenError, endpoint: &str) -> BackendError {
    if super::failure::sasl_refused(e) {
        return BackendError::Auth(format!(
            "{endpoint}: the broker refused the SASL credentials"
        ));
    }
    match e.failure() {
        Failure::Remote(err) => from_condition(err, endpoint),
        _ => BackendError::Unreachable(format!(
            "{endpoint}: AMQP handshake: {}",
            one_line(&e.to_string())
        )),
    }
}

/// A session that did not begin, by what stopped it.
pub fn begin_error(e: &fe2o3_amqp::session::BeginError, endpoint: &str) -> BackendError {
    match e.failure() {
        Failure::Remote(err) => from_condition(err, endpoint),
        _ => BackendError::Unreachable(format!(
            "{endpoint}: beginning a session: {}",
            one_line(&e.to_string())
        )),
    }
}

#[cfg(test)]
#[path = "errors_tests.rs"]
mod tests;
