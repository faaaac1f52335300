//! Entra ID auth for Service Bus (`auth = "azure-cli"` and `"workload-identity"`) through the
//! CLI, against the AMQP stand-in started with `--entra-token TOKEN=CLAIMS`: the management
//! API gets `Authorization: Bearer`, the AMQP side a CBS put-token of type `jwt`. Microsoft's
//! client (with the stand-in's SAS key) makes the scenes. Verified against the stand-in, not
//! Azure.
//!
//! The stand-in tests need QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON, as in
//! tests/servicebus_amqp.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use common::cli_env::CliEnv;
use common::sb_standin::SbStandin;
use serde_json::Value as Json;

/// A config with one Service Bus profile `sb` (the default) whose other settings are `extra`.
fn write_config(env: &CliEnv, s: Option<&SbStandin>, extra: &str) {
    let cfg = env.dir.path().join("config/qdeck/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let mgmt = s.map_or_else(String::new, |s| {
        format!("management_url = \"{}\"\n", s.mgmt)
    });
    std::fs::write(
        &cfg,
        format!(
            "default_profile = \"sb\"\n[[profiles]]\nname = \"sb\"\nkind = \"servicebus\"\ntopics = false\n{mgmt}{extra}"
        ),
    )
    .unwrap();
}

/// A fake `az` in its own folder: prints `answer` on stdout, or `fail` on stderr with exit
/// 1, and appends its arguments to `calls` there.
fn fake_az(dir: &Path, answer: &str, fail: Option<&str>) -> PathBuf {
    let bin = dir.join("fake-az");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("answer.json"), answer).unwrap();
    let script = match fail {
        Some(text) => {
            std::fs::write(bin.join("fail.txt"), text).unwrap();
            "#!/bin/sh\nd=$(dirname \"$0\")\necho \"$@\" >> \"$d/calls\"\ncat \"$d/fail.txt\" >&2\nexit 1\n"
        }
        None => {
            "#!/bin/sh\nd=$(dirname \"$0\")\necho \"$@\" >> \"$d/calls\"\ncat \"$d/answer.json\"\n"
        }
    };
    let az = bin.join("az");
    std::fs::write(&az, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&az, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// What `az account get-access-token --output json` prints (CLI 2.54 and later).
fn az_answer(token: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    format!(
        r#"{{"accessToken": "{token}", "expiresOn": "2030-01-01 00:00:00.000000", "expires_on": {exp}, "subscription": "00000000-0000-0000-0000-000000000000", "tenant": "11111111-1111-1111-1111-111111111111", "tokenType": "Bearer"}}"#
    )
}

/// PATH with `first` in front of the test's own.
fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one line a failed command printed on stderr.
fn one_error_line(out: &Output) -> String {
    let (_, err) = text(out);
    assert!(!out.status.success(), "expected a failure, stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line of error: {err:?}");
    lines[0].to_string()
}

fn ok_json(out: &Output) -> Json {
    let (stdout, err) = text(out);
    assert!(out.status.success(), "{err}");
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("JSON on stdout: {stdout:?}"))
}

fn row<'a>(rows: &'a Json, name: &str) -> &'a Json {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {rows}"))
}

fn peek_ids(out: &Output) -> Vec<String> {
    let mut ids: Vec<String> = ok_json(out)
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// `auth = "azure-cli"` with a connection string that has no key: `ls` reads the figures
/// (Bearer on the management API) and `peek` the dead letters (jwt on CBS) that Microsoft's
/// client made; `az` was asked for a Service Bus token; the token is printed nowhere.
#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
fn azure_cli_token_lists_and_peeks() {
    let token = "entra-cli-tok-5f1c9e27";
    let grant = format!("{token}=Listen,Send,Manage");
    let s = SbStandin::start(&["entra-cli"], &["--entra-token", &grant]);
    assert_eq!(s.client(&["dead", "entra-cli", "ecli", "3"])["dead"], 3);
    s.client(&["schedule", "entra-cli", "2", "3600"]);
    let env = CliEnv::new();
    write_config(
        &env,
        Some(&s),
        "auth = \"azure-cli\"\nconnection_string_env = \"QDECK_SB_CS\"\n",
    );
    let bin = fake_az(env.dir.path(), &az_answer(token), None);
    let run = |args: &[&str]| {
        env.qdeck()
            .env("PATH", path_with(&bin))
            .env("QDECK_SB_CS", s.endpoint_only())
            .args(args)
            .output()
            .unwrap()
    };
    let ls = run(&["ls", "-o", "json"]);
    let rows = ok_json(&ls);
    let r = row(&rows, "entra-cli");
    assert_eq!(r["dlq_depth"], 3, "{r}");
    assert_eq!(r["delayed"], 2, "{r}");
    let peek = run(&["peek", "entra-cli/$DeadLetterQueue", "-o", "json"]);
    assert_eq!(peek_ids(&peek), ["ecli-0", "ecli-1", "ecli-2"]);
    let calls = std::fs::read_to_string(bin.join("calls")).unwrap();
    // One token per run, shared by the management API and the AMQP connection.
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        ["account get-access-token --resource https://servicebus.azure.net --output json"; 2],
        "{calls}"
    );
    for out in [&ls, &peek] {
        let (o, e) = text(out);
        assert!(!o.contains(token) && !e.contains(token), "{o}{e}");
    }
}

/// A token the namespace does not know: one line saying authorisation failed, without it.
#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
fn an_unknown_entra_token_is_a_one_line_auth_error() {
    let s = SbStandin::start(
        &["entra-bad"],
        &["--entra-token", "known-tok=Listen,Send,Manage"],
    );
    let token = "stranger-tok-81d0aa";
    let env = CliEnv::new();
    write_config(
        &env,
        Some(&s),
        "auth = \"azure-cli\"\nconnection_string_env = \"QDECK_SB_CS\"\n",
    );
    let bin = fake_az(env.dir.path(), &az_answer(token), None);
    for args in [&["ls"][..], &["peek", "entra-bad"][..]] {
        let out = env
            .qdeck()
            .env("PATH", path_with(&bin))
            .env("QDECK_SB_CS", s.endpoint_only())
            .args(args)
            .output()
            .unwrap();
        let line = one_error_line(&out);
        assert!(line.contains("not authorised"), "{args:?}: {line}");
        assert!(line.contains("InvalidIssuer"), "{args:?}: {line}");
        assert!(!line.contains(token), "{line}");
    }
}

/// `az` not signed in, and no `az` at all: one line each, saying what to do.
#[test]
fn a_signed_out_or_missing_azure_cli_is_one_line() {
    let env = CliEnv::new();
    write_config(
        &env,
        None,
        "auth = \"azure-cli\"\nnamespace = \"qdeck-test.servicebus.windows.net\"\n",
    );
    let bin = fake_az(
        env.dir.path(),
        "",
        Some("WARNING: A few things\nERROR: Please run 'az login' to setup account.\n"),
    );
    let out = env
        .qdeck()
        .env("PATH", path_with(&bin))
        .args(["ls"])
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("az login"), "{line}");
    assert!(line.contains("azure-cli"), "{line}");
    let empty = env.dir.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env
        .qdeck()
        .env("PATH", &empty)
        .args(["ls"])
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("not on PATH"), "{line}");
}

/// A token endpoint on this machine that answers every request with `token` and keeps the
/// request lines and bodies it got.
struct TokenEndpoint {
    url: String,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl TokenEndpoint {
    fn start(token: &'static str) -> TokenEndpoint {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap_or(0);
                let mut length = 0;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap_or(());
                keep.lock().unwrap().push((
                    request_line.trim().to_string(),
                    String::from_utf8_lossy(&body).into_owned(),
                ));
                let answer = format!(
                    r#"{{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"{token}"}}"#
                );
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        TokenEndpoint { url, seen }
    }
}

fn form(body: &str) -> std::collections::BTreeMap<String, String> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = v.replace('+', " ");
            (k.to_string(), urlencoding::decode(&v).unwrap().into_owned())
        })
        .collect()
}

/// `auth = "workload-identity"`: the federated token file is exchanged at
/// `{AZURE_AUTHORITY_HOST}/{tenant}/oauth2/v2.0/token` with the fields Entra wants, and the
/// token it answers peeks the queue.
#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
fn workload_identity_exchanges_the_federated_token_and_peeks() {
    const TOKEN: &str = "entra-wi-tok-3a7d";
    let s = SbStandin::start(
        &["entra-wi"],
        &["--entra-token", "entra-wi-tok-3a7d=Listen,Manage"],
    );
    s.client(&["dead", "entra-wi", "wi", "2"]);
    let endpoint = TokenEndpoint::start(TOKEN);
    let env = CliEnv::new();
    write_config(
        &env,
        Some(&s),
        "auth = \"workload-identity\"\nconnection_string_env = \"QDECK_SB_CS\"\n",
    );
    let file = env.dir.path().join("federated-token");
    std::fs::write(&file, "fed-assertion-4b2e\n").unwrap();
    let out = env
        .qdeck()
        .env("QDECK_SB_CS", s.endpoint_only())
        .env("AZURE_CLIENT_ID", "client-0a1b")
        .env("AZURE_TENANT_ID", "tenant-9c8d")
        .env("AZURE_FEDERATED_TOKEN_FILE", &file)
        .env("AZURE_AUTHORITY_HOST", &endpoint.url)
        .args(["peek", "entra-wi/$DeadLetterQueue", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(peek_ids(&out), ["wi-0", "wi-1"]);
    let (o, e) = text(&out);
    assert!(!o.contains(TOKEN) && !e.contains(TOKEN), "{o}{e}");
    let seen = endpoint.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for (line, body) in &seen {
        assert_eq!(line, "POST /tenant-9c8d/oauth2/v2.0/token HTTP/1.1");
        let f = form(body);
        assert_eq!(f["grant_type"], "client_credentials", "{f:?}");
        assert_eq!(f["client_assertion"], "fed-assertion-4b2e", "{f:?}");
        assert_eq!(
            f["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(f["client_id"], "client-0a1b");
        assert_eq!(f["scope"], "https://servicebus.azure.net/.default");
    }
}

/// No AZURE_FEDERATED_TOKEN_FILE: one line naming it, before anything is asked of the network.
#[test]
fn workload_identity_without_its_token_file_names_the_variable() {
    let env = CliEnv::new();
    write_config(
        &env,
        None,
        "auth = \"workload-identity\"\nnamespace = \"qdeck-test.servicebus.windows.net\"\n",
    );
    let out = env
        .qdeck()
        .env("AZURE_CLIENT_ID", "client-0a1b")
        .env("AZURE_TENANT_ID", "tenant-9c8d")
        .args(["ls"])
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("AZURE_FEDERATED_TOKEN_FILE"), "{line}");
    assert!(line.contains("not set"), "{line}");
}

/// A token with only Listen peeks, but the figures (they need Manage) fail with one line
/// naming the claim, and a redrive (planned by a peek count) fails naming Send; with Listen
/// and Manage the redrive fails naming Send too. The dead letters stay where they were and no
/// token reaches the audit log.
#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
fn listen_only_tokens_peek_but_cannot_redrive() {
    let listen = "entra-listen-tok-c4e2";
    let listen_manage = "entra-lm-tok-77b0";
    let s = SbStandin::start(
        &["entra-ro"],
        &[
            "--entra-token",
            &format!("{listen}=Listen"),
            "--entra-token",
            &format!("{listen_manage}=Listen,Manage"),
        ],
    );
    s.client(&["dead", "entra-ro", "ro", "2"]);
    let env = CliEnv::new();
    write_config(
        &env,
        Some(&s),
        "auth = \"azure-cli\"\nconnection_string_env = \"QDECK_SB_CS\"\n",
    );
    let run = |token: &str, args: &[&str]| {
        let bin = fake_az(&env.dir.path().join(token), &az_answer(token), None);
        env.qdeck()
            .env("PATH", path_with(&bin))
            .env("QDECK_SB_CS", s.endpoint_only())
            .args(args)
            .output()
            .unwrap()
    };
    let redrive = ["redrive", "entra-ro/$DeadLetterQueue", "--yes"];
    let peek = ["peek", "entra-ro/$DeadLetterQueue", "-o", "json"];
    assert_eq!(peek_ids(&run(listen, &peek)), ["ro-0", "ro-1"]);
    let line = one_error_line(&run(listen, &["ls"]));
    assert!(line.contains("missing 'Manage' claim"), "{line}");
    let line = one_error_line(&run(listen, &redrive));
    assert!(line.contains("missing 'Send' claim"), "{line}");
    let line = one_error_line(&run(listen_manage, &redrive));
    assert!(line.contains("missing 'Send' claim"), "{line}");
    assert_eq!(
        peek_ids(&run(listen, &peek)),
        ["ro-0", "ro-1"],
        "nothing moved or lost"
    );
    let audit = env.dir.path().join("state/qdeck/audit.log");
    let audit = std::fs::read_to_string(audit).unwrap_or_default();
    assert!(
        audit.contains("redrive"),
        "the refused redrive is audited: {audit}"
    );
    assert!(
        !audit.contains(listen) && !audit.contains(listen_manage),
        "{audit}"
    );
}

/// The stand-in's Entra ID side held to Microsoft's client: with a token credential it sends
/// and peeks (a jwt put-token), with an unknown token it is refused; qdeck with another
/// identity then counts and peeks what it sent.
#[test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
fn microsofts_client_with_an_entra_token_and_qdeck_agree() {
    let s = SbStandin::start(
        &["entra-ms"],
        &[
            "--entra-token",
            "ms-app-tok-0c3f=Listen,Send",
            "--entra-token",
            "qdeck-tok-9e1b=Listen,Manage",
        ],
    );
    let host = s
        .conn
        .strip_prefix("Endpoint=sb://")
        .and_then(|r| r.split(';').next())
        .unwrap()
        .to_string();
    let ms = |token: &str, n: &str| {
        let out = std::process::Command::new(common::sb_standin::python())
            .arg(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures/sb_amqp_client/entra_client.py"),
            )
            .args([host.as_str(), token, "entra-ms", n])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or("");
        serde_json::from_str::<Json>(line).unwrap_or_else(|_| panic!("no JSON answer: {text}"))
    };
    let sent = ms("ms-app-tok-0c3f", "3");
    assert_eq!(sent["sent"], 3, "{sent}");
    assert_eq!(
        sent["peeked"],
        serde_json::json!(["entra-0", "entra-1", "entra-2"])
    );
    let refused = ms("stranger-tok", "1");
    assert!(refused["error"].is_string(), "{refused}");

    let env = CliEnv::new();
    write_config(
        &env,
        Some(&s),
        "auth = \"azure-cli\"\nconnection_string_env = \"QDECK_SB_CS\"\n",
    );
    let bin = fake_az(env.dir.path(), &az_answer("qdeck-tok-9e1b"), None);
    let run = |args: &[&str]| {
        env.qdeck()
            .env("PATH", path_with(&bin))
            .env("QDECK_SB_CS", s.endpoint_only())
            .args(args)
            .output()
            .unwrap()
    };
    let rows = ok_json(&run(&["ls", "-o", "json"]));
    assert_eq!(row(&rows, "entra-ms")["depth"], 3, "{rows}");
    assert_eq!(
        peek_ids(&run(&["peek", "entra-ms", "-o", "json"])),
        ["entra-0", "entra-1", "entra-2"]
    );
}
