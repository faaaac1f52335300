//! The gRPC connection to Pub/Sub: one lazily connected tonic channel, a bearer token from
//! Application Default Credentials on each call (none with an emulator), and Google's status
//! codes mapped to qdeck's errors in one line.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};

use crate::{ApiCalls, BackendError, Result};

/// Google's Pub/Sub endpoint.
pub const GOOGLE_PUBSUB: &str = "https://pubsub.googleapis.com";
/// The scope Pub/Sub calls need; Monitoring reads need `MONITORING_SCOPE`.
pub const PUBSUB_SCOPE: &str = "https://www.googleapis.com/auth/pubsub";
pub const MONITORING_SCOPE: &str = "https://www.googleapis.com/auth/monitoring.read";

/// Where tokens come from: nowhere (an emulator), or Application Default Credentials,
/// discovered on first use.
pub enum Auth {
    Emulator,
    Adc {
        /// A credentials file named by the profile (`credentials_file`) or by
        /// `GOOGLE_APPLICATION_CREDENTIALS`, with which of the two named it; `None`: the gcloud
        /// ADC file, then the metadata server, then gcloud.
        file: Option<(PathBuf, &'static str)>,
        source: Box<OnceCell<Source>>,
    },
}

pub enum Source {
    Gcp(Arc<dyn gcp_auth::TokenProvider>),
    /// Workload identity federation, which `gcp_auth` does not read.
    External(Box<super::external_account::ExternalAccount>),
}

impl Auth {
    pub fn adc(file: Option<(PathBuf, &'static str)>) -> Auth {
        Auth::Adc {
            file,
            source: Box::new(OnceCell::new()),
        }
    }

    /// A bearer token for `scope`, or `None` with an emulator.
    pub async fn token(&self, scope: &str) -> Result<Option<String>> {
        let Auth::Adc { file, source } = self else {
            return Ok(None);
        };
        let source = source.get_or_try_init(|| resolve(file.as_ref())).await?;
        match source {
            Source::External(x) => Ok(Some(x.token(scope).await?)),
            Source::Gcp(provider) => {
                let token = provider.token(&[scope]).await.map_err(|e| {
                    BackendError::Auth(format!(
                        "the token endpoint refused the credentials ({})",
                        one_line(&e.to_string())
                    ))
                })?;
                Ok(Some(token.as_str().to_string()))
            }
        }
    }
}

/// The token source: a named file by its `type` (a service-account key through `gcp_auth`,
/// an `external_account` through qdeck's own exchange), else `gcp_auth`'s discovery.
async fn resolve(file: Option<&(PathBuf, &'static str)>) -> Result<Source> {
    let Some((path, named_by)) = file else {
        let provider = gcp_auth::provider().await.map_err(|e| {
            BackendError::Auth(format!(
                "Application Default Credentials: {} (looked at GOOGLE_APPLICATION_CREDENTIALS, then the gcloud ADC file, the metadata server and gcloud)",
                one_line(&e.to_string())
            ))
        })?;
        return Ok(Source::Gcp(provider));
    };
    let bad = |why: String| {
        BackendError::Auth(format!(
            "credentials file {} (named by {named_by}): {}",
            path.display(),
            one_line(&why)
        ))
    };
    let json = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let kind = serde_json::from_str::<serde_json::Value>(&json)
        .map_err(|e| bad(format!("not JSON ({e})")))?
        .get("type")
        .and_then(|t| t.as_str().map(str::to_string));
    match kind.as_deref() {
        Some("external_account") => Ok(Source::External(Box::new(
            super::external_account::ExternalAccount::from_json(&json, path)?,
        ))),
        Some("service_account") => gcp_auth::CustomServiceAccount::from_json(&json)
            .map(|sa| Source::Gcp(Arc::new(sa)))
            .map_err(|e| bad(e.to_string())),
        Some(other) => Err(bad(format!(
            "type {other:?} is not read here: give a service-account key or an external_account (workload identity federation) file, or leave it unset for the gcloud ADC file and the metadata server"
        ))),
        None => Err(bad("no \"type\": not a Google credentials file".into())),
    }
}

/// Google's service at `url` (a regional or Private Service Connect endpoint), with TLS; plain
/// HTTP only on loopback, since every call carries a token.
fn google_endpoint(url: &str) -> Result<(Endpoint, String)> {
    let url = url.trim().trim_end_matches('/');
    let bad = |why: &str| BackendError::Invalid(format!("endpoint {url:?}: {why}"));
    let (plain, rest) = match url.split_once("://") {
        Some(("https", rest)) => (false, rest),
        Some(("http", rest)) => (true, rest),
        _ => return Err(bad("give https://HOST[:PORT]")),
    };
    let host = rest.to_string();
    let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
    let loopback = matches!(name, "localhost" | "127.0.0.1" | "[::1]");
    if plain && !loopback {
        return Err(bad(
            "plain http would send Google tokens in clear; use https (plain http is for loopback only)",
        ));
    }
    let ep = Endpoint::from_shared(url.to_string()).map_err(|e| bad(&e.to_string()))?;
    let ep = if plain {
        ep
    } else {
        ep.tls_config(ClientTlsConfig::new().with_webpki_roots())
            .map_err(|e| BackendError::Other(format!("TLS for Pub/Sub: {e}")))?
    };
    Ok((ep, host))
}

fn one_line(s: &str) -> String {
    qdeck_model::sanitize::clean_short(&qdeck_model::config::redact::redact(s), 240)
}

pub struct Conn {
    channel: Channel,
    pub auth: Arc<Auth>,
    pub calls: Arc<ApiCalls>,
    /// The host, for messages ("Pub/Sub at 127.0.0.1:8085").
    pub host: String,
}

impl Conn {
    /// A channel to `emulator_host` (plain HTTP/2, no credentials) or to Google (TLS, ADC).
    /// No network until the first call.
    pub fn new(
        emulator_host: Option<&str>,
        endpoint: Option<&str>,
        credentials: Option<(PathBuf, &'static str)>,
        calls: Arc<ApiCalls>,
    ) -> Result<Conn> {
        crate::tls::install_provider();
        let (endpoint, auth, host) = match emulator_host {
            Some(h) => {
                let h = h.trim().trim_start_matches("http://");
                let ep = Endpoint::from_shared(format!("http://{h}")).map_err(|e| {
                    BackendError::Invalid(format!("emulator_host {h:?} is not host:port: {e}"))
                })?;
                (ep, Auth::Emulator, h.to_string())
            }
            None => {
                let (ep, host) = google_endpoint(endpoint.unwrap_or(GOOGLE_PUBSUB))?;
                (ep, Auth::adc(credentials), host)
            }
        };
        let channel = endpoint
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .connect_lazy();
        Ok(Conn {
            channel,
            auth: Arc::new(auth),
            calls,
            host,
        })
    }

    /// One unary call of `google.pubsub.v1.{service}/{method}`, counted as `pubsub:{method}`.
    pub async fn unary<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        req: Req,
        timeout: Option<Duration>,
    ) -> Result<Resp>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.unary_or_status(service, method, req, timeout)
            .await?
            .map_err(|s| self.status(method, &s))
    }

    /// `unary`, handing back the status Pub/Sub answered with as it is, for a caller that
    /// judges a code itself (a Pull's deadline is an empty answer, not a failure); failures
    /// before the call (token, channel) are errors already.
    pub async fn unary_or_status<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        req: Req,
        timeout: Option<Duration>,
    ) -> Result<std::result::Result<Resp, Status>>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.calls.bump(&format!("pubsub:{method}"));
        let mut request = tonic::Request::new(req);
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        if let Some(token) = self.auth.token(PUBSUB_SCOPE).await? {
            let value = format!("Bearer {token}")
                .parse()
                .map_err(|_| BackendError::Auth("the access token is not a valid header".into()))?;
            request.metadata_mut().insert("authorization", value);
        }
        let path = PathAndQuery::try_from(format!("/google.pubsub.v1.{service}/{method}"))
            .map_err(|e| BackendError::Other(format!("gRPC path: {e}")))?;
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| self.unreachable(&transport_cause(&e)))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        Ok(grpc
            .unary(request, path, codec)
            .await
            .map(tonic::Response::into_inner))
    }

    fn unreachable(&self, why: &str) -> BackendError {
        BackendError::Unreachable(format!("Pub/Sub at {}: {why}", self.host))
    }

    /// Google's status for `method`, as one line naming what to do where that is known.
    pub fn status(&self, method: &str, s: &Status) -> BackendError {
        let msg = one_line(s.message());
        match s.code() {
            Code::Unavailable | Code::Unknown if looks_like_transport(s) => {
                self.unreachable(&transport_words(s))
            }
            Code::Unavailable => self.unreachable(&msg),
            Code::DeadlineExceeded => self.unreachable(&format!("{method} timed out")),
            Code::Unauthenticated => BackendError::Auth(format!("{method}: {msg}")),
            Code::PermissionDenied => BackendError::Forbidden {
                msg: format!("{method} denied: {msg}"),
                right: Some(permission_for(method).to_string()),
            },
            Code::NotFound => BackendError::NotFound(format!("{method}: not found: {msg}")),
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                BackendError::Invalid(format!("{method}: {msg}"))
            }
            Code::ResourceExhausted => BackendError::Throttled {
                msg: format!("{method}: {msg}"),
                retry_after: None,
            },
            Code::Unimplemented => BackendError::Unsupported(format!(
                "{method} is not implemented by {}: {msg}",
                self.host
            )),
            code => BackendError::Other(format!("{method}: {code:?}: {msg}")),
        }
    }
}

/// The IAM permission a Pub/Sub method needs, for a `PermissionDenied`.
pub fn permission_for(method: &str) -> &'static str {
    match method {
        "Pull" | "Acknowledge" | "ModifyAckDeadline" => "pubsub.subscriptions.consume",
        "Seek" => "pubsub.subscriptions.consume (and pubsub.topics.attachSubscription)",
        "ListSubscriptions" => "pubsub.subscriptions.list",
        "GetSubscription" => "pubsub.subscriptions.get",
        "ListTopics" => "pubsub.topics.list",
        "ListTopicSubscriptions" => "pubsub.topics.get",
        "Publish" => "pubsub.topics.publish",
        _ => "a Pub/Sub role on the project",
    }
}

/// A status tonic made from a local failure (the channel, the connection) carries that
/// failure as its source; one the server sent has none.
fn looks_like_transport(s: &Status) -> bool {
    std::error::Error::source(s).is_some()
}

/// A refused or timed-out connection in a few words, from the error's causes.
fn transport_words(s: &Status) -> String {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(s);
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                std::io::ErrorKind::TimedOut => "timed out".into(),
                k => format!("{k}"),
            };
        }
        if e.is::<tonic::TimeoutExpired>() || e.is::<tokio::time::error::Elapsed>() {
            return "timed out".into();
        }
        src = e.source();
    }
    one_line(s.message())
}

fn transport_cause(e: &tonic::transport::Error) -> String {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(x) = src {
        if let Some(io) = x.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                k => format!("{k}"),
            };
        }
        src = x.source();
    }
    one_line(&e.to_string())
}
