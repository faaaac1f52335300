//! Copy or move messages to another queue, on the same profile or another one (`qdeck copy`,
//! `qdeck move`). The source is browsed (never consumed) to pick the messages; each copy is
//! sent to the target and, for a move, only the originals whose copy the target confirmed are
//! deleted afterwards, through the source broker's `delete_ids`. A crash in between leaves a
//! duplicate, never a loss. Both profiles' gates are checked before anything is read or sent,
//! and both get an audit line.

use serde::Serialize;
use serde_json::json;

use crate::gate::{Gate, Mutation};
use crate::ops::Outcome;
use crate::triage::batches::{batch_len, send_batch};
use crate::triage::predicate::{EvalContext, Predicate};
use crate::triage::scan::{scan, ScanLimits, ScanSummary};
use qdeck_backend::headers::{map_message, HeaderChange, HeaderLedger};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{Message, QueueId};
use qdeck_model::rate::{Limiter, Rate};

/// The source's deleter for a move, or the refusal that says to copy instead.
fn move_deleter(
    b: &dyn qdeck_backend::Backend,
) -> Result<&dyn qdeck_backend::DeleteById, BackendError> {
    b.deleter().ok_or_else(|| {
        BackendError::Unsupported(format!(
            "move deletes the originals by id, which the {} backend cannot do; use copy",
            b.kind()
        ))
    })
}

/// One side of a transfer: a profile's gate and a queue on it.
#[derive(Clone, Copy)]
pub struct End<'a> {
    pub gate: &'a Gate,
    pub queue: &'a QueueId,
}

impl End<'_> {
    /// `profile/queue`, as confirmations and audit lines name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.gate.profile_name(), self.queue)
    }
}

/// Check every tier a transfer needs, before anything is read: `browse` on the source (it
/// reads bodies), `redrive` on the target (it adds messages), and for a move `full` on the
/// source (it deletes); and that the target's broker takes messages from qdeck at all.
/// Refusals of a tier are audited on the profile that refused.
pub fn require(from: End<'_>, to: End<'_>, moving: bool) -> Result<(), BackendError> {
    from.gate.require(Mutation::Browse, from.queue)?;
    let on_target = if moving {
        Mutation::Move
    } else {
        Mutation::Copy
    };
    to.gate.require(on_target, to.queue)?;
    if moving {
        from.gate.require(Mutation::Delete, from.queue)?;
    }
    qdeck_backend::sender_of(to.gate.backend().as_ref())?;
    Ok(())
}

/// The messages of a bounded scan that match `pred` (all when `None`), at most `max`.
/// Bodies are held in memory: the scan bounds are what bound it.
pub async fn collect(
    from: End<'_>,
    pred: Option<&Predicate>,
    limits: &ScanLimits,
    ctx: &EvalContext,
    max: Option<u64>,
    progress: &OpProgress,
) -> Result<(Vec<Message>, ScanSummary), BackendError> {
    let mut picked = Vec::new();
    let full = |n: usize| max.is_some_and(|m| n as u64 >= m);
    let b = from.gate.backend().as_ref();
    let summary = scan(b, from.queue, limits, progress, |page| {
        for m in page {
            if full(picked.len()) {
                return false;
            }
            if pred.is_none_or(|p| p.matches(m, ctx)) {
                picked.push(m.clone());
            }
        }
        !full(picked.len())
    })
    .await?;
    Ok((picked, summary))
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TransferReport {
    pub action: &'static str,
    pub from: String,
    pub to: String,
    pub selected: u64,
    /// Copies the target confirmed.
    pub sent: u64,
    pub failed: u64,
    /// Originals deleted after their copy was confirmed (move only).
    pub deleted: u64,
    /// Originals already gone when the delete pass looked for them.
    pub missing: u64,
    /// Originals a worker held a lease on: left in place, so they now exist twice.
    pub leased: u64,
    pub cancelled: bool,
    /// A move's deletion of the originals failed: every confirmed copy may now exist twice.
    /// Its own field because `deleted` stays 0 whether the deletion failed or never ran.
    pub delete_failed: bool,
    /// Headers that did not arrive under their own name: renamed to `x-qdeck-*` or dropped.
    pub headers: Vec<HeaderChange>,
    pub error: Option<String>,
}

/// What a transfer of chosen messages will do, checked before anything is sent.
#[derive(Debug, Clone)]
pub struct TransferCheck {
    /// Every header rename and drop the copies will carry.
    pub headers: Vec<HeaderChange>,
    /// A move: what deleting the originals does to the source's other messages.
    pub delete_note: Option<String>,
    /// The queue whose name a protected profile types to confirm: the source of a move on a
    /// protected profile, else the target on a protected profile.
    pub typed: Option<QueueId>,
}

/// Checks a transfer of `msgs` can go ahead, changing nothing: the target's broker publishes
/// (a dry run skips `require`), the target exists (`NotFound`),
/// a move's source can delete these messages by id (refusals as `purge --where` gives them),
/// and an SQS target gets text bodies only. The tiers are [`require`]'s, checked by `transfer`.
pub async fn check(
    from: End<'_>,
    to: End<'_>,
    msgs: &[Message],
    moving: bool,
) -> Result<TransferCheck, BackendError> {
    let (fb, tb) = (from.gate.backend(), to.gate.backend());
    qdeck_backend::sender_of(tb.as_ref())?;
    tb.describe(to.queue).await?;
    let mut delete_note = None;
    if moving {
        let d = move_deleter(fb.as_ref())?;
        let info = fb.describe(from.queue).await?;
        if let Some(why) = d.delete_refusal(&info) {
            return Err(BackendError::Refused(why));
        }
        delete_note = d.delete_note(&info);
    }
    let rules = tb.header_rules();
    if let Some((m, why)) = msgs
        .iter()
        .find_map(|m| rules.body_refusal(&m.body).map(|why| (m, why)))
    {
        return Err(BackendError::Invalid(format!(
            "message {} has a binary body and {why}; nothing was sent",
            qdeck_model::sanitize::clean(&m.id)
        )));
    }
    let typed = if moving && from.gate.protected() {
        Some(from.queue.clone())
    } else if to.gate.protected() {
        Some(to.queue.clone())
    } else {
        None
    };
    Ok(TransferCheck {
        headers: preview_headers(from, to, msgs),
        delete_note,
        typed,
    })
}

/// What the copies will look like: every header rename and drop over `msgs`, without sending.
pub fn preview_headers(from: End<'_>, to: End<'_>, msgs: &[Message]) -> Vec<HeaderChange> {
    let (fk, tk) = (
        from.gate.backend().header_rules(),
        to.gate.backend().header_rules(),
    );
    let mut ledger = HeaderLedger::default();
    for m in msgs {
        map_message(m, fk, tk, &mut ledger);
    }
    ledger.changes()
}

/// Send a copy of each message to `to` in batches (rate limited, cancellable), then for a
/// move delete the originals whose copy was confirmed. The first batch with a failed send
/// stops the sending; the originals already copied (in that batch too) are still deleted, so
/// nothing stays twice because of the stop.
/// `note` (predicate, scan counts) joins both audit lines.
#[allow(clippy::too_many_arguments)]
pub async fn transfer(
    from: End<'_>,
    to: End<'_>,
    msgs: Vec<Message>,
    moving: bool,
    rate: Option<Rate>,
    note: serde_json::Value,
    progress: &OpProgress,
) -> Result<TransferReport, BackendError> {
    require(from, to, moving)?;
    let (fk, tk) = (
        from.gate.backend().header_rules(),
        to.gate.backend().header_rules(),
    );
    let mut report = TransferReport {
        action: if moving { "move" } else { "copy" },
        from: from.label(),
        to: to.label(),
        selected: msgs.len() as u64,
        ..Default::default()
    };
    let mut ledger = HeaderLedger::default();
    let mut copied = Vec::new();
    progress.set_total(Some(msgs.len() as u64));
    progress.phase("copying");
    let pace = Limiter::new(rate);
    for chunk in msgs.chunks(batch_len(rate)) {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let batch = chunk
            .iter()
            .map(|m| map_message(m, fk, tk, &mut ledger))
            .collect();
        let backend = to.gate.backend().as_ref();
        let o = send_batch(backend, to.queue, batch, &pace, progress).await;
        report.sent += o.sent.len() as u64;
        report.failed += o.failed as u64;
        copied.extend(o.sent.iter().map(|&i| chunk[i].id.clone()));
        if let Some((i, e)) = o.first_error {
            report.error = Some(format!("message {}: {e}", chunk[i].id));
            break;
        }
    }
    report.headers = ledger.changes();
    let mut delete_error = None;
    if moving && !copied.is_empty() {
        progress.phase("deleting originals");
        // Not the run's progress: a cancel must not stop the deletion of originals whose
        // copy already exists, or they would stay twice.
        let deleted = match move_deleter(from.gate.backend().as_ref()) {
            Ok(d) => {
                d.delete_ids(from.queue, &copied, &OpProgress::detached())
                    .await
            }
            Err(e) => Err(e),
        };
        match deleted {
            Ok(d) => {
                report.deleted = d.deleted;
                report.missing = d.missing;
                report.leased = d.leased;
            }
            Err(e) => delete_error = Some(e),
        }
    }
    let mut counts = json!({
        "selected": report.selected,
        "sent": report.sent,
        "failed": report.failed,
        "headers_renamed": report.headers.iter().filter(|h| h.to.is_some()).count(),
        "headers_dropped": report.headers.iter().filter(|h| h.to.is_none()).count(),
    });
    if moving {
        counts["deleted"] = json!(report.deleted);
        counts["missing"] = json!(report.missing);
        counts["leased"] = json!(report.leased);
    }
    if let (serde_json::Value::Object(n), Some(c)) = (&note, counts.as_object_mut()) {
        c.extend(n.clone());
    }
    report.delete_failed = delete_error.is_some();
    let verdict = Outcome::Transfer(report.clone()).verdict();
    let error = match &delete_error {
        Some(e) => Some(format!("deleting the originals: {e}")),
        None => report.error.clone(),
    };
    let m = if moving {
        Mutation::Move
    } else {
        Mutation::Copy
    };
    let mut from_counts = counts.clone();
    from_counts["direction"] = json!("out");
    from.gate.record(
        m,
        from.queue,
        Some(to.label()),
        from_counts,
        verdict,
        error.clone(),
    );
    counts["direction"] = json!("in");
    counts["source"] = json!(from.label());
    to.gate.record(m, to.queue, None, counts, verdict, error);
    if let Some(e) = delete_error {
        report.error = Some(format!(
            "{} copied, but deleting the originals failed (they now exist twice): {e}",
            report.sent
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::audit::AuditLog;
    use crate::ops::Verdict;
    use crate::testing::Scripted;
    use qdeck_model::config::Profile;
    use qdeck_model::domain::{BrowseRequest, OutgoingMessage};

    /// Copies confirmed, then deleting the originals fails: the report, both audit lines and
    /// (through `Outcome::verdict`) the exit code and the console all say partial.
    #[tokio::test]
    async fn a_move_whose_deletes_fail_is_partial_in_the_report_and_the_audit() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(Scripted::open(dir.path()));
        for body in [&b"a"[..], b"b"] {
            let m = OutgoingMessage {
                body: body.to_vec(),
                ..Default::default()
            };
            b.inner.0.send_sync("src", &m).unwrap();
        }
        let log = AuditLog::new(dir.path().join("audit.log"));
        let g = Gate::new(b.clone(), &Profile::default_local(), log);
        let (src, dst) = (QueueId::new("src"), QueueId::new("dst"));
        let req = BrowseRequest {
            cursor: None,
            max: 10,
            force: false,
        };
        let msgs = g.browse(&src, &req).await.unwrap().messages;
        let from = End {
            gate: &g,
            queue: &src,
        };
        let to = End {
            gate: &g,
            queue: &dst,
        };
        let p = OpProgress::detached();
        let r = transfer(from, to, msgs, true, None, json!({}), &p)
            .await
            .unwrap();
        assert_eq!((r.sent, r.deleted, r.delete_failed), (2, 0, true));
        assert!(r.error.as_deref().unwrap().contains("exist twice"));
        assert_eq!(Outcome::Transfer(r).verdict(), Verdict::Partial);
        let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        let results: Vec<serde_json::Value> = audit
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["result"].clone())
            .collect();
        assert_eq!(results, vec!["partial", "partial"]);
    }
}
