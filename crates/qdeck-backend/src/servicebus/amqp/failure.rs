//! What each fe2o3-amqp error carries, read from its variants: the AMQP error the broker sent
//! (a link detached or closed with an error, a session ended with one, the connection closed
//! with one, a rejected outcome) or the kind of local failure. `errors::link_error` turns that
//! into a `BackendError`; nothing here looks at the text an error prints, so an upgrade that
//! rewords fe2o3's messages cannot turn an auth failure into "unreachable".

use fe2o3_amqp::connection::{ConnectionStopReason, OpenError};
use fe2o3_amqp::link::{
    DetachError, IllegalLinkStateError, LinkStateError, ReceiverAttachError, RecvError, SendError,
    SenderAttachError, SessionStopReason,
};
use fe2o3_amqp::session::BeginError;
use fe2o3_amqp::types::definitions::Error as AmqpErrorFrame;
use fe2o3_amqp::types::sasl::SaslCode;

/// The kind of an AMQP failure.
#[derive(Debug)]
pub enum Failure<'a> {
    /// The broker said why, with an AMQP error (condition and description).
    Remote(&'a AmqpErrorFrame),
    /// What was asked cannot be done as it is (a message too large or not encodable):
    /// trying again changes nothing.
    Refused,
    /// The broker sent something the client could not read or did not expect.
    Protocol,
    /// The link, session or connection is gone or unusable: worth trying again.
    Transport,
}

/// An fe2o3 error whose kind can be read from its type.
pub trait AmqpFailure: std::fmt::Display {
    fn failure(&self) -> Failure<'_>;
}

impl AmqpFailure for AmqpErrorFrame {
    fn failure(&self) -> Failure<'_> {
        Failure::Remote(self)
    }
}

fn connection(r: &ConnectionStopReason) -> Failure<'_> {
    match r {
        ConnectionStopReason::ClosedWithError(e)
        | ConnectionStopReason::RemoteClosedWithError(e) => Failure::Remote(e),
        ConnectionStopReason::Closed | ConnectionStopReason::RemoteClosed => Failure::Transport,
    }
}

fn session(r: &SessionStopReason) -> Failure<'_> {
    match r {
        SessionStopReason::EndedWithError(e) | SessionStopReason::RemoteEndedWithError(e) => {
            Failure::Remote(e)
        }
        SessionStopReason::ConnectionStopped(c) => connection(c),
        SessionStopReason::Ended | SessionStopReason::RemoteEnded => Failure::Transport,
    }
}

impl AmqpFailure for IllegalLinkStateError {
    fn failure(&self) -> Failure<'_> {
        match self {
            IllegalLinkStateError::SessionStopped(r) => session(r),
            IllegalLinkStateError::IllegalState => Failure::Transport,
        }
    }
}

impl AmqpFailure for LinkStateError {
    fn failure(&self) -> Failure<'_> {
        match self {
            LinkStateError::RemoteDetachedWithError(e)
            | LinkStateError::RemoteClosedWithError(e) => Failure::Remote(e),
            LinkStateError::SessionStopped(r) => session(r),
            LinkStateError::IllegalState
            | LinkStateError::RemoteDetached
            | LinkStateError::RemoteClosed
            | LinkStateError::ExpectImmediateDetach => Failure::Transport,
        }
    }
}

impl AmqpFailure for DetachError {
    #[allow(deprecated)] // `DetachedByRemote` is still produced by this version
    fn failure(&self) -> Failure<'_> {
        match self {
            DetachError::RemoteDetachedWithError(e) | DetachError::RemoteClosedWithError(e) => {
                Failure::Remote(e)
            }
            DetachError::SessionStopped(r) => session(r),
            DetachError::IllegalState
            | DetachError::ClosedByRemote
            | DetachError::DetachedByRemote => Failure::Transport,
        }
    }
}

impl AmqpFailure for SendError {
    fn failure(&self) -> Failure<'_> {
        match self {
            SendError::LinkStateError(e) => e.failure(),
            SendError::Detached(e) => e.failure(),
            SendError::MessageSizeExceeded(_) | SendError::MessageEncodeError => Failure::Refused,
            SendError::NonTerminalDeliveryState | SendError::IllegalDeliveryState => {
                Failure::Protocol
            }
        }
    }
}

impl AmqpFailure for RecvError {
    fn failure(&self) -> Failure<'_> {
        match self {
            RecvError::LinkStateError(e) => e.failure(),
            // The link is detached for it; a larger message will not shrink on a retry.
            RecvError::MessageSizeExceeded(_) => Failure::Refused,
            RecvError::TransferLimitExceeded
            | RecvError::DeliveryIdIsNone
            | RecvError::DeliveryTagIsNone
            | RecvError::MessageDecode(_)
            | RecvError::IllegalRcvSettleModeInTransfer
            | RecvError::InconsistentFieldInMultiFrameDelivery
            | RecvError::TransactionalAcquisitionIsNotImeplemented => Failure::Protocol,
        }
    }
}

/// Attach errors: what the broker closed the link with, or a session that stopped; the rest
/// are answers the client could not accept.
macro_rules! attach_failure {
    ($t:ident) => {
        impl AmqpFailure for $t {
            fn failure(&self) -> Failure<'_> {
                match self {
                    $t::RemoteClosedWithError(e) => Failure::Remote(e),
                    $t::SessionStopped(r) => session(r),
                    $t::SessionNotMapped | $t::IllegalState => Failure::Transport,
                    _ => Failure::Protocol,
                }
            }
        }
    };
}
attach_failure!(SenderAttachError);
attach_failure!(ReceiverAttachError);

impl AmqpFailure for BeginError {
    fn failure(&self) -> Failure<'_> {
        match self {
            BeginError::RemoteEndedWithError(e) => Failure::Remote(e),
            BeginError::ConnectionStopped(c) => connection(c),
            _ => Failure::Transport,
        }
    }
}

impl AmqpFailure for OpenError {
    fn failure(&self) -> Failure<'_> {
        match self {
            OpenError::RemoteClosedWithError(e) => Failure::Remote(e),
            // SASL answered: a refused mechanism or credentials is the broker's word, not the
            // network's (`Auth` is a SASL code of its own, see `errors::open_error`).
            OpenError::SaslError { .. } | OpenError::ProtocolHeaderMismatch(_) => Failure::Protocol,
            _ => Failure::Transport,
        }
    }
}

/// Whether an open failed because SASL refused the credentials.
pub fn sasl_refused(e: &OpenError) -> bool {
    matches!(
        e,
        OpenError::SaslError {
            code: SaslCode::Auth,
            ..
        }
    )
}
