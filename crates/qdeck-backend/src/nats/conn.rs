//! One lazily opened NATS connection and the JetStream API over it. JetStream's API is JSON
//! request/reply on `$JS.API.<op>` (`$JS.<domain>.API.<op>` with a domain), so qdeck speaks it
//! directly: every call is counted, and every answer's `error` object becomes a
//! `BackendError` by its code, never by its wording.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, ConnectErrorKind, ConnectOptions, HeaderMap, RequestErrorKind};
use serde_json::Value as Json;
use tokio::sync::OnceCell;

use crate::{ApiCalls, BackendError, Result};
use qdeck_model::config::secret::{url_has_password, Secret, SecretSource};
use qdeck_model::config::NatsSettings;

/// How long a connect and one API request may take before the broker counts as unreachable.
const TIMEOUT: Duration = Duration::from_secs(5);

enum Auth {
    None,
    /// User, password, and the variable that held it.
    UserPassword(String, Secret, String),
    Token(Secret, String),
    Nkey(Secret, String),
    CredsFile(PathBuf),
}

impl Auth {
    /// Which credentials these are, for an error that says what the server refused (never
    /// the secret: the variable that holds it).
    fn describe(&self) -> String {
        match self {
            Auth::None => "no credentials (the server wants some)".into(),
            Auth::UserPassword(u, _, var) => format!(
                "user {:?} with the password in {var}",
                qdeck_model::sanitize::clean_short(u, 60)
            ),
            Auth::Token(_, var) => format!("the token in {var}"),
            Auth::Nkey(_, var) => format!("the nkey seed in {var}"),
            Auth::CredsFile(p) => format!("creds_file {}", p.display()),
        }
    }
}

pub struct Conn {
    /// The profile's URL (never with a password), or the whole of `url_env`'s variable.
    url: Secret,
    auth: Auth,
    tls: bool,
    ca_file: Option<PathBuf>,
    /// `$JS.API` or `$JS.<domain>.API`.
    api_prefix: String,
    /// Servers for messages, without user info.
    pub display: String,
    cell: OnceCell<Client>,
    pub calls: Arc<ApiCalls>,
}

/// `nats://user:pw@host:4222,nats://h2` → `nats://host:4222,nats://h2`.
fn without_userinfo(urls: &str) -> String {
    urls.split(',')
        .map(|u| {
            let u = u.trim();
            match u.split_once("://") {
                Some((scheme, rest)) => {
                    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                    format!("{scheme}://{host}")
                }
                None => u.rsplit_once('@').map_or(u, |(_, h)| h).to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Conn {
    pub fn from_settings(
        profile: &str,
        s: &NatsSettings,
        secrets: &dyn SecretSource,
        calls: Arc<ApiCalls>,
    ) -> Result<Conn> {
        let url = match (&s.url_env, &s.url) {
            (Some(var), _) => secrets.require(profile, "url_env", var)?,
            (None, Some(u)) => Secret::new(u.clone()),
            (None, None) => Secret::new("nats://127.0.0.1:4222"),
        };
        if s.url_env.is_none() && url.expose().split(',').any(url_has_password) {
            return Err(BackendError::Invalid(
                "the profile's url carries a password: name it with password_env (or put the whole URL in url_env)".into(),
            ));
        }
        let mut auth = Auth::None;
        let mut set = |a: Auth, key: &str| -> Result<()> {
            if !matches!(auth, Auth::None) {
                return Err(BackendError::Invalid(format!(
                    "{key}: give one of password_env, token_env, nkey_seed_env and creds_file"
                )));
            }
            auth = a;
            Ok(())
        };
        if let Some(var) = &s.password_env {
            let user = s
                .username
                .clone()
                .ok_or_else(|| BackendError::Invalid("password_env needs username".into()))?;
            set(
                Auth::UserPassword(
                    user,
                    secrets.require(profile, "password_env", var)?,
                    var.clone(),
                ),
                "password_env",
            )?;
        }
        if let Some(var) = &s.token_env {
            set(
                Auth::Token(secrets.require(profile, "token_env", var)?, var.clone()),
                "token_env",
            )?;
        }
        if let Some(var) = &s.nkey_seed_env {
            set(
                Auth::Nkey(secrets.require(profile, "nkey_seed_env", var)?, var.clone()),
                "nkey_seed_env",
            )?;
        }
        if let Some(path) = &s.creds_file {
            set(
                Auth::CredsFile(qdeck_model::config::paths::expand_home(path)),
                "creds_file",
            )?;
        }
        let tls = s.tls.unwrap_or(false)
            || url
                .expose()
                .split(',')
                .any(|u| u.trim().starts_with("tls://"));
        if tls {
            crate::tls::install_provider();
        }
        let api_prefix = match s.domain.as_deref().map(str::trim) {
            None | Some("") => "$JS.API".to_string(),
            Some(d) if d.contains(['.', '*', '>', ' ']) => {
                return Err(BackendError::Invalid(format!(
                    "domain {:?} may not contain '.', '*', '>' or spaces",
                    qdeck_model::sanitize::clean_short(d, 40)
                )))
            }
            Some(d) => format!("$JS.{d}.API"),
        };
        Ok(Conn {
            display: without_userinfo(url.expose()),
            url,
            auth,
            tls,
            ca_file: s
                .tls_ca_file
                .as_deref()
                .map(qdeck_model::config::paths::expand_home),
            api_prefix,
            cell: OnceCell::new(),
            calls,
        })
    }

    /// The options the client connects with: the one place credentials leave their `Secret`.
    async fn options(&self) -> Result<ConnectOptions> {
        let mut o =
            match &self.auth {
                Auth::None => ConnectOptions::new(),
                Auth::UserPassword(u, p, _) => {
                    ConnectOptions::with_user_and_password(u.clone(), p.expose().to_string())
                }
                Auth::Token(t, _) => ConnectOptions::with_token(t.expose().to_string()),
                Auth::Nkey(seed, _) => ConnectOptions::with_nkey(seed.expose().trim().to_string()),
                Auth::CredsFile(path) => ConnectOptions::with_credentials_file(path)
                    .await
                    .map_err(|e| {
                        BackendError::Invalid(format!(
                            "creds_file {}: {}",
                            path.display(),
                            qdeck_model::sanitize::clean_short(&e.to_string(), 120)
                        ))
                    })?,
            };
        o = o
            .name("qdeck")
            .connection_timeout(TIMEOUT)
            .request_timeout(Some(TIMEOUT))
            .require_tls(self.tls);
        if let Some(ca) = &self.ca_file {
            o = o.add_root_certificates(ca.clone());
        }
        Ok(o)
    }

    pub async fn client(&self) -> Result<Client> {
        let c = self
            .cell
            .get_or_try_init(|| async {
                let servers: Vec<String> = self
                    .url
                    .expose()
                    .split(',')
                    .map(|u| u.trim().to_string())
                    .collect();
                let addrs = servers
                    .iter()
                    .map(|u| u.parse::<async_nats::ServerAddr>())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|_| {
                        BackendError::Invalid(format!("url {} is not a NATS URL", self.display))
                    })?;
                self.calls.bump("nats:CONNECT");
                self.options().await?.connect(addrs).await.map_err(|e| {
                    connect_error(&self.display, &self.auth, self.ca_file.as_deref(), &e)
                })
            })
            .await?;
        Ok(c.clone())
    }

    /// The full subject of JetStream API operation `op` (`STREAM.LIST`, `CONSUMER.INFO.S.C`).
    pub fn api_subject(&self, op: &str) -> String {
        format!("{}.{op}", self.api_prefix)
    }

    /// Call JetStream API operation `op` with a JSON body; its answer, or the error it holds.
    pub async fn api(&self, op: &str, body: &Json) -> Result<Json> {
        self.api_coded(op, body).await?.map_err(|e| api_error(&e))
    }

    /// As `api`, with an answer's JetStream error kept whole (`err_code` included) for the
    /// callers that tell one error from another by its code.
    pub async fn api_coded(
        &self,
        op: &str,
        body: &Json,
    ) -> Result<std::result::Result<Json, Json>> {
        let msg = self.api_raw(op, body).await?;
        let v: Json = serde_json::from_slice(&msg.payload).map_err(|e| {
            BackendError::Protocol(format!("JetStream answer to {op} is not JSON: {e}"))
        })?;
        Ok(match v.get("error") {
            Some(err) => Err(err.clone()),
            None => Ok(v),
        })
    }

    /// The answer as it came, for callers that parse it straight into their own types (a
    /// list page of 256 consumers is parsed once, not through a `Value` first).
    pub async fn api_raw(&self, op: &str, body: &Json) -> Result<async_nats::Message> {
        let client = self.client().await?;
        let payload = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).map_err(|e| BackendError::Other(e.to_string()))?
        };
        let name = op.split('.').take(2).collect::<Vec<_>>().join(".");
        self.calls.bump(&format!("nats:{name}"));
        client
            .request(self.api_subject(op), payload.into())
            .await
            .map_err(|e| request_error(&self.display, op, e.kind()))
    }

    /// Publish with headers and wait for the stream's PubAck; its JSON.
    pub async fn publish_acked(
        &self,
        subject: String,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Json> {
        let client = self.client().await?;
        self.calls.bump("nats:PUBLISH");
        let msg = client
            .request_with_headers(subject, headers, body.into())
            .await
            .map_err(|e| match e.kind() {
                RequestErrorKind::NoResponders => BackendError::NotFound(
                    "no stream takes this subject any more (no PubAck responder)".into(),
                ),
                k => request_error(&self.display, "publish", k),
            })?;
        parse_answer(&msg.payload)
    }
}

/// A JetStream answer: the JSON, or its `error` object as a `BackendError`.
pub fn parse_answer(payload: &[u8]) -> Result<Json> {
    let v: Json = serde_json::from_slice(payload)
        .map_err(|e| BackendError::Protocol(format!("JetStream answer is not JSON: {e}")))?;
    match v.get("error") {
        Some(err) => Err(api_error(err)),
        None => Ok(v),
    }
}

/// JetStream error codes qdeck tells apart (nats-server's errors.json).
pub const ERR_NO_MESSAGE: u64 = 10037;
pub const ERR_MSG_DELETE_FAILED: u64 = 10057;
pub const ERR_SEQUENCE_NOT_FOUND: u64 = 10043;

pub fn err_code(err: &Json) -> u64 {
    err.get("err_code").and_then(Json::as_u64).unwrap_or(0)
}

/// JetStream's `{"code", "err_code", "description"}` by code.
pub fn api_error(err: &Json) -> BackendError {
    let code = err.get("code").and_then(Json::as_u64).unwrap_or(0);
    let err_code = err.get("err_code").and_then(Json::as_u64).unwrap_or(0);
    let text = qdeck_model::sanitize::clean_short(
        err.get("description")
            .and_then(Json::as_str)
            .unwrap_or("JetStream error"),
        200,
    );
    match (code, err_code) {
        // JetStream not enabled (for the account).
        (_, 10039 | 10076) | (503, _) => BackendError::Unsupported(format!(
            "{text}: JetStream is not enabled on this server or for this account"
        )),
        (404, _) => BackendError::NotFound(text),
        (401 | 403, _) => BackendError::forbidden(text, Some("the JetStream API subject")),
        (408, _) => BackendError::Unreachable(text),
        (400, _) => BackendError::Invalid(text),
        _ => BackendError::Other(format!("{text} (JetStream error {err_code})")),
    }
}

fn connect_error(
    display: &str,
    auth: &Auth,
    ca_file: Option<&std::path::Path>,
    e: &async_nats::ConnectError,
) -> BackendError {
    let what = format!("cannot connect to NATS at {display}");
    match e.kind() {
        ConnectErrorKind::AuthorizationViolation => BackendError::Auth(format!(
            "NATS at {display} refused {} (authorization violation)",
            auth.describe()
        )),
        ConnectErrorKind::Authentication => BackendError::Auth(format!(
            "NATS at {display}: {} could not be used: {}",
            auth.describe(),
            qdeck_model::sanitize::clean_short(&e.to_string(), 120)
        )),
        ConnectErrorKind::ServerParse => {
            BackendError::Invalid(format!("url {display} is not a NATS URL"))
        }
        _ if tls_failed(e) => BackendError::Unreachable(format!(
            "{what}: TLS failed ({}){}",
            qdeck_model::sanitize::clean_short(&e.to_string(), 160),
            match ca_file {
                Some(ca) => format!(" with the CA in tls_ca_file {}", ca.display()),
                None => " with the system's CA roots (tls_ca_file names another CA)".into(),
            }
        )),
        ConnectErrorKind::TimedOut => {
            BackendError::Unreachable(format!("{what}: timed out after {}s", TIMEOUT.as_secs()))
        }
        _ => BackendError::Unreachable(format!(
            "{what}: {}",
            qdeck_model::sanitize::clean_short(&e.to_string(), 160)
        )),
    }
}

fn request_error(display: &str, op: &str, kind: RequestErrorKind) -> BackendError {
    match kind {
        RequestErrorKind::NoResponders => BackendError::Unsupported(format!(
            "NATS at {display} has no JetStream responder for {op}: JetStream is not enabled on this server or for this account (or the domain is wrong)"
        )),
        RequestErrorKind::TimedOut => BackendError::Unreachable(format!(
            "NATS at {display} did not answer {op} within {}s",
            TIMEOUT.as_secs()
        )),
        other => BackendError::Unreachable(format!("NATS at {display}: {op}: {other:?}")),
    }
}

/// Whether the TLS set-up or handshake failed: the kind says so for the set-up, while a
/// certificate the CA does not vouch for comes back as the handshake's I/O error, which
/// carries rustls's own error inside it.
fn tls_failed(e: &async_nats::ConnectError) -> bool {
    if e.kind() == ConnectErrorKind::Tls {
        return true;
    }
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let inner_is_tls = match s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => inner.is::<rustls::Error>(),
            None => false,
        };
        if inner_is_tls || s.is::<rustls::Error>() {
            return true;
        }
        src = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::SecretMap;

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            without_userinfo("nats://u:p@h1:4222, tls://h2:4443"),
            "nats://h1:4222,tls://h2:4443"
        );
    }

    #[test]
    fn one_kind_of_credentials_and_no_password_in_the_url() {
        let calls = Arc::new(ApiCalls::default());
        let s = NatsSettings {
            url: Some("nats://u:pw@h:4222".into()),
            ..Default::default()
        };
        let e = Conn::from_settings("p", &s, &SecretMap::new(), calls.clone())
            .err()
            .expect("refused");
        assert!(e.to_string().contains("carries a password"), "{e}");
        let s = NatsSettings {
            token_env: Some("T".into()),
            nkey_seed_env: Some("N".into()),
            ..Default::default()
        };
        let m = SecretMap::new().with("T", "tok").with("N", "SUSEED");
        let e = Conn::from_settings("p", &s, &m, calls.clone())
            .err()
            .expect("refused");
        assert!(e.to_string().contains("give one of"), "{e}");
        let s = NatsSettings {
            domain: Some("hub".into()),
            token_env: Some("T".into()),
            ..Default::default()
        };
        let c = Conn::from_settings("p", &s, &m, calls).expect("conn");
        assert_eq!(c.api_subject("STREAM.LIST"), "$JS.hub.API.STREAM.LIST");
    }

    #[test]
    fn api_errors_map_by_code() {
        let e = parse_answer(
            br#"{"error":{"code":404,"err_code":10059,"description":"stream not found"}}"#,
        )
        .unwrap_err();
        assert!(matches!(e, BackendError::NotFound(_)), "{e:?}");
        let e = parse_answer(
            br#"{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled for account"}}"#,
        )
        .unwrap_err();
        assert!(matches!(e, BackendError::Unsupported(_)), "{e:?}");
    }
}
