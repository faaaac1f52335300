//! `qdeck export QUEUE --file F.jsonl`: one JSON object per message (triage::transfer). A
//! browse: nothing is removed. Written to a temporary file beside F and renamed at the end, so
//! a failed export never leaves a half file under the name asked for.

use std::io::Write;
use std::path::Path;

use super::args::{Format, ScanArgs};
use super::exit::{CliError, CliResult, FAILED, INTERRUPTED, OK};
use super::fetch;
use super::output::{self, name};
use super::scan;
use qdeck_engine::session::Session;
use qdeck_engine::triage::transfer::Record;
use qdeck_engine::triage::{self, StopReason};

pub async fn export(
    s: &Session,
    queue: &str,
    file: &Path,
    filter: Option<&str>,
    count: Option<u64>,
    a: &ScanArgs,
    f: Format,
) -> CliResult {
    let pred = filter.map(scan::predicate).transpose()?;
    // Export reads bodies: tier `browse` at least, refused (and audited) before any scan.
    s.gate.require(
        qdeck_engine::gate::Mutation::Export,
        &qdeck_model::domain::QueueId::new(queue),
    )?;
    if count == Some(0) {
        return Err(CliError::usage("-n must be at least 1"));
    }
    let mut limits = scan::limits(s, a, false)?;
    if pred.is_none() {
        // Without a filter every message seen is exported: the scan stops at -n.
        limits.max_messages = match (limits.max_messages, count) {
            (Some(l), Some(n)) => Some(l.min(n)),
            (l, n) => l.or(n),
        };
    }
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let io_err =
        |e: std::io::Error| CliError::new(FAILED, format!("cannot write {}: {e}", file.display()));
    let tmp = file.with_extension("jsonl.partial");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io_err)?);
    let ctx = scan::eval_context(s);
    let kind = b.kind();
    let mut written = 0u64;
    let mut write_error: Option<std::io::Error> = None;
    let summary = scan::with_progress("export", |p| {
        let (limits, ctx, id) = (&limits, &ctx, &info.id);
        let (out, written, write_error, pred) = (&mut out, &mut written, &mut write_error, &pred);
        async move {
            triage::scan(b, id, limits, &p, |page| {
                for m in page {
                    if count.is_some_and(|n| *written >= n) {
                        return false;
                    }
                    if pred.as_ref().is_some_and(|p| !p.matches(m, ctx)) {
                        continue;
                    }
                    let line = Record::from_message(m, kind, id.as_str())
                        .to_line()
                        .map_err(std::io::Error::other)
                        .and_then(|l| writeln!(out, "{l}"));
                    if let Err(e) = line {
                        *write_error = Some(e);
                        return false;
                    }
                    *written += 1;
                }
                count.is_none_or(|n| *written < n)
            })
            .await
        }
    })
    .await;
    let finish = |r: Result<(), std::io::Error>| {
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r.map_err(io_err)
    };
    let summary = match summary {
        Ok(sm) => sm,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    if let Some(e) = write_error {
        finish(Err(e))?;
    }
    finish(out.flush())?;
    drop(out);
    finish(std::fs::rename(&tmp, file))?;
    scan::print_effect(&summary);
    let note = summary.sample_note("read");
    if f == Format::Json {
        output::print_json(&serde_json::json!({
            "queue": info.id,
            "file": file.display().to_string(),
            "exported": written,
            "predicate": pred.as_ref().map(|p| p.source().to_string()),
            "scanned": summary.scanned,
            "total": summary.total,
            "complete": summary.complete(),
            "stopped": summary.stopped,
            "sample_note": note,
        }))
        .ok();
    } else {
        output::print(&format!(
            "exported {written} message(s) to {} ({})\n",
            name(&file.display().to_string()),
            name(&note)
        ));
    }
    Ok(if summary.stopped == StopReason::Cancelled {
        INTERRUPTED
    } else {
        OK
    })
}
