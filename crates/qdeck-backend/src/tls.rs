//! The one TLS crypto provider of the process.
//!
//! Every TLS client in qdeck (reqwest for the management APIs, lapin, redis, the AWS SDK) is
//! rustls, built with the `ring` provider only: aws-lc-rs would compile a large C library and
//! double the binary's crypto for nothing. reqwest is built without a provider of its own and
//! panics on `Client::build` unless one is installed process-wide, so every place that builds
//! a client calls [`install_provider`] first; it is idempotent and cheap.

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;

/// Installs ring as the process-level rustls provider (once) and returns the one in force.
///
/// If something else installed a provider first, that one stays and is returned: a second
/// install would fail, and both would be rustls anyway.
pub fn install_provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            CryptoProvider::get_default()
                .cloned()
                .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
        })
        .clone()
}

/// The HTTPS client for the AWS SDK and its credential providers, on the same ring provider
/// (the SDK's `default-https-client` would bring aws-lc-rs back).
#[cfg(feature = "sqs")]
pub fn aws_https_client() -> aws_sdk_sqs::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    install_provider();
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_ring_once_and_reqwest_builds_on_it() {
        let first = install_provider();
        let second = install_provider();
        assert!(Arc::ptr_eq(&first, &second), "provider installed twice");
        let process = CryptoProvider::get_default().expect("a process-level provider");
        assert!(Arc::ptr_eq(&first, process));
        let ring = rustls::crypto::ring::default_provider();
        let names = |p: &CryptoProvider| {
            p.cipher_suites
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&first),
            names(&ring),
            "the installed provider is not ring"
        );
        // reqwest (rustls-no-provider) panics here when no provider is installed.
        reqwest::Client::builder()
            .https_only(true)
            .build()
            .expect("reqwest client on the ring provider");
    }
}
