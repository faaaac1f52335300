//! Runtime REST calls: send, peek-lock, unlock, complete, renew, receive-and-delete.
//!
//! These are implemented directly over reqwest rather than through the
//! `azure_messaging_servicebus` 0.21 crate, on purpose: the crate takes and returns bodies as
//! UTF-8 `String`s (binary DLQ bodies could not be browsed or resubmitted), parses
//! `BrokerProperties` strictly *after* the lock was taken (a missing `State`/`TimeToLive` or an
//! `EnqueuedSequenceNumber` beyond i32 fails the call and loses the lock URI, leaving the
//! message locked and its delivery count raised), hard-codes `https://{ns}.servicebus.windows.net`
//! and signs that URL. Here bodies are bytes, `BrokerProperties` is read leniently (every field
//! optional, numbers up to 64 bits), and the lock URI is kept whatever the properties hold.
//! `tests/servicebus.rs` (`crate_routing`) shows both sides: the crate does reach a custom
//! endpoint through our own `azure_core::HttpClient` (URL rewrite + re-signing), and its
//! peek-lock fails after locking on a binary body, sparse properties and a 33-bit
//! `EnqueuedSequenceNumber`, stranding the message locked.

use reqwest::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::Method;
use serde_json::{Map, Value};

use crate::servicebus::http::{entity_url_path, status_error, Rest};
use crate::{BackendError, Result};

/// Response headers that are HTTP/transport, not user (custom) properties.
const NOT_CUSTOM: &[&str] = &[
    "brokerproperties",
    "content-type",
    "content-length",
    "content-encoding",
    "location",
    "date",
    "server",
    "transfer-encoding",
    "strict-transport-security",
    "connection",
    "keep-alive",
    "vary",
    "cache-control",
    "expires",
    "pragma",
    "etag",
    "retry-after",
];

/// A message received from Service Bus (locked, or already deleted for receive-and-delete).
#[derive(Debug, Clone)]
pub struct Received {
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    /// `BrokerProperties` as sent by the broker; `None` fields are simply absent.
    pub props: Map<String, Value>,
    /// Custom properties: header name → raw header value (string values arrive quoted).
    pub custom: Vec<(String, String)>,
    /// Path (relative to the namespace) to unlock (PUT), complete (DELETE), renew (POST).
    pub lock_path: Option<String>,
}

impl Received {
    pub fn prop_str(&self, k: &str) -> Option<String> {
        match self.props.get(k)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            v => Some(v.to_string()),
        }
    }
    pub fn prop_i64(&self, k: &str) -> Option<i64> {
        match self.props.get(k)? {
            // A whole number written as a float reads as that number; a fraction or a number
            // past i64 is not an integer, and is not read as a truncated or saturated one.
            Value::Number(n) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18)
                    .map(|f| f as i64)
            }),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn sequence_number(&self) -> Option<i64> {
        self.prop_i64("SequenceNumber")
    }
    pub fn message_id(&self) -> Option<String> {
        self.prop_str("MessageId")
    }
}

fn parse_received(resp: crate::servicebus::http::Resp, entity: &str) -> Received {
    let h = &resp.headers;
    let props = h
        .get("brokerproperties")
        .and_then(|v| serde_json::from_slice::<Value>(v.as_bytes()).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    let content_type = h
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut custom = Vec::new();
    for (k, v) in h {
        let name = k.as_str();
        if NOT_CUSTOM.contains(&name) || name.starts_with("x-ms-") {
            continue;
        }
        custom.push((
            name.to_string(),
            String::from_utf8_lossy(v.as_bytes()).into_owned(),
        ));
    }
    let mut r = Received {
        body: resp.body,
        content_type,
        props,
        custom,
        lock_path: None,
    };
    // Prefer the Location the broker gave (its path, joined to *our* endpoint so credentials
    // never go to another host); else build it from SequenceNumber/MessageId and LockToken.
    let from_location = h
        .get("location")
        .and_then(|v| v.to_str().ok())
        .and_then(|loc| {
            let after_scheme = loc.split_once("://").map_or(loc, |x| x.1);
            let path = after_scheme.split_once('/').map(|x| x.1)?;
            (!path.is_empty()).then(|| path.to_string())
        });
    r.lock_path = from_location.or_else(|| {
        let token = r.prop_str("LockToken")?;
        let id = r
            .sequence_number()
            .map(|s| s.to_string())
            .or_else(|| r.message_id())?;
        Some(format!(
            "{}/messages/{}/{}",
            entity_url_path(entity),
            urlencoding::encode(&id),
            urlencoding::encode(&token)
        ))
    });
    r
}

/// What to send: body, content type, settable broker properties, custom properties.
#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    pub props: Map<String, Value>,
    pub custom: Vec<(String, String)>,
}

/// Broker properties a sender may set, and that a resubmitted copy keeps.
/// Not kept: TimeToLive (the original's may have run out), ScheduledEnqueueTimeUtc.
pub const SETTABLE: &[&str] = &[
    "MessageId",
    "CorrelationId",
    "SessionId",
    "Label",
    "ReplyTo",
    "To",
    "ReplyToSessionId",
    "PartitionKey",
];

impl Outgoing {
    pub fn copy_of(m: &Received) -> Outgoing {
        let mut props = Map::new();
        for k in SETTABLE {
            if let Some(v) = m.props.get(*k) {
                if !v.is_null() {
                    props.insert((*k).to_string(), v.clone());
                }
            }
        }
        Outgoing {
            body: m.body.clone(),
            content_type: m.content_type.clone(),
            props,
            custom: m.custom.clone(),
        }
    }
}

pub async fn send(rest: &Rest, entity: &str, msg: &Outgoing) -> Result<()> {
    let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let ct = msg
        .content_type
        .clone()
        .unwrap_or_else(|| "application/octet-stream".to_string());
    if let Ok(v) = HeaderValue::from_str(&ct) {
        headers.push((CONTENT_TYPE, v));
    }
    if !msg.props.is_empty() {
        let j = Value::Object(msg.props.clone()).to_string();
        if let Ok(v) = HeaderValue::from_str(&j) {
            headers.push((HeaderName::from_static("brokerproperties"), v));
        } else {
            return Err(BackendError::Invalid(
                "message properties cannot travel in an HTTP header".into(),
            ));
        }
    }
    for (k, v) in &msg.custom {
        match (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            (Ok(k), Ok(v)) => headers.push((k, v)),
            _ => {
                return Err(BackendError::Invalid(format!(
                    "custom property {:?} cannot travel as an HTTP header",
                    k.chars().take(60).collect::<String>()
                )))
            }
        }
    }
    let path = format!("{}/messages", entity_url_path(entity));
    let resp = rest
        .call("send", Method::POST, &path, &headers, msg.body.clone())
        .await?;
    if resp.status == 201 || resp.status == 200 {
        Ok(())
    } else {
        Err(status_error(&resp, &format!("sending to {entity}")))
    }
}

/// Peek-lock the next message. `Ok(None)` when there is none within `timeout_secs`.
pub async fn peek_lock(rest: &Rest, entity: &str, timeout_secs: u32) -> Result<Option<Received>> {
    let path = format!(
        "{}/messages/head?timeout={timeout_secs}",
        entity_url_path(entity)
    );
    let resp = rest
        .call("peek-lock", Method::POST, &path, &[], Vec::new())
        .await?;
    match resp.status {
        201 | 200 => Ok(Some(parse_received(resp, entity))),
        204 => Ok(None),
        _ => Err(status_error(&resp, &format!("receiving from {entity}"))),
    }
}

/// Receive and delete the next message. `Ok(None)` when there is none.
pub async fn receive_delete(
    rest: &Rest,
    entity: &str,
    timeout_secs: u32,
) -> Result<Option<Received>> {
    let path = format!(
        "{}/messages/head?timeout={timeout_secs}",
        entity_url_path(entity)
    );
    let resp = rest
        .call("receive-delete", Method::DELETE, &path, &[], Vec::new())
        .await?;
    match resp.status {
        200 | 201 => Ok(Some(parse_received(resp, entity))),
        204 => Ok(None),
        _ => Err(status_error(&resp, &format!("receiving from {entity}"))),
    }
}

async fn on_lock(rest: &Rest, op: &str, m: Method, msg: &Received, what: &str) -> Result<()> {
    let Some(path) = msg.lock_path.as_deref() else {
        return Err(BackendError::Protocol(format!(
            "cannot {what}: the broker gave no lock URI or lock token (the lock expires by itself)"
        )));
    };
    let resp = rest.call(op, m, path, &[], Vec::new()).await?;
    if (200..300).contains(&resp.status) {
        Ok(())
    } else if resp.status == 404 || resp.status == 410 {
        Err(BackendError::NotFound(format!(
            "cannot {what}: the lock was lost or the message is gone (HTTP {})",
            resp.status
        )))
    } else {
        Err(status_error(&resp, &format!("cannot {what}")))
    }
}

pub async fn unlock(rest: &Rest, msg: &Received) -> Result<()> {
    on_lock(rest, "unlock", Method::PUT, msg, "unlock").await
}

pub async fn complete(rest: &Rest, msg: &Received) -> Result<()> {
    on_lock(rest, "complete", Method::DELETE, msg, "complete").await
}

pub async fn renew(rest: &Rest, msg: &Received) -> Result<()> {
    on_lock(rest, "renew-lock", Method::POST, msg, "renew the lock").await
}
