//! Replay (`qdeck replay`): seek a subscription back to a time, planned, confirmed and audited
//! like every other operation. The plan says what becomes unacknowledged (delivered again)
//! and what becomes acknowledged; the run goes through the gate at tier `full`, since the
//! messages published before the time are acknowledged for good.

use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{QueueId, QueueInfo, SeekPlan};
use qdeck_model::sanitize::clean;
use serde_json::json;

use super::{Outcome, Planned};
use crate::gate::{Gate, Mutation};

/// Plan seeking subscription `queue` back to `to_ms` (Unix ms). Nothing is changed.
pub async fn plan_seek(gate: &Gate, queue: &QueueId, to_ms: i64) -> Result<Planned, BackendError> {
    let plan = qdeck_backend::seeker_of(gate.backend().as_ref(), queue)?
        .plan_seek(queue, to_ms)
        .await?;
    let info = QueueInfo {
        id: queue.clone(),
        ..Default::default()
    };
    Ok(Planned::Seek { queue: info, plan })
}

fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339())
}

pub(super) fn describe(plan: &SeekPlan) -> String {
    format!(
        "replay {} from {}: {}",
        clean(plan.queue.as_str()),
        when(plan.to_ms),
        clean(&plan.effects.join("; "))
    )
}

pub(super) fn plan_json(plan: &SeekPlan) -> serde_json::Value {
    json!({
        "dry_run": true,
        "action": "replay",
        "queue": plan.queue,
        "to": when(plan.to_ms),
        "to_ms": plan.to_ms,
        "effects": plan.effects,
    })
}

fn counts(plan: &SeekPlan) -> serde_json::Value {
    json!({"to": when(plan.to_ms), "effects": plan.effects})
}

pub(super) async fn run(gate: &Gate, queue: &QueueId, plan: &SeekPlan, p: &OpProgress) -> Outcome {
    let failed = |error: BackendError, p: &OpProgress| Outcome::Failed {
        error,
        progress: p.snapshot(),
    };
    if let Err(e) = gate.require(Mutation::Replay, queue) {
        return failed(e, p);
    }
    let seeker = match qdeck_backend::seeker_of(gate.backend().as_ref(), queue) {
        Ok(s) => s,
        Err(e) => return failed(e, p),
    };
    let (outcome, error) = match seeker.seek(plan).await {
        Ok(r) => (Outcome::Seek(r), None),
        Err(e) => (failed(e.clone(), p), Some(e.to_string())),
    };
    gate.record(
        Mutation::Replay,
        queue,
        None,
        counts(plan),
        outcome.verdict(),
        error,
    );
    outcome
}
