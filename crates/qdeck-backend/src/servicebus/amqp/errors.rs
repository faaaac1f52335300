//! One-line, redacted errors from what the broker answered over AMQP: a `$management` or
//! `$cbs` status code with its description, or a link or connection error condition.

use super::super::http::required_right;
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

/// Conditions by which the broker refuses what was asked (a message a session entity cannot
/// take, one too large, an operation the entity does not allow): not a fault of the network,
/// and trying again changes nothing.
const REFUSALS: [&str; 9] = [
    "argument-error",
    "argument-out-of-range",
    "invalid-field",
    "decode-error",
    "not-allowed",
    "not-implemented",
    "precondition-failed",
    "message-size-exceeded",
    "entity-disabled",
];

/// `Error { condition: Custom(Symbol("c")), description: Some("d"), .. }` (an error's Debug
/// form) as `c: d`; other text as it is. Standard conditions print as variant names
/// (`AmqpError(NotFound)`), kept as they are.
fn condition_line(text: &str) -> String {
    let Some(at) = text.find("condition: ") else {
        return text.to_string();
    };
    let rest = &text[at + "condition: ".len()..];
    let condition = match rest.strip_prefix("Custom(Symbol(\"") {
        Some(sym) => quoted(sym),
        None => rest
            .split(", description")
            .next()
            .unwrap_or(rest)
            .to_string(),
    };
    match text.find("description: Some(\"") {
        Some(d) => format!(
            "{condition}: {}",
            quoted(&text[d + "description: Some(\"".len()..])
        ),
        None => condition,
    }
}

/// The text of a Debug-quoted string up to its closing quote, escapes undone.
fn quoted(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// An error from a link or the connection, by its AMQP error condition
/// (`amqp:unauthorized-access`, `amqp:not-found`, `com.microsoft:server-busy`, ...).
pub fn from_condition(text: &str, what: &str) -> BackendError {
    let line = one_line(&condition_line(text));
    // `resource-limit-exceeded` and `ResourceLimitExceeded` alike.
    let lower = line.to_ascii_lowercase().replace('-', "");
    if lower.contains("unauthorized") {
        unauthorized(&line, what, 401)
    } else if lower.contains("notfound") {
        BackendError::NotFound(format!("{what}: not found: {line}"))
    } else if lower.contains("serverbusy") || lower.contains("resourcelimitexceeded") {
        BackendError::Throttled {
            msg: format!("{what}: the broker is busy: {line}"),
            retry_after: None,
        }
    } else if lower.contains("messagelocklost") || lower.contains("sessionlocklost") {
        BackendError::NotFound(format!("{what}: the lock was lost: {line}"))
    } else if REFUSALS.iter().any(|c| lower.contains(&c.replace('-', ""))) {
        BackendError::Refused(format!("{what}: the broker refused it: {line}"))
    } else {
        BackendError::Unreachable(format!("{what}: {line}"))
    }
}

/// `from_condition` for anything that prints its condition.
pub fn link_error(e: impl std::fmt::Debug, what: &str) -> BackendError {
    from_condition(&format!("{e:?}"), what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker refusing a message (a session entity without SessionId) is a refusal in one
    /// readable line, not "broker unreachable" with a Debug dump.
    #[test]
    fn a_refused_message_is_a_refusal_with_its_condition_and_description() {
        let debug = r#"Rejected(Error { condition: Custom(Symbol("com.microsoft:argument-error")), description: Some("The SessionId was not set on a message, and it cannot be sent to the \"entity\"."), info: None })"#;
        let e = from_condition(debug, "sending to talks");
        let BackendError::Refused(text) = &e else {
            panic!("{e:?}");
        };
        assert_eq!(
            text,
            "sending to talks: the broker refused it: com.microsoft:argument-error: The SessionId was not set on a message, and it cannot be sent to the \"entity\"."
        );
        let busy = from_condition(
            "Error { condition: AmqpError(ResourceLimitExceeded), description: None }",
            "receiving",
        );
        assert!(matches!(busy, BackendError::Throttled { .. }), "{busy:?}");
        let gone = from_condition("connection reset by peer", "receiving");
        assert!(matches!(gone, BackendError::Unreachable(_)), "{gone:?}");
    }

    #[test]
    fn a_missing_claim_names_the_right_and_a_bad_key_is_auth() {
        let e = from_condition(
            "RemoteClosedWithError(Error { condition: amqp:unauthorized-access, description: Some(\"Unauthorized access. 'Send' claim(s) are required to perform this operation.\") })",
            "sending to q",
        );
        assert!(
            matches!(e, BackendError::Forbidden { right: Some(ref r), .. } if r == "Send"),
            "{e:?}"
        );
        let e = classify(
            401,
            &Some("InvalidSignature: The token has an invalid signature.".into()),
            "authorising q",
        );
        assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
        assert!(!e.to_string().contains('\n'));
        let e = classify(404, &None, "peeking q");
        assert!(matches!(e, BackendError::NotFound(_)));
    }
}
