//! NATS credentials and TLS against nats-servers of the tests' own, configured from files:
//! user/password and an nkey user behind TLS with a CA made here (openssl), a `.creds` file
//! on an operator-mode server (JWTs signed by nats-py's nkeys), and a JetStream domain. A
//! wrong credential, or a CA that did not sign the server's certificate, is one line that
//! names what failed and never the secret.
//!
//! Needs QDECK_TEST_NATS_URL (marks the NATS tests as wanted), QDECK_TEST_PYTHON with nats-py
//! and nkeys, nats-server and openssl on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::nats::{nats_url, peer_at, profile, OwnServer};
use qdeck_backend::{build_with, Backend, BackendError};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::NatsSettings;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| common::skip(&format!("cannot run openssl: {e}")));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`) and a certificate for 127.0.0.1 it signed (`server.pem`, `server.key`);
/// `other-ca.pem` signed nothing here.
fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (key, pem) = (format!("{ca}.key"), format!("{ca}.pem"));
        let subject = format!("/CN=qdeck-test-{ca}");
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", &subject];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &pem]);
        openssl(dir, &args);
    }
    let mut args = vec!["req", "-subj", "/CN=127.0.0.1", "-keyout", "server.key"];
    args.extend(ec);
    args.extend(["-out", "server.csr"]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
}

async fn open(settings: NatsSettings, secrets: &SecretMap) -> Arc<dyn Backend> {
    build_with(&profile(settings), secrets).await.unwrap()
}

/// The one-line error listing the streams gives, checked for what it must never say.
async fn refusal(b: &dyn Backend, secret: &str) -> BackendError {
    let e = b.list_queues().await.unwrap_err();
    let text = e.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(!text.contains(secret), "the secret leaked: {text}");
    e
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON with nats-py and nkeys, nats-server and openssl"]
async fn user_password_and_nkey_users_behind_tls_with_a_ca_file() {
    nats_url();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificates(d);
    let keys = peer_at("-", &["keys", d.to_str().unwrap()]);
    let (seed, public) = (
        keys["nkey_seed"].as_str().unwrap(),
        keys["nkey_public"].as_str().unwrap(),
    );
    let server = OwnServer::with_config(
        d,
        |port| {
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{dir}/js\" }}\n\
                 tls {{ cert_file: \"{dir}/server.pem\", key_file: \"{dir}/server.key\" }}\n\
                 authorization {{ users = [ {{user: ops, password: \"right-pw\"}}, {{nkey: {public}}} ] }}\n",
                dir = d.display()
            )
        },
        "tls",
    );
    let ca = |f: &str| Some(d.join(f).display().to_string());
    let user = NatsSettings {
        url: Some(server.url.clone()),
        username: Some("ops".into()),
        password_env: Some("QDECK_T_PW".into()),
        tls_ca_file: ca("ca.pem"),
        ..Default::default()
    };
    let pw = |p: &str| SecretMap::new().with("QDECK_T_PW", p);
    let b = open(user.clone(), &pw("right-pw")).await;
    assert!(b.list_queues().await.unwrap().is_empty());

    let e = refusal(
        open(user.clone(), &pw("wrong-pw")).await.as_ref(),
        "wrong-pw",
    )
    .await;
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&server.url) && text.contains("user \"ops\"") && text.contains("QDECK_T_PW"),
        "{text}"
    );

    // The CA that did not sign the server's certificate: TLS fails, and says with which CA.
    let other = NatsSettings {
        tls_ca_file: ca("other-ca.pem"),
        ..user.clone()
    };
    let e = refusal(open(other, &pw("right-pw")).await.as_ref(), "right-pw").await;
    assert!(matches!(e, BackendError::Unreachable(_)), "{e:?}");
    assert!(
        e.to_string().contains("TLS failed") && e.to_string().contains("other-ca.pem"),
        "{e}"
    );

    let nkey = NatsSettings {
        url: Some(server.url.clone()),
        nkey_seed_env: Some("QDECK_T_SEED".into()),
        tls_ca_file: ca("ca.pem"),
        ..Default::default()
    };
    let b = open(nkey.clone(), &SecretMap::new().with("QDECK_T_SEED", seed)).await;
    assert!(b.list_queues().await.unwrap().is_empty());
    // Another user's seed: the server does not know its public key.
    let stranger = peer_at("-", &["keys", d.to_str().unwrap()]);
    let wrong = stranger["nkey_seed"].as_str().unwrap();
    let b = open(nkey, &SecretMap::new().with("QDECK_T_SEED", wrong)).await;
    let e = refusal(b.as_ref(), wrong).await;
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    assert!(
        e.to_string().contains("the nkey seed in QDECK_T_SEED"),
        "{e}"
    );
}

/// An operator-mode server: an operator, a system account and an account with JetStream,
/// preloaded; the user's JWT and seed in `user.creds`.
fn operator_server(d: &Path) -> OwnServer {
    let keys = peer_at("-", &["keys", d.to_str().unwrap()]);
    let s = |k: &str| keys[k].as_str().unwrap().to_string();
    OwnServer::with_config(
        d,
        move |port| {
            format!(
                "listen: 127.0.0.1:{port}\noperator: \"{dir}/op.jwt\"\nsystem_account: {sys}\n\
                 resolver: MEMORY\nresolver_preload: {{ {acc}: \"{acc_jwt}\", {sys}: \"{sys_jwt}\" }}\n\
                 jetstream {{ store_dir: \"{dir}/js\" }}\n",
                dir = d.display(),
                sys = s("system_account"),
                sys_jwt = s("system_account_jwt"),
                acc = s("account"),
                acc_jwt = s("account_jwt"),
            )
        },
        "nats",
    )
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL, QDECK_TEST_PYTHON with nats-py and nkeys, and nats-server"]
async fn a_creds_file_opens_an_operator_mode_server_and_a_stranger_is_named() {
    nats_url();
    let dir = tempfile::tempdir().unwrap();
    let server = operator_server(dir.path());
    let creds = dir.path().join("user.creds");
    let settings = NatsSettings {
        url: Some(server.url.clone()),
        creds_file: Some(creds.display().to_string()),
        ..Default::default()
    };
    let b = open(settings.clone(), &SecretMap::new()).await;
    assert!(
        b.list_queues().await.unwrap().is_empty(),
        "JetStream answers"
    );

    // A .creds file of another operator's account: refused, naming the file.
    let other = tempfile::tempdir().unwrap();
    peer_at("-", &["keys", other.path().to_str().unwrap()]);
    let stranger = other.path().join("user.creds");
    let b = open(
        NatsSettings {
            creds_file: Some(stranger.display().to_string()),
            ..settings.clone()
        },
        &SecretMap::new(),
    )
    .await;
    let e = refusal(b.as_ref(), "SUA").await;
    assert!(matches!(e, BackendError::Auth(_)), "{e:?}");
    assert!(
        e.to_string().contains(&stranger.display().to_string()),
        "{e}"
    );

    // A file that is not there: one line naming it.
    let b = open(
        NatsSettings {
            creds_file: Some("/nonexistent/qdeck.creds".into()),
            ..settings
        },
        &SecretMap::new(),
    )
    .await;
    let e = refusal(b.as_ref(), "SUA").await;
    assert!(e.to_string().contains("/nonexistent/qdeck.creds"), "{e}");
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and nats-server"]
async fn a_jetstream_domain_prefixes_the_api_and_a_wrong_one_says_so() {
    nats_url();
    let dir = tempfile::tempdir().unwrap();
    let server = OwnServer::with_config(
        dir.path(),
        |port| {
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{ domain: hub, store_dir: \"{}/js\" }}\n",
                dir.path().display()
            )
        },
        "nats",
    );
    let with = |d: &str| NatsSettings {
        url: Some(server.url.clone()),
        domain: Some(d.into()),
        ..Default::default()
    };
    let b = open(with("hub"), &SecretMap::new()).await;
    assert!(b.list_queues().await.unwrap().is_empty());
    let calls = b.api_calls().snapshot();
    assert!(calls.contains_key("nats:STREAM.LIST"), "{calls:?}");
    let b = open(with("elsewhere"), &SecretMap::new()).await;
    let e = refusal(b.as_ref(), "\u{0}").await;
    assert!(matches!(e, BackendError::Unsupported(_)), "{e:?}");
    assert!(e.to_string().contains("the domain is wrong"), "{e}");
}
