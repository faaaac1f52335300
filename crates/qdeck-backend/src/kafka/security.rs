//! How a connection to a broker is secured, from the profile: TLS (rustls on the process's one
//! ring provider, trusting the profile's CA file or the public web roots) and SASL (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512), the four combinations Kafka calls PLAINTEXT, SSL,
//! SASL_PLAINTEXT and SASL_SSL. Settings are checked and the CA file read once, when the
//! backend is built, so a bad one is one line before any network. The password stays a
//! `Secret` until the one place that writes it to the broker (sasl.rs).

use std::path::PathBuf;
use std::sync::Arc;

use qdeck_model::config::secret::{Secret, SecretSource};
use qdeck_model::config::KafkaSettings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

use super::connection::Stream;
use super::scram::Hash;
use crate::{BackendError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(Hash),
}

impl Mechanism {
    /// The name Kafka knows the mechanism by (SaslHandshake, `sasl.enabled.mechanisms`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(Hash::Sha256) => "SCRAM-SHA-256",
            Mechanism::Scram(Hash::Sha512) => "SCRAM-SHA-512",
        }
    }
}

pub struct Sasl {
    pub mechanism: Mechanism,
    pub user: String,
    pub password: Secret,
    /// The variable the password came from, to name in an error instead of the password.
    pub password_env: String,
}

struct Tls {
    config: Arc<rustls::ClientConfig>,
    ca_file: Option<PathBuf>,
}

#[derive(Default)]
pub struct Security {
    tls: Option<Tls>,
    pub sasl: Option<Sasl>,
}

fn invalid(profile: &str, what: impl std::fmt::Display) -> BackendError {
    BackendError::Invalid(format!("profile {profile:?}: {what}"))
}

fn filled(v: Option<&str>) -> Option<&str> {
    v.map(str::trim).filter(|v| !v.is_empty())
}

impl Security {
    pub fn from_settings(
        profile: &str,
        s: &KafkaSettings,
        secrets: &dyn SecretSource,
    ) -> Result<Security> {
        let sasl = match filled(s.sasl_mechanism.as_deref()) {
            None => {
                if filled(s.sasl_username.as_deref()).is_some()
                    || filled(s.sasl_password_env.as_deref()).is_some()
                {
                    return Err(invalid(
                        profile,
                        "sasl_username and sasl_password_env need sasl_mechanism = \"PLAIN\", \"SCRAM-SHA-256\" or \"SCRAM-SHA-512\"",
                    ));
                }
                None
            }
            Some(m) => {
                let mechanism = match m.to_ascii_uppercase().as_str() {
                    "PLAIN" => Mechanism::Plain,
                    "SCRAM-SHA-256" => Mechanism::Scram(Hash::Sha256),
                    "SCRAM-SHA-512" => Mechanism::Scram(Hash::Sha512),
                    _ => {
                        return Err(invalid(
                            profile,
                            format!(
                                "sasl_mechanism {:?} is not one qdeck speaks: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                                qdeck_model::sanitize::clean_short(m, 40)
                            ),
                        ))
                    }
                };
                let user = filled(s.sasl_username.as_deref()).ok_or_else(|| {
                    invalid(
                        profile,
                        format!("sasl_mechanism {} needs sasl_username", mechanism.name()),
                    )
                })?;
                let var = filled(s.sasl_password_env.as_deref()).ok_or_else(|| {
                    invalid(
                        profile,
                        format!(
                            "sasl_mechanism {} needs sasl_password_env: the name of the environment variable holding the password",
                            mechanism.name()
                        ),
                    )
                })?;
                let password = secrets.require(profile, "sasl_password_env", var)?;
                Some(Sasl {
                    mechanism,
                    user: user.to_string(),
                    password,
                    password_env: var.to_string(),
                })
            }
        };
        let ca_file = filled(s.tls_ca_file.as_deref()).map(qdeck_model::config::paths::expand_home);
        let tls = match (s.tls, &ca_file) {
            (Some(false), Some(_)) => return Err(invalid(
                profile,
                "tls = false with tls_ca_file: the CA file is only used over TLS; drop one of them",
            )),
            (Some(true), _) | (None, Some(_)) => Some(tls_config(profile, ca_file)?),
            _ => None,
        };
        Ok(Security { tls, sasl })
    }

    /// The stream to speak Kafka on: the TCP stream itself, or TLS over it.
    pub async fn open(&self, addr: &str, tcp: TcpStream) -> Result<Stream> {
        let Some(tls) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|_| {
            BackendError::Invalid(format!(
                "Kafka broker {addr}: {host:?} is not a name TLS can check a certificate against"
            ))
        })?;
        let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
        match connector.connect(name, tcp).await {
            Ok(s) => Ok(Box::new(s)),
            Err(e) => {
                let why = e.to_string();
                // A plaintext listener reads the ClientHello as a request and hangs up.
                let hint = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    ": the broker closed the connection; is this listener PLAINTEXT or SASL_PLAINTEXT (then drop tls)?"
                } else {
                    ""
                };
                Err(BackendError::Unreachable(format!(
                    "TLS with Kafka broker {addr} failed ({}) with {}{hint}",
                    qdeck_model::sanitize::clean_short(&why, 160),
                    match &tls.ca_file {
                        Some(ca) => format!("the CA in tls_ca_file {}", ca.display()),
                        None => "the public web roots (tls_ca_file names another CA)".into(),
                    }
                )))
            }
        }
    }
}

fn tls_config(profile: &str, ca_file: Option<PathBuf>) -> Result<Tls> {
    let provider = crate::tls::install_provider();
    let mut roots = rustls::RootCertStore::empty();
    match &ca_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| invalid(profile, format!("tls_ca_file {}: {e}", path.display())))?;
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| {
                    invalid(
                        profile,
                        format!("tls_ca_file {} is not PEM: {e}", path.display()),
                    )
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(invalid(
                    profile,
                    format!(
                        "tls_ca_file {} holds no usable CA certificate (PEM `BEGIN CERTIFICATE` blocks)",
                        path.display()
                    ),
                ));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(profile, format!("TLS set-up: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Tls {
        config: Arc::new(config),
        ca_file,
    })
}
