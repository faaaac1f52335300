//! `peek --scheduled`: messages that wait for a due time, where the broker can list them.

use super::args::Format;
use super::confirm::confirm;
use super::exit::{of_failed, of_verdict, unexpected, CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name, opt, Table};
use qdeck_backend::OpProgress;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Outcome};
use qdeck_engine::session::Session;
use qdeck_model::domain::{now_ms, BrowseRequest, QueueId};

pub async fn peek(s: &Session, queue: &str, n: usize, f: Format) -> CliResult {
    if n == 0 {
        return Err(CliError::usage("-n must be at least 1"));
    }
    // Same order as plain peek: the tier first, so a `stats` profile learns nothing.
    s.gate.require(Mutation::Browse, &QueueId::new(queue))?;
    let info = fetch::find(s.backend.as_ref(), queue).await?;
    let mut messages = Vec::new();
    let mut cursor = None;
    while messages.len() < n {
        let req = BrowseRequest {
            cursor: cursor.clone(),
            max: n - messages.len(),
            force: false,
        };
        let page = s.gate.browse_scheduled(&info.id, &req).await?;
        let got = page.messages.len();
        messages.extend(page.messages);
        match page.next {
            Some(c) if got > 0 => cursor = Some(c),
            _ => break,
        }
    }
    if f == Format::Json {
        output::print_json(&messages).ok();
        return Ok(OK);
    }
    let now = now_ms();
    let mut t = Table::new(vec![
        "ID", "DUE", "DUE_IN", "ENQUEUED", "RECEIVES", "KEY", "SIZE", "BODY",
    ]);
    for m in &messages {
        let due = m.due_ms();
        t.push(vec![
            name(&m.id),
            output::time_in(due, f),
            output::age_in(due.map(|d| (d - now) as f64 / 1000.0), f),
            output::time_in(m.enqueued_ms, f),
            opt(m.receive_count),
            m.key.as_deref().map(name).unwrap_or_default(),
            m.body.len().to_string(),
            output::body_cell(&m.body, f),
        ]);
    }
    output::print(&t.render(f));
    Ok(OK)
}

/// Delete one delayed message, after checking it is one: an id that is already due stays
/// (cancelling is for what has not been delivered yet). Planned (`ops::plan_cancel_scheduled`)
/// and run through the gate like every mutation, so the tier, the read-only switch, the
/// confirmation on the plan's own text and the audit log apply.
pub async fn cancel(s: &Session, queue: &str, id: &str, yes: bool, f: Format) -> CliResult {
    let qid = QueueId::new(queue);
    s.gate.require(Mutation::Delete, &qid)?;
    let planned = ops::plan_cancel_scheduled(&s.gate, &qid, id).await?;
    let target = planned.queue().clone();
    if !yes {
        let question = planned.question();
        if let Err(e) = confirm(&question, target.as_str(), s.gate.protected()) {
            s.gate.refuse(Mutation::Delete, &target, &e.message);
            return Err(e);
        }
    }
    let (progress, _rx) = OpProgress::new();
    let outcome = ops::run(&s.gate, planned, &progress).await;
    if let Some(e) = of_failed(&outcome, &target) {
        return Err(e);
    }
    if !matches!(outcome, Outcome::CancelScheduled(_)) {
        return Err(unexpected("cancel", &outcome));
    }
    let code = of_verdict(outcome.verdict());
    if code != OK {
        let msg = format!("message {} was {}", name(id), outcome.line());
        return Err(CliError::new(code, msg));
    }
    if f == Format::Json {
        output::print_json(&serde_json::json!({"queue": target.as_str(), "cancelled": id})).ok();
    } else {
        output::print(&format!(
            "cancelled delayed message {} in {}\n",
            name(id),
            name(queue)
        ));
    }
    Ok(OK)
}
