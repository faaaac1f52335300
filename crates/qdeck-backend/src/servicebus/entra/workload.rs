//! Kubernetes workload identity, as Azure's `WorkloadIdentityCredential` does it: the pod's
//! federated token (the file `AZURE_FEDERATED_TOKEN_FILE` names, re-read on every fetch as
//! Kubernetes rotates it) is the client assertion of a client-credentials grant at
//! `{AZURE_AUTHORITY_HOST}/{AZURE_TENANT_ID}/oauth2/v2.0/token` for `AZURE_CLIENT_ID`.

use std::time::Duration;

use serde_json::Value;

use super::{AccessToken, FALLBACK_LIFETIME_SECS, SCOPE};
use crate::servicebus::connstr::unix_now;
use crate::{BackendError, Result};
use qdeck_model::config::redact::redact;
use qdeck_model::config::secret::{Secret, SecretSource};
use qdeck_model::sanitize;

const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com/";
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const WHAT: &str = "Entra ID token for the workload identity (auth = \"workload-identity\")";

pub struct Workload {
    client_id: String,
    token_file: String,
    /// `{authority}/{tenant}/oauth2/v2.0/token`.
    endpoint: String,
    http: reqwest::Client,
}

impl Workload {
    pub fn from_env(profile: &str, env: &dyn SecretSource) -> Result<Workload> {
        let var = |name: &str, why: &str| -> Result<String> {
            // Ids, a file path and a host: none of them secret.
            match env.get(name) {
                Some(v) if !v.expose().trim().is_empty() => Ok(v.expose().trim().to_string()),
                found => Err(BackendError::Invalid(format!(
                    "profile '{profile}' (auth = \"workload-identity\"): environment variable {name} is {} ({why})",
                    if found.is_some() { "empty" } else { "not set" }
                ))),
            }
        };
        let client_id = var("AZURE_CLIENT_ID", "the workload identity's application id")?;
        let tenant = var("AZURE_TENANT_ID", "the Entra ID tenant")?;
        let token_file = var(
            "AZURE_FEDERATED_TOKEN_FILE",
            "Kubernetes sets it in a pod with workload identity",
        )?;
        let authority = env
            .get("AZURE_AUTHORITY_HOST")
            .map(|a| a.expose().to_string())
            .filter(|a| !a.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_AUTHORITY.to_string());
        let authority = check_authority(authority.trim()).map_err(|why| {
            BackendError::Invalid(format!(
                "profile '{profile}' (auth = \"workload-identity\"): AZURE_AUTHORITY_HOST {why}"
            ))
        })?;
        if tenant.contains(['/', '?', '#', ' ']) {
            return Err(BackendError::Invalid(format!(
                "profile '{profile}' (auth = \"workload-identity\"): AZURE_TENANT_ID is not a tenant id or domain"
            )));
        }
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| BackendError::Other(redact(&format!("HTTP client: {e}"))))?;
        Ok(Workload {
            client_id,
            token_file,
            endpoint: format!("{authority}/{tenant}/oauth2/v2.0/token"),
            http,
        })
    }

    pub async fn fetch(&self) -> Result<AccessToken> {
        // A small local file: read in place (tokio's `fs` is not among the crate's features).
        let assertion = std::fs::read_to_string(&self.token_file).map_err(|e| {
            BackendError::Auth(format!(
                "{WHAT}: cannot read the federated token file {} (AZURE_FEDERATED_TOKEN_FILE): {e}",
                sanitize::clean(&self.token_file)
            ))
        })?;
        let assertion = Secret::new(assertion.trim());
        let form = [
            ("client_assertion", assertion.expose()),
            ("client_assertion_type", ASSERTION_TYPE),
            ("client_id", self.client_id.as_str()),
            ("grant_type", "client_credentials"),
            ("scope", SCOPE),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencoding::encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        let resp = self
            .http
            .post(&self.endpoint)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| {
                BackendError::Unreachable(format!(
                    "{WHAT}: token endpoint {}: {}",
                    self.authority_shown(),
                    crate::net_error::cause(&e)
                ))
            })?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.map_err(|e| {
            BackendError::Unreachable(format!(
                "{WHAT}: reading the token endpoint's answer: {}",
                e.without_url()
            ))
        })?;
        let text = String::from_utf8_lossy(&body);
        if !(200..300).contains(&status) {
            return Err(BackendError::Auth(format!(
                "{WHAT}: the token endpoint {} refused (HTTP {status}){}",
                self.authority_shown(),
                refusal(&text)
            )));
        }
        parse_token_response(&text, unix_now())
            .map_err(|why| BackendError::Auth(format!("{WHAT}: {why}")))
    }

    /// Scheme and host of the endpoint, for errors.
    fn authority_shown(&self) -> String {
        let rest = self.endpoint.split_once("://").map_or("", |(_, r)| r);
        sanitize::clean(rest.split('/').next().unwrap_or("")).into_owned()
    }
}

/// `https://host[/]` → `https://host`. Plain HTTP only to this machine (a test's endpoint):
/// the assertion must not cross a network in clear.
fn check_authority(a: &str) -> std::result::Result<String, &'static str> {
    let a = if a.contains("://") {
        a.to_string()
    } else {
        format!("https://{a}")
    };
    let a = a.trim_end_matches('/').to_string();
    let (scheme, rest) = a.split_once("://").unwrap_or(("", ""));
    let host = rest.split('/').next().unwrap_or("");
    let bare = host
        .rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(h, _)| h);
    match scheme.to_ascii_lowercase().as_str() {
        _ if host.is_empty() || host.contains(['@', '?', '#', ' ']) => {
            Err("is not a URL such as https://login.microsoftonline.com/")
        }
        "https" => Ok(a),
        "http" if matches!(bare, "127.0.0.1" | "localhost" | "[::1]") => Ok(a),
        _ => Err("must be an https:// URL (plain http only to localhost)"),
    }
}

/// Entra's `error` and the first line of `error_description` (`AADSTS…`), as `: …`.
fn refusal(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return String::new();
    };
    let code = v.get("error").and_then(Value::as_str).unwrap_or("");
    let desc = v
        .get("error_description")
        .and_then(Value::as_str)
        .and_then(|d| d.lines().next())
        .unwrap_or("");
    let text = format!("{code} {desc}");
    let text = sanitize::one_line_max(&redact(text.trim()), 240);
    if text.is_empty() {
        text
    } else {
        format!(": {text}")
    }
}

/// The token and its expiry from the endpoint's JSON (`access_token`, `expires_in` seconds as
/// a number or a string); no readable expiry → `FALLBACK_LIFETIME_SECS`. Errors never hold the
/// answer.
pub fn parse_token_response(text: &str, now: u64) -> std::result::Result<AccessToken, String> {
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|_| "the token endpoint did not answer JSON".to_string())?;
    let token = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| "the token endpoint answered without an access_token".to_string())?;
    let expires_in = v
        .get("expires_in")
        .and_then(|e| match e {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .unwrap_or(FALLBACK_LIFETIME_SECS);
    Ok(AccessToken {
        token: Secret::new(token.trim()),
        expires_on: now + expires_in,
        fetched_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::SecretMap;

    #[test]
    fn token_answers_as_entra_sends_them() {
        let t = parse_token_response(
            r#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"eyJ.x"}"#,
            100,
        )
        .unwrap();
        assert_eq!((t.token.expose(), t.expires_on), ("eyJ.x", 3_699));
        let t = parse_token_response(r#"{"access_token":"a","expires_in":"600"}"#, 100).unwrap();
        assert_eq!(t.expires_on, 700);
        let e = parse_token_response(r#"{"error":"SECRET"}"#, 0).unwrap_err();
        assert!(!e.contains("SECRET"), "{e}");
    }

    #[test]
    fn authority_hosts() {
        assert_eq!(
            check_authority("https://login.microsoftonline.com/").unwrap(),
            "https://login.microsoftonline.com"
        );
        assert_eq!(
            check_authority("login.microsoftonline.us").unwrap(),
            "https://login.microsoftonline.us"
        );
        assert!(check_authority("http://127.0.0.1:8080/").is_ok());
        assert!(check_authority("http://login.example.com/").is_err());
        assert!(check_authority("https://user:pw@host/").is_err());
    }

    #[test]
    fn a_missing_variable_is_named() {
        let env = SecretMap::new()
            .with("AZURE_CLIENT_ID", "c")
            .with("AZURE_TENANT_ID", "t");
        let e = Workload::from_env("prod", &env).err().unwrap().to_string();
        assert!(e.contains("AZURE_FEDERATED_TOKEN_FILE is not set"), "{e}");
        assert!(e.contains("profile 'prod'"), "{e}");
        let env = env
            .with("AZURE_FEDERATED_TOKEN_FILE", "/f")
            .with("AZURE_AUTHORITY_HOST", "http://evil.example/");
        let e = Workload::from_env("prod", &env).err().unwrap().to_string();
        assert!(e.contains("AZURE_AUTHORITY_HOST must be an https"), "{e}");
    }

    /// A token endpoint on this machine answering `n` requests; the bodies it got.
    fn endpoint(n: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            for conn in listener.incoming().take(n) {
                let mut conn = conn.unwrap();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                bodies.push(String::from_utf8(body).unwrap());
                let answer = r#"{"access_token":"tok","expires_in":3599}"#;
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .unwrap();
            }
            bodies
        });
        (url, server)
    }

    /// Kubernetes rotates the federated token file: each fetch sends what it holds then.
    #[tokio::test]
    async fn the_token_file_is_read_again_on_every_fetch() {
        let (url, server) = endpoint(2);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "first-assertion\n").unwrap();
        let env = SecretMap::new()
            .with("AZURE_CLIENT_ID", "c")
            .with("AZURE_TENANT_ID", "t")
            .with("AZURE_FEDERATED_TOKEN_FILE", file.display().to_string())
            .with("AZURE_AUTHORITY_HOST", url);
        let w = Workload::from_env("p", &env).unwrap();
        assert_eq!(w.fetch().await.unwrap().token.expose(), "tok");
        std::fs::write(&file, "second-assertion").unwrap();
        w.fetch().await.unwrap();
        let bodies = server.join().unwrap();
        assert!(
            bodies[0].contains("client_assertion=first-assertion&"),
            "{bodies:?}"
        );
        assert!(
            bodies[1].contains("client_assertion=second-assertion&"),
            "{bodies:?}"
        );
    }

    /// One fetch serves every request until the token nears expiry.
    #[tokio::test]
    async fn the_credential_keeps_its_token() {
        let (url, server) = endpoint(1);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "assertion").unwrap();
        let env = SecretMap::new()
            .with("AZURE_CLIENT_ID", "c")
            .with("AZURE_TENANT_ID", "t")
            .with("AZURE_FEDERATED_TOKEN_FILE", file.display().to_string())
            .with("AZURE_AUTHORITY_HOST", url);
        let c = super::super::EntraCredential::workload_identity("p", &env).unwrap();
        let first = c.token().await.unwrap();
        assert_eq!(server.join().unwrap().len(), 1);
        // The endpoint is gone: a second fetch would fail.
        let again = c.token().await.unwrap();
        assert_eq!(again.token.expose(), first.token.expose());
        assert_eq!(again.expires_on, first.expires_on);
    }

    #[test]
    fn refusals_are_one_line() {
        let r = refusal(
            r#"{"error":"invalid_client","error_description":"AADSTS700016: Application not found.\r\nTrace ID: 1\r\nCorrelation ID: 2"}"#,
        );
        assert_eq!(r, ": invalid_client AADSTS700016: Application not found.");
    }
}
