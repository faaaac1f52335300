//! `qdeck sessions QUEUE`: the sessions of a session-enabled Service Bus entity, with their
//! message counts and state; `--peek ID` shows one session's messages instead.

use super::args::Format;
use super::exit::{CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name, Table};
use qdeck_engine::gate::Mutation;
use qdeck_engine::session::Session;
use qdeck_model::domain::{BrowseRequest, QueueId};

pub async fn sessions(
    s: &Session,
    queue: &str,
    peek: Option<&str>,
    n: usize,
    f: Format,
) -> CliResult {
    if n == 0 {
        return Err(CliError::usage("-n must be at least 1"));
    }
    s.gate.require(Mutation::Browse, &QueueId::new(queue))?;
    let info = fetch::find(s.backend.as_ref(), queue).await?;
    if let Some(id) = peek {
        return peek_session(s, &info.id, id, n, f).await;
    }
    let list = s.gate.sessions(&info.id).await?;
    if f == Format::Json {
        output::print_json(&list).ok();
        return Ok(OK);
    }
    let mut t = Table::new(vec!["SESSION", "MESSAGES", "STATE"]);
    for x in &list {
        let count = match (x.messages, x.messages_capped) {
            (Some(c), true) => format!("{c}+"),
            (Some(c), false) => c.to_string(),
            (None, _) => "—".into(),
        };
        let state = match &x.state_note {
            Some(why) => format!("— ({})", name(why)),
            None if x.state.is_empty() => "—".into(),
            None => output::body_cell(&x.state, f),
        };
        t.push(vec![name(&x.id), count, state]);
    }
    output::print(&t.render(f));
    Ok(OK)
}

async fn peek_session(s: &Session, queue: &QueueId, id: &str, n: usize, f: Format) -> CliResult {
    let mut messages = Vec::new();
    let mut cursor = None;
    while messages.len() < n {
        let req = BrowseRequest {
            cursor: cursor.clone(),
            max: n - messages.len(),
            force: false,
        };
        let page = s.gate.browse_session(queue, id, &req).await?;
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
    let mut t = Table::new(vec![
        "ID", "SEQ", "ENQUEUED", "RECEIVES", "STATE", "SIZE", "BODY",
    ]);
    for m in &messages {
        t.push(vec![
            name(&m.id),
            output::opt(m.seq),
            output::time_in(m.enqueued_ms, f),
            output::opt(m.receive_count),
            m.field_text("State")
                .as_deref()
                .map(name)
                .unwrap_or_default(),
            m.body.len().to_string(),
            output::body_cell(&m.body, f),
        ]);
    }
    output::print(&t.render(f));
    Ok(OK)
}
