//! Planning a copy or move of chosen messages (`qdeck copy|move`, `:copy` / `:move`): the
//! same checks for both front-ends, before anything is sent, on the gates of both profiles.

use super::{Outcome, Planned};
use crate::backend::{BackendError, OpProgress};
use crate::domain::{BrokerKind, Message, QueueId};
use crate::engine::gate::Gate;
use crate::engine::rate::Rate;
use crate::sanitize::clean;
use crate::triage::copy::{self, End, TransferCheck};

/// A checked transfer: both ends (each with its own profile's gate), the messages, and what
/// the check found (header renames, a move's effect on the others, the name to type).
#[derive(Debug, Clone)]
pub struct TransferPlan {
    pub from: Gate,
    pub to: Gate,
    pub source: QueueId,
    pub target: QueueId,
    pub messages: Vec<Message>,
    pub moving: bool,
    pub rate: Option<Rate>,
    /// How the messages were chosen (predicate and scan counts, or the console's selection),
    /// for both audit lines.
    pub selection: serde_json::Value,
    pub check: TransferCheck,
}

impl TransferPlan {
    pub fn verb(&self) -> &'static str {
        if self.moving {
            "move"
        } else {
            "copy"
        }
    }

    pub fn from_end(&self) -> End<'_> {
        End {
            gate: &self.from,
            queue: &self.source,
        }
    }

    pub fn to_end(&self) -> End<'_> {
        End {
            gate: &self.to,
            queue: &self.target,
        }
    }

    /// The brokers of the source and of the target.
    pub fn kinds(&self) -> (BrokerKind, BrokerKind) {
        (self.from.backend().kind(), self.to.backend().kind())
    }

    /// `profile/queue (kind)` of the source and of the target, escaped for a terminal.
    pub fn labels(&self) -> (String, String) {
        let (fk, tk) = self.kinds();
        (
            format!("{} ({fk})", clean(&self.from_end().label())),
            format!("{} ({tk})", clean(&self.to_end().label())),
        )
    }

    /// The plan's sentence: `verb N message(s) from A (kind) to B (kind)`.
    pub fn describe(&self) -> String {
        let (from, to) = self.labels();
        format!(
            "{} {} message(s) from {from} to {to}",
            self.verb(),
            self.messages.len()
        )
    }

    /// What the plan says besides its sentence: for a move, that each original goes only
    /// after its copy is confirmed and what that does to the others; every header that does
    /// not arrive under its own name.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.moving {
            notes.push("each original is deleted after the target confirmed its copy".into());
            if let Some(n) = &self.check.delete_note {
                notes.push(clean(n).into_owned());
            }
        }
        notes.extend(
            self.check
                .headers
                .iter()
                .map(|h| clean(&h.line()).into_owned()),
        );
        notes
    }
}

/// What to plan: the two ends, the chosen messages and how they were chosen.
pub struct TransferRequest<'a> {
    pub from: &'a Gate,
    pub to: &'a Gate,
    pub source: QueueId,
    pub target: QueueId,
    pub messages: Vec<Message>,
    pub moving: bool,
    pub rate: Option<Rate>,
    pub selection: serde_json::Value,
}

/// Plan a copy or move of chosen messages: not a queue into itself, the target exists and its
/// broker publishes, a move's source deletes by id without harming the others, an SQS target
/// gets text bodies. The tiers of both profiles are checked by the caller (a dry run needs
/// only `browse`) and again by the run.
pub async fn plan_transfer(r: TransferRequest<'_>) -> Result<Planned, BackendError> {
    let from = End {
        gate: r.from,
        queue: &r.source,
    };
    let to = End {
        gate: r.to,
        queue: &r.target,
    };
    if from.label() == to.label() {
        return Err(BackendError::Invalid(format!(
            "source and target are the same queue ({})",
            clean(&from.label())
        )));
    }
    let check = copy::check(from, to, &r.messages, r.moving).await?;
    Ok(Planned::Transfer(Box::new(TransferPlan {
        from: r.from.clone(),
        to: r.to.clone(),
        source: r.source,
        target: r.target,
        messages: r.messages,
        moving: r.moving,
        rate: r.rate,
        selection: r.selection,
        check,
    })))
}

/// Send the copies and, for a move, delete the originals whose copy was confirmed
/// (`triage::copy::transfer`, which audits on both profiles).
pub(super) async fn run(t: TransferPlan, p: &OpProgress) -> Outcome {
    let TransferPlan {
        from,
        to,
        source,
        target,
        messages,
        moving,
        rate,
        selection,
        ..
    } = t;
    let from = End {
        gate: &from,
        queue: &source,
    };
    let to = End {
        gate: &to,
        queue: &target,
    };
    match copy::transfer(from, to, messages, moving, rate, selection, p).await {
        Ok(r) => Outcome::Transfer(r),
        Err(error) => Outcome::Failed {
            error,
            progress: p.snapshot(),
        },
    }
}
