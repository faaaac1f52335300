//! Queue list + figures in one go, shared by `ls`, `stats` and `check`.

use regex::Regex;
use serde::Serialize;

use super::exit::CliError;
use qdeck_backend::Backend;
use qdeck_model::domain::{QueueError, QueueErrorKind, QueueId, QueueInfo, QueueKind, QueueStats};

/// One row of `qdeck ls -o json`. Field names are stable (README "JSON output").
#[derive(Debug, Clone, Serialize)]
pub struct QueueRow {
    pub name: String,
    pub kind: QueueKind,
    pub depth: Option<u64>,
    pub in_flight: Option<u64>,
    pub delayed: Option<u64>,
    pub oldest_age_secs: Option<f64>,
    pub age_note: Option<String>,
    /// How old the figures were when the broker answered, for figures from a metric sampled
    /// and published late (Pub/Sub's Cloud Monitoring); absent for figures read live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figures_age_secs: Option<f64>,
    pub dlq: Option<String>,
    pub dlq_depth: Option<u64>,
    pub is_dlq: bool,
    pub dlq_sources: Vec<String>,
    /// For a DLQ, what it is the DLQ of: its sources, or why they cannot be named.
    pub dlq_of: Option<String>,
    pub consumers: Option<u32>,
    /// Messages deleted by the broker before this reader read them (Kafka retention breach:
    /// committed offset below the log start); null where the broker has no such notion.
    pub lost: Option<u64>,
    /// What a log keeps after its readers read it (a JetStream limits stream, a Kafka
    /// topic): retention, not backlog, so `depth` and `oldest_age_secs` are null there and
    /// `check` judges its readers' rows instead.
    pub retained: Option<u64>,
    pub retained_age_secs: Option<f64>,
    pub in_rate: Option<f64>,
    pub out_rate: Option<f64>,
    /// Why this queue has no figures (e.g. AccessDenied); null when it has.
    pub error: Option<String>,
    /// The kind of `error` (`not_found`, `permission`, `unreachable`, …): what a script
    /// decides by, never the text; null with `error`.
    pub error_kind: Option<QueueErrorKind>,
    /// The console's derived figures, present only with `--sample`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived: Option<qdeck_engine::derive::Derived>,
}

impl QueueRow {
    pub fn new(
        info: &QueueInfo,
        stats: Option<&QueueStats>,
        error: Option<&QueueError>,
    ) -> QueueRow {
        QueueRow {
            name: info.id.to_string(),
            kind: info.kind,
            depth: stats.and_then(|s| s.depth),
            in_flight: stats.and_then(|s| s.in_flight),
            delayed: stats.and_then(|s| s.delayed),
            oldest_age_secs: stats.and_then(|s| s.oldest_age_secs),
            age_note: stats.and_then(|s| s.age_note.clone()),
            figures_age_secs: stats
                .filter(|s| s.sampled.is_some())
                .map(QueueStats::figures_age_secs),
            dlq: info.dlq.as_ref().map(std::string::ToString::to_string),
            dlq_depth: stats.and_then(|s| s.dlq_depth),
            is_dlq: info.is_dlq,
            dlq_sources: info
                .dlq_sources
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            dlq_of: info.dlq_of(),
            consumers: stats.and_then(|s| s.consumers),
            lost: stats.and_then(|s| s.lost),
            retained: stats.and_then(|s| s.retained),
            retained_age_secs: stats.and_then(|s| s.retained_age_secs),
            in_rate: stats.and_then(|s| s.in_rate),
            out_rate: stats.and_then(|s| s.out_rate),
            error: error.map(ToString::to_string),
            error_kind: error.map(|e| e.kind),
            derived: None,
        }
    }
}

pub fn compile_pattern(p: Option<&str>) -> Result<Option<Regex>, CliError> {
    p.map(|p| {
        Regex::new(p).map_err(|e| {
            CliError::usage(format!(
                "bad pattern {p:?}: {}",
                qdeck_model::sanitize::one_line(&e.to_string())
            ))
        })
    })
    .transpose()
}

/// List queues (optionally matching `pattern`) and fetch their figures.
pub async fn rows(
    backend: &dyn Backend,
    pattern: Option<&Regex>,
) -> Result<Vec<QueueRow>, CliError> {
    let infos: Vec<QueueInfo> = backend
        .list_queues()
        .await?
        .into_iter()
        .filter(|q| pattern.is_none_or(|re| re.is_match(q.id.as_str())))
        .collect();
    rows_of(backend, infos).await
}

/// Figures for these queues, one row each (a queue the broker could not answer for carries
/// its `error`).
pub async fn rows_of(
    backend: &dyn Backend,
    infos: Vec<QueueInfo>,
) -> Result<Vec<QueueRow>, CliError> {
    if infos.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<QueueId> = infos.iter().map(|q| q.id.clone()).collect();
    let batch = backend.stats(&ids).await?;
    let by_id: std::collections::HashMap<&QueueId, &QueueStats> =
        batch.stats.iter().map(|s| (&s.id, s)).collect();
    let errs: std::collections::HashMap<&QueueId, &QueueError> =
        batch.errors.iter().map(|(q, e)| (q, e)).collect();
    Ok(infos
        .iter()
        .map(|i| QueueRow::new(i, by_id.get(&i.id).copied(), errs.get(&i.id).copied()))
        .collect())
}

/// `rows` for `ls`: the pattern goes to the broker where it can filter by name
/// (`Backend::list_queues_matching`), so a few queues of a big broker cost a few rows.
pub async fn rows_matching(
    backend: &dyn Backend,
    pattern: Option<&Regex>,
) -> Result<Vec<QueueRow>, CliError> {
    let infos = match pattern {
        Some(re) => {
            backend
                .list_queues_matching(&qdeck_backend::QueueFilter::new(re.clone()))
                .await?
        }
        None => backend.list_queues().await?,
    };
    rows_of(backend, infos).await
}

/// `rows`, polled twice `gap` apart through the console's store, so the rows carry the same
/// derived figures (rates, trend, time to drain, workers needed, stuck) the console shows.
pub async fn rows_sampled(
    backend: &dyn Backend,
    pattern: Option<&Regex>,
    gap: std::time::Duration,
    drain_target_secs: f64,
) -> Result<Vec<QueueRow>, CliError> {
    let infos: Vec<QueueInfo> = backend
        .list_queues()
        .await?
        .into_iter()
        .filter(|q| pattern.is_none_or(|re| re.is_match(q.id.as_str())))
        .collect();
    sampled(backend, infos, gap, drain_target_secs).await
}

/// Two polls of these queues `gap` apart, as rows with derived figures.
pub async fn sampled(
    backend: &dyn Backend,
    infos: Vec<QueueInfo>,
    gap: std::time::Duration,
    drain_target_secs: f64,
) -> Result<Vec<QueueRow>, CliError> {
    // A ring resolution no coarser than the gap, so the two polls land in separate samples.
    let history = (gap.as_secs_f64() * 240.0).ceil().max(60.0) as u64;
    let mut store = qdeck_engine::store::Store::new(history, 240, drain_target_secs);
    // The console trusts a per-worker rate after 20 s of its own polls at one worker count;
    // a sample's two polls measure the work between them, so the whole gap (at one worker
    // count in both polls) is the measurement. The figure is the console's sum on it.
    store.measure_secs = (gap.as_secs() as u32).clamp(1, qdeck_engine::derive::MEASURE_SECS);
    let ids: Vec<QueueId> = infos.iter().map(|q| q.id.clone()).collect();
    store.set_queues(infos, qdeck_model::domain::now_ms());
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    store.apply(backend.stats(&ids).await?, qdeck_model::domain::now_ms());
    tokio::time::sleep(gap).await;
    store.apply(backend.stats(&ids).await?, qdeck_model::domain::now_ms());
    Ok(store
        .entries()
        .iter()
        .map(|e| {
            let mut r = QueueRow::new(&e.info, e.latest.as_ref(), e.error.as_ref());
            r.derived = store.derived(&e.info.id);
            r
        })
        .collect())
}

/// The one queue named `name`, addressed directly (no listing of every queue); on a miss, a
/// not-found error listing close names.
pub async fn find(backend: &dyn Backend, name: &str) -> Result<QueueInfo, CliError> {
    match backend.describe(&QueueId::new(name)).await {
        Ok(q) => return Ok(q),
        Err(qdeck_backend::BackendError::NotFound(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let all = backend.list_queues().await.unwrap_or_default();
    let close: Vec<&str> = all
        .iter()
        .map(|q| q.id.as_str())
        .filter(|n| n.contains(name) || name.contains(*n))
        .take(5)
        .collect();
    let hint = if close.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            qdeck_model::sanitize::clean(&close.join(", "))
        )
    };
    Err(CliError::new(
        super::exit::NOT_FOUND,
        format!(
            "unknown queue {:?}{hint}",
            qdeck_model::sanitize::clean(name)
        ),
    ))
}

/// Stop before anything is scanned or sent when `action` has to delete chosen messages of
/// `info` and the broker cannot (no delete by id: exit 1, `instead` says what to do) or
/// would refuse on this queue (it could dead-letter messages nobody chose: exit 5).
pub fn require_delete_by_id(
    backend: &dyn Backend,
    info: &QueueInfo,
    action: &str,
    instead: &str,
) -> Result<(), CliError> {
    let Some(d) = backend.deleter() else {
        return Err(qdeck_backend::BackendError::Unsupported(format!(
            "{action} deletes chosen messages by id, which the {} backend cannot do; {instead}",
            backend.kind()
        ))
        .into());
    };
    if let Some(why) = d.delete_refusal(info) {
        return Err(qdeck_backend::BackendError::Refused(why).into());
    }
    Ok(())
}
