//! Mutating commands: send, redrive, purge. All of them go through the session's gate
//! (read-only check + audit log).

use std::io::{IsTerminal, Read};
use std::time::Duration;

use super::args::Format;
use super::confirm::confirm;
use super::exit::{CliError, CliResult, FAILED, OK};
use super::fetch;
use super::output::{self, name};
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Planned};
use qdeck_engine::session::Session;
use qdeck_model::domain::{OutgoingMessage, QueueId, RedriveReport, RedriveRequest};

/// The gate refuses (and audits) mutations on read-only profiles before anything else runs.
fn require(s: &Session, m: Mutation, queue: &str) -> Result<(), CliError> {
    Ok(s.gate
        .require(m, &qdeck_model::domain::QueueId::new(queue))?)
}

/// `qdeck create-dlq STREAM/CONSUMER`: find or create the stream that captures the consumer's
/// dead-letter advisories, gated at tier `full` and audited like `create`.
pub async fn create_dlq(s: &Session, queue: &str, f: Format) -> CliResult {
    let id = QueueId::new(queue);
    s.gate.require(Mutation::Create, &id)?;
    let (dlq, created) = match s.backend.create_dlq(&id).await {
        Ok(r) => r,
        Err(e) => {
            s.gate
                .record_failed(Mutation::Create, &id, serde_json::json!({}), &e.to_string());
            return Err(e.into());
        }
    };
    s.gate.record_ok(
        Mutation::Create,
        &id,
        serde_json::json!({"dlq": dlq.as_str(), "created": created}),
    );
    if f == Format::Json {
        let v = serde_json::json!({"queue": queue, "dlq": dlq, "created": created});
        output::print_json(&v).ok();
    } else if created {
        output::print(&format!(
            "created {} capturing the dead letters of {}\n",
            name(dlq.as_str()),
            name(queue)
        ));
    } else {
        output::print(&format!(
            "{} already captures the dead letters of {}\n",
            name(dlq.as_str()),
            name(queue)
        ));
    }
    Ok(OK)
}

pub async fn send(
    s: &Session,
    queue: &str,
    body: Option<&str>,
    msg: OutgoingMessage,
    f: Format,
) -> CliResult {
    require(s, Mutation::Send, queue)?;
    let body = match body {
        Some(b) if b != "-" => b.as_bytes().to_vec(),
        _ => {
            if std::io::stdin().is_terminal() && body.is_none() {
                return Err(CliError::usage(
                    "give a BODY, or `-` to read it from standard input",
                ));
            }
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::new(FAILED, format!("cannot read standard input: {e}")))?;
            buf
        }
    };
    let info = fetch::find(s.backend.as_ref(), queue).await?;
    let planned = ops::plan_send(&s.gate, info, OutgoingMessage { body, ..msg })?;
    let queue = planned.queue().clone();
    let id = match ops::run(&s.gate, planned, &qdeck_backend::OpProgress::detached()).await {
        ops::Outcome::Sent { id } => id,
        ops::Outcome::Failed { error, .. } => return Err(error.into()),
        _ => None,
    };
    let profile = s.profile().name.as_str();
    if f == Format::Json {
        let v = serde_json::json!({"queue": queue, "id": id, "profile": profile, "sent": 1});
        output::print_json(&v).ok();
    } else {
        // What was done, where: a bare id read as a count. The id follows where the broker
        // gives one (`peek` and `edit` take it).
        let id = id.map_or_else(String::new, |i| format!(", id {}", name(&i)));
        output::print(&format!(
            "sent 1 message to {} (profile {}){id}\n",
            name(queue.as_str()),
            name(profile)
        ));
    }
    Ok(OK)
}

/// Plan, show, confirm, run: the dry run executes the same planning code as the real run and
/// stops before the first change, so the two cannot disagree.
pub async fn redrive(
    s: &Session,
    req: RedriveRequest,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    if req.max == Some(0) {
        return Err(CliError::usage("--max must be at least 1"));
    }
    if req.window == Some(0) {
        return Err(CliError::usage("--window must be at least 1"));
    }
    let source = req.source.clone();
    if !dry_run {
        require(s, Mutation::Redrive, source.as_str())?;
    }
    let planned = ops::plan_redrive(&s.gate, req).await?;
    run_planned(s, planned, dry_run, yes, f, "nothing to move").await
}

pub async fn purge(s: &Session, queue: &str, dry_run: bool, yes: bool, f: Format) -> CliResult {
    if !dry_run {
        require(s, Mutation::Purge, queue)?;
    }
    let planned = ops::plan_purge(&s.gate, &QueueId::new(queue)).await?;
    run_planned(s, planned, dry_run, yes, f, "nothing to purge").await
}

pub(super) async fn run_planned(
    s: &Session,
    planned: Planned,
    dry_run: bool,
    yes: bool,
    f: Format,
    nothing: &str,
) -> CliResult {
    let plan = planned.describe();
    if dry_run {
        if f == Format::Json {
            output::print_json(&planned.to_json()).ok();
        } else {
            output::print(&format!("dry run: would {plan}; nothing changed\n"));
        }
        return Ok(OK);
    }
    let queue = planned.queue().clone();
    if planned.is_empty() {
        if f == Format::Json {
            let empty = match &planned {
                Planned::Redrive { .. } => ops::Outcome::Redrive(RedriveReport {
                    mode: "none (empty)".into(),
                    ..Default::default()
                }),
                Planned::Purge { .. } => ops::Outcome::Purge(qdeck_model::domain::PurgeReport {
                    purged: Some(0),
                    note: Some("empty".into()),
                }),
                Planned::Delete { .. } => ops::Outcome::Delete(Default::default()),
                Planned::CancelScheduled { .. } => {
                    ops::Outcome::CancelScheduled(Default::default())
                }
                Planned::Import { .. } => ops::Outcome::Import(Default::default()),
                // One message each: never empty.
                Planned::Send { .. } | Planned::Edit { .. } => ops::Outcome::Sent { id: None },
                Planned::Transfer(_) => ops::Outcome::Transfer(Default::default()),
                // Never empty (`Planned::is_empty`).
                Planned::OffsetReset { .. } | Planned::GroupDelete { .. } => {
                    ops::Outcome::Sent { id: None }
                }
            };
            output::print_json(&empty.to_json()).ok();
        } else {
            output::print(&format!("{} is empty; {nothing}\n", name(queue.as_str())));
        }
        return Ok(OK);
    }
    if !yes {
        let question = match &planned {
            Planned::Purge { .. } => format!("About to {plan}. This cannot be undone."),
            _ => format!("About to {plan}."),
        };
        if let Err(e) = confirm(&question, queue.as_str(), s.gate.protected()) {
            s.gate.refuse(planned.mutation(), &queue, &e.message);
            return Err(e);
        }
    }
    let handle = ops::start(&s.gate, planned);
    let ticker = spawn_progress(handle.mutation.name(), handle.watch());
    let cancel = handle.cancel_handle();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nqdeck: cancelling after the current batch…");
            cancel.cancel();
        }
    });
    let outcome = handle.wait().await;
    ctrl_c.abort();
    ticker.abort();
    // The progress line is cleared before the summary.
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    report(&queue, &outcome, f)
}

fn report(queue: &QueueId, outcome: &ops::Outcome, f: Format) -> CliResult {
    if let ops::Outcome::Failed { error, progress } = outcome {
        // Nothing done: the error alone is the message. Work done before it is in the counts.
        if progress.done == 0 {
            return Err(CliError::from(error.clone()));
        }
        let code = super::exit::of_outcome(outcome);
        return Err(CliError::new(code, outcome.summary(queue)));
    }
    if f == Format::Json {
        output::print_json(&outcome.to_json()).ok();
    } else {
        output::print(&format!("{}\n", outcome.line()));
        if let ops::Outcome::Redrive(r) = outcome {
            for e in r.errors.iter().skip(1).take(9) {
                eprintln!("qdeck: {}", name(e));
            }
        }
    }
    Ok(super::exit::of_outcome(outcome))
}

pub(super) fn spawn_progress(
    what: &'static str,
    mut rx: tokio::sync::watch::Receiver<qdeck_backend::ProgressState>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if !std::io::stderr().is_terminal() {
            return;
        }
        while rx.changed().await.is_ok() {
            let p = rx.borrow().clone();
            let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
            eprint!(
                "\r{what}: {}{total} done, {} failed {}   ",
                p.done, p.failed, p.phase
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
