//! Mutating commands: send, redrive, purge. All of them go through the session's gate
//! (read-only check + audit log).

use std::io::{IsTerminal, Read};
use std::time::Duration;

use super::args::Format;
use super::confirm::confirm;
use super::exit::{CliError, CliResult, FAILED, OK, PARTIAL};
use super::fetch;
use super::output::{self, name};
use crate::backend::OpProgress;
use crate::domain::{OutgoingMessage, RedriveReport, RedriveRequest, RedriveTarget};
use crate::engine::gate::Mutation;
use crate::engine::session::Session;

/// The gate refuses (and audits) mutations on read-only profiles before anything else runs.
fn require(s: &Session, m: Mutation, queue: &str) -> Result<(), CliError> {
    Ok(s.gate.require(m, &crate::domain::QueueId::new(queue))?)
}

pub async fn send(
    s: &Session,
    queue: &str,
    body: Option<&str>,
    key: Option<String>,
    delay: Option<Duration>,
    headers: Vec<(String, String)>,
    f: Format,
) -> CliResult {
    require(s, Mutation::Send, queue)?;
    let body = match body {
        Some(b) if b != "-" => b.as_bytes().to_vec(),
        _ => {
            if std::io::stdin().is_terminal() && body.is_none() {
                return Err(CliError::usage(
                    "give a BODY, or `-` to read it from standard input",
                ));
            }
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::new(FAILED, format!("cannot read standard input: {e}")))?;
            buf
        }
    };
    let info = fetch::find(s.backend.as_ref(), queue).await?;
    let id = s
        .gate
        .send(
            &info.id,
            OutgoingMessage {
                body,
                key,
                delay,
                headers,
            },
        )
        .await?;
    if f == Format::Json {
        output::print_json(&serde_json::json!({"queue": info.id, "id": id})).ok();
    } else {
        output::print(&format!("{}\n", id.unwrap_or_else(|| "sent".into())));
    }
    Ok(OK)
}

#[allow(clippy::too_many_arguments)]
pub async fn redrive(
    s: &Session,
    dlq: &str,
    to: Option<&str>,
    max: Option<u64>,
    rate: Option<f64>,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    if max == Some(0) {
        return Err(CliError::usage("--max must be at least 1"));
    }
    if let Some(r) = rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(CliError::usage(
                "--rate must be a number of messages per second above 0",
            ));
        }
    }
    if !dry_run {
        require(s, Mutation::Redrive, dlq)?;
    }
    let b = s.backend.as_ref();
    let src = fetch::find(b, dlq).await?;
    let target = match to {
        Some(t) => RedriveTarget::Queue(fetch::find(b, t).await?.id),
        None => RedriveTarget::Origin,
    };
    let target_text = match &target {
        RedriveTarget::Origin => match src.dlq_sources.as_slice() {
            [one] => format!("their origin ({})", name(one.as_str())),
            [] => "their recorded origin".to_string(),
            many => format!(
                "their origins ({})",
                name(
                    &many
                        .iter()
                        .map(|q| q.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            ),
        },
        RedriveTarget::Queue(q) => name(q.as_str()),
    };
    let stats = b.stats(std::slice::from_ref(&src.id)).await?;
    let depth = stats.stats.first().and_then(|x| x.depth);
    let count = match (depth, max) {
        (Some(d), Some(m)) => Some(d.min(m)),
        (d, _) => d,
    };
    let count_text = count.map(|c| c.to_string()).unwrap_or_else(|| "all".into());
    let mode = b.capabilities().redrive;
    let plan = format!(
        "move {count_text} message(s) from {} to {target_text}{}{}",
        name(src.id.as_str()),
        rate.map(|r| format!(" at most {r}/s")).unwrap_or_default(),
        match &mode {
            crate::domain::RedriveMode::Native(m) => format!(" (server-side: {m})"),
            _ => " (copy, confirm, then delete)".to_string(),
        }
    );
    if dry_run {
        if f == Format::Json {
            output::print_json(&serde_json::json!({
                "dry_run": true, "source": src.id, "target": target, "count": count, "rate": rate,
            }))
            .ok();
        } else {
            output::print(&format!("dry run: would {plan}; nothing changed\n"));
        }
        return Ok(OK);
    }
    if count == Some(0) {
        output::print(&format!(
            "{} is empty; nothing to move\n",
            name(src.id.as_str())
        ));
        return Ok(OK);
    }
    if !yes {
        confirm(
            &format!("About to {plan}."),
            src.id.as_str(),
            s.gate.protected(),
        )?;
    }
    let req = RedriveRequest {
        source: src.id.clone(),
        target,
        max,
        rate,
        only_ids: None,
    };
    let (progress, rx) = OpProgress::new();
    let ticker = spawn_progress("redrive", rx);
    let cancel = progress.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nqdeck: cancelling after the current batch…");
            cancel.cancel();
        }
    });
    let result = s.gate.redrive(&req, &progress).await;
    ctrl_c.abort();
    ticker.abort();
    let report = result?;
    print_report(&report, f);
    Ok(redrive_code(&report))
}

fn redrive_code(r: &RedriveReport) -> u8 {
    if r.cancelled {
        super::exit::INTERRUPTED
    } else if r.failed == 0 && r.possibly_duplicated == 0 {
        OK
    } else if r.moved > 0 {
        PARTIAL
    } else {
        FAILED
    }
}

fn print_report(r: &RedriveReport, f: Format) {
    if f == Format::Json {
        output::print_json(r).ok();
        return;
    }
    output::print(&format!(
        "moved {}, failed {}, possibly duplicated {}{} ({})\n",
        r.moved,
        r.failed,
        r.possibly_duplicated,
        if r.cancelled { ", cancelled" } else { "" },
        r.mode
    ));
    for e in r.errors.iter().take(10) {
        eprintln!("qdeck: {}", name(e));
    }
}

fn spawn_progress(
    what: &'static str,
    mut rx: tokio::sync::watch::Receiver<crate::backend::ProgressState>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if !std::io::stderr().is_terminal() {
            return;
        }
        while rx.changed().await.is_ok() {
            let p = rx.borrow().clone();
            let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
            eprint!(
                "\r{what}: {}{total} done, {} failed {}   ",
                p.done, p.failed, p.phase
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

pub async fn purge(s: &Session, queue: &str, dry_run: bool, yes: bool, f: Format) -> CliResult {
    if !dry_run {
        require(s, Mutation::Purge, queue)?;
    }
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let stats = b.stats(std::slice::from_ref(&info.id)).await?;
    let st = stats.stats.first();
    let depth = st.and_then(|x| x.depth);
    let inflight = st.and_then(|x| x.in_flight);
    let caps = b.capabilities();
    let plan = format!(
        "purge {} ({} ready, {} in flight){}",
        name(info.id.as_str()),
        output::opt(depth),
        output::opt(inflight),
        caps.purge_note
            .as_deref()
            .map(|n| format!("; note: {n}"))
            .unwrap_or_default()
    );
    if dry_run {
        if f == Format::Json {
            output::print_json(&serde_json::json!({"dry_run": true, "queue": info.id, "depth": depth, "in_flight": inflight, "note": caps.purge_note})).ok();
        } else {
            output::print(&format!("dry run: would {plan}; nothing changed\n"));
        }
        return Ok(OK);
    }
    if !yes {
        confirm(
            &format!("About to {plan}. This cannot be undone."),
            info.id.as_str(),
            s.gate.protected(),
        )?;
    }
    let (progress, rx) = OpProgress::new();
    let ticker = spawn_progress("purge", rx);
    let r = s.gate.purge(&info.id, &progress).await;
    ticker.abort();
    let r = r?;
    if f == Format::Json {
        output::print_json(&r).ok();
    } else {
        output::print(&format!(
            "purged {}{}\n",
            r.purged
                .map(|n| format!("{n} message(s)"))
                .unwrap_or_else(|| "(the broker gives no count)".into()),
            r.note.map(|n| format!("; {n}")).unwrap_or_default()
        ));
    }
    Ok(OK)
}
