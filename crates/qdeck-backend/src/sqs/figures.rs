//! Queue list (ListQueues pages, MaxResults set) and figures (GetQueueAttributes per queue,
//! bounded concurrency). DLQ links come from each queue's RedrivePolicy, inverted locally.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use futures::stream::{self, StreamExt};

use super::client::{is_missing_queue, map_sdk};
use super::{lock, ops, QueueMeta, Recent, RedrivePolicy, SqsBackend};
use crate::{BackendError, QueueFilter, Result};
use qdeck_model::domain::*;

/// Queues read at once (SQS has no batch attribute call).
pub(crate) const CONCURRENCY: usize = 16;
/// Attributes younger than this are reused by `stats` (a list followed by stats costs N calls).
const REUSE: Duration = Duration::from_secs(2);
const PAGE: i32 = 1000;

/// Attributes with the Unix ms they were read at.
type Timed = (i64, BTreeMap<String, String>);

/// Parse a RedrivePolicy JSON string. `maxReceiveCount` may be a number or a numeric string.
pub(crate) fn parse_redrive_policy(s: &str) -> std::result::Result<RedrivePolicy, String> {
    let v: serde_json::Value =
        serde_json::from_str(s).map_err(|e| format!("malformed RedrivePolicy: {e}"))?;
    let arn = v
        .get("deadLetterTargetArn")
        .and_then(|a| a.as_str())
        .filter(|a| a.starts_with("arn:"))
        .ok_or("malformed RedrivePolicy: no deadLetterTargetArn")?;
    let max = match v.get("maxReceiveCount") {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(t)) => t.trim().parse::<u64>().ok(),
        _ => None,
    }
    .filter(|n| *n >= 1)
    .ok_or("malformed RedrivePolicy: maxReceiveCount missing or not a positive number")?;
    Ok(RedrivePolicy {
        dlq_arn: arn.to_string(),
        max_receives: u32::try_from(max).unwrap_or(u32::MAX),
    })
}

fn num(attrs: &BTreeMap<String, String>, k: &str) -> Option<u64> {
    attrs.get(k).and_then(|v| v.trim().parse::<u64>().ok())
}

fn queue_name_from_url(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(url)
        .to_string()
}

/// Static settings for the detail panel.
pub(crate) fn settings_from(attrs: &BTreeMap<String, String>, meta: &QueueMeta) -> QueueSettings {
    let mut extra = BTreeMap::new();
    for k in [
        "DelaySeconds",
        "MaximumMessageSize",
        "ReceiveMessageWaitTimeSeconds",
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
        "SqsManagedSseEnabled",
        "KmsMasterKeyId",
        "RedriveAllowPolicy",
        "RedrivePolicy",
    ] {
        if let Some(v) = attrs.get(k) {
            extra.insert(k.to_string(), v.clone());
        }
    }
    if let Some(e) = &meta.redrive_error {
        extra.insert("redrive_policy_error".to_string(), e.clone());
    }
    QueueSettings {
        lease_secs: num(attrs, "VisibilityTimeout").map(|v| v as f64),
        max_receives: meta.redrive.as_ref().map(|r| r.max_receives),
        retention_secs: num(attrs, "MessageRetentionPeriod").map(|v| v as f64),
        key_policy: None,
        extra,
    }
}

/// Fold attributes into a queue's meta (ARN, FIFO, redrive policy).
fn apply_attrs(meta: &mut QueueMeta, attrs: &BTreeMap<String, String>) {
    if let Some(a) = attrs.get("QueueArn") {
        meta.arn = Some(a.clone());
    }
    meta.fifo = attrs.get("FifoQueue").is_some_and(|v| v == "true") || meta.name.ends_with(".fifo");
    match attrs.get("RedrivePolicy").map(|s| s.trim()) {
        None | Some("") => {
            meta.redrive = None;
            meta.redrive_error = None;
        }
        Some(s) => match parse_redrive_policy(s) {
            Ok(p) => {
                meta.redrive = Some(p);
                meta.redrive_error = None;
            }
            Err(e) => {
                meta.redrive = None;
                meta.redrive_error = Some(e);
            }
        },
    }
}

impl SqsBackend {
    /// One GetQueueAttributes(All) for a queue; updates the meta and recent caches.
    pub(crate) async fn fetch_attrs(
        &self,
        id: &QueueId,
        meta: &QueueMeta,
    ) -> Result<BTreeMap<String, String>> {
        self.fetch_attrs_as(id, meta, false).await
    }

    pub(crate) async fn fetch_attrs_as(
        &self,
        id: &QueueId,
        meta: &QueueMeta,
        from_list: bool,
    ) -> Result<BTreeMap<String, String>> {
        let res = self
            .clients(meta.region)
            .sqs
            .get_queue_attributes()
            .queue_url(&meta.url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await;
        let out = match res {
            Ok(o) => o,
            Err(e) => {
                let ce = map_sdk(ops::GET_ATTRS, id.as_str(), &e, self.profile_name());
                if ce.code.as_deref().is_some_and(is_missing_queue) {
                    self.forget(id);
                }
                return Err(ce.err);
            }
        };
        let attrs: BTreeMap<String, String> = out
            .attributes()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        {
            let mut metas = lock(&self.meta);
            let m = metas.entry(id.clone()).or_insert_with(|| meta.clone());
            apply_attrs(m, &attrs);
        }
        lock(&self.recent).insert(
            id.clone(),
            Recent {
                at: Instant::now(),
                at_ms: now_ms(),
                attrs: attrs.clone(),
                from_list,
            },
        );
        Ok(attrs)
    }

    /// Attributes younger than `REUSE`, else a fresh call.
    async fn attrs_for_stats(&self, id: &QueueId) -> Result<(i64, BTreeMap<String, String>)> {
        if let Some(r) = lock(&self.recent).get_mut(id) {
            if r.from_list && r.at.elapsed() < REUSE {
                // Reuse once: the next refresh reads fresh figures.
                r.from_list = false;
                return Ok((r.at_ms, r.attrs.clone()));
            }
        }
        let meta = self.resolve(id).await?;
        let attrs = self.fetch_attrs(id, &meta).await?;
        Ok((now_ms(), attrs))
    }
}

/// All queue URLs of one region, paging with MaxResults set (without it SQS returns at most
/// 1000 and no NextToken).
async fn list_region(b: &SqsBackend, region: usize, prefix: Option<&str>) -> Result<Vec<String>> {
    let mut urls = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut req = b
            .clients(region)
            .sqs
            .list_queues()
            .max_results(PAGE)
            .set_next_token(token.clone());
        if let Some(p) = prefix {
            req = req.queue_name_prefix(p);
        }
        let out = req
            .send()
            .await
            .map_err(|e| map_sdk(ops::LIST_QUEUES, "", &e, b.profile_name()).err)?;
        urls.extend(out.queue_urls().iter().cloned());
        match out.next_token() {
            Some(t) if !t.is_empty() && Some(t) != token.as_deref() => token = Some(t.to_string()),
            _ => break,
        }
    }
    Ok(urls)
}

/// The `QueueNamePrefix` to list with: the profile's `queue_prefix` narrowed by the
/// filter's literal prefix where queue ids are plain names (one region). `Err` when the two
/// cannot both hold: nothing can match.
fn name_prefix(
    b: &SqsBackend,
    filter: Option<&QueueFilter>,
) -> std::result::Result<Option<String>, ()> {
    let profile = b.settings.queue_prefix.clone();
    let wanted = filter
        .filter(|_| !b.multi_region())
        .and_then(super::super::filter::QueueFilter::literal_prefix);
    match (profile, wanted) {
        (p, None) => Ok(p),
        (None, w) => Ok(w),
        (Some(p), Some(w)) if w.starts_with(&p) => Ok(Some(w)),
        (Some(p), Some(w)) if p.starts_with(&w) => Ok(Some(p)),
        _ => Err(()),
    }
}

pub(crate) async fn list_queues(b: &SqsBackend) -> Result<Vec<QueueInfo>> {
    list_queues_filtered(b, None).await
}

/// Queues matching `filter` (all with None). The filter narrows the listing at SQS by name
/// prefix and is applied to the names before any attribute is read: attributes cost one
/// call per queue.
pub(crate) async fn list_queues_filtered(
    b: &SqsBackend,
    filter: Option<&QueueFilter>,
) -> Result<Vec<QueueInfo>> {
    let Ok(prefix) = name_prefix(b, filter) else {
        return Ok(Vec::new());
    };
    // 1. Names, per region.
    let found = list_names(b, filter, prefix.as_deref()).await?;
    {
        let mut metas = lock(&b.meta);
        // A filtered listing keeps what is known of the other queues.
        if filter.is_none() {
            metas.clear();
        }
        for (id, m) in &found {
            metas.insert(id.clone(), m.clone());
        }
    }
    // 2. Attributes, bounded concurrency. A queue that fails alone is still listed, marked.
    let results: Vec<(QueueId, Result<BTreeMap<String, String>>)> =
        stream::iter(found.iter().cloned().map(|(id, m)| async move {
            let r = b.fetch_attrs_as(&id, &m, true).await;
            (id, r)
        }))
        .buffered(CONCURRENCY)
        .collect()
        .await;
    if let Some(e) = account_failure(&results) {
        return Err(e);
    }
    // 3. DLQ links, both directions, from the RedrivePolicy of each source.
    let (mut infos, sources) = linked_infos(b, &results);
    note_sources(b, &mut infos, &sources, filter.is_none());
    infos.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(infos)
}

/// The queues of every region whose id matches `filter`, with what their URL tells.
async fn list_names(
    b: &SqsBackend,
    filter: Option<&QueueFilter>,
    prefix: Option<&str>,
) -> Result<Vec<(QueueId, QueueMeta)>> {
    let mut found: Vec<(QueueId, QueueMeta)> = Vec::new();
    for region in 0..b.regions.len() {
        for url in list_region(b, region, prefix).await? {
            let name = queue_name_from_url(&url);
            let id = b.id_for(region, &name);
            if filter.is_some_and(|f| !f.matches(id.as_str())) {
                continue;
            }
            found.push((
                id,
                QueueMeta {
                    region,
                    fifo: name.ends_with(".fifo"),
                    name,
                    url,
                    ..QueueMeta::default()
                },
            ));
        }
    }
    Ok(found)
}

/// When every queue failed, and with a failure of the account rather than of a queue
/// (credentials refused or missing, the endpoint down, throttling): that failure.
fn account_failure<T>(results: &[(QueueId, Result<T>)]) -> Option<BackendError> {
    if results.is_empty() || !results.iter().all(|(_, r)| r.is_err()) {
        return None;
    }
    match results.first() {
        Some((_, Err(e)))
            if matches!(
                e,
                BackendError::Unreachable(_)
                    | BackendError::Throttled { .. }
                    | BackendError::Auth(_)
            ) =>
        {
            Some(e.clone())
        }
        _ => None,
    }
}

/// One `QueueInfo` per queue read, with its DLQ from its RedrivePolicy; and, inverted, the
/// sources of each DLQ.
fn linked_infos(
    b: &SqsBackend,
    results: &[(QueueId, Result<BTreeMap<String, String>>)],
) -> (Vec<QueueInfo>, HashMap<QueueId, Vec<QueueId>>) {
    let metas: HashMap<QueueId, QueueMeta> = lock(&b.meta).clone();
    let by_arn: HashMap<String, QueueId> = metas
        .iter()
        .filter_map(|(id, m)| m.arn.clone().map(|a| (a, id.clone())))
        .collect();
    let mut infos: Vec<QueueInfo> = Vec::with_capacity(results.len());
    let mut sources: HashMap<QueueId, Vec<QueueId>> = HashMap::new();
    for (id, res) in results {
        let meta = metas.get(id).cloned().unwrap_or_default();
        let dlq = meta.redrive.as_ref().and_then(|p| {
            by_arn
                .get(&p.dlq_arn)
                .cloned()
                .or_else(|| b.id_for_arn(&p.dlq_arn))
        });
        if let Some(d) = &dlq {
            sources.entry(d.clone()).or_default().push(id.clone());
        }
        let mut settings = match res {
            Ok(attrs) => settings_from(attrs, &meta),
            Err(_) => QueueSettings::default(),
        };
        if let Err(e) = res {
            settings.extra.insert(
                "error".to_string(),
                super::client::one_line(&e.to_string(), 200),
            );
        }
        infos.push(QueueInfo {
            id: id.clone(),
            kind: if meta.fifo {
                QueueKind::Fifo
            } else {
                QueueKind::Standard
            },
            is_dlq: false,
            dlq,
            dlq_sources: Vec::new(),
            settings,
        });
    }
    (infos, sources)
}

/// Mark each DLQ with its sources; a full listing (`complete`) also remembers them, and that
/// every queue's sources are now known.
fn note_sources(
    b: &SqsBackend,
    infos: &mut [QueueInfo],
    sources: &HashMap<QueueId, Vec<QueueId>>,
    complete: bool,
) {
    let mut metas = lock(&b.meta);
    for info in infos {
        if let Some(s) = sources.get(&info.id) {
            let mut s = s.clone();
            s.sort();
            info.is_dlq = true;
            info.dlq_sources = s.clone();
            if let Some(m) = metas.get_mut(&info.id).filter(|_| complete) {
                m.sources = s;
            }
        }
        // A filtered listing has not seen every possible source.
        if let Some(m) = metas.get_mut(&info.id).filter(|_| complete) {
            m.sources_known = true;
        }
    }
}

/// One queue's settings and DLQ links without listing the account.
pub(crate) async fn describe(b: &SqsBackend, id: &QueueId) -> Result<QueueInfo> {
    let meta = b.resolve(id).await?;
    let attrs = b.fetch_attrs_as(id, &meta, true).await?;
    let meta = b.resolve(id).await?;
    let dlq = meta.redrive.as_ref().and_then(|p| b.id_for_arn(&p.dlq_arn));
    let mut settings = settings_from(&attrs, &meta);
    // Without the right to list sources the queue is still described, with the gap said.
    let dlq_sources = match b.dlq_sources(id).await {
        Ok(s) => s,
        Err(e @ BackendError::Forbidden { .. }) => {
            settings.extra.insert(
                "dlq_sources_error".to_string(),
                super::client::one_line(&e.to_string(), 200),
            );
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    Ok(QueueInfo {
        id: id.clone(),
        kind: if meta.fifo {
            QueueKind::Fifo
        } else {
            QueueKind::Standard
        },
        is_dlq: !dlq_sources.is_empty(),
        dlq,
        dlq_sources,
        settings,
    })
}

pub(crate) async fn stats(b: &SqsBackend, queues: &[QueueId]) -> Result<StatsBatch> {
    let results: Vec<(QueueId, Result<Timed>)> =
        stream::iter(queues.iter().cloned().map(|id| async move {
            let r = b.attrs_for_stats(&id).await;
            (id, r)
        }))
        .buffered(CONCURRENCY)
        .collect()
        .await;
    if let Some(e) = account_failure(&results) {
        return Err(e);
    }
    let mut batch = StatsBatch::default();
    let mut depth_now: HashMap<QueueId, u64> = HashMap::new();
    for (id, res) in results {
        match res {
            Ok((at_ms, attrs)) => {
                let depth = num(&attrs, "ApproximateNumberOfMessages");
                if let Some(d) = depth {
                    depth_now.insert(id.clone(), d);
                }
                batch.stats.push(QueueStats {
                    id,
                    at_ms,
                    depth,
                    in_flight: num(&attrs, "ApproximateNumberOfMessagesNotVisible"),
                    delayed: num(&attrs, "ApproximateNumberOfMessagesDelayed"),
                    ..QueueStats::default()
                });
            }
            Err(e) => batch.errors.push((id, e.into())),
        }
    }
    // DLQ depth: from this batch, else from the last figures we read for the DLQ.
    {
        let metas = lock(&b.meta);
        let recent = lock(&b.recent);
        for s in &mut batch.stats {
            let Some(p) = metas.get(&s.id).and_then(|m| m.redrive.clone()) else {
                continue;
            };
            let Some(dlq) = b.id_for_arn(&p.dlq_arn) else {
                continue;
            };
            s.dlq_depth = depth_now.get(&dlq).copied().or_else(|| {
                recent
                    .get(&dlq)
                    .and_then(|r| num(&r.attrs, "ApproximateNumberOfMessages"))
            });
        }
    }
    super::age::fill(b, &mut batch.stats).await;
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redrive_policy_parses_numbers_and_strings() {
        let p = parse_redrive_policy(
            r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123:dlq","maxReceiveCount":"3"}"#,
        )
        .unwrap();
        assert_eq!(p.max_receives, 3);
        assert_eq!(p.dlq_arn, "arn:aws:sqs:us-east-1:123:dlq");
        let p = parse_redrive_policy(
            r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123:dlq","maxReceiveCount":5}"#,
        )
        .unwrap();
        assert_eq!(p.max_receives, 5);
    }

    #[test]
    fn malformed_redrive_policy_is_an_error_not_a_panic() {
        for bad in [
            "",
            "{",
            "[]",
            r#"{"maxReceiveCount":3}"#,
            r#"{"deadLetterTargetArn":"x","maxReceiveCount":3}"#,
            r#"{"deadLetterTargetArn":"arn:aws:sqs:r:1:d","maxReceiveCount":"many"}"#,
            r#"{"deadLetterTargetArn":"arn:aws:sqs:r:1:d","maxReceiveCount":0}"#,
            r#"{"deadLetterTargetArn":"arn:aws:sqs:r:1:d","maxReceiveCount":-1}"#,
        ] {
            assert!(parse_redrive_policy(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_policy_marks_the_queue() {
        let mut m = QueueMeta {
            name: "q".into(),
            ..QueueMeta::default()
        };
        let mut attrs = BTreeMap::new();
        attrs.insert("RedrivePolicy".to_string(), "{oops".to_string());
        apply_attrs(&mut m, &attrs);
        assert!(m.redrive.is_none());
        let s = settings_from(&attrs, &m);
        assert!(s.extra["redrive_policy_error"].contains("malformed"));
    }

    #[test]
    fn name_from_url() {
        assert_eq!(
            queue_name_from_url("http://127.0.0.1:5055/123456789012/orders.fifo"),
            "orders.fifo"
        );
    }
}
