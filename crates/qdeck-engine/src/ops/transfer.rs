//! Planning a copy or move of chosen messages (`qdeck copy|move`, `:copy` / `:move`): the
//! same checks for both front-ends, before anything is sent, on the gates of both profiles.

use super::{Outcome, Planned};
use crate::gate::Gate;
use crate::ops::copy::{self, End, TransferCheck};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{BrokerKind, Message, QueueId};
use qdeck_model::rate::Rate;
use qdeck_model::sanitize::clean;

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
/// (`ops::copy::transfer`, which audits on both profiles).
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{run, Verdict};
    use super::*;
    use crate::audit::AuditLog;
    use crate::gate::Mutation;
    use crate::testing::Scripted;
    use qdeck_model::config::Profile;
    use qdeck_model::domain::{BrowseRequest, OutgoingMessage};

    /// A move is planned like every mutation, with the same plan for both front-ends: its
    /// count, its sentence and its notes (the deletion comes after each confirmed copy); a
    /// plan into its own queue is refused; run through `ops::run`, a move whose deletes fail
    /// is partial, in the outcome and in both audit lines.
    #[tokio::test]
    async fn a_planned_move_whose_deletes_fail_runs_to_partial() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(Scripted::open(dir.path()));
        for body in ["a", "b"] {
            b.inner
                .0
                .send_sync("src", &OutgoingMessage::text(body, &[]))
                .unwrap();
        }
        let log = AuditLog::new(dir.path().join("audit.log"));
        let g = Gate::new(b.clone(), &Profile::default_local(), log);
        let (src, dst) = (QueueId::new("src"), QueueId::new("dst"));
        let req = BrowseRequest {
            cursor: None,
            max: 10,
            force: false,
        };
        let messages = g.browse(&src, &req).await.unwrap().messages;
        let request = |target: &QueueId| TransferRequest {
            from: &g,
            to: &g,
            source: src.clone(),
            target: target.clone(),
            messages: messages.clone(),
            moving: true,
            rate: None,
            selection: serde_json::json!({"chosen_in": "test"}),
        };
        let err = plan_transfer(request(&src)).await.unwrap_err();
        assert!(matches!(err, BackendError::Invalid(_)), "{err:?}");

        let planned = plan_transfer(request(&dst)).await.unwrap();
        assert_eq!(planned.mutation(), Mutation::Move);
        assert_eq!((planned.count().ready, planned.count().exact), (2, true));
        assert_eq!(
            planned.describe(),
            "move 2 message(s) from local/src (local) to local/dst (local)"
        );
        let Planned::Transfer(tp) = &planned else {
            panic!("{planned:?}")
        };
        assert_eq!(
            tp.notes(),
            vec!["each original is deleted after the target confirmed its copy".to_string()]
        );
        let outcome = run(&g, planned, &OpProgress::detached()).await;
        let Outcome::Transfer(r) = &outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!((r.sent, r.deleted, r.delete_failed), (2, 0, true));
        assert_eq!(outcome.verdict(), Verdict::Partial);
        let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        let results: Vec<serde_json::Value> = audit
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["result"].clone())
            .collect();
        assert_eq!(results, vec!["partial", "partial"]);
    }
}
