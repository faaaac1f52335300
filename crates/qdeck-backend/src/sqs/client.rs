//! Client setup (aws-config's default credential chain, regions, endpoint override) and the
//! mapping of SDK errors to `BackendError` (one line, redacted, no secrets).

pub(crate) use qdeck_model::sanitize::one_line_max as one_line;
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

use crate::{ApiCalls, BackendError, Result};
use qdeck_model::config::secret::AwsKeys;
use qdeck_model::config::SqsSettings;

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
        profile.map_or_else(
            || "from AWS_PROFILE or `default`".to_string(),
            |p| format!("`{p}`")
        )
    )
}

/// Why no request could be signed: the provider's own words plus what was tried.
pub(crate) fn credentials_text(profile: Option<&str>, detail: &str) -> String {
    format!(
        "could not load AWS credentials ({detail}); {}; with SSO run `aws sso login{}`",
        chain_text(profile),
        profile
            .map(|p| format!(" --profile {p}"))
            .unwrap_or_default()
    )
}

/// One set of clients per configured region. No network here (credentials resolve lazily).
pub(crate) async fn build_clients(
    settings: &SqsSettings,
    keys: Option<AwsKeys>,
    calls: Arc<ApiCalls>,
) -> Result<Vec<RegionClients>> {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(3))
        .operation_attempt_timeout(Duration::from_secs(25))
        .build();
    let https = crate::tls::aws_https_client();
    let base = || {
        let mut l = aws_config::defaults(BehaviorVersion::latest())
            .http_client(https.clone())
            .timeout_config(timeouts.clone())
            .retry_config(RetryConfig::standard().with_max_attempts(3));
        if let Some(p) = &settings.aws_profile {
            l = l.profile_name(p);
        }
        if let Some(e) = &settings.endpoint_url {
            l = l.endpoint_url(e);
        }
        if let Some(k) = &keys {
            l = l.credentials_provider(aws_sdk_sqs::config::Credentials::new(
                &k.access_key_id,
                k.secret_access_key.expose(),
                k.session_token.as_ref().map(|t| t.expose().to_string()),
                None,
                "qdeck",
            ));
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

/// What an AWS error code (or, without one, the HTTP status) means to qdeck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Throttled,
    /// Authenticated, but the policy does not allow the action.
    Forbidden,
    /// A right on the queue's KMS key is missing (SSE-KMS queues).
    KmsForbidden,
    /// The credentials themselves were refused (unknown key, expired token, bad signature).
    Auth,
    MissingQueue,
    Server,
    Other,
}

/// Classify by the error code AWS returned (never by message text), then by HTTP status.
pub(crate) fn classify(code: Option<&str>, status: Option<u16>) -> Class {
    match code.unwrap_or("") {
        "Throttling"
        | "ThrottlingException"
        | "RequestThrottled"
        | "AWS.SimpleQueueService.RequestThrottled"
        | "TooManyRequestsException"
        | "RequestLimitExceeded"
        | "LimitExceededException"
        | "SlowDown" => Class::Throttled,
        "AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation" => Class::Forbidden,
        "KMS.AccessDeniedException"
        | "KmsAccessDenied"
        | "KMS.DisabledException"
        | "KmsDisabled" => Class::KmsForbidden,
        "InvalidClientTokenId"
        | "UnrecognizedClientException"
        | "ExpiredToken"
        | "ExpiredTokenException"
        | "RequestExpired"
        | "SignatureDoesNotMatch"
        | "InvalidSecurity"
        | "AuthFailure"
        | "MissingAuthenticationToken"
        | "IncompleteSignature"
        | "InvalidAccessKeyId" => Class::Auth,
        c if is_missing_queue(c) => Class::MissingQueue,
        _ => match status {
            Some(429) => Class::Throttled,
            Some(401) => Class::Auth,
            // 403 without a code we know: the request was refused after authentication.
            Some(403) => Class::Forbidden,
            Some(s) if s >= 500 => Class::Server,
            _ => Class::Other,
        },
    }
}

/// `Retry-After` in seconds, when the response carries one.
pub(crate) fn retry_after_header(value: Option<&str>) -> Option<Duration> {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// The KMS right an SQS action needs on an encrypted queue.
fn kms_right(op: &str) -> &'static str {
    match op {
        "sqs:SendMessage" | "sqs:SendMessageBatch" => "kms:GenerateDataKey",
        _ => "kms:Decrypt",
    }
}

/// The typed error for a classified AWS error. `op` is the action ("sqs:ReceiveMessage"),
/// named as the missing right when access is denied.
pub(crate) fn error_for(
    class: Class,
    op: &str,
    line: String,
    retry_after: Option<Duration>,
) -> BackendError {
    match class {
        Class::Throttled => BackendError::Throttled {
            msg: format!("{line} (backing off)"),
            retry_after,
        },
        Class::Forbidden => BackendError::forbidden(
            format!("{line}: the identity lacks the right {op}"),
            Some(op),
        ),
        Class::KmsForbidden => {
            let right = kms_right(op);
            BackendError::forbidden(
                format!("{line}: the identity lacks {right} on the queue's KMS key"),
                Some(right),
            )
        }
        Class::Auth => BackendError::Auth(line),
        Class::MissingQueue => BackendError::NotFound(line),
        Class::Server | Class::Other => BackendError::Other(line),
    }
}

pub(crate) fn is_missing_queue(code: &str) -> bool {
    matches!(
        code,
        "AWS.SimpleQueueService.NonExistentQueue" | "QueueDoesNotExist" | "NonExistentQueue"
    )
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
    let retry_after = retry_after_header(
        e.raw_response()
            .and_then(|r| r.headers().get("retry-after")),
    );
    let detail = one_line(&DisplayErrorContext(e).to_string(), 300);
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
            let msg = e.message().map_or_else(
                || match status {
                    Some(s) => format!("HTTP {s} without error details"),
                    None => detail.clone(),
                },
                |m| one_line(m, 200),
            );
            match classify(code.as_deref(), status) {
                Class::MissingQueue => {
                    BackendError::NotFound(format!("queue {what} does not exist (deleted?)"))
                }
                Class::Server => BackendError::Other(format!(
                    "{prefix}: server error {}{}: {msg}",
                    status.unwrap_or(500),
                    if c.is_empty() {
                        String::new()
                    } else {
                        format!(" {c}")
                    }
                )),
                class => error_for(class, op, format!("{prefix}: {c}: {msg}"), retry_after),
            }
        }
        SdkError::TimeoutError(_) => {
            BackendError::Unreachable(format!("{prefix}: timed out ({detail})"))
        }
        SdkError::DispatchFailure(d) if d.is_io() || d.is_timeout() => {
            BackendError::Unreachable(format!("{prefix}: {detail}"))
        }
        // Before a request is sent the only "other" failure is signing it, which needs
        // credentials: none found, or the provider (SSO, credential_process) failed.
        SdkError::DispatchFailure(d) if d.is_other() => {
            BackendError::Auth(credentials_text(profile, &detail))
        }
        SdkError::DispatchFailure(_) => BackendError::Unreachable(format!("{prefix}: {detail}")),
        _ => BackendError::Other(format!("{prefix}: {detail}")),
    };
    CallError { code, status, err }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_actions_name_the_missing_right_and_bad_keys_are_auth() {
        let line = || "x".to_string();
        match error_for(
            classify(Some("AccessDenied"), Some(403)),
            "sqs:ReceiveMessage",
            line(),
            None,
        ) {
            BackendError::Forbidden { right, .. } => {
                assert_eq!(right.as_deref(), Some("sqs:ReceiveMessage"));
            }
            other => panic!("{other:?}"),
        }
        match error_for(
            classify(Some("KMS.AccessDeniedException"), Some(400)),
            "sqs:SendMessageBatch",
            line(),
            None,
        ) {
            BackendError::Forbidden { right, .. } => {
                assert_eq!(right.as_deref(), Some("kms:GenerateDataKey"));
            }
            other => panic!("{other:?}"),
        }
        for code in [
            "InvalidClientTokenId",
            "ExpiredToken",
            "SignatureDoesNotMatch",
        ] {
            assert_eq!(classify(Some(code), Some(403)), Class::Auth, "{code}");
        }
        assert_eq!(classify(None, Some(401)), Class::Auth);
        assert_eq!(classify(None, Some(403)), Class::Forbidden);
    }

    #[test]
    fn throttling_carries_retry_after_when_given() {
        let e = error_for(
            classify(Some("RequestThrottled"), Some(400)),
            "sqs:ListQueues",
            "x".to_string(),
            retry_after_header(Some("7")),
        );
        assert!(e.is_transient());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(classify(None, Some(429)), Class::Throttled);
        assert_eq!(retry_after_header(Some("soon")), None);
    }
}
