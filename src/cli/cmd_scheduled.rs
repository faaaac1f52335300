//! `peek --scheduled`: messages that wait for a due time, where the broker can list them.

use super::args::Format;
use super::confirm::confirm;
use super::exit::{of_verdict, CliError, CliResult, NOT_FOUND, OK};
use super::fetch;
use super::output::{self, name, opt, Table};
use crate::backend::{BackendError, OpProgress};
use crate::domain::{now_ms, BrowseRequest, Message, QueueId};
use crate::engine::gate::Mutation;
use crate::engine::ops::Outcome;
use crate::engine::session::Session;
use crate::sanitize;

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
        let due = due_ms(m);
        t.push(vec![
            name(&m.id),
            output::time_in(due, f),
            output::age_in(due.map(|d| (d - now) as f64 / 1000.0), f),
            output::time_in(m.enqueued_ms, f),
            opt(m.receive_count),
            m.key.as_deref().map(name).unwrap_or_default(),
            m.body.len().to_string(),
            sanitize::preview(&m.body, 60),
        ]);
    }
    output::print(&t.render(f));
    Ok(OK)
}

/// The due time a backend put in the `due-at` header (RFC 3339).
fn due_ms(m: &Message) -> Option<i64> {
    let v = m.field_text("due-at")?;
    chrono::DateTime::parse_from_rfc3339(&v)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Delete one delayed message, after checking it is one: an id that is already due stays
/// (cancelling is for what has not been delivered yet). Goes through the gate as a delete,
/// so the tier, the read-only switch and the audit log apply.
pub async fn cancel(s: &Session, queue: &str, id: &str, yes: bool, f: Format) -> CliResult {
    let qid = QueueId::new(queue);
    s.gate.require(Mutation::Delete, &qid)?;
    let info = fetch::find(s.backend.as_ref(), queue).await?;
    if s.backend.deleter().is_none() {
        let why = format!(
            "cancelling a scheduled message deletes it by id, which the {} backend cannot do",
            s.backend.kind()
        );
        s.gate.refuse(Mutation::Delete, &info.id, &why);
        return Err(BackendError::Unsupported(why).into());
    }
    let Some(m) = find_scheduled(s, &info.id, id).await? else {
        return Err(CliError::new(
            NOT_FOUND,
            format!(
                "no delayed message {} in {} (already due, leased or gone); nothing was changed",
                name(id),
                name(queue)
            ),
        ));
    };
    if !yes {
        let question = format!(
            "About to cancel delayed message {} in {} (due {}). This cannot be undone.",
            name(id),
            name(queue),
            output::time_in(due_ms(&m), Format::Table)
        );
        if let Err(e) = confirm(&question, info.id.as_str(), s.gate.protected()) {
            s.gate.refuse(Mutation::Delete, &info.id, &e.message);
            return Err(e);
        }
    }
    let (progress, _rx) = OpProgress::new();
    let r = s.gate.cancel_scheduled(&info.id, &m.id, &progress).await?;
    let outcome = Outcome::CancelScheduled(r);
    let code = of_verdict(outcome.verdict());
    if code != OK {
        let msg = format!("message {} was {}", name(id), outcome.line());
        return Err(CliError::new(code, msg));
    }
    if f == Format::Json {
        output::print_json(&serde_json::json!({"queue": info.id.as_str(), "cancelled": m.id})).ok();
    } else {
        output::print(&format!(
            "cancelled delayed message {} in {}\n",
            name(&m.id),
            name(queue)
        ));
    }
    Ok(OK)
}

/// The delayed message with this id, read through the same listing `peek --scheduled` uses.
async fn find_scheduled(
    s: &Session,
    queue: &QueueId,
    id: &str,
) -> Result<Option<Message>, CliError> {
    let mut cursor = None;
    loop {
        let req = BrowseRequest {
            cursor: cursor.take(),
            max: 1000,
            force: false,
        };
        let page = s.gate.browse_scheduled(queue, &req).await?;
        let got = page.messages.len();
        if let Some(m) = page.messages.into_iter().find(|m| m.id == id) {
            return Ok(Some(m));
        }
        match page.next {
            Some(c) if got > 0 => cursor = Some(c),
            _ => return Ok(None),
        }
    }
}
