//! `:copy` / `:move` from the message browser, on the event loop's side: planned with
//! `ops::plan_transfer`, the same code as `qdeck copy|move` (tiers of both profiles, target
//! exists, a move's deletion, SQS text bodies), when the dialog opens; the plan the dialog
//! showed is what `ops::run` runs on confirm (`ops::copy::transfer`, which audits on both
//! profiles and deletes an original only after its copy was confirmed).

use super::state::{error_line, HeldPlan, OpSummary, TransferAsk};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_engine::ops::copy;
use qdeck_engine::ops::{self, Outcome, Planned, TransferPlan, TransferRequest};
use qdeck_engine::session::{OpenError, Session};
use qdeck_model::domain::{Message, QueueId};
use qdeck_model::sanitize::one_line;

fn verb(moving: bool) -> &'static str {
    if moving {
        "move"
    } else {
        "copy"
    }
}

/// The target's session (`Session::for_profile`); errors name the profile. A configuration
/// that cannot be read is bad input, as the CLI's exit code 2 has it.
async fn target_session(own: &Session, profile: Option<&str>) -> Result<Session, BackendError> {
    let p = format!("profile {}", profile.unwrap_or_default());
    own.for_profile(profile).await.map_err(|e| match e {
        OpenError::Config(c) => BackendError::Invalid(format!("{p}: {}", c.0)),
        OpenError::Backend(b) => b.context(p),
    })
}

/// The checked transfer of `messages`, tiers of both profiles included; nothing is sent.
async fn plan_ops(
    own: &Session,
    source: QueueId,
    messages: Vec<Message>,
    to: QueueId,
    to_profile: Option<&str>,
    moving: bool,
) -> Result<TransferPlan, BackendError> {
    let t = target_session(own, to_profile).await?;
    let selection = serde_json::json!({"selected": messages.len(), "chosen_in": "console"});
    let req = TransferRequest {
        from: &own.gate,
        to: &t.gate,
        source,
        target: to,
        messages,
        moving,
        rate: None,
        selection,
    };
    let (from, dst) = (
        copy::End {
            gate: req.from,
            queue: &req.source,
        },
        copy::End {
            gate: req.to,
            queue: &req.target,
        },
    );
    if from.label() != dst.label() {
        copy::require(from, dst, moving)?;
    }
    match ops::plan_transfer(req).await? {
        Planned::Transfer(p) => Ok(*p),
        other => Err(BackendError::Other(format!(
            "the transfer planned as {}",
            other.mutation().name()
        ))),
    }
}

/// Plans the copy/move of `messages` and describes it for the dialog; nothing is sent.
pub async fn plan(
    own: &Session,
    source: QueueId,
    messages: Vec<Message>,
    to: QueueId,
    to_profile: Option<String>,
    moving: bool,
) -> Result<Box<TransferAsk>, BackendError> {
    let tp = plan_ops(own, source, messages, to, to_profile.as_deref(), moving).await?;
    let (from_label, to_label) = tp.labels();
    Ok(Box::new(TransferAsk {
        from_label,
        to_label,
        header_lines: tp
            .check
            .headers
            .iter()
            .map(qdeck_backend::headers::HeaderChange::line)
            .collect(),
        delete_note: tp.check.delete_note.clone(),
        typed: tp.check.typed.clone(),
        source: tp.source.clone(),
        messages: tp.messages.clone(),
        to: tp.target.clone(),
        to_profile,
        moving,
        plan: Some(HeldPlan::new(Planned::Transfer(Box::new(tp)))),
    }))
}

/// A transfer its error stopped before anything was sent, with the exit code `qdeck copy`
/// gives for that error.
fn nothing_sent(verb: &str, error: BackendError, p: &OpProgress) -> OpSummary {
    let text = format!("{verb}: nothing was sent: {}", error_line(&error));
    let failed = Outcome::Failed {
        error,
        progress: p.snapshot(),
    };
    OpSummary::of(&failed, text)
}

/// Runs a confirmed copy/move through `ops::run`: the plan the dialog showed, or one made
/// now for a dialog opened without one. The one line and verdict the status bar shows.
pub async fn run(own: &Session, ask: TransferAsk, p: &OpProgress) -> OpSummary {
    let v = verb(ask.moving);
    let planned = match ask.plan {
        Some(held) => held.into_planned(),
        None => {
            let to_profile = ask.to_profile.as_deref();
            match plan_ops(
                own,
                ask.source,
                ask.messages,
                ask.to,
                to_profile,
                ask.moving,
            )
            .await
            {
                Ok(tp) => Planned::Transfer(Box::new(tp)),
                Err(e) => return nothing_sent(v, e, p),
            }
        }
    };
    let source = planned.queue().clone();
    match ops::run(&own.gate, planned, p).await {
        // Copies sent before the error stay sent: only an error before the first is "nothing".
        Outcome::Failed { error, progress } if progress.done == 0 => nothing_sent(v, error, p),
        outcome => OpSummary::of(&outcome, one_line(&outcome.summary(&source))),
    }
}
