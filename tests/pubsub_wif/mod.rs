//! Workload identity federation (an `external_account` credentials file named by the profile's
//! `credentials_file`), held to Google's own `google-auth` library: a stand-in for the Security
//! Token Service, IAM Credentials and Cloud Monitoring on loopback records what each client
//! asks; qdeck's token exchange must ask what google-auth's `identity_pool.Credentials` asks,
//! and the token it ends with must be the one its Monitoring calls carry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qdeck_backend::{build, BackendError};
use qdeck_model::config::{Profile, ProfileKind, PubsubSettings};
use qdeck_model::domain::QueueId;
use serde_json::{json, Value as Json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SA: &str = "qdeck-reader@p.iam.gserviceaccount.com";

#[derive(Debug, Clone)]
struct Asked {
    path: String,
    authorization: String,
    body: String,
}

/// One HTTP/1.1 request off `s`: the path, the Authorization header and the body.
async fn read_request(s: &mut tokio::net::TcpStream) -> Option<Asked> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let head = &text[..end];
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        if buf.len() < end + 4 + len {
            continue;
        }
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let authorization = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("authorization")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string();
        return Some(Asked {
            path,
            authorization,
            body,
        });
    }
}

/// The stand-in: STS answers `fed-<subject>` (400 for the subject `refuse-me`), IAM answers
/// `sa-<federated token>`, Monitoring answers no series. Every request is recorded.
async fn standin() -> (String, Arc<Mutex<Vec<Asked>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let log = log2.clone();
            tokio::spawn(async move {
                let Some(a) = read_request(&mut s).await else {
                    return;
                };
                log.lock().unwrap().push(a.clone());
                let (status, body) = answer(&a);
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    (base, log)
}

fn form(body: &str) -> BTreeMap<String, String> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = v.replace('+', " ");
            (k.to_string(), urlencoding::decode(&v).unwrap().into_owned())
        })
        .collect()
}

fn answer(a: &Asked) -> (&'static str, String) {
    if a.path.starts_with("/v1/token") {
        let f = form(&a.body);
        let subject = f.get("subject_token").cloned().unwrap_or_default();
        if subject == "refuse-me" {
            let body = json!({"error": "invalid_grant", "error_description": "The audience in the token is not allowed."});
            return ("400 Bad Request", body.to_string());
        }
        let body = json!({"access_token": format!("fed-{}", subject.trim()), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer", "expires_in": 3600});
        return ("200 OK", body.to_string());
    }
    if a.path.contains(":generateAccessToken") {
        let fed = a.authorization.trim_start_matches("Bearer ").to_string();
        let expire = (chrono::Utc::now() + chrono::Duration::hours(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let body = json!({"accessToken": format!("sa-{fed}"), "expireTime": expire});
        return ("200 OK", body.to_string());
    }
    if a.path.contains("/timeSeries") {
        return ("200 OK", json!({"timeSeries": []}).to_string());
    }
    (
        "404 Not Found",
        json!({"error": {"message": "no such path"}}).to_string(),
    )
}

/// An external_account file whose subject token is read from `token_file`.
fn credentials(base: &str, token_file: &std::path::Path, impersonate: bool) -> Json {
    let mut c = json!({
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/ci/providers/gh",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": format!("{base}/v1/token"),
        "credential_source": {"file": token_file.display().to_string()},
    });
    if impersonate {
        c["service_account_impersonation_url"] = json!(format!(
            "{base}/v1/projects/-/serviceAccounts/{SA}:generateAccessToken"
        ));
    }
    c
}

/// A profile as on Google's service (credentials sent), its Pub/Sub endpoint the fake on
/// loopback (which ignores the token) and its Monitoring the stand-in (which records it).
fn profile(project: &str, credentials_file: &std::path::Path, monitoring: &str) -> Profile {
    Profile {
        kind: ProfileKind::Pubsub(PubsubSettings {
            projects: vec![project.to_string()],
            emulator_host: None,
            monitoring_endpoint: Some(monitoring.to_string()),
            credentials_file: Some(credentials_file.display().to_string()),
            endpoint: Some(format!("http://{}", crate::emulator())),
        }),
        ..crate::profile(project, "unused", None)
    }
}

/// What google-auth's identity_pool.Credentials asks, for the same file and scope.
fn google_auth_refresh(file: &std::path::Path, scope: &str) -> String {
    let code = r#"
import json, sys
import google.auth.transport.requests
from google.auth import identity_pool
info = json.load(open(sys.argv[1]))
creds = identity_pool.Credentials.from_info(info, scopes=[sys.argv[2]])
creds.refresh(google.auth.transport.requests.Request())
print(creds.token)
"#;
    let out = std::process::Command::new(crate::python())
        .args(["-c", code])
        .arg(file)
        .arg(scope)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "google-auth: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QDECK_TEST_PYTHON with google-auth (scripts/pubsub_up.sh)"]
async fn workload_identity_federation_asks_what_google_auth_asks_and_uses_its_token() {
    let (base, log) = standin().await;
    let p = crate::project();
    crate::scene(&["backlog", &p, "wif", "--grow", "3"]);
    let sub = format!("{p}/wif-sub");
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("oidc-token");
    std::fs::write(&subject, "subject-jwt-1\n").unwrap();
    let scope = "https://www.googleapis.com/auth/monitoring.read";
    for impersonate in [false, true] {
        let file = dir.path().join(format!("wif-{impersonate}.json"));
        std::fs::write(&file, credentials(&base, &subject, impersonate).to_string()).unwrap();

        // Google's library first: its requests are the reference.
        log.lock().unwrap().clear();
        let theirs_token = google_auth_refresh(&file, scope);
        let theirs = log.lock().unwrap().clone();

        log.lock().unwrap().clear();
        let b = build(&profile(&p, &file, &base)).await.unwrap();
        let q = QueueId(sub.clone());
        let got = tokio::time::timeout(Duration::from_secs(60), b.stats(&[q]))
            .await
            .expect("no hang")
            .unwrap();
        let ours = log.lock().unwrap().clone();

        let sts = |asked: &[Asked]| {
            asked
                .iter()
                .filter(|a| a.path.starts_with("/v1/token"))
                .map(|a| form(&a.body))
                .collect::<Vec<_>>()
        };
        let (our_sts, their_sts) = (sts(&ours), sts(&theirs));
        assert_eq!(their_sts.len(), 1, "google-auth: {theirs:?}");
        let monitoring_sts: Vec<_> = our_sts
            .iter()
            .filter(|f| impersonate || f.get("scope").map(String::as_str) == Some(scope))
            .collect();
        assert!(!monitoring_sts.is_empty(), "qdeck asked STS: {ours:?}");
        for key in [
            "grant_type",
            "audience",
            "requested_token_type",
            "subject_token",
            "subject_token_type",
            "scope",
        ] {
            assert_eq!(
                monitoring_sts[0].get(key),
                their_sts[0].get(key),
                "impersonate={impersonate}: STS field {key}: ours {our_sts:?}, google-auth's {their_sts:?}"
            );
        }
        assert_eq!(
            monitoring_sts[0].get("subject_token").map(String::as_str),
            Some("subject-jwt-1\n"),
            "the subject token as the file holds it, as google-auth sends it"
        );
        if impersonate {
            let iam = |asked: &[Asked]| {
                asked
                    .iter()
                    .filter(|a| a.path.contains(":generateAccessToken"))
                    .map(|a| {
                        (
                            a.authorization.clone(),
                            serde_json::from_str::<Json>(&a.body).unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            let (our_iam, their_iam) = (iam(&ours), iam(&theirs));
            assert_eq!(their_iam.len(), 1, "{theirs:?}");
            let mine = our_iam
                .iter()
                .find(|(_, b)| b["scope"] == json!([scope]))
                .unwrap_or_else(|| panic!("qdeck asked IAM for {scope}: {our_iam:?}"));
            assert_eq!(mine.0, their_iam[0].0, "the federated token as bearer");
            assert_eq!(mine.1["scope"], their_iam[0].1["scope"], "the scope");
        }
        // The token Monitoring received is the one google-auth ended with.
        let used: Vec<&Asked> = ours
            .iter()
            .filter(|a| a.path.contains("/timeSeries"))
            .collect();
        assert!(
            !used.is_empty(),
            "qdeck called Monitoring: {ours:?}; {got:?}"
        );
        assert!(
            used.iter()
                .all(|a| a.authorization == format!("Bearer {theirs_token}")),
            "impersonate={impersonate}: Monitoring got {:?}, google-auth's token is {theirs_token}",
            used.iter().map(|a| &a.authorization).collect::<Vec<_>>()
        );
        // A second poll reuses the token: no new exchange.
        let before = log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.path.starts_with("/v1/token"))
            .count();
        let q = QueueId(sub.clone());
        let _ = tokio::time::timeout(Duration::from_secs(60), b.stats(&[q])).await;
        let after = log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.path.starts_with("/v1/token"))
            .count();
        assert_eq!(before, after, "a cached token is reused");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QDECK_TEST_PYTHON with google-auth (scripts/pubsub_up.sh)"]
async fn a_refused_federation_and_an_unsupported_source_are_one_line() {
    let _ = crate::python(); // the same gate as the other broker tests
    let (base, _log) = standin().await;
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("oidc-token");
    std::fs::write(&subject, "refuse-me").unwrap();
    let file = dir.path().join("wif.json");
    std::fs::write(&file, credentials(&base, &subject, true).to_string()).unwrap();
    let b = build(&profile("p", &file, &base)).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(60), b.list_queues())
        .await
        .expect("no hang")
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, BackendError::Auth(_)), "{text}");
    assert!(
        text.contains("Security Token Service refused")
            && text.contains("The audience in the token is not allowed.")
            && text.contains(&file.display().to_string())
            && !text.contains('\n'),
        "{text}"
    );

    let mut aws = credentials(&base, &subject, false);
    aws["credential_source"] =
        json!({"environment_id": "aws1", "region_url": "http://169.254.169.254/"});
    std::fs::write(&file, aws.to_string()).unwrap();
    let b = build(&profile("p", &file, &base)).await.unwrap();
    let text = b.list_queues().await.unwrap_err().to_string();
    assert!(
        text.contains("AWS") && text.contains("not supported"),
        "{text}"
    );
}
