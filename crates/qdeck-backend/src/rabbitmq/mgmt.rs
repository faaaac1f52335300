//! The HTTP management API client: Basic auth, paginated GETs, one line errors.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::{ApiCalls, BackendError, Result};
use qdeck_model::config::redact::redact;
use qdeck_model::config::secret::Secret;

use super::conn::{one_line, Creds};

pub const PAGE_SIZE: u32 = 500;
/// Beyond this many pages the rest comes in one unpaginated request: RabbitMQ builds and
/// sorts the whole listing for every page, so 40 pages of a 20,000-queue vhost cost 40 full
/// listings (measured 2.8× a plain `curl /api/queues`).
const MAX_PAGES: u32 = 4;
/// An unpaginated listing of a big vhost takes longer than one page.
const LONG_TIMEOUT: Duration = Duration::from_secs(120);
/// Pages fetched at once after the first.
const PAGE_CONCURRENCY: usize = 4;

pub struct Mgmt {
    http: reqwest::Client,
    base: String,
    user: String,
    password: Secret,
    calls: Arc<ApiCalls>,
    /// A 401, remembered for a while (see `conn::AUTH_MEMO`).
    auth_failed: std::sync::Mutex<Option<(std::time::Instant, BackendError)>>,
}

#[derive(Debug, Deserialize)]
struct Paged<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
    #[serde(default)]
    page_count: u32,
}

pub fn enc(s: &str) -> String {
    urlencoding::encode(s).into_owned()
}

impl Mgmt {
    pub fn new(creds: &Creds, calls: Arc<ApiCalls>) -> Result<Mgmt> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| {
                BackendError::Other(format!("HTTP client: {}", one_line(&e.to_string())))
            })?;
        Ok(Mgmt {
            http,
            base: creds.mgmt_base.clone(),
            user: creds.username.clone(),
            password: creds.password.clone(),
            calls,
            auth_failed: std::sync::Mutex::new(None),
        })
    }

    /// The cause as it happened (`connection refused at …`): a refused connection says
    /// nothing about the plugin, so no plugin hint here (a 404 on `/api` gets it).
    fn map_send_error(&self, e: &reqwest::Error) -> BackendError {
        BackendError::Unreachable(format!(
            "management API at {}: {}",
            redact(&self.base),
            crate::net_error::cause(e)
        ))
    }

    fn status_error(&self, status: StatusCode, path: &str, body: &str) -> BackendError {
        let reason: String = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string))
            .unwrap_or_default();
        let reason = one_line(&reason);
        let base = one_line(&self.base);
        let user = one_line(&self.user);
        let path = one_line(path.split('?').next().unwrap_or(path));
        match status {
            StatusCode::UNAUTHORIZED => BackendError::Auth(format!(
                "management API at {base} rejected the login of user '{user}' (HTTP 401: wrong username or password)"
            )),
            StatusCode::FORBIDDEN => BackendError::forbidden(
                format!("user '{user}' may not use {path} (HTTP 403) {reason}"),
                Some(right_for(&path)),
            ),
            // Every management path starts `/api/`: a 404 on the API itself (not on a
            // queue or vhost under it) means something else answers on that port.
            StatusCode::NOT_FOUND if reason.is_empty() => BackendError::NotFound(format!(
                "{path}: not found (HTTP 404) at {base}: is this the RabbitMQ management API? (rabbitmq-plugins enable rabbitmq_management)"
            )),
            StatusCode::NOT_FOUND => BackendError::NotFound(format!("{path}: not found (HTTP 404) {reason}")),
            StatusCode::TOO_MANY_REQUESTS => BackendError::Throttled {
                msg: format!("management API {path}: HTTP 429 {reason}"),
                retry_after: None,
            },
            s if s.is_server_error() => {
                BackendError::Unreachable(format!("management API {path}: HTTP {s} {reason}"))
            }
            s => BackendError::Protocol(format!("management API {path}: HTTP {s} {reason}")),
        }
    }

    /// RabbitMQ answers 401 both to a failed login and to a user without access to the
    /// vhost a path names. The login alone is checked with `/api/whoami`.
    async fn unauthorized(&self, path: &str, body: &str) -> BackendError {
        let whoami = self
            .http
            .get(format!("{}/api/whoami", self.base))
            .basic_auth(&self.user, Some(self.password.expose()))
            .send()
            .await;
        self.calls.bump("mgmt:GET /api/whoami");
        match whoami {
            Ok(r) if r.status().is_success() => {
                let p = one_line(path.split('?').next().unwrap_or(path));
                let vhost = vhost_of(path).unwrap_or_else(|| "/".into());
                BackendError::forbidden(
                    format!(
                        "user '{}' logged in but may not use {p} (HTTP 401 on a vhost resource)",
                        one_line(&self.user)
                    ),
                    Some(&format!(
                        "access to vhost {} (rabbitmqctl set_permissions) or the monitoring tag",
                        one_line(&vhost)
                    )),
                )
            }
            _ => self.status_error(StatusCode::UNAUTHORIZED, path, body),
        }
    }

    /// Send one request; `op` names it in the API call counter.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<String> {
        self.send_within(method, path, body, None).await
    }

    async fn send_within(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Option<Duration>,
    ) -> Result<String> {
        if let Some((at, e)) = &*self
            .auth_failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            if at.elapsed() < super::conn::AUTH_MEMO {
                return Err(e.clone());
            }
        }
        self.calls
            .bump(&format!("mgmt:{} {}", method, op_name(path)));
        let mut rb = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .basic_auth(&self.user, Some(self.password.expose()));
        if let Some(b) = body {
            rb = rb.json(b);
        }
        if let Some(t) = timeout {
            rb = rb.timeout(t);
        }
        let resp = rb.send().await.map_err(|e| self.map_send_error(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.map_send_error(&e))?;
        if !status.is_success() {
            let err = if status == StatusCode::UNAUTHORIZED {
                self.unauthorized(path, &text).await
            } else {
                self.status_error(status, path, &text)
            };
            if matches!(err, BackendError::Auth(_)) {
                *self
                    .auth_failed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((std::time::Instant::now(), err.clone()));
            }
            return Err(err);
        }
        Ok(text)
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.get_within(path, None).await
    }

    async fn get_within<T: DeserializeOwned>(
        &self,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<T> {
        let text = self
            .send_within(reqwest::Method::GET, path, None, timeout)
            .await?;
        serde_json::from_str(&text).map_err(|e| {
            BackendError::Protocol(format!(
                "management API {}: unexpected answer ({})",
                one_line(path),
                one_line(&e.to_string())
            ))
        })
    }

    /// Every page of a paginated listing: the first page says how many there are, the rest
    /// are fetched a few at a time. `query` is the part after `?` without paging.
    pub async fn get_all_pages<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &str,
    ) -> Result<Vec<T>> {
        let sep = if query.is_empty() { "" } else { "&" };
        let url = |page: u32| {
            format!("{path}?page={page}&page_size={PAGE_SIZE}&pagination=true{sep}{query}")
        };
        let first: Paged<T> = self.get(&url(1)).await?;
        if first.page_count > MAX_PAGES {
            let whole = if query.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{query}")
            };
            return self.get_within(&whole, Some(LONG_TIMEOUT)).await;
        }
        let mut out = first.items;
        if first.page_count > 1 {
            let pages: Vec<Result<Paged<T>>> = futures::stream::iter(2..=first.page_count)
                .map(|p| {
                    let u = url(p);
                    async move { self.get::<Paged<T>>(&u).await }
                })
                .buffered(PAGE_CONCURRENCY)
                .collect()
                .await;
            for p in pages {
                out.extend(p?.items);
            }
        }
        Ok(out)
    }
}

/// Path without vhost/queue parts for the call counter ("/api/queues", "/api/consumers").
fn op_name(path: &str) -> String {
    let p = path.split('?').next().unwrap_or(path);
    let mut parts = p.split('/').filter(|s| !s.is_empty());
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => format!("/{a}/{b}"),
        _ => p.to_string(),
    }
}

/// The tag a management path needs when RabbitMQ answers 403.
fn right_for(path: &str) -> &'static str {
    let p = path.trim_start_matches("/api/");
    if p.starts_with("parameters") || p.starts_with("policies") || p.starts_with("shovels") {
        "the policymaker tag"
    } else if p.starts_with("users") || p.starts_with("permissions") || p.starts_with("vhosts") {
        "the administrator tag"
    } else {
        "the monitoring or management tag"
    }
}

/// The vhost a vhost-scoped path names (`/api/queues/%2F/q` → `/`).
fn vhost_of(path: &str) -> Option<String> {
    let p = path.split('?').next().unwrap_or(path);
    let seg = p.trim_start_matches("/api/").split('/').nth(1)?;
    if seg.is_empty() {
        return None;
    }
    urlencoding::decode(seg)
        .ok()
        .map(std::borrow::Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vhost_and_right_from_paths() {
        assert_eq!(
            vhost_of("/api/queues/%2F/q?columns=x").as_deref(),
            Some("/")
        );
        assert_eq!(vhost_of("/api/consumers/orders").as_deref(), Some("orders"));
        assert_eq!(vhost_of("/api/queues"), None);
        assert_eq!(
            right_for("/api/parameters/shovel/%2F/x"),
            "the policymaker tag"
        );
        assert_eq!(
            right_for("/api/queues/%2F/q"),
            "the monitoring or management tag"
        );
    }
}
