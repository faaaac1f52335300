//! One exchange with a Google REST endpoint (Cloud Monitoring, the Security Token Service,
//! IAM credentials): the answer's status and text, whatever the status, so that each caller
//! maps a refusal its own way; a failure to reach or read is `Unreachable`, naming the step.

use crate::{BackendError, Result};

pub async fn call(
    step: &str,
    req: reqwest::RequestBuilder,
) -> Result<(reqwest::StatusCode, String)> {
    let unreachable = |e: reqwest::Error| {
        BackendError::Unreachable(format!("{step}: {}", crate::net_error::cause(&e)))
    };
    let resp = req.send().await.map_err(unreachable)?;
    let status = resp.status();
    let text = resp.text().await.map_err(unreachable)?;
    Ok((status, text))
}

/// Google's own words from an OAuth (`error_description`) or API (`error.message`) answer,
/// else the start of the body; cleaned for a terminal and with anything secret-like redacted.
pub fn google_words(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let words = v["error_description"]
        .as_str()
        .or_else(|| v["error"]["message"].as_str())
        .or_else(|| v["error"].as_str())
        .map_or_else(|| body.chars().take(160).collect(), str::to_string);
    qdeck_model::sanitize::clean_short(&qdeck_model::config::redact::redact(&words), 200)
}
