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
use crate::domain::QueueId;
use crate::engine::gate::Mutation;
use crate::engine::ops::Outcome;
use crate::engine::session::{OpenError, Session};
use crate::triage::copy::{self, End};
use crate::triage::headers::HeaderChange;

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
    let sb = s.backend.as_ref();
    if moving {
        fetch::require_delete_by_id(sb, &src_info, "move", "use copy")?;
    }
    let ctx = scan::eval_context(s);
    let (msgs, summary) = scan::with_progress("scan", |p| {
        let (pred, limits, ctx) = (pred.as_ref(), &limits, &ctx);
        async move { copy::collect(from, pred, limits, ctx, a.count, &p).await }
    })
    .await?;
    scan::finished(&summary)?;
    let checked = copy::check(from, to, &msgs, moving).await?;
    let headers = checked.headers;
    let scope = match &pred {
        Some(p) => format!(
            "{} match {:?}; {}",
            msgs.len(),
            p.source(),
            summary.sample_note("checked")
        ),
        None => format!("{} message(s); {}", msgs.len(), summary.sample_note("read")),
    };
    let plan = format!(
        "{verb} {} message(s) from {} ({}) to {} ({})",
        msgs.len(),
        name(&from.label()),
        sb.kind(),
        name(&to.label()),
        t.backend.kind()
    );
    if a.dry_run || msgs.is_empty() {
        if f == Format::Json {
            output::print_json(&json!({
                "dry_run": a.dry_run,
                "action": verb,
                "from": from.label(),
                "to": to.label(),
                "count": msgs.len(),
                "predicate": pred.as_ref().map(|p| p.source()),
                "scanned": summary.scanned,
                "complete": summary.complete(),
                "headers": headers,
            }))
            .ok();
        } else if msgs.is_empty() {
            output::print(&format!("{}; nothing to {verb}\n", name(&scope)));
        } else {
            output::print(&format!(
                "dry run: {}\nwould {plan}; nothing changed\n{}",
                name(&scope),
                header_lines(&headers)
            ));
        }
        return Ok(OK);
    }
    if !a.yes {
        let cost = if moving {
            // What deleting chosen messages does to the others, as the broker declares it.
            let effect = checked
                .delete_note
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
            "{}.\nAbout to {plan}.{cost}\n{}",
            name(&scope),
            header_lines(&headers)
        );
        // Typed confirmation when the profile that loses or gains messages is protected.
        let typed = checked.typed.as_ref().map(|q| q.as_str());
        let (gate, q) = if moving {
            (&s.gate, &src_info.id)
        } else {
            (&t.gate, &dst_info.id)
        };
        if let Err(e) = confirm(question.trim_end(), typed.unwrap_or(""), typed.is_some()) {
            let m = if moving {
                Mutation::Move
            } else {
                Mutation::Copy
            };
            gate.refuse(m, q, &e.message);
            return Err(e);
        }
    }
    let note = json!({
        "predicate": pred.as_ref().map(|p| p.source()),
        "scanned": summary.scanned,
        "complete": summary.complete(),
    });
    let r = with_progress(verb, "stopping after the current batch…", |p| async move {
        copy::transfer(from, to, msgs, moving, a.rate, note, &p).await
    })
    .await?;
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
