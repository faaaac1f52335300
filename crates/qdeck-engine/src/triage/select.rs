//! Select the messages of a bounded scan that match a predicate: their ids (what a filtered
//! redrive passes as `RedriveRequest::only_ids`) and a few samples to show before acting.

use serde::Serialize;

use super::predicate::{EvalContext, Predicate};
use super::scan::{scan, ScanLimits, ScanSummary};
use super::signature::signature;
use qdeck_backend::{Backend, BackendError, OpProgress};
use qdeck_model::domain::QueueId;

/// Samples kept to show in a dry run.
pub const SAMPLES: usize = 10;

#[derive(Debug, Clone, Serialize)]
pub struct SampleRow {
    pub id: String,
    pub signature: String,
    pub enqueued_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    pub predicate: String,
    #[serde(flatten)]
    pub scan: ScanSummary,
    /// Ids of the matching messages, in browse order.
    #[serde(skip)]
    pub ids: Vec<String>,
    pub matched: u64,
    pub samples: Vec<SampleRow>,
}

impl Selection {
    /// `12 match "reason = \"x\""; checked all 200 message(s)`.
    pub fn describe(&self) -> String {
        format!(
            "{} match {:?}; {}",
            super::scan::thousands(self.matched),
            self.predicate,
            self.scan.sample_note("checked")
        )
    }
}

pub async fn select(
    backend: &dyn Backend,
    queue: &QueueId,
    pred: &Predicate,
    limits: &ScanLimits,
    ctx: &EvalContext,
    progress: &OpProgress,
) -> Result<Selection, BackendError> {
    let mut ids = Vec::new();
    let mut samples = Vec::new();
    let summary = scan(backend, queue, limits, progress, |page| {
        for m in page.iter().filter(|m| pred.matches(m, ctx)) {
            if samples.len() < SAMPLES {
                samples.push(SampleRow {
                    id: m.id.clone(),
                    signature: signature(m, &ctx.signature).text,
                    enqueued_ms: m.enqueued_ms,
                });
            }
            ids.push(m.id.clone());
        }
        true
    })
    .await?;
    Ok(Selection {
        predicate: pred.source().to_string(),
        scan: summary,
        matched: ids.len() as u64,
        ids,
        samples,
    })
}
