//! SASL authentication of a new connection, as KIP-152 has it: SaslHandshake v1 names the
//! mechanism, then each SASL token travels in a SaslAuthenticate request, so a refusal comes
//! back as an error code and message instead of a closed socket. PLAIN sends the user and
//! password in one token (use it over TLS); SCRAM proves knowledge of the password without
//! sending it and checks that the broker knows it too.
//!
//! Errors name the mechanism, the user and the variable the password came from; never the
//! password, nor the broker's SCRAM messages (they carry salts and proofs).

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::connection::{Conn, Stream};
use super::scram;
use super::security::{Mechanism, Sasl};
use crate::{BackendError, Result};

const HANDSHAKE_V: i16 = 1;
const AUTHENTICATE_V: i16 = 2;
/// Kafka's error codes for a refused SASL exchange.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

pub async fn authenticate(conn: &Conn, stream: &mut Stream, sasl: &Sasl) -> Result<()> {
    let addr = conn.addr();
    let mech = sasl.mechanism.name();
    let hs = conn
        .roundtrip(
            stream,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mech)),
            HANDSHAKE_V,
        )
        .await
        .map_err(|e| match e {
            // A plaintext or TLS listener does not answer a handshake the way a SASL one does.
            BackendError::Protocol(_) | BackendError::Unreachable(_) => BackendError::Unreachable(format!(
                "Kafka broker {addr} did not take a SASL handshake: is this listener SASL_PLAINTEXT or SASL_SSL (and tls set to match)? ({e})"
            )),
            e => e,
        })?;
    match hs.error_code {
        0 => {}
        UNSUPPORTED_SASL_MECHANISM | ILLEGAL_SASL_STATE => {
            let offered: Vec<&str> = hs.mechanisms.iter().map(StrBytes::as_str).collect();
            return Err(BackendError::Auth(format!(
                "Kafka broker {addr} does not enable SASL {mech} on this listener (it offers {})",
                if offered.is_empty() {
                    "none".to_string()
                } else {
                    offered.join(", ")
                }
            )));
        }
        code => {
            return Err(BackendError::Protocol(format!(
                "Kafka broker {addr} answered the SASL handshake with error {code}"
            )))
        }
    }
    match sasl.mechanism {
        Mechanism::Plain => {
            // authzid NUL authcid NUL password (RFC 4616), the authorisation id left empty.
            let mut token = Vec::with_capacity(sasl.user.len() + sasl.password.expose().len() + 2);
            token.push(0);
            token.extend_from_slice(sasl.user.as_bytes());
            token.push(0);
            token.extend_from_slice(sasl.password.expose().as_bytes());
            step(conn, stream, sasl, token).await?;
        }
        Mechanism::Scram(hash) => {
            let nonce = format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            let mut client = scram::Client::new(hash, &sasl.user, &nonce);
            let server_first = step(conn, stream, sasl, client.first()).await?;
            let last = client
                .last(&server_first, sasl.password.expose())
                .map_err(|e| scram_error(addr, mech, &e))?;
            let server_final = step(conn, stream, sasl, last).await?;
            client
                .verify(&server_final)
                .map_err(|e| scram_error(addr, mech, &e))?;
        }
    }
    Ok(())
}

/// Send one SASL token; the broker's answer token.
async fn step(conn: &Conn, stream: &mut Stream, sasl: &Sasl, token: Vec<u8>) -> Result<Bytes> {
    let resp = conn
        .roundtrip(
            stream,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
            AUTHENTICATE_V,
        )
        .await
        .map_err(|e| match e {
            // Some brokers close the connection on a failed exchange instead of answering.
            BackendError::Unreachable(_) => refused(conn.addr(), sasl, None),
            e => e,
        })?;
    match resp.error_code {
        0 => Ok(resp.auth_bytes),
        SASL_AUTHENTICATION_FAILED => Err(refused(conn.addr(), sasl, resp.error_message.as_ref())),
        code => Err(BackendError::Auth(format!(
            "Kafka broker {} ended the SASL exchange with error {code}{}",
            conn.addr(),
            resp.error_message
                .as_ref()
                .map(|m| format!(": {}", qdeck_model::sanitize::clean_short(m.as_str(), 160)))
                .unwrap_or_default()
        ))),
    }
}

/// The broker refused the credentials: named by mechanism, user and the password's variable.
fn refused(addr: &str, sasl: &Sasl, message: Option<&StrBytes>) -> BackendError {
    BackendError::Auth(format!(
        "Kafka broker {addr} refused SASL {} for user {:?}: wrong password in {} or unknown user{}",
        sasl.mechanism.name(),
        sasl.user,
        sasl.password_env,
        message
            .map(|m| format!(" ({})", qdeck_model::sanitize::clean_short(m.as_str(), 160)))
            .unwrap_or_default()
    ))
}

fn scram_error(addr: &str, mech: &str, e: &str) -> BackendError {
    BackendError::Auth(format!("Kafka broker {addr}: SASL {mech}: {e}"))
}
