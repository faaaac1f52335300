//! `qdeck import QUEUE --file F.jsonl`: plan (the whole file read and checked, a malformed
//! line stops everything, naming the line; the queue exists), confirm on the plan's own text,
//! then run it through `ops::run` with a rate limit and progress.

use std::path::Path;

use super::args::Format;
use super::confirm::confirm;
use super::exit::{of_failed, of_verdict, unexpected, unexpected_plan, CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name};
use super::progress_line::with_progress;
use qdeck_backend::BackendError;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Outcome, Planned};
use qdeck_engine::session::Session;
use qdeck_model::domain::QueueId;

/// A bad file is a usage error whose message already names the file and line.
fn file_error(e: BackendError) -> CliError {
    match e {
        BackendError::Invalid(m) => CliError::usage(m),
        e => e.into(),
    }
}

pub async fn import(
    s: &Session,
    queue: &str,
    file: &Path,
    rate: Option<qdeck_model::rate::Rate>,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let qid = QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Import, &qid)?;
    }
    let b = s.backend.as_ref();
    let read = ops::read_import_file(file, b.header_rules()).map_err(file_error)?;
    let info = fetch::find(b, queue).await?;
    let planned = ops::plan_import(&s.gate, info, read, rate).map_err(file_error)?;
    let plan = planned.describe();
    if dry_run {
        if f == Format::Json {
            output::print_json(&planned.to_json()).ok();
        } else {
            output::print(&format!("dry run: would {plan}; nothing sent\n"));
        }
        return Ok(OK);
    }
    let Planned::Import { file: read, .. } = &planned else {
        return Err(unexpected_plan("import", &planned));
    };
    let shown_file = read.shown();
    if planned.is_empty() {
        output::print(&format!(
            "{shown_file} holds no messages; nothing to send\n"
        ));
        return Ok(OK);
    }
    if !yes {
        if let Err(e) = confirm(
            &planned.question(),
            planned.queue().as_str(),
            s.gate.protected(),
        ) {
            s.gate.refuse(Mutation::Import, planned.queue(), &e.message);
            return Err(e);
        }
    }
    let outcome = with_progress("import", "stopping after the current batch…", |p| {
        let gate = &s.gate;
        async move { ops::run(gate, planned, &p).await }
    })
    .await;
    report(outcome, &qid, &shown_file, f)
}

/// The import's own report: its counts (text or JSON), then the error that stopped it.
fn report(outcome: Outcome, queue: &QueueId, shown_file: &str, f: Format) -> CliResult {
    if let Some(e) = of_failed(&outcome, queue) {
        return Err(e);
    }
    let r = match outcome {
        Outcome::Import(r) => r,
        other => return Err(unexpected("import", &other)),
    };
    if f == Format::Json {
        output::print_json(&r).ok();
    } else {
        output::print(&format!(
            "sent {}, failed {}{}\n",
            r.sent,
            r.failed,
            if r.cancelled { ", cancelled" } else { "" }
        ));
    }
    let error = r.error.clone();
    let code = of_verdict(Outcome::Import(r).verdict());
    if let Some(e) = error {
        let msg = format!("{shown_file} {}; the rest was not sent", name(&e));
        return Err(CliError::after_report(code, msg));
    }
    Ok(code)
}
