//! `qdeck import QUEUE --file F.jsonl`: validate the whole file (a malformed line stops
//! everything, naming the line), check the queue exists, confirm, then send each message
//! through the gate with a rate limit and progress.

use std::io::BufRead;
use std::path::Path;

use super::args::Format;
use super::confirm::confirm;
use super::exit::{of_verdict, CliError, CliResult, OK, USAGE};
use super::fetch;
use super::output::{self, name};
use super::progress_line::with_progress;
use crate::domain::{BrokerKind, OutgoingMessage};
use crate::engine::gate::Mutation;
use crate::engine::ops::Outcome;
use crate::engine::session::Session;
use crate::triage::headers::{map_outgoing, HeaderChange, HeaderLedger};
use crate::triage::import::import as send_all;
use crate::triage::transfer::Record;

/// The messages of a file with their line numbers, the field names the source broker set
/// itself (left out), and for a file from another kind of broker every field renamed or
/// converted on the way.
struct Parsed {
    msgs: Vec<(usize, OutgoingMessage)>,
    dropped: Vec<String>,
    changes: Vec<HeaderChange>,
}

/// Every line parsed for a `target` broker, or an error naming the first bad one.
fn read_file(file: &Path, target: BrokerKind) -> Result<Parsed, CliError> {
    let shown = name(&file.display().to_string());
    let f = std::fs::File::open(file)
        .map_err(|e| CliError::usage(format!("cannot read {shown}: {e}")))?;
    let mut msgs = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    let mut ledger = HeaderLedger::default();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| CliError::usage(format!("{shown} line {n}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec = Record::parse_line(&line).map_err(|e| {
            CliError::usage(format!("{shown} line {n}: {}; nothing was sent", name(&e)))
        })?;
        let (mut msg, mut left_out) = rec.to_outgoing();
        if let Some(from) = rec.broker.filter(|k| *k != target) {
            // Across kinds the metadata travels as x-qdeck-* headers (listed), not left out.
            left_out.clear();
            let dead = rec.dead_letter.as_ref();
            msg = map_outgoing(msg, &rec.meta, dead, from, target, &mut ledger);
        }
        left_out.extend(crate::triage::headers::drop_identity(target, &mut msg));
        for d in left_out {
            if !dropped.contains(&d) {
                dropped.push(d);
            }
        }
        msgs.push((n, msg));
    }
    Ok(Parsed {
        msgs,
        dropped,
        changes: ledger.changes(),
    })
}

pub async fn import(
    s: &Session,
    queue: &str,
    file: &Path,
    rate: Option<crate::engine::rate::Rate>,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let qid = crate::domain::QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Import, &qid)?;
    }
    let b = s.backend.as_ref();
    let Parsed {
        msgs,
        dropped,
        changes,
    } = read_file(file, b.kind())?;
    let info = fetch::find(b, queue).await?;
    if b.kind() == BrokerKind::Sqs {
        if let Some((n, _)) = msgs
            .iter()
            .find(|(_, m)| std::str::from_utf8(&m.body).is_err())
        {
            return Err(CliError::new(
                USAGE,
                format!(
                    "{} line {n}: the body is binary and SQS bodies are text; nothing was sent",
                    name(&file.display().to_string())
                ),
            ));
        }
    }
    let shown_file = name(&file.display().to_string());
    let plan = format!(
        "send {} message(s) from {shown_file} to {}",
        msgs.len(),
        name(info.id.as_str())
    );
    let mut left_out = if dropped.is_empty() {
        String::new()
    } else {
        format!(
            "; fields the source broker set are left out: {}",
            name(&dropped.join(", "))
        )
    };
    for c in &changes {
        left_out.push_str(&format!("; {}", name(&c.line())));
    }
    if dry_run {
        if f == Format::Json {
            output::print_json(&serde_json::json!({
                "dry_run": true,
                "action": "import",
                "queue": info.id,
                "file": file.display().to_string(),
                "count": msgs.len(),
                "headers_left_out": dropped,
                "header_changes": changes,
            }))
            .ok();
        } else {
            output::print(&format!("dry run: would {plan}{left_out}; nothing sent\n"));
        }
        return Ok(OK);
    }
    if msgs.is_empty() {
        output::print(&format!(
            "{shown_file} holds no messages; nothing to send\n"
        ));
        return Ok(OK);
    }
    if !yes {
        if let Err(e) = confirm(
            &format!("About to {plan}{left_out}."),
            info.id.as_str(),
            s.gate.protected(),
        ) {
            s.gate.refuse(Mutation::Import, &info.id, &e.message);
            return Err(e);
        }
    }
    let source = file.display().to_string();
    let r = with_progress("import", "stopping after the current batch…", |p| {
        let (gate, id, source) = (&s.gate, &info.id, &source);
        async move { send_all(gate, id, msgs, rate, source, &p).await }
    })
    .await?;
    if f == Format::Json {
        output::print_json(&r).ok();
    } else {
        output::print(&format!(
            "sent {}, failed {}{}\n",
            r.sent,
            r.failed,
            if r.cancelled { ", cancelled" } else { "" }
        ));
    }
    let error = r.error.clone();
    let code = of_verdict(Outcome::Import(r).verdict());
    if let Some(e) = error {
        let msg = format!("{shown_file} {}; the rest was not sent", name(&e));
        return Err(CliError::after_report(code, msg));
    }
    Ok(code)
}
