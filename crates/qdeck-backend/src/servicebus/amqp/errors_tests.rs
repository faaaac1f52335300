//! Each case builds the typed error fe2o3 hands back and checks the `BackendError` it becomes.

use fe2o3_amqp::connection::{ConnectionStopReason, OpenError};
use fe2o3_amqp::link::{
    DetachError, IllegalLinkStateError, LinkStateError, MessageSizeExceeded, ReceiverAttachError,
    RecvError, SendError, SenderAttachError, SessionStopReason,
};
use fe2o3_amqp::session::BeginError;
use fe2o3_amqp::types::definitions::{AmqpError, ConnectionError, Error as Frame, ErrorCondition};
use fe2o3_amqp::types::primitives::Symbol;
use fe2o3_amqp::types::sasl::SaslCode;

use super::*;

fn custom(sym: &str, description: &str) -> Frame {
    Frame::new(
        ErrorCondition::Custom(Symbol::from(sym)),
        Some(description.to_string()),
        None,
    )
}

fn amqp(e: AmqpError, description: Option<&str>) -> Frame {
    Frame::new(e, description.map(str::to_string), None)
}

/// The broker refusing a message (a session entity without SessionId) is a refusal in one
/// readable line, not "broker unreachable" with a Debug dump.
#[test]
fn a_rejected_message_is_a_refusal_with_its_condition_and_description() {
    let rejected = custom(
        "com.microsoft:argument-error",
        "The SessionId was not set on a message, and it cannot be sent to the \"entity\".",
    );
    let e = link_error(rejected, "sending to talks");
    let BackendError::Refused(text) = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        text,
        "sending to talks: the broker refused it: com.microsoft:argument-error: The SessionId was not set on a message, and it cannot be sent to the \"entity\"."
    );
}

#[test]
fn a_missing_claim_on_a_closed_link_names_the_right() {
    let closed = DetachError::RemoteClosedWithError(amqp(
        AmqpError::UnauthorizedAccess,
        Some("Unauthorized access. 'Send' claim(s) are required to perform this operation."),
    ));
    let e = link_error(SendError::Detached(closed), "sending to q");
    assert!(
        matches!(e, BackendError::Forbidden { right: Some(ref r), .. } if r == "Send"),
        "{e:?}"
    );
}

/// A rejected key is auth, on every path it can come by, and is never retried.
#[test]
fn a_rejected_key_is_auth_and_not_transient_however_it_arrives() {
    let bad = || {
        amqp(
            AmqpError::UnauthorizedAccess,
            Some("InvalidSignature: The token has an invalid signature."),
        )
    };
    let cases = [
        link_error(ReceiverAttachError::RemoteClosedWithError(bad()), "opening"),
        link_error(SenderAttachError::RemoteClosedWithError(bad()), "opening"),
        link_error(
            RecvError::LinkStateError(LinkStateError::RemoteDetachedWithError(bad())),
            "receiving",
        ),
        link_error(
            IllegalLinkStateError::SessionStopped(SessionStopReason::ConnectionStopped(
                ConnectionStopReason::RemoteClosedWithError(bad()),
            )),
            "completing",
        ),
        open_error(&OpenError::RemoteClosedWithError(bad()), "endpoint"),
        open_error(
            &OpenError::SaslError {
                code: SaslCode::Auth,
                additional_data: None,
            },
            "endpoint",
        ),
    ];
    for e in cases {
        assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
        assert!(!e.is_transient(), "{e:?}");
        assert!(!e.to_string().contains('\n'));
    }
}

/// The condition decides, not the description: a description that reads like another kind
/// changes nothing.
#[test]
fn the_condition_decides_not_the_description() {
    let e = link_error(
        amqp(
            AmqpError::NotFound,
            Some("unauthorized access, server busy"),
        ),
        "peeking q",
    );
    assert!(matches!(e, BackendError::NotFound(_)), "{e:?}");
    let e = link_error(custom("com.example:odd", "amqp:unauthorized-access"), "q");
    assert!(matches!(e, BackendError::Unreachable(_)), "{e:?}");
}

#[test]
fn busy_lost_locks_and_missing_entities_by_their_conditions() {
    let busy = link_error(amqp(AmqpError::ResourceLimitExceeded, None), "receiving");
    assert!(matches!(busy, BackendError::Throttled { .. }), "{busy:?}");
    let busy = link_error(
        IllegalLinkStateError::SessionStopped(SessionStopReason::RemoteEndedWithError(custom(
            "com.microsoft:server-busy",
            "try later",
        ))),
        "settling",
    );
    assert!(matches!(busy, BackendError::Throttled { .. }), "{busy:?}");
    let lost = link_error(
        RecvError::LinkStateError(LinkStateError::RemoteDetachedWithError(custom(
            "com.microsoft:message-lock-lost",
            "gone",
        ))),
        "completing",
    );
    assert!(matches!(lost, BackendError::NotFound(ref m) if m.contains("lock was lost")));
    let missing = link_error(
        SenderAttachError::RemoteClosedWithError(amqp(AmqpError::NotFound, None)),
        "opening a sender to nope",
    );
    assert!(matches!(missing, BackendError::NotFound(_)), "{missing:?}");
}

#[test]
fn local_failures_by_their_variant() {
    let big = link_error(
        SendError::MessageSizeExceeded(MessageSizeExceeded {
            size: 300_000,
            max_size: 262_144,
        }),
        "sending",
    );
    assert!(matches!(big, BackendError::Refused(_)), "{big:?}");
    let gone = link_error(
        SendError::LinkStateError(LinkStateError::SessionStopped(
            SessionStopReason::ConnectionStopped(ConnectionStopReason::RemoteClosed),
        )),
        "sending",
    );
    assert!(matches!(gone, BackendError::Unreachable(_)), "{gone:?}");
    assert!(gone.is_transient());
    let odd = link_error(RecvError::DeliveryTagIsNone, "receiving");
    assert!(matches!(odd, BackendError::Protocol(_)), "{odd:?}");
    let forced =
        begin_error(
            &BeginError::ConnectionStopped(ConnectionStopReason::RemoteClosedWithError(
                Frame::new(ConnectionError::ConnectionForced, None, None),
            )),
            "endpoint",
        );
    assert!(matches!(forced, BackendError::Unreachable(_)), "{forced:?}");
    let io = open_error(
        &OpenError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        "endpoint",
    );
    assert!(matches!(io, BackendError::Unreachable(_)), "{io:?}");
}

#[test]
fn status_codes_of_management_and_cbs_answers() {
    let e = classify(
        401,
        &Some("InvalidSignature: The token has an invalid signature.".into()),
        "authorising q",
    );
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    assert!(!e.to_string().contains('\n'));
    let e = classify(404, &None, "peeking q");
    assert!(matches!(e, BackendError::NotFound(_)));
    let e = classify(503, &None, "peeking q");
    assert!(matches!(e, BackendError::Throttled { .. }));
}
