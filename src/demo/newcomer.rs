//! Whether a console started without configuration runs the demo workload, and if not, why:
//! the newcomer sees a live demo, or a line that says what they are looking at instead.

use qdeck_backend::local::LocalHandle;
use qdeck_backend::Backend;
use qdeck_model::domain::{QueueId, WorkerState};

use super::{ORDERS, ORDERS_DLQ, PAYMENTS, PAYMENTS_DLQ, REPORTS};

/// What the console does about the demo on the embedded broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemoChoice {
    /// Start it (an empty broker, or the demo's own queues left by an earlier run).
    Start,
    /// Do not; the line says why, for the status bar.
    Skip(String),
}

/// Decided from the broker's queues and workers: only the demo's own queues (or none) and no
/// demo worker active right now (another console runs it: this one watches that one).
pub async fn choose(local: &LocalHandle) -> DemoChoice {
    let queues = match local.list_queues().await {
        Ok(q) => q,
        Err(e) => return DemoChoice::Skip(format!("no demo: the embedded broker: {e}")),
    };
    let own = [ORDERS, ORDERS_DLQ, PAYMENTS, PAYMENTS_DLQ, REPORTS];
    if let Some(other) = queues.iter().find(|q| !own.contains(&q.id.as_str())) {
        return DemoChoice::Skip(format!(
            "no demo: the embedded broker holds queues of its own ({} and {} more); \
             `qdeck demo` runs it on demand",
            other.id,
            queues.len() - 1
        ));
    }
    if queues.is_empty() {
        return DemoChoice::Start;
    }
    let live = local
        .consumers(&QueueId::new(ORDERS))
        .await
        .unwrap_or_default()
        .iter()
        .any(|c| matches!(c.status, WorkerState::Active | WorkerState::Busy));
    if live {
        DemoChoice::Skip(
            "the demo runs in another qdeck (its workers are active): this console watches it"
                .to_string(),
        )
    } else {
        DemoChoice::Start
    }
}
