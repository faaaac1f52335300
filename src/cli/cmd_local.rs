//! Commands for the embedded local broker: `create` and `demo`.

use std::sync::Arc;
use std::time::Duration;

use super::exit::{of_failed, unexpected, CliError, CliResult, OK, USAGE};
use super::output;
use crate::demo::{self, DemoConfig};
use qdeck_backend::local::{KeyPolicy, LocalBackend, LocalHandle, QueueOptions};
use qdeck_backend::OpProgress;
use qdeck_engine::audit::AuditLog;
use qdeck_engine::gate::{Gate, Mutation};
use qdeck_engine::ops;
use qdeck_model::config::{Loaded, ProfileKind};
use qdeck_model::domain::QueueId;

/// The local broker behind the selected profile, or a usage error for other brokers.
pub fn open_local(loaded: &Loaded, what: &str) -> Result<Arc<LocalBackend>, CliError> {
    match &loaded.profile.kind {
        ProfileKind::Local(s) => Ok(Arc::new(LocalBackend::open(&s.resolved_path())?)),
        other => Err(CliError::new(
            USAGE,
            format!(
                "`{what}` works on the local broker; profile {:?} is {}",
                loaded.profile.name,
                other.name()
            ),
        )),
    }
}

/// The gate for a local-broker command: the same read-only check and audit line as every other
/// mutation.
pub(crate) fn gate_for(loaded: &Loaded, local: &Arc<LocalBackend>) -> Gate {
    Gate::new(
        Arc::new(LocalHandle(local.clone())),
        &loaded.profile,
        AuditLog::new(loaded.audit_log_path()),
    )
}

/// `qdeck create`: planned, run and audited like every mutation (tier `full`); the audit line
/// is the run's, with its result.
pub async fn create(
    loaded: &Loaded,
    queue: &str,
    dlq: Option<String>,
    max_receives: Option<u32>,
    lease: Duration,
    key_policy: &str,
) -> CliResult {
    let local = open_local(loaded, "create")?;
    let gate = gate_for(loaded, &local);
    let id = QueueId::new(queue);
    gate.require(Mutation::Create, &id)?;
    let policy: KeyPolicy = key_policy.parse()?;
    if lease.is_zero() {
        return Err(CliError::usage("--lease must be longer than 0"));
    }
    let opts = QueueOptions {
        lease,
        max_receives,
        dlq,
        key_policy: policy,
    };
    let planned = ops::plan_create_queue(&gate, queue, opts)?;
    let outcome = ops::run(&gate, planned, &OpProgress::detached()).await;
    if let Some(e) = of_failed(&outcome, &id) {
        return Err(e);
    }
    let ops::Outcome::CreatedQueues(_) = &outcome else {
        return Err(unexpected("create", &outcome));
    };
    output::print(&format!("{}\n", outcome.line()));
    Ok(qdeck_engine::exit::of_outcome(&outcome))
}

/// The demo's own queues, planned, run and audited (tier of `demo`) before its workload
/// starts; the audit line carries the workload's rates.
pub async fn set_up_demo(gate: &Gate, note: serde_json::Value) -> Result<(), CliError> {
    let star = QueueId::new("*");
    let planned = ops::plan_demo_setup(gate, demo::queues(), note)?;
    let outcome = ops::run(gate, planned, &OpProgress::detached()).await;
    if let Some(e) = of_failed(&outcome, &star) {
        return Err(e);
    }
    match outcome {
        ops::Outcome::CreatedQueues(_) => Ok(()),
        other => Err(unexpected("demo", &other)),
    }
}

pub async fn demo(
    loaded: &Loaded,
    rate: f64,
    workers: usize,
    per_worker: f64,
    duration: Option<Duration>,
) -> CliResult {
    if !(rate >= 0.0 && per_worker > 0.0 && rate.is_finite() && per_worker.is_finite()) {
        return Err(CliError::usage(
            "--rate must be ≥ 0 and --per-worker above 0",
        ));
    }
    let local = open_local(loaded, "demo")?;
    let gate = gate_for(loaded, &local);
    set_up_demo(
        &gate,
        serde_json::json!({"produce_rate": rate, "workers": workers}),
    )
    .await?;
    let cfg = DemoConfig {
        produce_rate: rate,
        workers,
        per_worker_rate: per_worker,
        ..Default::default()
    };
    demo::run_headless(local, cfg, duration)
        .await
        .map_err(|e| CliError::new(super::exit::FAILED, e.to_string()))?;
    Ok(OK)
}
