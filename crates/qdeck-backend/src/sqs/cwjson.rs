//! CloudWatch GetMetricData over AWS JSON 1.0 (`X-Amz-Target:
//! GraniteServiceVersion20100801.GetMetricData`), signed with aws-sigv4 (the SDK's signer).
//!
//! Why not aws-sdk-cloudwatch: since 2025 it speaks only Smithy RPC v2 CBOR, which moto does not
//! implement (getmoto/moto#9195: Query and JSON only), so age could not be tested. CloudWatch
//! accepts JSON 1.0 (what botocore and the AWS CLI use), so one code path serves AWS and moto.

use std::time::Duration;

use serde_json::{json, Value};

use super::client::{
    chain_text, classify, credentials_text, error_for, one_line, retry_after_header,
};
use crate::{BackendError, Result};
use aws_sdk_sqs::config::{ProvideCredentials, SharedCredentialsProvider};

const TARGET: &str = "GraniteServiceVersion20100801.GetMetricData";

/// Where and as whom to call CloudWatch in one region.
#[derive(Clone, Debug)]
pub(crate) struct CwTarget {
    pub endpoint: String,
    pub region: String,
    pub creds: Option<SharedCredentialsProvider>,
    pub profile: Option<String>,
}

/// CloudWatch endpoint: the profile's override, else AWS_ENDPOINT_URL_CLOUDWATCH, else
/// AWS_ENDPOINT_URL, else the regional endpoint.
pub(crate) fn endpoint_for(override_url: Option<&str>, region: &str) -> String {
    endpoint_in(override_url, region, |k| std::env::var(k).ok())
}

/// `endpoint_for` with the environment passed in, so tests do not depend on the caller's.
fn endpoint_in(
    override_url: Option<&str>,
    region: &str,
    var: impl Fn(&str) -> Option<String>,
) -> String {
    let env = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    override_url
        .map(str::to_string)
        .or_else(|| env("AWS_ENDPOINT_URL_CLOUDWATCH"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| {
            let suffix = if region.starts_with("cn-") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            format!("https://monitoring.{region}.{suffix}")
        })
}

/// Resolved credentials, borrowed for one signature.
pub(crate) struct Keys<'a> {
    pub access_key: &'a str,
    pub secret: &'a str,
    pub token: Option<&'a str>,
}

/// Headers to add to a JSON 1.0 POST to `url` (`https://host[:port]/path`): content type,
/// target, and the SigV4 ones from aws-sigv4 (the SDK's own signer).
pub(crate) fn sign(
    url: &str,
    region: &str,
    key: &Keys<'_>,
    body: &str,
    now: std::time::SystemTime,
) -> Result<Vec<(String, String)>> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let creds = aws_sdk_sqs::config::Credentials::new(
        key.access_key,
        key.secret,
        key.token.map(str::to_string),
        None,
        "qdeck",
    );
    let identity = creds.into();
    let bad = |e: &dyn std::fmt::Display| {
        BackendError::Invalid(one_line(
            &format!("cannot sign CloudWatch request: {e}"),
            200,
        ))
    };
    let params: aws_sigv4::http_request::SigningParams<'_> = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("monitoring")
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| bad(&e))?
        .into();
    let mut headers: Vec<(String, String)> = vec![
        (
            "content-type".to_string(),
            "application/x-amz-json-1.0".to_string(),
        ),
        ("x-amz-target".to_string(), TARGET.to_string()),
    ];
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body.as_bytes()),
    )
    .map_err(|e| bad(&e))?;
    let (out, _signature) = sign(signable, &params).map_err(|e| bad(&e))?.into_parts();
    headers.extend(out.headers().map(|(k, v)| (k.to_string(), v.to_string())));
    Ok(headers)
}

/// One GetMetricData call. `body` is the JSON request; returns the JSON response.
pub(crate) async fn get_metric_data(
    http: &reqwest::Client,
    t: &CwTarget,
    body: &Value,
) -> Result<Value> {
    let url = reqwest::Url::parse(&t.endpoint).map_err(|e| {
        BackendError::Invalid(one_line(
            &format!("CloudWatch endpoint {}: {e}", t.endpoint),
            200,
        ))
    })?;
    if url.host_str().is_none() {
        return Err(BackendError::Invalid(format!(
            "CloudWatch endpoint {} has no host",
            one_line(&t.endpoint, 100)
        )));
    }
    let provider = t.creds.as_ref().ok_or_else(|| {
        BackendError::Auth(format!(
            "no AWS credentials found; {}",
            chain_text(t.profile.as_deref())
        ))
    })?;
    let creds = provider.provide_credentials().await.map_err(|e| {
        let d = one_line(
            &aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            200,
        );
        BackendError::Auth(credentials_text(t.profile.as_deref(), &d))
    })?;
    let text = body.to_string();
    let headers = sign(
        url.as_str(),
        &t.region,
        &Keys {
            access_key: creds.access_key_id(),
            secret: creds.secret_access_key(),
            token: creds.session_token(),
        },
        &text,
        std::time::SystemTime::now(),
    )?;
    let mut req = http.post(url).timeout(Duration::from_secs(20));
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let resp = req.body(text).send().await.map_err(|e| {
        BackendError::Unreachable(one_line(&format!("cloudwatch:GetMetricData: {e}"), 200))
    })?;
    let status = resp.status().as_u16();
    let retry_after = retry_after_header(
        resp.headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
    );
    let bytes = resp.bytes().await.map_err(|e| {
        BackendError::Unreachable(one_line(&format!("cloudwatch:GetMetricData: {e}"), 200))
    })?;
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(v);
    }
    // JSON 1.0 errors name their code in `__type` ("com.amazonaws...#ThrottlingException").
    let code = v
        .get("__type")
        .and_then(Value::as_str)
        .map(|t| t.rsplit('#').next().unwrap_or(t).to_string());
    let msg = v
        .get("message")
        .or_else(|| v.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let line = one_line(
        &format!(
            "cloudwatch:GetMetricData: HTTP {status} {}: {msg}",
            code.as_deref().unwrap_or("")
        ),
        200,
    );
    Err(error_for(
        classify(code.as_deref(), Some(status)),
        "cloudwatch:GetMetricData",
        line,
        retry_after,
    ))
}

/// The GetMetricData body for queue names `names` (query ids `q0`, `q1`, …).
pub(crate) fn request_body(names: &[&str], start: i64, end: i64, token: Option<&str>) -> Value {
    let queries: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "Id": format!("q{i}"),
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SQS",
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Dimensions": [{"Name": "QueueName", "Value": n}]
                    },
                    "Period": 60,
                    "Stat": "Maximum"
                },
                "ReturnData": true
            })
        })
        .collect();
    let mut body = json!({
        "MetricDataQueries": queries,
        "StartTime": start,
        "EndTime": end,
        "ScanBy": "TimestampDescending"
    });
    if let (Some(t), Some(o)) = (token, body.as_object_mut()) {
        o.insert("NextToken".into(), json!(t));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a session token the token is sent and signed; content type and target are signed
    /// too (CloudWatch rejects requests whose target is not covered by the signature).
    #[test]
    fn signed_headers_cover_target_and_session_token() {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let h = sign(
            "http://127.0.0.1:5055/",
            "us-east-1",
            &Keys {
                access_key: "AKID",
                secret: "SECRET",
                token: Some("TOK"),
            },
            "{}",
            now,
        )
        .expect("sign");
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-amz-security-token"), Some("TOK"));
        assert_eq!(get("x-amz-date"), Some("20231114T221320Z"));
        let auth = get("authorization").unwrap_or_default();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKID/20231114/us-east-1/monitoring/aws4_request"
            ),
            "{auth}"
        );
        assert!(
            auth.contains(
                "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
            ),
            "{auth}"
        );
    }

    /// An environment holding exactly `vars`.
    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    /// The override wins over the environment and the regional default.
    #[test]
    fn endpoint_override_wins() {
        let env = env_of(&[
            ("AWS_ENDPOINT_URL_CLOUDWATCH", "http://cw:2"),
            ("AWS_ENDPOINT_URL", "http://all:3"),
        ]);
        assert_eq!(
            endpoint_in(Some("http://x:1"), "eu-west-1", env),
            "http://x:1"
        );
    }

    /// Without override or environment the regional endpoint is used (China has its own
    /// suffix), whatever the environment of the test run holds.
    #[test]
    fn endpoint_defaults_to_regional() {
        assert_eq!(
            endpoint_in(None, "eu-west-1", env_of(&[])),
            "https://monitoring.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            endpoint_in(None, "cn-north-1", env_of(&[])),
            "https://monitoring.cn-north-1.amazonaws.com.cn"
        );
        // A blank variable is no endpoint; a variable of another service is not CloudWatch's.
        let blank = env_of(&[
            ("AWS_ENDPOINT_URL", "  "),
            ("AWS_ENDPOINT_URL_SQS", "http://s:4"),
        ]);
        assert_eq!(
            endpoint_in(None, "eu-west-1", blank),
            "https://monitoring.eu-west-1.amazonaws.com"
        );
    }

    /// The CloudWatch variable wins over the general one, which wins over the default.
    #[test]
    fn endpoint_variables_in_order() {
        let both = env_of(&[
            ("AWS_ENDPOINT_URL", "http://all:3"),
            ("AWS_ENDPOINT_URL_CLOUDWATCH", "http://cw:2"),
        ]);
        assert_eq!(endpoint_in(None, "eu-west-1", both), "http://cw:2");
        let general = env_of(&[("AWS_ENDPOINT_URL", "http://all:3")]);
        assert_eq!(endpoint_in(None, "eu-west-1", general), "http://all:3");
    }
}

#[cfg(test)]
mod botocore_check {
    use super::*;

    /// Fixed inputs whose signature was cross-checked with botocore's SigV4Auth (see the
    /// comment below); guards the request we sign against regressions.
    #[test]
    fn signature_matches_botocore() {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_687_600);
        let body = r#"{"MetricDataQueries":[],"StartTime":1,"EndTime":2}"#;
        let h = sign(
            "https://monitoring.us-east-1.amazonaws.com/",
            "us-east-1",
            &Keys {
                access_key: "AKIDEXAMPLE",
                secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                token: None,
            },
            body,
            now,
        )
        .expect("sign");
        let auth = h
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        assert!(auth.ends_with(BOTOCORE_SIG), "{auth}");
    }

    // botocore.auth.SigV4Auth(Credentials("AKIDEXAMPLE", "wJalr…EXAMPLEKEY"), "monitoring",
    // "us-east-1") on POST https://monitoring.us-east-1.amazonaws.com/ with the same body,
    // Content-Type and X-Amz-Target headers at 2025-12-02T15:00:00Z.
    const BOTOCORE_SIG: &str =
        "Signature=2f48d2765becf3ba575a9dd4826c7db1129ce2da840f1b3f225090caa5860aba";
}
