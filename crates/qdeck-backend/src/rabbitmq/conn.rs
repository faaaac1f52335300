//! Credentials, AMQP connections (one per vhost, reconnected on demand) and error mapping.
//! The password is a `Secret` in `Creds`, exposed only into the URI handed to lapin and the
//! management API's Basic auth; it never reaches a message: every text that might hold a URL
//! goes through `redact`.

pub(crate) use qdeck_model::sanitize::one_line;
use std::collections::HashMap;
use std::sync::Arc;

use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties, ErrorKind};
use tokio::sync::Mutex;

use crate::{BackendError, Result};
use qdeck_model::config::redact::redact;
use qdeck_model::config::secret::{Secret, SecretSource};
use qdeck_model::config::RabbitmqSettings;

/// Where and how to connect. `Debug` is hand-written to show where, not who with what.
#[derive(Clone)]
pub struct Creds {
    /// The AMQP URI without a password: `password` goes into it only when a connection opens.
    pub uri: AMQPUri,
    pub username: String,
    pub password: Secret,
    /// Management API base without a trailing slash.
    pub mgmt_base: String,
    /// The vhost of the AMQP URL: its queues are addressed by bare name.
    pub default_vhost: String,
}

impl std::fmt::Debug for Creds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Creds")
            .field("host", &self.uri.authority.host)
            .field("port", &self.uri.authority.port)
            .field("username", &self.username)
            .field("mgmt_base", &self.mgmt_base)
            .finish_non_exhaustive()
    }
}

impl Creds {
    /// Resolve profile `profile`: URL from `amqp_url_env` or `amqp_url`, password from
    /// `password_env` (overrides one in the URL), username from settings or the URL; the
    /// variables are read from `secrets`.
    pub fn from_settings(
        profile: &str,
        s: &RabbitmqSettings,
        secrets: &dyn SecretSource,
    ) -> Result<Creds> {
        let mut uri: AMQPUri = match (&s.amqp_url_env, &s.amqp_url) {
            // The whole URL is a secret: a parse error names the variable, never the URL.
            (Some(var), _) => {
                let url = secrets.require(profile, "amqp_url_env", var)?;
                url.expose().parse().map_err(|e: String| {
                    BackendError::Invalid(format!(
                        "profile '{profile}': environment variable {var} (named by amqp_url_env) \
                         is not an AMQP URL: {}",
                        redact(&e)
                    ))
                })?
            }
            (None, url) => {
                let raw = url.as_deref().unwrap_or("amqp://127.0.0.1:5672/%2f");
                raw.parse().map_err(|e: String| {
                    BackendError::Invalid(format!("bad AMQP URL {}: {}", redact(raw), redact(&e)))
                })?
            }
        };
        if let Some(u) = &s.username {
            uri.authority.userinfo.username = u.clone();
        }
        let in_url = Secret::new(std::mem::take(&mut uri.authority.userinfo.password));
        let password = match &s.password_env {
            Some(var) => secrets.require(profile, "password_env", var)?,
            None => in_url,
        };
        let tls = matches!(uri.scheme, lapin::uri::AMQPScheme::AMQPS);
        let mgmt_base = match &s.management_url {
            Some(m) => m.trim_end_matches('/').to_string(),
            None => {
                let (scheme, port) = if tls {
                    ("https", 15671)
                } else {
                    ("http", 15672)
                };
                format!("{scheme}://{}:{port}", uri.authority.host)
            }
        };
        let default_vhost = s.vhost.clone().unwrap_or_else(|| uri.vhost.clone());
        Ok(Creds {
            username: uri.authority.userinfo.username.clone(),
            password,
            default_vhost,
            mgmt_base,
            uri,
        })
    }

    /// Host:port for messages (no credentials).
    pub fn amqp_endpoint(&self) -> String {
        format!("{}:{}", self.uri.authority.host, self.uri.authority.port)
    }
}

/// One AMQP connection per vhost, opened on first use and reopened when it died.
pub struct Pool {
    creds: Creds,
    name: String,
    conns: Mutex<HashMap<String, Arc<Connection>>>,
    /// A refused login, remembered for a while: the credentials cannot change without a new
    /// backend, so retrying sooner only hammers the broker (and may trip its rate limits).
    auth_failed: std::sync::Mutex<Option<(std::time::Instant, BackendError)>>,
}

/// How long a refused login is answered from memory.
pub const AUTH_MEMO: std::time::Duration = std::time::Duration::from_secs(30);

impl Pool {
    /// `name` shows in the broker's connection list ("qdeck <profile>").
    pub fn new(creds: Creds, name: String) -> Pool {
        Pool {
            creds,
            name,
            conns: Mutex::new(HashMap::new()),
            auth_failed: std::sync::Mutex::new(None),
        }
    }

    /// `slot` picks one of several connections to the same vhost ("" for the shared one;
    /// redrive publishes on its own so the broker parses publishes and acks in parallel).
    async fn connection(&self, vhost: &str, slot: &str) -> Result<Arc<Connection>> {
        let key = format!("{slot}\u{0}{vhost}");
        if let Some((at, e)) = &*self
            .auth_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            if at.elapsed() < AUTH_MEMO {
                return Err(e.clone());
            }
        }
        let mut conns = self.conns.lock().await;
        if let Some(c) = conns.get(&key) {
            if c.status().connected() {
                return Ok(c.clone());
            }
            conns.remove(&key);
        }
        let mut uri = self.creds.uri.clone();
        uri.vhost = vhost.to_string();
        uri.authority.userinfo.password = self.creds.password.expose().to_string();
        let props = ConnectionProperties::default().with_connection_name(self.name.as_str().into());
        let conn = tokio::time::timeout(
            std::time::Duration::from_secs(15),
            Connection::connect_uri(uri, props),
        )
        .await
        .map_err(|_| {
            BackendError::Unreachable(format!(
                "AMQP {} did not answer within 15 s",
                self.creds.amqp_endpoint()
            ))
        })?
        .map_err(|e| {
            let err = self.connect_error(vhost, &e);
            if matches!(err, BackendError::Auth(_)) {
                *self
                    .auth_failed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((std::time::Instant::now(), err.clone()));
            }
            err
        })?;
        let conn = Arc::new(conn);
        conns.insert(key, conn.clone());
        Ok(conn)
    }

    /// A fresh channel on the vhost's connection (channels are cheap; a channel error such as
    /// a missing queue closes only that channel).
    pub async fn channel(&self, vhost: &str) -> Result<Channel> {
        self.channel_on(vhost, "").await
    }

    /// Channels the vhost's shared connection may open (negotiated with the broker; 0 there
    /// means no limit).
    pub async fn channel_max(&self, vhost: &str) -> Result<u16> {
        let max = self
            .connection(vhost, "")
            .await?
            .configuration()
            .channel_max();
        Ok(if max == 0 { u16::MAX } else { max })
    }

    /// A fresh channel on the given connection slot of the vhost.
    pub async fn channel_on(&self, vhost: &str, slot: &str) -> Result<Channel> {
        let conn = self.connection(vhost, slot).await?;
        match conn.create_channel().await {
            Ok(c) => Ok(c),
            Err(e) => {
                // The connection may have died between the status check and now: retry once.
                self.conns
                    .lock()
                    .await
                    .remove(&format!("{slot}\u{0}{vhost}"));
                let conn = self.connection(vhost, slot).await?;
                conn.create_channel().await.map_err(|_| amqp_error(&e, ""))
            }
        }
    }

    fn connect_error(&self, vhost: &str, e: &lapin::Error) -> BackendError {
        let ep = self.creds.amqp_endpoint();
        let user = one_line(&self.creds.username);
        match e.kind() {
            ErrorKind::IOError(io) => {
                BackendError::Unreachable(format!("AMQP {ep}: {}", one_line(&io.to_string())))
            }
            // During connection.start-ok the broker answers a failed login with ACCESS_REFUSED.
            ErrorKind::ProtocolError(p) if p.get_id() == 403 => BackendError::Auth(format!(
                "RabbitMQ at {ep} refused the login of user '{user}' (AMQP 403 ACCESS_REFUSED: wrong username or password)"
            )),
            // connection.open: logged in, but no access to the vhost (or it does not exist).
            ErrorKind::ProtocolError(p) if p.get_id() == 530 => BackendError::forbidden(
                format!(
                    "user '{user}' may not open vhost '{}' (AMQP 530 NOT_ALLOWED: {})",
                    one_line(vhost),
                    one_line(p.get_message().as_str())
                ),
                Some(&format!(
                    "access to vhost {} (rabbitmqctl set_permissions)",
                    one_line(vhost)
                )),
            ),
            ErrorKind::ProtocolError(p) => map_reply(p.get_id(), &format!("AMQP {ep}"), p.get_message().as_str()),
            // The broker closed the socket during the handshake without a reason: what
            // RabbitMQ does to a failed login when the client cannot take a close frame.
            ErrorKind::InvalidConnectionState(_) => BackendError::Auth(format!(
                "RabbitMQ at {ep} closed the connection during login of user '{user}' (wrong username or password?)"
            )),
            _ => BackendError::Unreachable(format!("AMQP {ep}: {}", one_line(&e.to_string()))),
        }
    }
}

/// AMQP reply code → variant; the text names the code as the broker's docs do.
fn map_reply(code: u16, what: &str, broker_text: &str) -> BackendError {
    let name = match code {
        311 => "CONTENT_TOO_LARGE",
        313 => "NO_CONSUMERS",
        320 => "CONNECTION_FORCED",
        402 => "INVALID_PATH",
        403 => "ACCESS_REFUSED",
        404 => "NOT_FOUND",
        405 => "RESOURCE_LOCKED",
        406 => "PRECONDITION_FAILED",
        501 => "FRAME_ERROR",
        502 => "SYNTAX_ERROR",
        503 => "COMMAND_INVALID",
        504 => "CHANNEL_ERROR",
        505 => "UNEXPECTED_FRAME",
        506 => "RESOURCE_ERROR",
        530 => "NOT_ALLOWED",
        540 => "NOT_IMPLEMENTED",
        541 => "INTERNAL_ERROR",
        _ => "reply",
    };
    let msg = format!("{what}: AMQP {code} {name}: {}", one_line(broker_text));
    match code {
        404 => BackendError::NotFound(msg),
        403 | 530 => BackendError::forbidden(msg, None),
        405 | 406 | 311 | 313 => BackendError::Refused(msg),
        // An operator closed the connection or the broker is shutting down: try again later.
        320 | 541 => BackendError::Unreachable(msg),
        // Memory or disk alarm, too many channels: the broker asks us to back off.
        506 => BackendError::Throttled {
            msg,
            retry_after: None,
        },
        _ => BackendError::Protocol(msg),
    }
}

/// Map an AMQP error on an open connection. `what` names the queue or action for the text.
pub fn amqp_error(e: &lapin::Error, what: &str) -> BackendError {
    match e.kind() {
        ErrorKind::ProtocolError(p) => map_reply(p.get_id(), what, p.get_message().as_str()),
        ErrorKind::IOError(_) | ErrorKind::MissingHeartbeatError => {
            BackendError::Unreachable(format!("{what}: {}", one_line(&e.to_string())))
        }
        ErrorKind::InvalidChannelState(..) | ErrorKind::InvalidConnectionState(_) => {
            BackendError::Unreachable(format!(
                "{what}: the connection or channel closed ({})",
                one_line(&e.to_string())
            ))
        }
        _ => BackendError::Protocol(format!("{what}: {}", one_line(&e.to_string()))),
    }
}

/// As `amqp_error`, naming the permission a refused operation needs (RabbitMQ checks
/// configure/write/read per resource; `right` is e.g. "read on queue q in vhost /").
pub fn amqp_error_needing(e: &lapin::Error, what: &str, right: &str) -> BackendError {
    match amqp_error(e, what) {
        BackendError::Forbidden { msg, .. } => BackendError::Forbidden {
            msg,
            right: Some(format!("{right} (rabbitmqctl set_permissions)")),
        },
        other => other,
    }
}
