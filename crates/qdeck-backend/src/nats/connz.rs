//! Client identities from the server's monitoring port (`/connz?subs=1`), the one place NATS
//! names them. A push consumer's clients are the connections subscribed to its deliver
//! subject; a pull consumer's requests carry no subscription of its own, so its clients cannot
//! be told apart there either.

use std::time::Duration;

use serde::Deserialize;

use super::dlq::subject_matches;
use crate::{ApiCalls, BackendError, Result};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Conn {
    pub cid: u64,
    pub ip: String,
    pub port: u16,
    pub name: Option<String>,
    pub lang: Option<String>,
    pub version: Option<String>,
    pub subscriptions_list: Vec<String>,
}

impl Conn {
    /// `name ip:port (lang version)`, as the workers view shows it.
    pub fn label(&self) -> String {
        let name = self
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("unnamed");
        let client = match (&self.lang, &self.version) {
            (Some(l), Some(v)) => format!(" ({l} {v})"),
            (Some(l), None) => format!(" ({l})"),
            _ => String::new(),
        };
        qdeck_model::sanitize::clean_short(
            &format!("{name} {}:{}{client} cid {}", self.ip, self.port, self.cid),
            120,
        )
    }

    pub fn subscribes_to(&self, subject: &str) -> bool {
        self.subscriptions_list
            .iter()
            .any(|s| subject_matches(s, subject))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Connz {
    connections: Vec<Conn>,
}

pub struct Monitor {
    base: String,
    http: reqwest::Client,
}

impl Monitor {
    pub fn new(base: &str) -> Result<Monitor> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| BackendError::Other(format!("HTTP client: {e}")))?;
        Ok(Monitor {
            base: base.trim_end_matches('/').to_string(),
            http,
        })
    }

    /// Every client connection with its subscriptions (up to 10,000).
    pub async fn connections(&self, calls: &ApiCalls) -> Result<Vec<Conn>> {
        calls.bump("nats-monitor:GET /connz");
        let url = format!("{}/connz?subs=1&limit=10000", self.base);
        let resp = self.http.get(&url).send().await.map_err(|e| {
            BackendError::Unreachable(format!(
                "NATS monitoring port {}: {}",
                self.base,
                qdeck_model::sanitize::clean_short(&e.to_string(), 160)
            ))
        })?;
        if !resp.status().is_success() {
            return Err(BackendError::Other(format!(
                "NATS monitoring port {}: /connz answered {}",
                self.base,
                resp.status()
            )));
        }
        let c: Connz = resp
            .json()
            .await
            .map_err(|e| BackendError::Protocol(format!("/connz: {e}")))?;
        Ok(c.connections)
    }
}
