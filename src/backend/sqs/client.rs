//! Client setup (aws-config's default credential chain, regions, endpoint override) and the
//! mapping of SDK errors to `BackendError` (one line, redacted, no secrets).

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use std::sync::Arc;

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_sqs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::BoxError;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::backend::{ApiCalls, BackendError, Result};
use crate::config::redact::redact;
use crate::config::SqsSettings;

/// The SQS and CloudWatch clients for one region.
#[derive(Clone, Debug)]
pub(crate) struct RegionClients {
    pub region: String,
    pub sqs: aws_sdk_sqs::Client,
    pub cw: super::cwjson::CwTarget,
}

/// Counts every SQS request actually sent, retries included (they are billed too), as
/// `sqs:<Action>` from the `X-Amz-Target` header.
#[derive(Debug)]
struct CountCalls(Arc<ApiCalls>);

impl Intercept for CountCalls {
    fn name(&self) -> &'static str {
        "qdeck-count-calls"
    }

    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        let action = ctx
            .request()
            .headers()
            .get("x-amz-target")
            .and_then(|t| t.strip_prefix("AmazonSQS."))
            .unwrap_or("unknown");
        self.0.bump(&format!("sqs:{action}"));
        Ok(())
    }
}

/// What we tell users we tried when no credentials were found.
pub(crate) fn chain_text(profile: Option<&str>) -> String {
    format!(
        "tried, in order: environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), shared files \
         ~/.aws/config and ~/.aws/credentials (profile {}, incl. SSO and credential_process), \
         web identity token (AWS_WEB_IDENTITY_TOKEN_FILE), ECS container credentials, \
         EC2 instance metadata",
        profile
            .map(|p| format!("`{p}`"))
            .unwrap_or_else(|| "from AWS_PROFILE or `default`".to_string())
    )
}

/// One set of clients per configured region. No network here (credentials resolve lazily).
pub(crate) async fn build_clients(
    settings: &SqsSettings,
    calls: Arc<ApiCalls>,
) -> Result<Vec<RegionClients>> {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(25))
        .build();
    let base = || {
        let mut l = aws_config::defaults(BehaviorVersion::latest())
            .timeout_config(timeouts.clone())
            .retry_config(RetryConfig::standard().with_max_attempts(3));
        if let Some(p) = &settings.aws_profile {
            l = l.profile_name(p);
        }
        if let Some(e) = &settings.endpoint_url {
            l = l.endpoint_url(e);
        }
        l
    };
    let mut regions: Vec<String> = settings.regions.clone();
    if regions.is_empty() {
        let conf = base().load().await;
        match conf.region() {
            Some(r) => regions.push(r.to_string()),
            None => {
                return Err(BackendError::Invalid(
                    "no AWS region: set `regions` in the profile, AWS_REGION, or a region in the \
                     AWS profile"
                        .to_string(),
                ))
            }
        }
    }
    let mut out = Vec::with_capacity(regions.len());
    for r in regions {
        let conf = base().region(Region::new(r.clone())).load().await;
        out.push(RegionClients {
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&conf)
                    .interceptor(CountCalls(calls.clone()))
                    .build(),
            ),
            cw: super::cwjson::CwTarget {
                endpoint: super::cwjson::endpoint_for(settings.endpoint_url.as_deref(), &r),
                region: r.clone(),
                creds: conf.credentials_provider(),
                profile: settings.aws_profile.clone(),
            },
            region: r,
        });
    }
    Ok(out)
}

/// Error codes that mean "slow down".
fn is_throttle(code: &str) -> bool {
    matches!(
        code,
        "Throttling"
            | "ThrottlingException"
            | "RequestThrottled"
            | "AWS.SimpleQueueService.RequestThrottled"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "SlowDown"
    )
}

fn is_auth(code: &str) -> bool {
    matches!(
        code,
        "AccessDenied"
            | "AccessDeniedException"
            | "InvalidClientTokenId"
            | "UnrecognizedClientException"
            | "ExpiredToken"
            | "ExpiredTokenException"
            | "SignatureDoesNotMatch"
            | "InvalidSecurity"
            | "AuthFailure"
            | "MissingAuthenticationToken"
            | "IncompleteSignature"
            | "KMS.AccessDeniedException"
    )
}

pub(crate) fn is_missing_queue(code: &str) -> bool {
    matches!(
        code,
        "AWS.SimpleQueueService.NonExistentQueue" | "QueueDoesNotExist" | "NonExistentQueue"
    )
}

/// One line, at most `max` chars, secrets scrubbed.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let red = redact(&flat);
    if red.chars().count() > max {
        let mut t: String = red.chars().take(max).collect();
        t.push('…');
        t
    } else {
        red
    }
}

/// Facts about a failed call, extracted once so callers can branch on them.
#[derive(Debug, Clone)]
pub(crate) struct CallError {
    pub code: Option<String>,
    pub status: Option<u16>,
    pub err: BackendError,
}

/// Map an SDK error to a `BackendError`. `op` names the call ("sqs:GetQueueAttributes"),
/// `what` the object (queue name) for the message.
pub(crate) fn map_sdk<E>(
    op: &str,
    what: &str,
    e: &SdkError<E, HttpResponse>,
    profile: Option<&str>,
) -> CallError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = e.code().map(str::to_string);
    let status = e.raw_response().map(|r| r.status().as_u16());
    let detail = one_line(&DisplayErrorContext(e).to_string(), 300);
    let lower = detail.to_ascii_lowercase();
    let prefix = if what.is_empty() {
        op.to_string()
    } else {
        format!("{op} {what}")
    };
    let err = match e {
        SdkError::ServiceError(_) | SdkError::ResponseError(_) => {
            let c = code.as_deref().unwrap_or("");
            // Without a parsed message the detail is a deserializer complaint about an HTML
            // or empty body: say the status instead.
            let msg = e
                .message()
                .map(|m| one_line(m, 200))
                .unwrap_or_else(|| match status {
                    Some(s) => format!("HTTP {s} without error details"),
                    None => detail.clone(),
                });
            if is_throttle(c) || status == Some(429) {
                BackendError::Throttled {
                    msg: format!("{prefix}: {c}: {msg} (backing off)"),
                    retry_after: None,
                }
            } else if is_auth(c) || status == Some(403) {
                BackendError::Auth(format!("{prefix}: {c}: {msg}"))
            } else if is_missing_queue(c) {
                BackendError::NotFound(format!("queue {what} does not exist (deleted?)"))
            } else if status.is_some_and(|s| s >= 500) {
                BackendError::Other(format!(
                    "{prefix}: server error {}{}: {msg}",
                    status.unwrap_or(500),
                    if c.is_empty() {
                        String::new()
                    } else {
                        format!(" {c}")
                    }
                ))
            } else {
                BackendError::Other(format!("{prefix}: {c}: {msg}"))
            }
        }
        _ if lower.contains("sso") && (lower.contains("expired") || lower.contains("token")) => {
            BackendError::Auth(format!(
                "AWS SSO session expired or missing: run `aws sso login{}` ({detail})",
                profile
                    .map(|p| format!(" --profile {p}"))
                    .unwrap_or_default()
            ))
        }
        _ if lower.contains("credential") => {
            BackendError::Auth(format!("no AWS credentials found; {}", chain_text(profile)))
        }
        SdkError::TimeoutError(_) => {
            BackendError::Unreachable(format!("{prefix}: timed out ({detail})"))
        }
        SdkError::DispatchFailure(d) if d.is_io() || d.is_timeout() => {
            BackendError::Unreachable(format!("{prefix}: {detail}"))
        }
        SdkError::DispatchFailure(_) => BackendError::Unreachable(format!("{prefix}: {detail}")),
        _ => BackendError::Other(format!("{prefix}: {detail}")),
    };
    CallError { code, status, err }
}
