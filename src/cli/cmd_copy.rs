//! `qdeck copy|move QUEUE --to TARGET [--to-profile P]`: check both gates and both queues
//! (an unknown target is exit 4 before anything is browsed), scan the source for the
//! messages to send, confirm naming both profiles and queues, then copy (and for a move,
//! delete the confirmed originals) through triage::copy.

use serde_json::json;

use super::args::{Format, TransferArgs};
use super::confirm::confirm;
use super::exit::{of_verdict, CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name};
use super::progress_line::with_progress;
use super::scan;
use crate::domain::{BrokerKind, QueueId};
use crate::engine::gate::Mutation;
use crate::engine::ops::Outcome;
use crate::engine::session::{OpenError, Session};
use crate::triage::copy::{self, End, TransferCheck, TransferReport};
use crate::triage::headers::HeaderChange;
use crate::triage::{Predicate, ScanSummary};

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
    let to = End {
        gate: &t.gate,
        queue: &dst_info.id,
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
    let checked = copy::check(from, to, &msgs, moving).await?;
    let plan = Plan {
        verb,
        moving,
        from,
        to,
        kinds: (s.backend.kind(), t.backend.kind()),
        pred: pred.as_ref(),
        summary: &summary,
        count: msgs.len(),
        checked,
    };
    if a.dry_run || msgs.is_empty() {
        plan.preview(a.dry_run, f);
        return Ok(OK);
    }
    if !a.yes {
        plan.confirm()?;
    }
    let note = plan.note();
    let r = with_progress(verb, "stopping after the current batch…", |p| async move {
        copy::transfer(from, to, msgs, moving, a.rate, note, &p).await
    })
    .await?;
    report(r, verb, moving, f)
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

/// A checked transfer, and how it is put to the user before it runs.
struct Plan<'a> {
    verb: &'static str,
    moving: bool,
    from: End<'a>,
    to: End<'a>,
    /// The brokers of the source and of the target.
    kinds: (BrokerKind, BrokerKind),
    pred: Option<&'a Predicate>,
    summary: &'a ScanSummary,
    count: usize,
    checked: TransferCheck,
}

impl Plan<'_> {
    /// What the scan chose, out of how much it read.
    fn scope(&self) -> String {
        let count = self.count;
        match self.pred {
            Some(p) => format!(
                "{count} match {:?}; {}",
                p.source(),
                self.summary.sample_note("checked")
            ),
            None => format!("{count} message(s); {}", self.summary.sample_note("read")),
        }
    }

    /// `verb N message(s) from A (kind) to B (kind)`.
    fn text(&self) -> String {
        format!(
            "{} {} message(s) from {} ({}) to {} ({})",
            self.verb,
            self.count,
            name(&self.from.label()),
            self.kinds.0,
            name(&self.to.label()),
            self.kinds.1
        )
    }

    /// A dry run, or nothing to send: what would be done, with nothing changed.
    fn preview(&self, dry_run: bool, f: Format) {
        let verb = self.verb;
        if f == Format::Json {
            output::print_json(&json!({
                "dry_run": dry_run,
                "action": verb,
                "from": self.from.label(),
                "to": self.to.label(),
                "count": self.count,
                "predicate": self.pred.map(qdeck_core::triage::Predicate::source),
                "scanned": self.summary.scanned,
                "complete": self.summary.complete(),
                "headers": self.checked.headers,
            }))
            .ok();
        } else if self.count == 0 {
            output::print(&format!("{}; nothing to {verb}\n", name(&self.scope())));
        } else {
            output::print(&format!(
                "dry run: {}\nwould {}; nothing changed\n{}",
                name(&self.scope()),
                self.text(),
                header_lines(&self.checked.headers)
            ));
        }
    }

    /// Ask before sending; typed when the profile that loses or gains messages is protected.
    /// A refusal is recorded by the gate of that profile.
    fn confirm(&self) -> Result<(), CliError> {
        let cost = if self.moving {
            // What deleting chosen messages does to the others, as the broker declares it.
            let effect = self
                .checked
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
            self.text(),
            header_lines(&self.checked.headers)
        );
        let typed = self
            .checked
            .typed
            .as_ref()
            .map(qdeck_core::domain::QueueId::as_str);
        let (end, m) = if self.moving {
            (self.from, Mutation::Move)
        } else {
            (self.to, Mutation::Copy)
        };
        confirm(question.trim_end(), typed.unwrap_or(""), typed.is_some()).inspect_err(|e| {
            end.gate.refuse(m, end.queue, &e.message);
        })
    }

    /// Said in the audit line of the run: how the messages were chosen.
    fn note(&self) -> serde_json::Value {
        json!({
            "predicate": self.pred.map(qdeck_core::triage::Predicate::source),
            "scanned": self.summary.scanned,
            "complete": self.summary.complete(),
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
