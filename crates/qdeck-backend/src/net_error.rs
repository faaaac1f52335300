//! What went wrong on the way to an HTTP API, said as the operator would say it
//! ("connection refused", "name not resolved") from the error's own causes rather than
//! guessed: a refused connection is not a missing plugin.

use std::error::Error as _;

/// The cause of a failed request in a few words: the OS error under it where there is one
/// (refused, reset, unreachable), else reqwest's own category.
pub fn cause(e: &reqwest::Error) -> String {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if let Some(words) = io_words(io.kind()) {
                return words.to_string();
            }
        }
        let text = s.to_string();
        // hyper-util names DNS failures in its message only.
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return "name not resolved".to_string();
        }
        source = s.source();
    }
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        qdeck_model::sanitize::one_line(&qdeck_model::config::redact::redact(&e.to_string()))
    }
}

fn io_words(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset => "connection reset",
        K::ConnectionAborted => "connection aborted",
        K::TimedOut => "timed out",
        K::HostUnreachable => "host unreachable",
        K::NetworkUnreachable => "network unreachable",
        K::AddrNotAvailable => "address not available",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_connection_refused() {
        crate::tls::install_provider();
        // Bind then drop: the port is (almost surely) closed for the request below.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_or(1, |a| a.port());
        let err = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/api/overview"))
            .send()
            .await
            .err();
        let err = err.map(|e| cause(&e));
        assert_eq!(err.as_deref(), Some("connection refused"));
    }
}
