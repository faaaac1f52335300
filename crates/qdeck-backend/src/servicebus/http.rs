//! One small REST client for both the runtime and the management API: builds URLs on the
//! profile's endpoint, signs with a cached SAS token, counts every call, backs off on 429/503,
//! and maps failures to one-line, redacted `BackendError`s.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use reqwest::Method;

use super::connstr::{sas_token, unix_now, ConnInfo, Credential};
use crate::{ApiCalls, BackendError, Result};
use qdeck_model::config::redact::redact;
use qdeck_model::config::secret::Secret;

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
    token: Mutex<Option<(Secret, u64)>>,
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
        crate::tls::install_provider();
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

    async fn auth_header(&self) -> Result<Secret> {
        Ok(match &self.info.credential {
            Credential::Token(t) => t.clone(),
            // The management API takes an Entra ID token as a bearer token.
            Credential::Entra(c) => {
                Secret::new(format!("Bearer {}", c.token().await?.token.expose()))
            }
            Credential::Key { name, key } => {
                let now = unix_now();
                let mut g = self
                    .token
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some((tok, exp)) = g.as_ref() {
                    let margin = super::token_life::refresh_margin(self.info.token_ttl_secs);
                    if *exp > now + margin {
                        return Ok(tok.clone());
                    }
                }
                let exp = now + self.info.token_ttl_secs;
                // One token for the whole namespace: Service Bus accepts a token whose `sr`
                // is a prefix of the entity URI.
                // An entity-scoped string (EntityPath) signs for that entity only.
                let resource = match &self.info.entity_path {
                    Some(e) => format!("{}{}", self.info.base, entity_url_path(e)),
                    None => self.info.base.clone(),
                };
                let tok = Secret::new(sas_token(&resource, name, key.expose(), exp));
                *g = Some((tok.clone(), exp));
                tok
            }
        })
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
            let auth = self.auth_header().await?;
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header(AUTHORIZATION, auth.expose());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req = req.body(body.clone());
            let resp = req.send().await.map_err(|e| {
                // reqwest errors carry the URL only; no secrets, but redact anyway.
                BackendError::Unreachable(redact(&format!(
                    "{}: {}",
                    self.info.host,
                    crate::net_error::cause(&e)
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

/// The `<Detail>` text of an Azure error body, cleaned to one short, redacted, terminal-safe
/// line.
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
    qdeck_model::sanitize::clean(&redact(one.trim())).into_owned()
}

/// The right a 401 names as missing. Azure answers both a bad token and a missing right with
/// 401; only the body tells them apart: "Unauthorized access. 'Listen' claim(s) are required
/// to perform this operation" (runtime) or "Manage,EntityRead claims required for this
/// operation" (management) name the claims, while "claim is empty or token is invalid",
/// "InvalidSignature: …" or "ExpiredToken: …" mean the token itself was rejected.
pub fn required_right(body: &[u8]) -> Option<&'static str> {
    let text = String::from_utf8_lossy(body).to_ascii_lowercase();
    for marker in [
        "claim(s) are required",
        "claims are required",
        "claims required",
        "claim is required",
        "claim required",
    ] {
        let Some(at) = text.find(marker) else {
            continue;
        };
        // The claim names sit just before the marker: `'Manage'`, `Manage,EntityRead`.
        let before = text[..at].trim_end();
        let names = before
            .rsplit([' ', '>', '.'])
            .next()
            .unwrap_or("")
            .trim_matches(|c| c == '\'' || c == '"');
        let listed: Vec<&str> = names
            .split(',')
            .map(|n| n.trim().trim_matches(|c| c == '\'' || c == '"'))
            .collect();
        for (right, key) in [("Manage", "manage"), ("Listen", "listen"), ("Send", "send")] {
            if listed.contains(&key) {
                return Some(right);
            }
        }
        return Some("Manage");
    }
    None
}

/// The leading Azure error code of a detail ("ExpiredToken", "InvalidSignature", "40103"),
/// when it has one.
fn detail_code(detail: &str) -> Option<&str> {
    let (head, _) = detail.split_once(':')?;
    let head = head.trim();
    (!head.is_empty() && head.len() <= 40 && head.chars().all(|c| c.is_ascii_alphanumeric()))
        .then_some(head)
}

/// Map a failed status to an error. `what` says what was being done ("sending to orders").
/// The variant comes from the status and, for 401, from the claims the body names; the
/// message carries the status and Azure's own detail.
pub fn status_error(resp: &Resp, what: &str) -> BackendError {
    let detail = error_detail(&resp.body);
    let sep = if detail.is_empty() { "" } else { ": " };
    match resp.status {
        401 => match required_right(&resp.body) {
            Some(right) => BackendError::forbidden(
                format!(
                    "{what}: the key or token is valid but lacks the {right} right (HTTP 401, missing '{right}' claim){sep}{detail}"
                ),
                Some(right),
            ),
            None => {
                let why = match detail_code(&detail) {
                    Some(c) if c.eq_ignore_ascii_case("ExpiredToken") => "the token has expired",
                    _ => "the key or token was rejected (wrong key or key name, expired or malformed token, an Entra ID token the namespace does not accept, or a token for another namespace or entity)",
                };
                BackendError::Auth(format!("{what}: HTTP 401, {why}{sep}{detail}"))
            }
        },
        // Documented for send as "quota exceeded or message too large"; also entity disabled
        // or a network rule. Authenticated, but not allowed.
        403 => BackendError::forbidden(
            format!("{what}: HTTP 403 (quota exceeded, message too large, entity disabled or blocked by a network rule){sep}{detail}"),
            None,
        ),
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
        400 | 409 | 413 => BackendError::Invalid(format!("{what}: HTTP {}{sep}{detail}", resp.status)),
        500 | 502 | 504 => BackendError::Unreachable(format!(
            "{what}: HTTP {} (server error){sep}{detail}",
            resp.status
        )),
        s => BackendError::Protocol(format!("{what}: HTTP {s}{sep}{detail}")),
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

    fn resp(status: u16, detail: &str) -> Resp {
        Resp {
            status,
            headers: HeaderMap::new(),
            body: format!("<Error><Code>{status}</Code><Detail>{detail}</Detail></Error>")
                .into_bytes(),
        }
    }

    /// Bodies as Azure sends them (from issue threads quoting real responses).
    #[test]
    fn a_bad_token_is_auth_and_a_missing_claim_is_forbidden_with_the_right() {
        let e = status_error(&resp(401, "claim is empty or token is invalid. TrackingId:7f29_G25, SystemTracker:x.servicebus.windows.net:$Resources/queues, Timestamp:2021-04-19T07:25:04"), "listing queues");
        assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
        let e = status_error(
            &resp(401, "ExpiredToken: The token is expired. TrackingId:1"),
            "x",
        );
        assert!(
            matches!(e, BackendError::Auth(ref m) if m.contains("expired")),
            "{e:?}"
        );
        for (detail, right) in [
            ("Unauthorized access. 'Listen' claim(s) are required to perform this operation. Resource: 'sb://ns.servicebus.windows.net/q'. TrackingId:f_G8", "Listen"),
            ("Unauthorized access. 'Send' claim(s) are required to perform this operation.", "Send"),
            ("Manage,EntityRead claims required for this operation. TrackingId:1", "Manage"),
            ("Manage claim is required for this operation..TrackingId:1", "Manage"),
        ] {
            let e = status_error(&resp(401, detail), "x");
            match e {
                BackendError::Forbidden { right: Some(r), ref msg } => {
                    assert_eq!(r, right, "{msg}");
                    assert!(msg.contains(right), "{msg}");
                }
                other => panic!("{detail}: {other:?}"),
            }
        }
        assert!(matches!(
            status_error(&resp(403, "QuotaExceeded"), "x"),
            BackendError::Forbidden { right: None, .. }
        ));
    }

    #[test]
    fn broker_text_in_errors_is_terminal_safe() {
        let d = error_detail(b"<Error><Detail>bad \x1b[31mred\x1b[0m</Detail></Error>");
        assert!(!d.contains('\x1b'), "{d}");
    }
}
