//! The AMQP connection to a namespace: TLS on port 5671 (rustls on ring, roots from
//! webpki-roots), or plain TCP on the endpoint's port for an emulator connection string
//! (`UseDevelopmentEmulator=true`, as Microsoft's emulator serves it); SASL ANONYMOUS, then one
//! session. Authorisation is claims-based: a SAS token (or, with Entra ID auth, a JWT) per
//! entity audience is put on `$cbs` before the entity's first link, and put again when it is
//! within a sixth of its lifetime (profile `sas_token_ttl`, default an hour) of expiring; an
//! Entra ID token is put again as soon as the credential refreshes it. Tokens belong to the
//! connection, so a reconnect starts without any.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::primitives::{SimpleValue, Value};
use fe2o3_amqp::{Connection, Session};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::super::connstr::{sas_token, unix_now, ConnInfo, Credential};
use super::super::token_life::refresh_margin;
use super::errors::{begin_error, classify, one_line, open_error};
use super::request::RequestLink;
use crate::{BackendError, Result};
use qdeck_model::sanitize;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const SAS_TYPE: &str = "servicebus.windows.net:sastoken";
const TLS_PORT: u16 = 5671;
const EMULATOR_PORT: u16 = 5672;

/// One open connection: its session, the `$cbs` link, the tokens put on it and the
/// `$management` links opened on it, by entity.
pub struct Live {
    /// Kept so the connection lives as long as the session; closed on drop.
    conn: ConnectionHandle<()>,
    pub session: SessionHandle<()>,
    cbs: RequestLink,
    /// Audience → expiry (Unix seconds) of the token put for it.
    tokens: HashMap<String, u64>,
    pub mgmt: HashMap<String, Arc<tokio::sync::Mutex<RequestLink>>>,
}

impl Live {
    pub fn is_broken(&self) -> bool {
        self.conn.is_closed() || self.session.is_ended()
    }
}

/// `host[:port]` of the connection string's endpoint, with the AMQP port to use.
pub fn host_port(info: &ConnInfo) -> (String, u16) {
    let default = if info.emulator {
        EMULATOR_PORT
    } else {
        TLS_PORT
    };
    match info.host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => match p.parse::<u16>() {
            // A port in an Azure endpoint is the HTTPS one; AMQP over TLS is always 5671.
            Ok(port) if info.emulator => (h.trim_matches(['[', ']']).to_string(), port),
            _ => (h.trim_matches(['[', ']']).to_string(), default),
        },
        _ => (info.host.clone(), default),
    }
}

fn endpoint(host: &str, port: u16) -> String {
    format!("Service Bus AMQP endpoint {}:{port}", sanitize::clean(host))
}

fn unreachable(host: &str, port: u16, why: impl std::fmt::Display) -> BackendError {
    BackendError::Unreachable(format!(
        "{}: {}",
        endpoint(host, port),
        one_line(&why.to_string())
    ))
}

/// Open the connection and its session, and attach `$cbs`.
pub async fn open(info: &ConnInfo) -> Result<Live> {
    let (host, port) = host_port(info);
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| unreachable(&host, port, "no answer within 10 s"))?
        .map_err(|e| unreachable(&host, port, e))?;
    let _ = tcp.set_nodelay(true);
    let mut conn = if info.emulator {
        handshake(&host, port, tcp).await?
    } else {
        let tls = tls_stream(&host, port, tcp).await?;
        handshake(&host, port, tls).await?
    };
    let mut session = Session::builder()
        .incoming_window(10_000)
        .outgoing_window(10_000)
        .begin(&mut conn)
        .await
        .map_err(|e| begin_error(&e, &endpoint(&host, port)))?;
    let cbs = RequestLink::attach(&mut session, "$cbs").await?;
    Ok(Live {
        conn,
        session,
        cbs,
        tokens: HashMap::new(),
        mgmt: HashMap::new(),
    })
}

async fn tls_stream(
    host: &str,
    port: u16,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let provider = crate::tls::install_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unreachable(host, port, format!("TLS set-up: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| unreachable(host, port, "not a valid TLS server name"))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
        .await
        .map_err(|_| unreachable(host, port, "TLS handshake timed out"))?
        .map_err(|e| unreachable(host, port, format!("TLS: {e}")))
}

/// AMQP and SASL ANONYMOUS over an established stream (TLS first, as Service Bus expects on
/// 5671: no AMQP TLS upgrade header).
async fn handshake<Io>(host: &str, port: u16, io: Io) -> Result<ConnectionHandle<()>>
where
    Io: AsyncRead + AsyncWrite + std::fmt::Debug + Send + Unpin + 'static,
{
    let id = format!("qdeck-{}", uuid::Uuid::new_v4().simple());
    let opening = Connection::builder()
        .container_id(id)
        .hostname(host)
        .scheme("amqp")
        .sasl_profile(SaslProfile::Anonymous)
        .max_frame_size(256 * 1024)
        .idle_time_out(120_000u32)
        .open_with_stream(io);
    tokio::time::timeout(CONNECT_TIMEOUT, opening)
        .await
        .map_err(|_| unreachable(host, port, "the AMQP handshake timed out"))?
        .map_err(|e| open_error(&e, &endpoint(host, port)))
}

/// `sb://HOST/ENTITY`: the audience a token is put for.
pub fn audience(info: &ConnInfo, entity: &str) -> String {
    format!("sb://{}/{}", info.host, entity.trim_start_matches('/'))
}

/// Put a token for `entity`'s audience unless one put on this connection still has long
/// enough to live.
pub async fn ensure_token(live: &mut Live, info: &ConnInfo, entity: &str) -> Result<()> {
    let aud = audience(info, entity);
    let now = unix_now();
    let ttl = info.token_ttl_secs;
    // It ran out (the backend sat idle past it): the broker has dropped this entity's links
    // on the connection, the kept `$management` link among them.
    if live.tokens.get(&aud).is_some_and(|exp| *exp <= now + 1) {
        live.mgmt.remove(entity);
    }
    let (token_type, token, expiry) = match &info.credential {
        // The credential refreshes its Entra ID token itself; a new one is put as soon as it
        // hands one out.
        Credential::Entra(c) => {
            let t = c.token().await?;
            if live.tokens.get(&aud) == Some(&t.expires_on) {
                return Ok(());
            }
            ("jwt", t.token.expose().to_string(), t.expires_on)
        }
        _ if live
            .tokens
            .get(&aud)
            .is_some_and(|exp| *exp > now + refresh_margin(ttl)) =>
        {
            return Ok(());
        }
        Credential::Key { name, key } => {
            let exp = now + ttl;
            (SAS_TYPE, sas_token(&aud, name, key.expose(), exp), exp)
        }
        // A ready-made token lives as long as its `se`; put it again each lifetime regardless.
        Credential::Token(t) => (SAS_TYPE, t.expose().to_string(), now + ttl),
    };
    let props = vec![
        ("operation", SimpleValue::String("put-token".into())),
        ("type", SimpleValue::String(token_type.into())),
        ("name", SimpleValue::String(aud.clone())),
    ];
    let resp = live.cbs.call(props, Value::String(token)).await?;
    if !(200..300).contains(&resp.status) {
        let what = format!("authorising {} on $cbs", sanitize::clean(entity));
        return Err(classify(resp.status, &resp.description, &what));
    }
    live.tokens.insert(aud, expiry);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::Secret;

    fn info(cs: &str) -> ConnInfo {
        super::super::super::connstr::parse(&Secret::new(cs)).unwrap()
    }

    #[test]
    fn azure_uses_5671_and_the_emulator_its_own_port() {
        let i = info(
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=a;SharedAccessKey=b",
        );
        assert_eq!(host_port(&i), ("ns.servicebus.windows.net".into(), 5671));
        let i = info("Endpoint=sb://127.0.0.1:5999;SharedAccessKeyName=a;SharedAccessKey=b;UseDevelopmentEmulator=true");
        assert_eq!(host_port(&i), ("127.0.0.1".into(), 5999));
        let i = info(
            "Endpoint=sb://localhost;SharedAccessKeyName=a;SharedAccessKey=b;UseDevelopmentEmulator=true",
        );
        assert_eq!(host_port(&i), ("localhost".into(), 5672));
        assert_eq!(
            audience(&i, "q/$DeadLetterQueue"),
            "sb://localhost/q/$DeadLetterQueue"
        );
    }
}
