//! Workload identity federation: an `external_account` credentials file (what
//! `gcloud iam workload-identity-pools create-cred-config` writes) turned into access tokens.
//! `gcp_auth` reads service-account keys, the gcloud ADC file and the metadata server, but not
//! this type, so qdeck does the two documented steps itself:
//! 1. read the workload's own token (the subject token) from a file or a local URL, as plain
//!    text or a field of a JSON document, and exchange it at Google's Security Token Service
//!    (RFC 8693 token exchange, `token_url`);
//! 2. when the file names `service_account_impersonation_url`, trade that federated token for
//!    a service account's access token (IAM Credentials `generateAccessToken`).
//!
//! Tokens are kept per scope until a minute before they expire. AWS and executable-sourced
//! credentials are refused in one line: they need request signing or running a program.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::google_http::{call, google_words};
use crate::{BackendError, Result};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The scope Google's own library (google-auth) asks STS for when a service account is
/// impersonated after it: the federated token only has to call IAM Credentials.
const IAM_SCOPE: &str = "https://www.googleapis.com/auth/iam";
/// A token is renewed this long before Google says it expires.
const EARLY: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
struct File {
    #[serde(rename = "type")]
    kind: String,
    audience: String,
    subject_token_type: String,
    token_url: String,
    credential_source: Source,
    #[serde(default)]
    service_account_impersonation_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Source {
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: HashMap<String, String>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    environment_id: Option<String>,
    #[serde(default)]
    executable: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Format {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    subject_token_field_name: Option<String>,
}

pub struct ExternalAccount {
    file: File,
    /// Where the credentials came from, to name in errors.
    origin: String,
    http: reqwest::Client,
    cache: Mutex<HashMap<String, (String, Instant)>>,
}

#[derive(Deserialize)]
struct StsAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IamAnswer {
    access_token: String,
    expire_time: String,
}

fn refused(origin: &str, what: impl std::fmt::Display) -> BackendError {
    BackendError::Auth(format!(
        "workload identity federation ({origin}): {}",
        qdeck_model::sanitize::clean_short(&what.to_string(), 240)
    ))
}

impl ExternalAccount {
    /// The credentials in `json` (read from `origin`), checked before any network.
    pub fn from_json(json: &str, origin: &Path) -> Result<ExternalAccount> {
        let origin = origin.display().to_string();
        let file: File = serde_json::from_str(json)
            .map_err(|e| BackendError::Invalid(format!("credentials file {origin}: {e}")))?;
        if file.kind != "external_account" {
            return Err(BackendError::Invalid(format!(
                "credentials file {origin}: type {:?} is not external_account",
                file.kind
            )));
        }
        let src = &file.credential_source;
        if src.environment_id.is_some() {
            return Err(BackendError::Invalid(format!(
                "credentials file {origin}: AWS-sourced workload identity federation is not supported; use a file- or URL-sourced credential, or a service-account key"
            )));
        }
        if src.executable.is_some() {
            return Err(BackendError::Invalid(format!(
                "credentials file {origin}: executable-sourced workload identity federation is not supported (qdeck runs no program named by a credentials file)"
            )));
        }
        if src.file.is_none() == src.url.is_none() {
            return Err(BackendError::Invalid(format!(
                "credentials file {origin}: credential_source needs exactly one of file and url"
            )));
        }
        if let Some(f) = &src.format {
            if f.kind == "json" && f.subject_token_field_name.is_none() {
                return Err(BackendError::Invalid(format!(
                    "credentials file {origin}: a json credential_source.format needs subject_token_field_name"
                )));
            }
        }
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| BackendError::Other(format!("HTTP client: {e}")))?;
        Ok(ExternalAccount {
            file,
            origin,
            http,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// An access token for `scope`, from the cache while it is good.
    pub async fn token(&self, scope: &str) -> Result<String> {
        let mut cache = self.cache.lock().await;
        if let Some((t, until)) = cache.get(scope) {
            if Instant::now() < *until {
                return Ok(t.clone());
            }
        }
        let (token, lifetime) = self.fresh(scope).await?;
        let until = Instant::now() + lifetime.saturating_sub(EARLY);
        cache.insert(scope.to_string(), (token.clone(), until));
        Ok(token)
    }

    async fn fresh(&self, scope: &str) -> Result<(String, Duration)> {
        let subject = self.subject_token().await?;
        let impersonate = self.file.service_account_impersonation_url.as_deref();
        let sts_scope = if impersonate.is_some() {
            IAM_SCOPE
        } else {
            scope
        };
        let form = [
            ("grant_type", TOKEN_EXCHANGE),
            ("audience", self.file.audience.as_str()),
            ("scope", sts_scope),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("subject_token", subject.as_str()),
            ("subject_token_type", self.file.subject_token_type.as_str()),
        ];
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencoding::encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let text = self
            .send(
                "the Security Token Service",
                self.http
                    .post(&self.file.token_url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body),
            )
            .await?;
        let sts: StsAnswer = serde_json::from_str(&text).map_err(|e| {
            refused(
                &self.origin,
                format!("the Security Token Service answered: {e}"),
            )
        })?;
        let Some(url) = impersonate else {
            let life = Duration::from_secs(sts.expires_in.unwrap_or(3600));
            return Ok((sts.access_token, life));
        };
        let req = self
            .http
            .post(url)
            .bearer_auth(&sts.access_token)
            .json(&serde_json::json!({ "scope": [scope] }));
        let text = self.send("the service account impersonation", req).await?;
        let iam: IamAnswer = serde_json::from_str(&text)
            .map_err(|e| refused(&self.origin, format!("generateAccessToken answered: {e}")))?;
        let life = chrono::DateTime::parse_from_rfc3339(&iam.expire_time)
            .ok()
            .and_then(|t| {
                (t.with_timezone(&chrono::Utc) - chrono::Utc::now())
                    .to_std()
                    .ok()
            })
            .unwrap_or(Duration::from_secs(300));
        Ok((iam.access_token, life))
    }

    /// POST and read the answer; a refusal names the step and Google's own words.
    async fn send(&self, step: &str, req: reqwest::RequestBuilder) -> Result<String> {
        let (status, text) = call(&format!("{step} for {}", self.origin), req).await?;
        if status.is_success() {
            return Ok(text);
        }
        let why = google_words(&text);
        Err(refused(
            &self.origin,
            format!(
                "{step} refused the credentials ({}: {why})",
                status.as_u16()
            ),
        ))
    }

    /// The workload's own token, from the file or URL the credentials name.
    async fn subject_token(&self) -> Result<String> {
        let src = &self.file.credential_source;
        let raw = if let Some(path) = &src.file {
            tokio::fs::read_to_string(path).await.map_err(|e| {
                refused(
                    &self.origin,
                    format!("cannot read the subject token file {path}: {e}"),
                )
            })?
        } else {
            let url = src.url.as_deref().unwrap_or_default();
            let mut req = self.http.get(url);
            for (k, v) in &src.headers {
                req = req.header(k, v);
            }
            let step = format!("the subject token URL of {}", self.origin);
            let (status, text) = call(&step, req).await?;
            if !status.is_success() {
                return Err(refused(
                    &self.origin,
                    format!("the subject token URL answered {}", status.as_u16()),
                ));
            }
            text
        };
        let token = match &src.format {
            Some(f) if f.kind == "json" => {
                let field = f.subject_token_field_name.as_deref().unwrap_or_default();
                serde_json::from_str::<serde_json::Value>(&raw)
                    .ok()
                    .and_then(|v| v.get(field).and_then(|t| t.as_str()).map(str::to_string))
                    .ok_or_else(|| {
                        refused(
                            &self.origin,
                            format!("the subject token has no field {field:?}"),
                        )
                    })?
            }
            // As Google's libraries send it: a file's text as it is, newline included.
            _ => raw,
        };
        if token.trim().is_empty() {
            return Err(refused(&self.origin, "the subject token is empty"));
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(source: &str) -> String {
        format!(
            r#"{{"type":"external_account","audience":"//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/o",
               "subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":"https://sts.googleapis.com/v1/token",
               "credential_source":{source}}}"#
        )
    }

    #[test]
    fn aws_executable_and_ambiguous_sources_are_refused_before_any_network() {
        let at = Path::new("/etc/wif.json");
        for (src, says) in [
            (
                r#"{"environment_id":"aws1","region_url":"http://x"}"#,
                "AWS",
            ),
            (r#"{"executable":{"command":"/bin/true"}}"#, "executable"),
            (r#"{"file":"/a","url":"http://b"}"#, "exactly one"),
            (
                r#"{"file":"/a","format":{"type":"json"}}"#,
                "subject_token_field_name",
            ),
        ] {
            let err = ExternalAccount::from_json(&file(src), at).err().unwrap();
            let text = err.to_string();
            assert!(matches!(err, BackendError::Invalid(_)), "{text}");
            assert!(
                text.contains(says) && text.contains("/etc/wif.json"),
                "{text}"
            );
        }
        assert!(ExternalAccount::from_json(&file(r#"{"file":"/a"}"#), at).is_ok());
        let sa = r#"{"type":"service_account"}"#;
        assert!(ExternalAccount::from_json(sa, at).is_err());
    }

    #[test]
    fn googles_words_are_taken_from_either_error_shape() {
        assert_eq!(
            google_words(
                r#"{"error":"invalid_grant","error_description":"The audience is invalid."}"#
            ),
            "The audience is invalid."
        );
        assert_eq!(
            google_words(
                r#"{"error":{"code":403,"message":"Permission iam.serviceAccounts.getAccessToken denied"}}"#
            ),
            "Permission iam.serviceAccounts.getAccessToken denied"
        );
    }
}
