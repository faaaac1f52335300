//! `qdeck reasons DLQ`: the DLQ grouped by failure signature over a bounded scan.

use super::args::{Format, ScanArgs};
use super::exit::{CliResult, INTERRUPTED, OK};
use super::fetch;
use super::output::{self, name, Table};
use super::scan;
use crate::engine::session::Session;
use crate::triage::{self, StopReason};

pub async fn reasons(s: &Session, dlq: &str, a: &ScanArgs, f: Format) -> CliResult {
    let limits = scan::limits(s, a, true)?;
    // Grouping reads bodies and headers: tier `browse` at least.
    s.gate.require(
        crate::engine::gate::Mutation::Browse,
        &crate::domain::QueueId::new(dlq),
    )?;
    let b = s.backend.as_ref();
    let info = fetch::find(b, dlq).await?;
    let cfg = scan::signature_config(s);
    let report = scan::with_progress("scan", |p| async move {
        triage::reasons(b, &info.id, &limits, &cfg, &p).await
    })
    .await?;
    scan::print_effect(&report.scan);
    let note = report.sample_note();
    let code = if report.scan.stopped == StopReason::Cancelled {
        INTERRUPTED
    } else {
        OK
    };
    if f == Format::Json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("complete".into(), report.scan.complete().into());
            o.insert("sample_note".into(), note.clone().into());
        }
        output::print_json(&v).ok();
        return Ok(code);
    }
    let mut t = Table::new(vec![
        "COUNT",
        "SIGNATURE",
        "ORIGIN",
        "FIRST_SEEN",
        "LAST_SEEN",
        "SAMPLE_ID",
        "REDRIVEN",
    ]);
    for g in &report.groups {
        t.push(vec![
            g.count.to_string(),
            name(&g.signature),
            g.origin.as_deref().map_or_else(|| "—".into(), name),
            output::time_in(g.first_seen_ms, f),
            output::time_in(g.last_seen_ms, f),
            name(&g.sample_id),
            match (g.redriven, f.is_machine()) {
                (0, true) => "0".into(),
                (0, false) => String::new(),
                (n, true) => n.to_string(),
                (n, false) => format!("{n} came back after a redrive"),
            },
        ]);
    }
    output::print(&t.render(f));
    // Scripts read the rows; the coverage line goes where people look.
    if f.is_machine() {
        eprintln!("qdeck: {note}; {} group(s)", report.groups.len());
    } else {
        output::print(&format!("{note}; {} group(s)\n", report.groups.len()));
    }
    Ok(code)
}
