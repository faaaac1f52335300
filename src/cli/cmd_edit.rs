//! `qdeck edit QUEUE ID`: the CLI face of `engine::edit`. Every check that can fail runs
//! before the editor opens, so the user never edits a message that cannot be sent.

use std::io::IsTerminal;

use super::args::Format;
use super::confirm::confirm;
use super::exit::{of_failed, of_verdict, unexpected, CliError, CliResult, FAILED, REFUSED, USAGE};
use super::fetch;
use super::output;
use qdeck_backend::OpProgress;
use qdeck_engine::edit::{self, EditorError, EditorOutcome};
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Outcome, Planned};
use qdeck_engine::session::Session;
use qdeck_model::domain::{QueueId, RedriveTarget};

pub async fn edit(
    s: &Session,
    queue: &str,
    id: &str,
    to: Option<&str>,
    yes: bool,
    f: Format,
) -> CliResult {
    let source = QueueId::new(queue);
    s.gate.require(Mutation::Edit, &source)?;
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let target = match to {
        Some(t) => RedriveTarget::Queue(fetch::find(b, t).await?.id),
        None => RedriveTarget::Origin,
    };
    // Before the editor opens: an edit that could never replace the original is refused here.
    fetch::require_delete_by_id(b, &info, "edit", "nothing was sent")?;
    if !yes && !std::io::stdin().is_terminal() {
        let e = CliError::new(
            REFUSED,
            "refusing without --yes: standard input is not a terminal to confirm on",
        );
        s.gate.refuse(Mutation::Edit, &info.id, &e.message);
        return Err(e);
    }
    let original = edit::find_message(&s.gate, &info.id, id).await?;
    let draft = edit::render(b.kind(), &info.id, &original).map_err(CliError::usage)?;
    let edited = match edit::run_editor(&draft) {
        Ok(EditorOutcome::Changed(e)) => e,
        Ok(EditorOutcome::Unchanged) => {
            return Err(CliError::new(
                REFUSED,
                "the file was left unchanged; nothing was sent",
            ))
        }
        Err(e @ EditorError::Aborted(_)) => return Err(CliError::new(REFUSED, e.to_string())),
        Err(e @ EditorError::Io(_)) => return Err(CliError::new(FAILED, e.to_string())),
        Err(e @ EditorError::Malformed(_)) => return Err(CliError::new(USAGE, e.to_string())),
    };
    let planned = ops::plan_edit(&s.gate, info, original, edited, target)?;
    if !yes {
        let q = planned.question();
        let dest = match &planned {
            Planned::Edit { dest, .. } => dest.clone(),
            _ => planned.queue().clone(),
        };
        if let Err(e) = confirm(&q, dest.as_str(), s.gate.protected()) {
            s.gate.refuse(Mutation::Edit, planned.queue(), &e.message);
            return Err(e);
        }
    }
    let source = planned.queue().clone();
    let outcome = ops::run(&s.gate, planned, &OpProgress::detached()).await;
    if let Some(e) = of_failed(&outcome, &source) {
        return Err(e);
    }
    let report = match outcome {
        Outcome::Edit(r) => r,
        other => return Err(unexpected("edit", &other)),
    };
    if f == Format::Json {
        output::print_json(&report).ok();
    } else {
        output::print(&format!("{}\n", report.line()));
    }
    Ok(of_verdict(Outcome::Edit(report).verdict()))
}
