//! Connection strings and SAS tokens.
//!
//! `Endpoint=sb://{ns}.servicebus.windows.net/;SharedAccessKeyName=…;SharedAccessKey=…`
//! or `…;SharedAccessSignature=SharedAccessSignature sr=…`. Keys are case-insensitive (as in the
//! Python SDK); `UseDevelopmentEmulator=true` (exactly lowercase `true`) switches to plain HTTP.
//! The endpoint host comes from the string, so sovereign clouds and the test stand-in work.
//! Errors never echo the string or the key.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::entra::EntraCredential;
use crate::BackendError;
use qdeck_model::config::secret::Secret;

/// How requests are authorised.
#[derive(Clone)]
pub enum Credential {
    /// Key name and key (the key's UTF-8 bytes are the HMAC key, as Azure does).
    Key { name: String, key: Secret },
    /// A ready-made token (`SharedAccessSignature sr=…&sig=…&se=…&skn=…`).
    Token(Secret),
    /// Entra ID tokens (profile `auth = "azure-cli"` or `"workload-identity"`), shared by the
    /// management API and the AMQP connection.
    Entra(Arc<EntraCredential>),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Key { name, .. } => write!(f, "Key {{ name: {name:?}, key: *** }}"),
            Credential::Token(_) => f.write_str("Token(***)"),
            Credential::Entra(c) => write!(f, "{c:?}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// `https://host[:port]/` (or `http://` for the development emulator), always ending in `/`.
    pub base: String,
    /// Host (and port) for display.
    pub host: String,
    pub credential: Credential,
    pub entity_path: Option<String>,
    /// `UseDevelopmentEmulator=true`: plain HTTP and AMQP without TLS.
    pub emulator: bool,
    /// How long the SAS tokens signed from the key live (profile `sas_token_ttl`).
    pub token_ttl_secs: u64,
}

impl ConnInfo {
    /// The management API at `url` instead of the namespace's own endpoint (profile
    /// `management_url`): `http(s)://host[:port][/]`.
    pub fn with_management_url(mut self, url: &str) -> Result<ConnInfo, BackendError> {
        let url = url.trim();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| {
                BackendError::Invalid("management_url must start with http:// or https://".into())
            })?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains(['?', '#', '@', ' ']) {
            return Err(BackendError::Invalid(
                "management_url must be http(s)://HOST[:PORT]/ (a base URL, without credentials)"
                    .into(),
            ));
        }
        let scheme = if url.starts_with("https://") {
            "https"
        } else {
            "http"
        };
        self.base = format!("{scheme}://{host}/");
        Ok(self)
    }
}

fn bad(what: &str) -> BackendError {
    BackendError::Invalid(format!("malformed Service Bus connection string: {what}"))
}

/// Parse a connection string. The message of any error names the problem, never the value.
pub fn parse(cs: &Secret) -> Result<ConnInfo, BackendError> {
    parse_with(cs, None)
}

/// The namespace a connection string names, authorised by `credential` instead of its keys
/// (which are ignored, present or not): Entra ID auth reaching the emulator or a stand-in.
pub fn parse_endpoint(cs: &Secret, credential: Credential) -> Result<ConnInfo, BackendError> {
    parse_with(cs, Some(credential))
}

/// `NAME.servicebus.windows.net` reached over TLS with `credential`.
pub fn for_namespace(host: &str, credential: Credential) -> ConnInfo {
    let host = host.trim().trim_end_matches('/').to_string();
    ConnInfo {
        base: format!("https://{host}/"),
        host,
        credential,
        entity_path: None,
        emulator: false,
        token_ttl_secs: qdeck_model::config::SAS_TOKEN_TTL_DEFAULT_SECS,
    }
}

fn parse_with(cs: &Secret, given: Option<Credential>) -> Result<ConnInfo, BackendError> {
    let s = cs.expose();
    let mut endpoint = None;
    let mut key_name = None;
    let mut key = None;
    let mut sas = None;
    let mut entity = None;
    let mut emulator = false;
    for part in s.trim().split(';') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let Some((k, v)) = part.split_once('=') else {
            return Err(bad(
                "a part has no '=' (expected Key=Value pairs separated by ';')",
            ));
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "endpoint" => endpoint = Some(v),
            "sharedaccesskeyname" => key_name = Some(v),
            "sharedaccesskey" => key = Some(v),
            "sharedaccesssignature" => sas = Some(v),
            "entitypath" => entity = Some(v),
            "usedevelopmentemulator" => emulator = v == "true",
            _ => {} // TransportType and friends: not used over REST
        }
    }
    let endpoint = endpoint.ok_or_else(|| bad("Endpoint is missing"))?;
    let rest = endpoint
        .split_once("://")
        .map(|(scheme, rest)| (scheme.to_ascii_lowercase(), rest));
    let host = match rest {
        Some((scheme, rest)) if ["sb", "https", "http", "amqps"].contains(&scheme.as_str()) => {
            rest.trim_end_matches('/').to_string()
        }
        Some(_) => return Err(bad("Endpoint must start with sb://")),
        None => endpoint.trim_end_matches('/').to_string(),
    };
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
        return Err(bad("Endpoint host is empty or not a plain host name"));
    }
    let credential = match (given, key_name, key, sas) {
        (Some(c), ..) => c,
        (None, key_name, key, sas) => sas_credential(key_name, key, sas)?,
    };
    let scheme = if emulator { "http" } else { "https" };
    Ok(ConnInfo {
        base: format!("{scheme}://{host}/"),
        host,
        credential,
        entity_path: entity.filter(|e| !e.is_empty()),
        emulator,
        token_ttl_secs: qdeck_model::config::SAS_TOKEN_TTL_DEFAULT_SECS,
    })
}

fn sas_credential(
    key_name: Option<String>,
    key: Option<String>,
    sas: Option<String>,
) -> Result<Credential, BackendError> {
    Ok(match (key_name, key, sas) {
        (_, _, Some(tok)) if !tok.is_empty() => {
            let tok = if tok.starts_with("SharedAccessSignature ") {
                tok
            } else {
                format!("SharedAccessSignature {tok}")
            };
            Credential::Token(Secret::new(tok))
        }
        (Some(name), Some(key), _) if !name.is_empty() && !key.is_empty() => Credential::Key {
            name,
            key: Secret::new(key),
        },
        (Some(n), _, _) if !n.is_empty() => return Err(bad("SharedAccessKey is missing or empty")),
        (_, Some(k), _) if !k.is_empty() => {
            return Err(bad("SharedAccessKeyName is missing or empty"))
        }
        _ => {
            return Err(bad(
                "needs SharedAccessKeyName and SharedAccessKey, or SharedAccessSignature",
            ))
        }
    })
}

/// `SharedAccessSignature sr={enc(uri)}&sig={enc(b64(HMAC-SHA256(key_utf8, enc(uri)+"\n"+expiry)))}&se={expiry}&skn={name}`.
pub fn sas_token(resource_uri: &str, key_name: &str, key: &str, expiry_unix: u64) -> String {
    let sr = urlencoding::encode(resource_uri).into_owned();
    let to_sign = format!("{sr}\n{expiry_unix}");
    let sig = match Hmac::<Sha256>::new_from_slice(key.as_bytes()) {
        Ok(mut mac) => {
            mac.update(to_sign.as_bytes());
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        }
        Err(_) => String::new(), // HMAC accepts keys of any length; unreachable in practice
    };
    format!(
        "SharedAccessSignature sr={sr}&sig={}&se={expiry_unix}&skn={}",
        urlencoding::encode(&sig),
        urlencoding::encode(key_name)
    )
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(cs: &str) -> Result<ConnInfo, BackendError> {
        super::parse(&Secret::new(cs))
    }

    /// Worked example computed independently with Python:
    /// ```text
    /// import hmac,hashlib,base64,urllib.parse
    /// sr=urllib.parse.quote_plus('https://contoso.servicebus.windows.net/')
    /// sig=base64.b64encode(hmac.new(b'MySecretKey1234567890abcdef=',
    ///     (sr+'\n1700000000').encode(), hashlib.sha256).digest())
    /// # → BizuLs8kJ3gKRPp6bjIgPqnyQHaaHB2az00oTsx0ypk=
    /// ```
    #[test]
    fn sas_matches_worked_example() {
        let t = sas_token(
            "https://contoso.servicebus.windows.net/",
            "RootManageSharedAccessKey",
            "MySecretKey1234567890abcdef=",
            1_700_000_000,
        );
        assert_eq!(
            t,
            "SharedAccessSignature sr=https%3A%2F%2Fcontoso.servicebus.windows.net%2F&sig=BizuLs8kJ3gKRPp6bjIgPqnyQHaaHB2az00oTsx0ypk%3D&se=1700000000&skn=RootManageSharedAccessKey"
        );
    }

    #[test]
    fn parses_key_string_case_insensitively() {
        let c = parse("endpoint=sb://ns.servicebus.chinacloudapi.cn/;SHAREDACCESSKEYNAME=Root;SharedAccessKey=k+/=;EntityPath=q1").unwrap();
        assert_eq!(c.base, "https://ns.servicebus.chinacloudapi.cn/");
        assert_eq!(c.entity_path.as_deref(), Some("q1"));
        assert!(
            matches!(c.credential, Credential::Key { ref name, ref key } if name == "Root" && key.expose() == "k+/=")
        );
        assert!(!format!("{c:?}").contains("k+/="));
    }

    #[test]
    fn emulator_flag_only_when_lowercase_true() {
        let c = parse("Endpoint=sb://localhost:5300;SharedAccessKeyName=a;SharedAccessKey=b;UseDevelopmentEmulator=true").unwrap();
        assert_eq!(c.base, "http://localhost:5300/");
        let c = parse("Endpoint=sb://localhost:5300;SharedAccessKeyName=a;SharedAccessKey=b;UseDevelopmentEmulator=True").unwrap();
        assert_eq!(c.base, "https://localhost:5300/");
    }

    #[test]
    fn sas_string_accepted() {
        let c = parse("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=x&sig=y&se=1&skn=z").unwrap();
        assert!(
            matches!(c.credential, Credential::Token(ref t) if t.expose().starts_with("SharedAccessSignature sr=x"))
        );
    }

    #[test]
    fn entra_auth_takes_only_the_endpoint() {
        let entra = || Credential::Entra(Arc::new(EntraCredential::azure_cli()));
        let c = parse_endpoint(
            &Secret::new("Endpoint=sb://127.0.0.1:5999;UseDevelopmentEmulator=true"),
            entra(),
        )
        .unwrap();
        assert_eq!(
            (c.base.as_str(), c.emulator),
            ("http://127.0.0.1:5999/", true)
        );
        // Keys in the string are ignored, and never shown.
        let c = parse_endpoint(
            &Secret::new("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=a;SharedAccessKey=SECRETKEY"),
            entra(),
        )
        .unwrap();
        assert!(matches!(c.credential, Credential::Entra(_)));
        assert!(!format!("{c:?}").contains("SECRETKEY"), "{c:?}");
        assert!(format!("{c:?}").contains("Entra(azure-cli)"), "{c:?}");
        let c = for_namespace("ns.servicebus.windows.net", entra());
        assert_eq!(
            (c.base.as_str(), c.emulator),
            ("https://ns.servicebus.windows.net/", false)
        );
    }

    #[test]
    fn errors_are_clear_and_never_echo_the_key() {
        for s in [
            "",
            "garbage-without-equals SECRETKEY",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=SECRETKEY",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root",
            "SharedAccessKeyName=Root;SharedAccessKey=SECRETKEY",
            "Endpoint=ftp://x/;SharedAccessKeyName=Root;SharedAccessKey=SECRETKEY",
        ] {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains("malformed Service Bus connection string"), "{e}");
            assert!(!e.contains("SECRETKEY"), "{e}");
        }
    }
}
