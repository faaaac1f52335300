//! `qdeck purge QUEUE --where PRED`: scan, match, then delete exactly the matching messages
//! (local broker, RabbitMQ, SQS, Service Bus dead-letter queues; other brokers declare it
//! unsupported before anything is scanned).

use serde_json::json;

use super::args::{Format, ScanArgs};
use super::cmd_mutate::run_planned;
use super::exit::{CliResult, OK};
use super::fetch;
use super::output::{self, name};
use super::scan;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops;
use qdeck_engine::session::Session;

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
    let qid = qdeck_model::domain::QueueId::new(queue);
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
    let sel = scan::select(b, &info.id, &pred, &limits, &ctx).await?;
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
    // The same plan, gate, progress, cancel and report as every other operation.
    let planned = ops::plan_delete(&s.gate, &info.id, sel.ids.clone(), note).await?;
    eprintln!("qdeck: {}", name(&sel.describe()));
    run_planned(s, planned, false, yes, f, "nothing to delete").await
}
