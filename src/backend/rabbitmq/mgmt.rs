//! The HTTP management API client: Basic auth, paginated GETs, one line errors.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::backend::{ApiCalls, BackendError, Result};
use crate::config::redact::redact;

use super::conn::Creds;

pub const PAGE_SIZE: u32 = 500;
/// Pages fetched at once after the first.
const PAGE_CONCURRENCY: usize = 4;

pub struct Mgmt {
    http: reqwest::Client,
    base: String,
    user: String,
    password: String,
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
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| BackendError::Other(format!("HTTP client: {}", redact(&e.to_string()))))?;
        Ok(Mgmt {
            http,
            base: creds.mgmt_base.clone(),
            user: creds.username.clone(),
            password: creds.password.clone(),
            calls,
            auth_failed: std::sync::Mutex::new(None),
        })
    }

    fn map_send_error(&self, e: &reqwest::Error) -> BackendError {
        if e.is_timeout() {
            BackendError::Unreachable(format!(
                "management API at {} timed out",
                redact(&self.base)
            ))
        } else if e.is_connect() {
            BackendError::Unreachable(format!(
                "management API at {} is not reachable: is the rabbitmq_management plugin enabled? (rabbitmq-plugins enable rabbitmq_management)",
                redact(&self.base)
            ))
        } else {
            BackendError::Unreachable(format!(
                "management API at {}: {}",
                redact(&self.base),
                redact(&e.to_string())
            ))
        }
    }

    fn status_error(&self, status: StatusCode, path: &str, body: &str) -> BackendError {
        let reason: String = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_string))
            .unwrap_or_default();
        let reason = redact(&reason.replace(['\n', '\r'], " "));
        match status {
            StatusCode::UNAUTHORIZED => BackendError::Auth(format!(
                "management API at {} rejected user '{}' (wrong username or password?)",
                redact(&self.base),
                self.user
            )),
            StatusCode::FORBIDDEN => BackendError::Auth(format!(
                "user '{}' may not use {path} (needs the management/monitoring tag or vhost access): {reason}",
                self.user
            )),
            StatusCode::NOT_FOUND => BackendError::NotFound(format!("{path}: not found {reason}")),
            s if s.is_server_error() => {
                BackendError::Unreachable(format!("management API {path}: HTTP {s} {reason}"))
            }
            s => BackendError::Other(format!("management API {path}: HTTP {s} {reason}")),
        }
    }

    /// Send one request; `op` names it in the API call counter.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<String> {
        if let Some((at, e)) = &*self.auth_failed.lock().unwrap_or_else(|e| e.into_inner()) {
            if at.elapsed() < super::conn::AUTH_MEMO {
                return Err(e.clone());
            }
        }
        self.calls
            .bump(&format!("mgmt:{} {}", method, op_name(path)));
        let mut rb = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .basic_auth(&self.user, Some(&self.password));
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let resp = rb.send().await.map_err(|e| self.map_send_error(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.map_send_error(&e))?;
        if !status.is_success() {
            let err = self.status_error(status, path, &text);
            if status == StatusCode::UNAUTHORIZED {
                *self.auth_failed.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((std::time::Instant::now(), err.clone()));
            }
            return Err(err);
        }
        Ok(text)
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let text = self.send(reqwest::Method::GET, path, None).await?;
        serde_json::from_str(&text).map_err(|e| {
            BackendError::Other(format!("management API {path}: unexpected answer ({e})"))
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
