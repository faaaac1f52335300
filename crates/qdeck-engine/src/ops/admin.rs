//! Operations on workers and on a broker's set-up rather than on messages: a Celery
//! remote-control command that changes workers, and a dead-letter capture made where the
//! broker keeps none, queues created where qdeck owns the broker (`qdeck create`, the demo's
//! own queues). They are planned, confirmed, run and audited like every mutation, so the
//! tier, the read-only switch, the prompt's text and the audit line come from one place.

use serde::Serialize;
use serde_json::json;

use super::{Outcome, Planned};
use crate::gate::{Gate, Mutation};
use qdeck_backend::celery::workers::{Request, WorkerReport};
use qdeck_backend::local::QueueOptions;
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

/// Queues to create on a broker qdeck owns (`qdeck create`, the demo's own queues), with the
/// tier and the audit line of the operation that asks for them.
#[derive(Debug, Clone)]
pub struct CreatePlan {
    /// The queue named in the audit line (`*` for the demo's set).
    pub target: QueueId,
    pub queues: Vec<(String, QueueOptions)>,
    pub mutation: Mutation,
    /// Joins the audit line's counts (the demo's rates).
    pub note: serde_json::Value,
}

/// The queues a create made (an existing one took the new settings and kept its messages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreatedQueues {
    pub queues: Vec<String>,
}

impl CreatedQueues {
    pub fn line(&self) -> String {
        let names: Vec<String> = self.queues.iter().map(|q| clean(q).into_owned()).collect();
        format!("created {}", names.join(", "))
    }
}

/// Plan creating `name` with `opts` (`qdeck create`), tier `full`.
pub fn plan_create_queue(
    gate: &Gate,
    name: &str,
    opts: QueueOptions,
) -> Result<Planned, BackendError> {
    let target = QueueId::new(name);
    plan_creation(
        gate,
        target,
        vec![(name.to_string(), opts)],
        Mutation::Create,
        json!({}),
    )
}

/// Plan the demo's own queues, at the demo's tier, its rates in the audit line.
pub fn plan_demo_setup(
    gate: &Gate,
    queues: Vec<(String, QueueOptions)>,
    note: serde_json::Value,
) -> Result<Planned, BackendError> {
    plan_creation(gate, QueueId::new("*"), queues, Mutation::Demo, note)
}

fn plan_creation(
    gate: &Gate,
    target: QueueId,
    queues: Vec<(String, QueueOptions)>,
    mutation: Mutation,
    note: serde_json::Value,
) -> Result<Planned, BackendError> {
    gate.require(mutation, &target)?;
    qdeck_backend::queue_creation_of(gate.backend().as_ref())?;
    Ok(Planned::CreateQueues(Box::new(CreatePlan {
        target,
        queues,
        mutation,
        note,
    })))
}

pub(super) async fn run_create_queues(gate: &Gate, c: CreatePlan, p: &OpProgress) -> Outcome {
    p.set_total(Some(c.queues.len() as u64));
    let mut made = Vec::new();
    let mut failure = None;
    match qdeck_backend::queue_creation_of(gate.backend().as_ref()) {
        Ok(creator) => {
            for (name, opts) in &c.queues {
                if let Err(e) = creator.create_queue(name, opts).await {
                    failure = Some(e);
                    break;
                }
                p.add_done(1);
                made.push(name.clone());
            }
        }
        Err(e) => failure = Some(e),
    }
    let mut counts = json!({"queues": made.len()});
    if let (Some(c), serde_json::Value::Object(n)) = (counts.as_object_mut(), &c.note) {
        c.extend(n.clone());
    }
    let (outcome, error) = match failure {
        None => (Outcome::CreatedQueues(CreatedQueues { queues: made }), None),
        Some(error) => {
            let why = error.to_string();
            (
                Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
                Some(why),
            )
        }
    };
    gate.record(
        c.mutation,
        &c.target,
        None,
        counts,
        outcome.verdict(),
        error,
    );
    outcome
}
