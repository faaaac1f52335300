//! `:copy` / `:move` from the message browser, on the event loop's side: check the transfer
//! with the same code as `qdeck copy|move` (tiers of both profiles, target exists, a move's
//! deletion, SQS text bodies), then run it through `triage::copy::transfer`, which audits on
//! both profiles and deletes an original only after its copy was confirmed.

use super::state::{error_line, OpSummary, TransferAsk};
use crate::backend::{BackendError, OpProgress};
use crate::domain::{Message, QueueId};
use crate::engine::ops::Outcome;
use crate::engine::session::{OpenError, Session};
use crate::sanitize::one_line;
use crate::triage::copy::{self, End};

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

/// Checks the copy/move of `messages` and describes it for the dialog; nothing is sent.
pub async fn plan(
    own: &Session,
    source: QueueId,
    messages: Vec<Message>,
    to: QueueId,
    to_profile: Option<String>,
    moving: bool,
) -> Result<Box<TransferAsk>, BackendError> {
    let t = target_session(own, to_profile.as_deref()).await?;
    let from = End {
        gate: &own.gate,
        queue: &source,
    };
    let dst = End {
        gate: &t.gate,
        queue: &to,
    };
    if from.label() == dst.label() {
        return Err(BackendError::Invalid(
            "source and target are the same queue".into(),
        ));
    }
    copy::require(from, dst, moving)?;
    let checked = copy::check(from, dst, &messages, moving).await?;
    Ok(Box::new(TransferAsk {
        from_label: format!("{} ({})", from.label(), own.backend.kind()),
        to_label: format!("{} ({})", dst.label(), t.backend.kind()),
        header_lines: checked
            .headers
            .iter()
            .map(crate::triage::headers::HeaderChange::line)
            .collect(),
        delete_note: checked.delete_note,
        typed: checked.typed,
        source,
        messages,
        to,
        to_profile,
        moving,
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

/// Runs a confirmed copy/move; the one line and verdict the status bar shows.
pub async fn run(own: &Session, ask: TransferAsk, p: &OpProgress) -> OpSummary {
    let v = verb(ask.moving);
    let t = match target_session(own, ask.to_profile.as_deref()).await {
        Ok(t) => t,
        Err(e) => return nothing_sent(v, e, p),
    };
    let from = End {
        gate: &own.gate,
        queue: &ask.source,
    };
    let dst = End {
        gate: &t.gate,
        queue: &ask.to,
    };
    let note = serde_json::json!({"selected": ask.messages.len(), "chosen_in": "console"});
    let r = match copy::transfer(from, dst, ask.messages, ask.moving, None, note, p).await {
        Ok(r) => r,
        Err(e) => return nothing_sent(v, e, p),
    };
    let mut text = format!(
        "{v} → {}: sent {}, failed {}",
        one_line(&r.to),
        r.sent,
        r.failed
    );
    if ask.moving {
        text.push_str(&format!(
            ", originals deleted {}, already gone {}, leased (left, now twice) {}",
            r.deleted, r.missing, r.leased
        ));
    }
    if r.cancelled {
        text.push_str(", cancelled");
    }
    if let Some(e) = &r.error {
        text.push_str(&format!(" — {}", one_line(e)));
    }
    OpSummary::new(text, Outcome::Transfer(r).verdict())
}
