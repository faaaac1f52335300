//! `qdeck copy|move QUEUE --to TARGET [--to-profile P]`: check both gates and both queues
//! (an unknown target is exit 4 before anything is browsed), scan the source for the
//! messages to send, confirm naming both profiles and queues, then copy (and for a move,
//! delete the confirmed originals) through ops::copy.

use serde_json::json;

use super::args::{Format, TransferArgs};
use super::confirm::confirm;
use super::exit::{of_failed, of_verdict, unexpected, unexpected_plan, CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name};
use super::progress_line::with_progress;
use super::scan;
use qdeck_backend::headers::HeaderChange;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::copy::{self, End, TransferReport};
use qdeck_engine::ops::{self, Outcome, Planned, TransferPlan, TransferRequest};
use qdeck_engine::session::{OpenError, Session};
use qdeck_engine::triage::{Predicate, ScanSummary};
use qdeck_model::domain::QueueId;

/// The target's session: the source's own, or another profile of the same config (with
/// `--read-only` carried over, so it can never be weakened by naming another profile).
async fn target_session(s: &Session, profile: Option<&str>) -> Result<Session, CliError> {
    s.for_profile(profile).await.map_err(|e| match e {
        OpenError::Config(e) => e.into(),
        OpenError::Backend(e) => e.into(),
    })
}

/// One line per header that did not arrive under its own name.
fn header_lines(changes: &[HeaderChange]) -> String {
    changes
        .iter()
        .map(|c| format!("  {}\n", name(&c.line())))
        .collect()
}

pub async fn transfer(s: &Session, a: &TransferArgs, moving: bool, f: Format) -> CliResult {
    let verb = if moving { "move" } else { "copy" };
    if a.count == Some(0) {
        return Err(CliError::usage("-n must be at least 1"));
    }
    let pred = a.filter.as_deref().map(scan::predicate).transpose()?;
    let mut limits = scan::limits(s, &a.scan, pred.is_some())?;
    if pred.is_none() {
        limits.max_messages = match (limits.max_messages, a.count) {
            (Some(l), Some(n)) => Some(l.min(n)),
            (l, n) => l.or(n),
        };
    }
    let t = target_session(s, a.to_profile.as_deref()).await?;
    require_allowed(s, &t, a, moving)?;
    // Unknown target (or source): exit 4 before a single message is browsed.
    let dst_info = fetch::find(t.backend.as_ref(), &a.to).await?;
    let src_info = fetch::find(s.backend.as_ref(), &a.queue).await?;
    let from = End {
        gate: &s.gate,
        queue: &src_info.id,
    };
    if moving {
        fetch::require_delete_by_id(s.backend.as_ref(), &src_info, "move", "use copy")?;
    }
    let ctx = scan::eval_context(s);
    let (msgs, summary) = scan::with_progress("scan", |p| {
        let (pred, limits, ctx) = (pred.as_ref(), &limits, &ctx);
        async move { copy::collect(from, pred, limits, ctx, a.count, &p).await }
    })
    .await?;
    scan::finished(&summary)?;
    let planned = ops::plan_transfer(TransferRequest {
        from: &s.gate,
        to: &t.gate,
        source: src_info.id.clone(),
        target: dst_info.id.clone(),
        messages: msgs,
        moving,
        rate: a.rate,
        selection: selection(pred.as_ref(), &summary),
    })
    .await?;
    let Planned::Transfer(tp) = &planned else {
        return Err(unexpected_plan(verb, &planned));
    };
    let plan = Plan {
        plan: tp,
        pred: pred.as_ref(),
        summary: &summary,
    };
    if a.dry_run || planned.is_empty() {
        plan.preview(a.dry_run, f);
        return Ok(OK);
    }
    if !a.yes {
        plan.confirm()?;
    }
    let outcome = with_progress(verb, "stopping after the current batch…", |p| async move {
        ops::run(&s.gate, planned, &p).await
    })
    .await;
    if let Some(e) = of_failed(&outcome, &src_info.id) {
        return Err(e);
    }
    match outcome {
        Outcome::Transfer(r) => report(r, verb, moving, f),
        other => Err(unexpected(verb, &other)),
    }
}

/// Said in the audit line of the run: how the messages were chosen.
fn selection(pred: Option<&Predicate>, summary: &ScanSummary) -> serde_json::Value {
    json!({
        "predicate": pred.map(qdeck_engine::triage::Predicate::source),
        "scanned": summary.scanned,
        "complete": summary.complete(),
    })
}

/// Checks on the names as given, before either queue is looked up: not one queue to itself,
/// and the gates allow it (a dry run only browses the source).
fn require_allowed(
    s: &Session,
    t: &Session,
    a: &TransferArgs,
    moving: bool,
) -> Result<(), CliError> {
    let verb = if moving { "move" } else { "copy" };
    let (src_q, dst_q) = (QueueId::new(&a.queue), QueueId::new(&a.to));
    let from = End {
        gate: &s.gate,
        queue: &src_q,
    };
    let to = End {
        gate: &t.gate,
        queue: &dst_q,
    };
    if from.label() == to.label() {
        return Err(CliError::usage(format!(
            "{verb}: source and target are the same queue ({})",
            name(&from.label())
        )));
    }
    // A dry run reads bodies and changes nothing: `browse` on the source is all it needs.
    if a.dry_run {
        s.gate.require(Mutation::Browse, &src_q)?;
    } else {
        copy::require(from, to, moving)?;
    }
    Ok(())
}

/// A planned transfer, and how it is put to the user before it runs: on the plan's own
/// sentence and notes, with the scan that chose the messages.
struct Plan<'a> {
    plan: &'a TransferPlan,
    pred: Option<&'a Predicate>,
    summary: &'a ScanSummary,
}

impl Plan<'_> {
    /// What the scan chose, out of how much it read.
    fn scope(&self) -> String {
        let count = self.plan.messages.len();
        match self.pred {
            Some(p) => format!(
                "{count} match {:?}; {}",
                p.source(),
                self.summary.sample_note("checked")
            ),
            None => format!("{count} message(s); {}", self.summary.sample_note("read")),
        }
    }

    /// A dry run, or nothing to send: what would be done, with nothing changed.
    fn preview(&self, dry_run: bool, f: Format) {
        let verb = self.plan.verb();
        let count = self.plan.messages.len();
        if f == Format::Json {
            output::print_json(&json!({
                "dry_run": dry_run,
                "action": verb,
                "from": self.plan.from_end().label(),
                "to": self.plan.to_end().label(),
                "count": count,
                "predicate": self.pred.map(qdeck_engine::triage::Predicate::source),
                "scanned": self.summary.scanned,
                "complete": self.summary.complete(),
                "headers": self.plan.check.headers,
            }))
            .ok();
        } else if count == 0 {
            output::print(&format!("{}; nothing to {verb}\n", name(&self.scope())));
        } else {
            output::print(&format!(
                "dry run: {}\nwould {}; nothing changed\n{}",
                name(&self.scope()),
                self.plan.describe(),
                header_lines(&self.plan.check.headers)
            ));
        }
    }

    /// Ask before sending; typed when the profile that loses or gains messages is protected.
    /// A refusal is recorded by the gate of that profile.
    fn confirm(&self) -> Result<(), CliError> {
        let cost = if self.plan.moving {
            // What deleting chosen messages does to the others, as the broker declares it.
            let effect = self
                .plan
                .check
                .delete_note
                .as_ref()
                .map(|n| format!(" Note: {n}."))
                .unwrap_or_default();
            format!(
                "\nEach original is deleted after the target confirmed its copy.{}",
                name(&effect)
            )
        } else {
            String::new()
        };
        let question = format!(
            "{}.\nAbout to {}.{cost}\n{}",
            name(&self.scope()),
            self.plan.describe(),
            header_lines(&self.plan.check.headers)
        );
        let typed = self
            .plan
            .check
            .typed
            .as_ref()
            .map(qdeck_model::domain::QueueId::as_str);
        let (end, m) = if self.plan.moving {
            (self.plan.from_end(), Mutation::Move)
        } else {
            (self.plan.to_end(), Mutation::Copy)
        };
        confirm(question.trim_end(), typed.unwrap_or(""), typed.is_some()).inspect_err(|e| {
            end.gate.refuse(m, end.queue, &e.message);
        })
    }
}

/// The result, and the exit code its verdict gives.
fn report(r: TransferReport, verb: &str, moving: bool, f: Format) -> CliResult {
    if f == Format::Json {
        output::print_json(&r).ok();
    } else {
        let deleted = if moving {
            format!(
                ", originals deleted {}, already gone {}, leased (left, now twice) {}",
                r.deleted, r.missing, r.leased
            )
        } else {
            String::new()
        };
        output::print(&format!(
            "{verb}: sent {}, failed {}{deleted}{}\n{}",
            r.sent,
            r.failed,
            if r.cancelled { ", cancelled" } else { "" },
            header_lines(&r.headers)
        ));
    }
    let error = r.error.clone();
    let code = of_verdict(Outcome::Transfer(r).verdict());
    if let Some(e) = error {
        return Err(CliError::after_report(code, name(&e)));
    }
    Ok(code)
}
