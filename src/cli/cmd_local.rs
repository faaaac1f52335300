//! Commands for the embedded local broker: `create` and `demo`.

use std::sync::Arc;
use std::time::Duration;

use super::exit::{CliError, CliResult, OK, USAGE};
use super::output::{self, name};
use crate::backend::local::{KeyPolicy, LocalBackend, QueueOptions};
use crate::config::{Loaded, ProfileKind};
use crate::demo::{self, DemoConfig};

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

pub fn create(
    loaded: &Loaded,
    queue: &str,
    dlq: Option<String>,
    max_receives: Option<u32>,
    lease: Duration,
    key_policy: &str,
) -> CliResult {
    if loaded.profile.read_only {
        return Err(CliError::new(
            super::exit::REFUSED,
            format!(
                "profile {:?} is read-only: create is not allowed",
                loaded.profile.name
            ),
        ));
    }
    let local = open_local(loaded, "create")?;
    let policy: KeyPolicy = key_policy.parse()?;
    if lease.is_zero() {
        return Err(CliError::usage("--lease must be longer than 0"));
    }
    local.create_queue(
        queue,
        &QueueOptions {
            lease,
            max_receives,
            dlq,
            key_policy: policy,
        },
    )?;
    output::print(&format!("created {}\n", name(queue)));
    Ok(OK)
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
    if loaded.profile.read_only {
        return Err(CliError::new(
            super::exit::REFUSED,
            format!(
                "profile {:?} is read-only: the demo writes messages",
                loaded.profile.name
            ),
        ));
    }
    let local = open_local(loaded, "demo")?;
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
