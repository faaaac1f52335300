//! `qdeck worker-control`: the Celery remote-control commands that change workers (revoke,
//! pool grow and shrink). Tier `full` only, through the gate, confirmed unless `--yes`, and
//! one audit line each, whatever the workers answered.

use serde_json::json;

use super::args::{Format, WorkerControlCmd};
use super::confirm::confirm;
use super::exit::{of_failed, of_outcome, unexpected, CliError, CliResult, FAILED, OK};
use super::output::{self, name};
use qdeck_backend::celery::workers::Request;
use qdeck_backend::OpProgress;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, admin::WORKERS, Outcome};
use qdeck_engine::session::Session;

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
    let (req, what) = request(&cmd)?;
    let planned = ops::plan_worker_control(&s.gate, req, what)?;
    let target = planned.queue().clone();
    if !yes {
        if let Err(e) = confirm(&planned.question(), WORKERS, s.gate.protected()) {
            s.gate.refuse(Mutation::WorkerControl, &target, &e.message);
            return Err(e);
        }
    }
    let outcome = ops::run(&s.gate, planned, &OpProgress::detached()).await;
    if let Some(e) = of_failed(&outcome, &target) {
        return Err(e);
    }
    let Outcome::Control(report) = &outcome else {
        return Err(unexpected("worker control", &outcome));
    };
    if f == Format::Json {
        output::print_json(report).ok();
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
    // The verdict decides, as for every operation: a worker's error answer fails the command.
    match of_outcome(&outcome) {
        OK => Ok(OK),
        code => Err(CliError::after_report(
            code,
            "a Celery worker answered an error",
        )),
    }
}
