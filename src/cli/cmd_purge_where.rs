//! `qdeck purge QUEUE --where PRED`: scan, match, then delete exactly the matching messages
//! (local broker, RabbitMQ, SQS, Service Bus dead-letter queues; other brokers declare it
//! unsupported before anything is scanned).

use serde_json::json;

use super::args::{Format, ScanArgs};
use super::confirm::confirm;
use super::exit::{CliError, CliResult, FAILED, INTERRUPTED, OK, PARTIAL};
use super::fetch;
use super::output::{self, name};
use super::progress_line::with_progress;
use super::scan;
use crate::engine::gate::Mutation;
use crate::engine::session::Session;
use crate::triage::{self, StopReason};

pub async fn purge_where(
    s: &Session,
    queue: &str,
    pred: &str,
    a: &ScanArgs,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let pred = scan::predicate(pred)?;
    let limits = scan::limits(s, a, true)?;
    let qid = crate::domain::QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Delete, &qid)?;
    }
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    fetch::require_delete_by_id(
        b,
        &info,
        "purge --where",
        "it works on the local broker, RabbitMQ, SQS and Service Bus dead-letter queues",
    )?;
    let ctx = scan::eval_context(s);
    let sel = scan::with_progress("scan", |p| {
        let (pred, limits, ctx, id) = (&pred, &limits, &ctx, &info.id);
        async move { triage::select(b, id, pred, limits, ctx, &p).await }
    })
    .await?;
    scan::print_effect(&sel.scan);
    if sel.scan.stopped == StopReason::Cancelled {
        return Err(CliError::new(
            INTERRUPTED,
            "scan cancelled; nothing was changed",
        ));
    }
    let note = json!({
        "predicate": pred.source(),
        "scanned": sel.scan.scanned,
        "matched": sel.matched,
        "complete": sel.scan.complete(),
    });
    let q = name(info.id.as_str());
    if dry_run || sel.ids.is_empty() {
        if f == Format::Json {
            output::print_json(&json!({
                "dry_run": dry_run,
                "action": "delete",
                "queue": info.id,
                "count": sel.matched,
                "selection": note,
                "sample_note": sel.scan.sample_note("checked"),
                "samples": sel.samples,
            }))
            .ok();
        } else if sel.ids.is_empty() {
            output::print(&format!("{}; nothing to delete\n", name(&sel.describe())));
        } else {
            let mut out = format!(
                "dry run: {}\nwould delete {} message(s) from {q}; nothing changed\n",
                name(&sel.describe()),
                sel.matched
            );
            for r in &sel.samples {
                out.push_str(&format!("  {}  {}\n", name(&r.id), name(&r.signature)));
            }
            output::print(&out);
        }
        return Ok(OK);
    }
    if !yes {
        let question = format!(
            "{}.\nAbout to delete {} message(s) from {q}. This cannot be undone.",
            name(&sel.describe()),
            sel.matched
        );
        if let Err(e) = confirm(&question, info.id.as_str(), s.gate.protected()) {
            s.gate.refuse(Mutation::Delete, &info.id, &e.message);
            return Err(e);
        }
    }
    let r = with_progress("delete", "cancelling after the current batch…", |p| {
        let (gate, id, ids) = (&s.gate, &info.id, &sel.ids);
        async move { gate.delete_selected(id, ids, note, &p).await }
    })
    .await?;
    if f == Format::Json {
        output::print_json(&r).ok();
    } else {
        output::print(&format!(
            "deleted {}, already gone {}, leased by a worker (left) {}{}\n",
            r.deleted,
            r.missing,
            r.leased,
            if r.cancelled { ", cancelled" } else { "" }
        ));
    }
    Ok(if r.cancelled {
        INTERRUPTED
    } else if r.leased > 0 && r.deleted > 0 {
        PARTIAL
    } else if r.leased > 0 {
        FAILED
    } else {
        OK
    })
}
