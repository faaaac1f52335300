//! `qdeck worker-control`: the Celery remote-control commands that change workers (revoke,
//! pool grow and shrink). Tier `full` only, through the gate, confirmed unless `--yes`, and
//! one audit line each, whatever the workers answered.

use serde_json::json;

use super::args::{Format, WorkerControlCmd};
use super::confirm::confirm;
use super::exit::{CliError, CliResult, FAILED, OK};
use super::output::{self, name};
use qdeck_backend::celery::workers::Request;
use qdeck_engine::gate::Mutation;
use qdeck_engine::session::Session;
use qdeck_model::domain::QueueId;

/// What the audit log names as the target: the profile's Celery workers.
const TARGET: &str = "celery-workers";

fn request(cmd: &WorkerControlCmd) -> Result<(Request, String), CliError> {
    let (method, args, dest, what) = match cmd {
        WorkerControlCmd::Revoke { ids, terminate } => (
            "revoke",
            json!({"task_id": ids, "terminate": terminate, "signal": "SIGTERM"}),
            None,
            format!(
                "revoke {} task(s) on every Celery worker{}",
                ids.len(),
                if *terminate {
                    ", stopping any that runs (SIGTERM)"
                } else {
                    ""
                }
            ),
        ),
        WorkerControlCmd::PoolGrow { worker, n } => (
            "pool_grow",
            json!({"n": n}),
            Some(vec![worker.clone()]),
            format!("grow the pool of Celery worker {} by {n}", name(worker)),
        ),
        WorkerControlCmd::PoolShrink { worker, n } => (
            "pool_shrink",
            json!({"n": n}),
            Some(vec![worker.clone()]),
            format!("shrink the pool of Celery worker {} by {n}", name(worker)),
        ),
    };
    let req =
        Request::changing(method, args, dest).map_err(|e| CliError::new(FAILED, e.to_string()))?;
    Ok((req, what))
}

pub async fn run(s: &Session, cmd: WorkerControlCmd, yes: bool, f: Format) -> CliResult {
    let target = QueueId::new(TARGET);
    s.gate.require(Mutation::WorkerControl, &target)?;
    let (req, what) = request(&cmd)?;
    if !yes {
        if let Err(e) = confirm(&format!("About to {what}."), TARGET, s.gate.protected()) {
            s.gate.refuse(Mutation::WorkerControl, &target, &e.message);
            return Err(e);
        }
    }
    let counts = |answers: usize| json!({"command": req.method, "arguments": req.arguments, "destination": req.destination, "answers": answers});
    let report = match s.backend.celery_control(&req).await {
        Ok(r) => r,
        Err(e) => {
            s.gate
                .record_failed(Mutation::WorkerControl, &target, counts(0), &e.to_string());
            return Err(e.into());
        }
    };
    let failed = report.workers.iter().any(|w| w.answered_error);
    if failed {
        s.gate.record_failed(
            Mutation::WorkerControl,
            &target,
            counts(report.workers.len()),
            "a worker answered an error",
        );
    } else {
        s.gate.record_ok(
            Mutation::WorkerControl,
            &target,
            counts(report.workers.len()),
        );
    }
    if f == Format::Json {
        output::print_json(&report).ok();
    } else {
        let mut text = String::new();
        for w in &report.workers {
            let said = w.notes.first().map_or("", String::as_str);
            text.push_str(&format!("{}: {}\n", name(&w.hostname), name(said)));
        }
        if report.workers.is_empty() {
            text.push_str("no worker answered\n");
        }
        for n in &report.notes {
            text.push_str(&format!("note: {}\n", name(n)));
        }
        output::print(&text);
    }
    if failed {
        return Err(CliError {
            code: FAILED,
            message: "a Celery worker answered an error".into(),
            reported: true,
        });
    }
    Ok(OK)
}
