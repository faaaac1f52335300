//! Depth and age from Cloud Monitoring: `projects.timeSeries.list` over REST, one call per
//! metric per project (following `nextPageToken`), never one per subscription. Pub/Sub samples
//! these metrics every minute and publishes them minutes late, so every figure carries the time
//! of its point.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::conn::{Auth, MONITORING_SCOPE};
use super::google_http::{call, google_words};
use crate::{ApiCalls, BackendError, Result};

pub const GOOGLE_MONITORING: &str = "https://monitoring.googleapis.com";
pub const UNDELIVERED: &str = "pubsub.googleapis.com/subscription/num_undelivered_messages";
pub const OLDEST_UNACKED: &str = "pubsub.googleapis.com/subscription/oldest_unacked_message_age";
/// Messages a subscription forwarded to its dead-letter topic: a DELTA metric, one count per
/// sampling interval, so the window's points are summed.
pub const FORWARDED: &str = "pubsub.googleapis.com/subscription/dead_letter_message_count";
/// How far back a call looks for the points of each series.
pub const WINDOW_SECS: i64 = 600;

/// The newest point of one subscription's series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub value: f64,
    /// Unix ms of the point's end time: how old the figure is.
    pub at_ms: i64,
}

pub struct Monitoring {
    base: String,
    http: reqwest::Client,
    auth: Arc<Auth>,
    calls: Arc<ApiCalls>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    #[serde(default)]
    time_series: Vec<Series>,
    #[serde(default)]
    next_page_token: String,
}

#[derive(Deserialize)]
struct Series {
    resource: Resource,
    #[serde(default)]
    points: Vec<RawPoint>,
}

#[derive(Deserialize)]
struct Resource {
    #[serde(default)]
    labels: HashMap<String, String>,
}

#[derive(Deserialize)]
struct RawPoint {
    interval: Interval,
    value: TypedValue,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Interval {
    end_time: String,
}

/// Monitoring's TypedValue: int64 values are JSON strings (proto3's JSON mapping).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypedValue {
    int64_value: Option<serde_json::Value>,
    double_value: Option<f64>,
}

impl TypedValue {
    fn number(&self) -> Option<f64> {
        match (&self.int64_value, self.double_value) {
            (Some(serde_json::Value::String(s)), _) => s.parse::<i64>().ok().map(|v| v as f64),
            (Some(serde_json::Value::Number(n)), _) => n.as_f64(),
            (_, Some(d)) => Some(d),
            _ => None,
        }
    }
}

impl Monitoring {
    pub fn new(base: &str, auth: Arc<Auth>, calls: Arc<ApiCalls>) -> Result<Monitoring> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| BackendError::Other(format!("HTTP client: {e}")))?;
        Ok(Monitoring {
            base: base.trim_end_matches('/').to_string(),
            http,
            auth,
            calls,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// The newest point of `metric` for every subscription of `project` that has one, keyed
    /// by subscription id: one `timeSeries.list` call, following its pages.
    pub async fn latest(&self, project: &str, metric: &str) -> Result<HashMap<String, Point>> {
        let all = self.points(project, metric).await?;
        Ok(all
            .into_iter()
            .filter_map(|(sub, points)| Some((sub, points.into_iter().max_by_key(|p| p.at_ms)?)))
            .collect())
    }

    /// A DELTA metric summed over the window, with its newest point's time, per subscription.
    pub async fn summed(&self, project: &str, metric: &str) -> Result<HashMap<String, Point>> {
        let all = self.points(project, metric).await?;
        Ok(all
            .into_iter()
            .filter_map(|(sub, points)| {
                let at_ms = points.iter().map(|p| p.at_ms).max()?;
                let value = points.iter().map(|p| p.value).sum();
                Some((sub, Point { value, at_ms }))
            })
            .collect())
    }

    /// Every point of `metric` in the window, per subscription.
    async fn points(&self, project: &str, metric: &str) -> Result<HashMap<String, Vec<Point>>> {
        let now = chrono::Utc::now();
        let start = now - chrono::Duration::seconds(WINDOW_SECS);
        let fmt = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let url = format!(
            "{}/v3/projects/{}/timeSeries",
            self.base,
            urlencoding::encode(project)
        );
        let filter = format!("metric.type = \"{metric}\"");
        let token = self.auth.token(MONITORING_SCOPE).await?;
        let mut out = HashMap::new();
        let mut page_token = String::new();
        loop {
            self.calls.bump("monitoring:timeSeries.list");
            let mut q: Vec<(&str, String)> = vec![
                ("filter", filter.clone()),
                ("interval.startTime", fmt(start)),
                ("interval.endTime", fmt(now)),
            ];
            if !page_token.is_empty() {
                q.push(("pageToken", page_token.clone()));
            }
            let mut req = self.http.get(&url).query(&q);
            if let Some(t) = &token {
                req = req.bearer_auth(t);
            }
            let (status, text) = call(&format!("Cloud Monitoring at {}", self.base), req).await?;
            if !status.is_success() {
                return Err(http_error(status.as_u16(), &text, project));
            }
            let page: Page = serde_json::from_str(&text).map_err(|e| {
                BackendError::Protocol(format!("Cloud Monitoring timeSeries.list: {e}"))
            })?;
            for s in page.time_series {
                let Some(sub) = s.resource.labels.get("subscription_id") else {
                    continue;
                };
                out.entry(sub.clone())
                    .or_insert_with(Vec::new)
                    .extend(parsed(&s.points));
            }
            if page.next_page_token.is_empty() {
                break;
            }
            page_token = page.next_page_token;
        }
        Ok(out)
    }
}

/// A series' points that carry a time and a number (Monitoring lists them newest first; the
/// order is not relied on).
fn parsed(points: &[RawPoint]) -> impl Iterator<Item = Point> + '_ {
    points.iter().filter_map(|p| {
        let at = chrono::DateTime::parse_from_rfc3339(&p.interval.end_time).ok()?;
        Some(Point {
            value: p.value.number()?,
            at_ms: at.timestamp_millis(),
        })
    })
}

fn http_error(status: u16, body: &str, project: &str) -> BackendError {
    let msg = google_words(body);
    match status {
        401 => BackendError::Auth(format!("Cloud Monitoring: {msg}")),
        403 => BackendError::Forbidden {
            msg: format!("Cloud Monitoring denied timeSeries.list on project {project}: {msg}"),
            right: Some("monitoring.timeSeries.list".into()),
        },
        404 => BackendError::NotFound(format!("Cloud Monitoring: project {project}: {msg}")),
        429 => BackendError::Throttled {
            msg: format!("Cloud Monitoring: {msg}"),
            retry_after: None,
        },
        s => BackendError::Other(format!("Cloud Monitoring answered {s}: {msg}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_point_wins_and_int64_strings_are_read() {
        let page: Page = serde_json::from_str(
            r#"{"timeSeries":[{"metric":{"type":"x"},"resource":{"type":"pubsub_subscription","labels":{"project_id":"p","subscription_id":"s"}},
               "metricKind":"GAUGE","valueType":"INT64","points":[
               {"interval":{"startTime":"2026-01-01T00:01:00Z","endTime":"2026-01-01T00:01:00Z"},"value":{"int64Value":"12"}},
               {"interval":{"startTime":"2026-01-01T00:00:00Z","endTime":"2026-01-01T00:00:00Z"},"value":{"int64Value":"10"}}]}],
               "nextPageToken":"abc","unit":"1"}"#,
        )
        .unwrap();
        assert_eq!(page.next_page_token, "abc");
        let p = parsed(&page.time_series[0].points)
            .max_by_key(|p| p.at_ms)
            .unwrap();
        assert_eq!(p.value, 12.0);
        assert_eq!(p.at_ms, 1_767_225_660_000);
    }

    #[test]
    fn a_denied_call_names_the_permission() {
        let e = http_error(
            403,
            r#"{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}"#,
            "p",
        );
        match e {
            BackendError::Forbidden { right, .. } => {
                assert_eq!(right.as_deref(), Some("monitoring.timeSeries.list"));
            }
            other => panic!("{other:?}"),
        }
    }
}
