//! `qdeck reasons QUEUE`: a DLQ grouped by failure signature over a bounded scan. A queue
//! with a DLQ is read through its DLQ, as the console's `F` (`triage::reasons_queue`);
//! `--live` reads the queue itself.

use super::args::{Format, ScanArgs};
use super::exit::{CliResult, INTERRUPTED, OK};
use super::fetch;
use super::output::{self, name, Table};
use super::scan;
use qdeck_engine::session::Session;
use qdeck_engine::triage::{self, StopReason};
use qdeck_model::domain::{QueueId, QueueInfo};

/// The queue read for `info`, the queue it is the DLQ of when that is not the one named, and
/// the title that says which.
fn target(info: &QueueInfo, live: bool) -> (QueueId, Option<QueueId>, String) {
    let q = name(info.id.as_str());
    if live {
        let title = match (&info.dlq, info.is_dlq) {
            (Some(d), false) => format!(
                "reasons of {q} (its live messages, not its DLQ {})",
                name(d.as_str())
            ),
            _ => format!("reasons of {q}"),
        };
        return (info.id.clone(), None, title);
    }
    match triage::reasons_queue(info) {
        Some(d) if d == info.id => (d, None, format!("reasons of {q}")),
        Some(d) => {
            let title = format!("reasons of {} (the DLQ of {q})", name(d.as_str()));
            (d, Some(info.id.clone()), title)
        }
        // Neither a known DLQ nor a queue with one: a DLQ no source names (a parking queue, a
        // link the broker does not show) is still read, and the title says what was read.
        None => (
            info.id.clone(),
            None,
            format!("reasons of {q} (no DLQ of its own: its messages)"),
        ),
    }
}

pub async fn reasons(
    s: &Session,
    queue: &str,
    live: bool,
    by: &[String],
    a: &ScanArgs,
    f: Format,
) -> CliResult {
    let limits = scan::limits(s, a, true)?;
    // Grouping reads bodies and headers: tier `browse` at least.
    s.gate
        .require(qdeck_engine::gate::Mutation::Browse, &QueueId::new(queue))?;
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let (read, dlq_of, title) = target(&info, live);
    let mut cfg = scan::signature_config(s);
    // `--by` first: what the user names now knows best what to group by.
    let named: Vec<String> = by
        .iter()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .collect();
    cfg.extra_headers.retain(|h| !named.contains(h));
    cfg.extra_headers.splice(0..0, named);
    let report = scan::with_progress("scan", |p| {
        let read = &read;
        async move { triage::reasons(b, read, &limits, &cfg, &p).await }
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
            o.insert("dlq_of".into(), dlq_of.as_ref().map(QueueId::as_str).into());
            o.insert("live".into(), live.into());
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
    // Scripts read the rows; which queue was read and what the scan covered go where people
    // look.
    let groups = report.groups.len();
    if f.is_machine() {
        output::print(&t.render(f));
        eprintln!("qdeck: {title}: {note}; {groups} group(s)");
    } else {
        output::print(&format!(
            "{title}\n{}{note}; {groups} group(s)\n",
            t.render(f)
        ));
    }
    Ok(code)
}
