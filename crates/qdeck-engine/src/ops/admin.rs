//! Operations on workers and on a broker's set-up rather than on messages: a Celery
//! remote-control command that changes workers, and a dead-letter capture made where the
//! broker keeps none. They are planned, confirmed, run and audited like every mutation, so the
//! tier, the read-only switch, the prompt's text and the audit line come from one place.

use serde::Serialize;
use serde_json::json;

use super::{Outcome, Planned};
use crate::gate::{Gate, Mutation};
use qdeck_backend::celery::workers::{Request, WorkerReport};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::QueueId;
use qdeck_model::sanitize::clean;

/// What the audit log names as the target of worker control: the profile's Celery workers.
pub const WORKERS: &str = "celery-workers";

/// A remote-control command, checked (`Request::changing`) and described for the prompt.
#[derive(Debug, Clone)]
pub struct ControlPlan {
    pub target: QueueId,
    pub request: Request,
    /// The sentence the prompt asks about ("revoke 2 task(s) on every Celery worker").
    pub what: String,
}

/// The capture `create-dlq` made or found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreatedDlq {
    pub queue: QueueId,
    pub dlq: QueueId,
    /// `false`: a capture existed already and was kept.
    pub created: bool,
}

impl CreatedDlq {
    pub fn line(&self) -> String {
        if self.created {
            format!(
                "created {} capturing the dead letters of {}",
                clean(self.dlq.as_str()),
                clean(self.queue.as_str())
            )
        } else {
            format!(
                "{} already captures the dead letters of {}",
                clean(self.dlq.as_str()),
                clean(self.queue.as_str())
            )
        }
    }
}

/// Plan a worker-control command: refused here below tier `full`, as every mutation is.
pub fn plan_worker_control(
    gate: &Gate,
    request: Request,
    what: String,
) -> Result<Planned, BackendError> {
    let target = QueueId::new(WORKERS);
    gate.require(Mutation::WorkerControl, &target)?;
    Ok(Planned::WorkerControl(Box::new(ControlPlan {
        target,
        request,
        what,
    })))
}

/// Plan creating the dead-letter capture of `queue` (a NATS JetStream consumer).
pub fn plan_create_dlq(gate: &Gate, queue: &QueueId) -> Result<Planned, BackendError> {
    gate.require(Mutation::Create, queue)?;
    Ok(Planned::CreateDlq {
        queue: queue.clone(),
    })
}

pub(super) async fn run_control(gate: &Gate, c: ControlPlan, p: &OpProgress) -> Outcome {
    p.set_total(None);
    let counts = |answers: usize| {
        json!({
            "command": c.request.method,
            "arguments": c.request.arguments,
            "destination": c.request.destination,
            "answers": answers,
        })
    };
    let celery = qdeck_backend::celery_of(gate.backend().as_ref());
    let answer = match celery {
        Ok(r) => r.control(&c.request).await,
        Err(e) => Err(e),
    };
    let outcome = match answer {
        Ok(r) => Outcome::Control(r),
        Err(error) => Outcome::Failed {
            error,
            progress: p.snapshot(),
        },
    };
    let (answers, error) = match &outcome {
        Outcome::Control(r) => (
            r.workers.len(),
            r.workers
                .iter()
                .any(|w| w.answered_error)
                .then(|| "a worker answered an error".to_string()),
        ),
        Outcome::Failed { error, .. } => (0, Some(error.to_string())),
        _ => (0, None),
    };
    gate.record(
        Mutation::WorkerControl,
        &c.target,
        None,
        counts(answers),
        outcome.verdict(),
        error,
    );
    outcome
}

pub(super) async fn run_create_dlq(gate: &Gate, queue: &QueueId, p: &OpProgress) -> Outcome {
    p.set_total(Some(1));
    let made = match qdeck_backend::dlq_creation_of(gate.backend().as_ref(), queue) {
        Ok(c) => c.create_dlq(queue).await,
        Err(e) => Err(e),
    };
    let outcome = match made {
        Ok((dlq, created)) => {
            p.add_done(1);
            Outcome::CreatedDlq(CreatedDlq {
                queue: queue.clone(),
                dlq,
                created,
            })
        }
        Err(error) => Outcome::Failed {
            error,
            progress: p.snapshot(),
        },
    };
    let (counts, error) = match &outcome {
        Outcome::CreatedDlq(c) => (json!({"dlq": c.dlq.as_str(), "created": c.created}), None),
        Outcome::Failed { error, .. } => (json!({}), Some(error.to_string())),
        _ => (json!({}), None),
    };
    gate.record(
        Mutation::Create,
        queue,
        None,
        counts,
        outcome.verdict(),
        error,
    );
    outcome
}

/// The workers' answers in one line: who answered, and how many said it failed.
pub fn control_line(r: &WorkerReport) -> String {
    let failed = r.workers.iter().filter(|w| w.answered_error).count();
    match (r.workers.len(), failed) {
        (0, _) => "no worker answered".to_string(),
        (n, 0) => format!("{n} worker(s) answered ok"),
        (n, f) => format!("{n} worker(s) answered, {f} with an error"),
    }
}
