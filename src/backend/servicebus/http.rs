//! One small REST client for both the runtime and the management API: builds URLs on the
//! profile's endpoint, signs with a cached SAS token, counts every call, backs off on 429/503,
//! and maps failures to one-line, redacted `BackendError`s.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use reqwest::Method;

use super::connstr::{sas_token, unix_now, ConnInfo, Credential};
use crate::backend::{ApiCalls, BackendError, Result};
use crate::config::redact::redact;

const TOKEN_TTL_SECS: u64 = 3600;
const TOKEN_REFRESH_MARGIN_SECS: u64 = 300;
/// Attempts for one call when the broker throttles (429) or is busy (503).
const MAX_ATTEMPTS: u32 = 6;

pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

pub struct Rest {
    http: reqwest::Client,
    pub info: ConnInfo,
    token: Mutex<Option<(String, u64)>>,
    pub calls: ApiCalls,
}

/// Percent-encode each segment of an entity path, keeping `/` and `$` (`orders/$DeadLetterQueue`).
pub fn entity_url_path(entity: &str) -> String {
    entity
        .split('/')
        .map(|seg| urlencoding::encode(seg).replace("%24", "$"))
        .collect::<Vec<_>>()
        .join("/")
}

impl Rest {
    pub fn new(info: ConnInfo) -> Result<Rest> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(64)
            .build()
            .map_err(|e| BackendError::Other(redact(&format!("HTTP client: {e}"))))?;
        Ok(Rest {
            http,
            info,
            token: Mutex::new(None),
            calls: ApiCalls::default(),
        })
    }

    fn auth_header(&self) -> String {
        match &self.info.credential {
            Credential::Token(t) => t.clone(),
            Credential::Key { name, key } => {
                let now = unix_now();
                let mut g = self.token.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((tok, exp)) = g.as_ref() {
                    if *exp > now + TOKEN_REFRESH_MARGIN_SECS {
                        return tok.clone();
                    }
                }
                let exp = now + TOKEN_TTL_SECS;
                // One token for the whole namespace: Service Bus accepts a token whose `sr`
                // is a prefix of the entity URI.
                // An entity-scoped string (EntityPath) signs for that entity only.
                let resource = match &self.info.entity_path {
                    Some(e) => format!("{}{}", self.info.base, entity_url_path(e)),
                    None => self.info.base.clone(),
                };
                let tok = sas_token(&resource, name, key, exp);
                *g = Some((tok.clone(), exp));
                tok
            }
        }
    }

    /// Send one request (`path` is relative to the namespace, without a leading `/`), retrying
    /// with backoff while the broker answers 429 or 503. Any other status is returned as is.
    pub async fn call(
        &self,
        op: &str,
        method: Method,
        path: &str,
        headers: &[(HeaderName, HeaderValue)],
        body: Vec<u8>,
    ) -> Result<Resp> {
        let url = format!("{}{}", self.info.base, path.trim_start_matches('/'));
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.calls.bump(op);
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header(AUTHORIZATION, self.auth_header());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req = req.body(body.clone());
            let resp = req.send().await.map_err(|e| {
                let kind = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "cannot connect"
                } else {
                    "request failed"
                };
                // reqwest errors carry the URL only; no secrets, but redact anyway.
                BackendError::Unreachable(redact(&format!(
                    "{} ({kind}): {}",
                    self.info.host,
                    e.without_url()
                )))
            })?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp
                .bytes()
                .await
                .map_err(|e| {
                    BackendError::Unreachable(redact(&format!(
                        "{}: reading the answer: {}",
                        self.info.host,
                        e.without_url()
                    )))
                })?
                .to_vec();
            if (status == 429 || status == 503) && attempt < MAX_ATTEMPTS {
                let wait = retry_after(&headers).unwrap_or_else(|| {
                    Duration::from_millis(100u64.saturating_mul(1 << (attempt - 1)).min(5_000))
                });
                tokio::time::sleep(wait.max(Duration::from_millis(20))).await;
                continue;
            }
            return Ok(Resp {
                status,
                headers,
                body,
            });
        }
    }
}

fn retry_after(h: &HeaderMap) -> Option<Duration> {
    let v = h.get("retry-after")?.to_str().ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(60.0)))
}

/// The `<Detail>` text of an Azure error body, cleaned to one short, redacted line.
pub fn error_detail(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let inner = match (text.find("<Detail>"), text.find("</Detail>")) {
        (Some(a), Some(b)) if b > a => &text[a + 8..b],
        _ => text.as_ref(),
    };
    let one: String = inner
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    redact(one.trim())
}

/// Map a failed status to an error. `what` says what was being done ("sending to orders").
pub fn status_error(resp: &Resp, what: &str) -> BackendError {
    let detail = error_detail(&resp.body);
    let sep = if detail.is_empty() { "" } else { ": " };
    match resp.status {
        401 => BackendError::Auth(format!("{what}: HTTP 401{sep}{detail}")),
        403 => BackendError::Auth(format!(
            "{what}: HTTP 403 (forbidden or quota){sep}{detail}"
        )),
        404 | 410 => BackendError::NotFound(format!(
            "{what}: not found (HTTP {}){sep}{detail}",
            resp.status
        )),
        429 | 503 => BackendError::Throttled {
            msg: format!(
                "{what}: HTTP {} after {MAX_ATTEMPTS} attempts{sep}{detail}",
                resp.status
            ),
            retry_after: retry_after(&resp.headers),
        },
        400 => BackendError::Invalid(format!("{what}: HTTP 400{sep}{detail}")),
        s => BackendError::Other(format!("{what}: HTTP {s}{sep}{detail}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_paths_keep_dlq_suffix() {
        assert_eq!(
            entity_url_path("orders/$DeadLetterQueue"),
            "orders/$DeadLetterQueue"
        );
        assert_eq!(entity_url_path("a b/c"), "a%20b/c");
    }

    #[test]
    fn detail_is_one_redacted_line() {
        let b = b"<Error><Code>401</Code><Detail>InvalidSignature: bad\nsig=ABC. TrackingId:1</Detail></Error>";
        let d = error_detail(b);
        assert!(d.starts_with("InvalidSignature: bad sig=***"), "{d}");
    }
}
