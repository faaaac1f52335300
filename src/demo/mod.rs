//! The demo workload on the local broker: producers, competing workers, poison messages,
//! crashing workers and an ordered keyed stream. (Interface only until the demo lands.)

use std::sync::Arc;

use crate::backend::local::LocalBackend;

/// Rates and shares of the demo workload.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Messages per second produced onto the main queue.
    pub produce_rate: f64,
    /// Workers at start.
    pub workers: usize,
    /// Messages per second one worker completes.
    pub per_worker_rate: f64,
    /// Share of messages that always fail (they end in the DLQ).
    pub poison_share: f64,
    /// Share of receives after which the worker "crashes" (its lease expires).
    pub crash_share: f64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            produce_rate: 10.0,
            workers: 1,
            per_worker_rate: 4.0,
            poison_share: 0.02,
            crash_share: 0.01,
        }
    }
}

/// A running demo; dropping it stops the tasks.
pub struct DemoHandle {
    _local: Arc<LocalBackend>,
}

impl DemoHandle {
    pub fn start(local: Arc<LocalBackend>, _cfg: DemoConfig) -> anyhow::Result<DemoHandle> {
        Ok(DemoHandle { _local: local })
    }
    pub fn add_worker(&self) {}
    pub fn remove_worker(&self) {}
    pub fn workers(&self) -> usize {
        0
    }
}

/// Run the demo without the console until `duration` passes or Ctrl-C.
pub async fn run_headless(
    _local: Arc<LocalBackend>,
    _cfg: DemoConfig,
    _duration: Option<std::time::Duration>,
) -> anyhow::Result<()> {
    anyhow::bail!("the demo workload is not built yet")
}
