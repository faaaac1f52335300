//! Consumer-group operations (Kafka's `reset-offsets` and `delete-group`), planned, run and
//! audited like every other operation: the plan reads the figures the confirmation shows (per
//! partition old → new offset and lag before → after), the run goes through the gate (tier
//! `full`: moving a group forward skips records for good, deleting one drops its offsets).

use qdeck_backend::{BackendError, GroupAdmin, OpProgress};
use qdeck_model::domain::{
    GroupDeletePlan, OffsetResetPlan, PartitionReset, QueueId, QueueInfo, ResetTo,
};
use qdeck_model::sanitize::clean;
use serde_json::json;

use super::{Outcome, Planned};
use crate::gate::{Gate, Mutation};

/// Partitions listed in the one-line plan; the JSON dry run lists them all.
const LISTED: usize = 16;

fn admin_of(gate: &Gate) -> Result<&dyn GroupAdmin, BackendError> {
    let b = gate.backend();
    b.group_admin().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "the {} backend has no consumer groups whose offsets qdeck can move or delete",
            b.kind()
        ))
    })
}

/// Plan moving the committed offsets of the group row `queue` (`GROUP@TOPIC`) to `to`.
pub async fn plan_offset_reset(
    gate: &Gate,
    queue: &QueueId,
    to: ResetTo,
) -> Result<Planned, BackendError> {
    let plan = admin_of(gate)?.plan_offset_reset(queue, to).await?;
    let info = QueueInfo {
        id: queue.clone(),
        ..Default::default()
    };
    Ok(Planned::OffsetReset { queue: info, plan })
}

/// Plan deleting consumer group `group`.
pub async fn plan_group_delete(gate: &Gate, group: &str) -> Result<Planned, BackendError> {
    let plan = admin_of(gate)?.plan_group_delete(group).await?;
    Ok(Planned::GroupDelete {
        queue: QueueId::new(group),
        plan,
    })
}

fn offset(o: Option<i64>) -> String {
    o.map_or_else(|| "—".into(), |v| v.to_string())
}

fn lag(o: Option<u64>) -> String {
    o.map_or_else(|| "—".into(), |v| v.to_string())
}

fn partition_text(p: &PartitionReset) -> String {
    format!(
        "[{}] {} → {}{} (lag {} → {})",
        p.partition,
        offset(p.old),
        p.new,
        if p.clamped {
            " (kept within the log)"
        } else {
            ""
        },
        lag(p.lag_before),
        p.lag_after
    )
}

pub(super) fn describe_reset(plan: &OffsetResetPlan) -> String {
    let mut parts: Vec<String> = plan
        .partitions
        .iter()
        .take(LISTED)
        .map(partition_text)
        .collect();
    if plan.partitions.len() > LISTED {
        parts.push(format!(
            "…and {} more partition(s) (all of them with -o json)",
            plan.partitions.len() - LISTED
        ));
    }
    if parts.is_empty() {
        parts.push("no partition has a committed offset to shift".into());
    }
    format!(
        "reset the committed offsets of consumer group {} on topic {} to {}: {}; total lag {} → {}",
        clean(&plan.group),
        clean(&plan.topic),
        plan.to,
        parts.join("; "),
        plan.lag_before(),
        plan.lag_after()
    )
}

pub(super) fn describe_delete(plan: &GroupDeletePlan) -> String {
    let offsets = if plan.topics.is_empty() {
        "it has committed no offset".to_string()
    } else {
        format!(
            "its committed offsets on {}",
            plan.topics
                .iter()
                .map(|(t, l)| format!("{} (lag {l})", clean(t)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "delete consumer group {} (no members) and {offsets}; this cannot be undone",
        clean(&plan.group)
    )
}

pub(super) fn reset_json(plan: &OffsetResetPlan) -> serde_json::Value {
    json!({
        "dry_run": true,
        "action": "reset-offsets",
        "group": plan.group,
        "topic": plan.topic,
        "to": plan.to,
        "partitions": plan.partitions,
        "lag_before": plan.lag_before(),
        "lag_after": plan.lag_after(),
    })
}

pub(super) fn delete_json(plan: &GroupDeletePlan) -> serde_json::Value {
    json!({
        "dry_run": true,
        "action": "delete-group",
        "group": plan.group,
        "topics": plan.topics.iter().map(|(t, l)| json!({"topic": t, "lag": l})).collect::<Vec<_>>(),
    })
}

/// The audit line keeps every partition's old and new offset: enough to move the group back.
fn reset_counts(plan: &OffsetResetPlan) -> serde_json::Value {
    json!({
        "topic": plan.topic,
        "to": plan.to.to_string(),
        "partitions": plan.partitions.len(),
        "lag_before": plan.lag_before(),
        "lag_after": plan.lag_after(),
        "offsets": plan.partitions.iter().map(|p| json!([p.partition, p.old, p.new])).collect::<Vec<_>>(),
    })
}

pub(super) async fn run_reset(
    gate: &Gate,
    queue: &QueueId,
    plan: &OffsetResetPlan,
    p: &OpProgress,
) -> Outcome {
    let failed = |error: BackendError, p: &OpProgress| Outcome::Failed {
        error,
        progress: p.snapshot(),
    };
    if let Err(e) = gate.require(Mutation::ResetOffsets, queue) {
        return failed(e, p);
    }
    let admin = match admin_of(gate) {
        Ok(a) => a,
        Err(e) => return failed(e, p),
    };
    p.set_total(Some(plan.partitions.len() as u64));
    match admin.reset_offsets(plan).await {
        Ok(r) => {
            p.add_done(r.partitions);
            let outcome = Outcome::OffsetReset(r);
            gate.record(
                Mutation::ResetOffsets,
                queue,
                None,
                reset_counts(plan),
                outcome.verdict(),
                None,
            );
            outcome
        }
        Err(e) => {
            let outcome = failed(e.clone(), p);
            gate.record(
                Mutation::ResetOffsets,
                queue,
                None,
                reset_counts(plan),
                outcome.verdict(),
                Some(e.to_string()),
            );
            outcome
        }
    }
}

pub(super) async fn run_delete(
    gate: &Gate,
    queue: &QueueId,
    plan: &GroupDeletePlan,
    p: &OpProgress,
) -> Outcome {
    let failed = |error: BackendError, p: &OpProgress| Outcome::Failed {
        error,
        progress: p.snapshot(),
    };
    if let Err(e) = gate.require(Mutation::DeleteGroup, queue) {
        return failed(e, p);
    }
    let admin = match admin_of(gate) {
        Ok(a) => a,
        Err(e) => return failed(e, p),
    };
    p.set_total(Some(1));
    let counts = json!({"topics": plan.topics.iter().map(|(t, _)| t).collect::<Vec<_>>()});
    match admin.delete_group(&plan.group).await {
        Ok(()) => {
            p.add_done(1);
            let outcome = Outcome::GroupDeleted {
                group: plan.group.clone(),
            };
            gate.record(
                Mutation::DeleteGroup,
                queue,
                None,
                counts,
                outcome.verdict(),
                None,
            );
            outcome
        }
        Err(e) => {
            let outcome = failed(e.clone(), p);
            gate.record(
                Mutation::DeleteGroup,
                queue,
                None,
                counts,
                outcome.verdict(),
                Some(e.to_string()),
            );
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditLog;
    use qdeck_backend::local::LocalHandle;
    use qdeck_model::config::Profile;
    use std::sync::Arc;

    fn plan() -> OffsetResetPlan {
        let p = |partition, old, new, lag_before, lag_after, clamped| PartitionReset {
            partition,
            old,
            new,
            lag_before,
            lag_after,
            clamped,
        };
        OffsetResetPlan {
            group: "billing".into(),
            topic: "orders\u{1b}[2J".into(),
            to: ResetTo::Shift(-5),
            partitions: vec![
                p(0, Some(12), 7, Some(3), 8, false),
                p(1, Some(2), 0, Some(9), 11, true),
            ],
        }
    }

    /// The plan names each partition's old → new offset and lag before → after, the totals,
    /// and broker text made visible.
    #[test]
    fn the_reset_plan_says_every_partition_and_the_totals() {
        let text = describe_reset(&plan());
        assert!(text.contains("[0] 12 → 7 (lag 3 → 8)"), "{text}");
        assert!(
            text.contains("[1] 2 → 0 (kept within the log) (lag 9 → 11)"),
            "{text}"
        );
        assert!(text.contains("to shift -5"), "{text}");
        assert!(text.contains("total lag 12 → 19"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        let j = reset_json(&plan());
        assert_eq!(j["partitions"][1]["clamped"], true);
        assert_eq!(j["lag_after"], 19);
    }

    /// A broker without consumer groups has no facet: planning says so, nothing is asked.
    #[tokio::test]
    async fn a_broker_without_groups_refuses_to_plan() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        let g = Gate::new(
            b,
            &Profile::default_local(),
            AuditLog::new(dir.path().join("audit.log")),
        );
        let e = plan_offset_reset(&g, &QueueId::new("g@t"), ResetTo::Earliest)
            .await
            .unwrap_err();
        assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
        let e = plan_group_delete(&g, "g").await.unwrap_err();
        assert!(e.to_string().contains("consumer groups"), "{e}");
    }
}
