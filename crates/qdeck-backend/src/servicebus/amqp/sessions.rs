//! Sessions of a session-enabled entity: their ids (`com.microsoft:get-message-sessions`,
//! paged with skip/top), the messages each holds (a bounded peek with `session-id`) and their
//! state (`com.microsoft:get-session-state`, which the broker refuses while another receiver
//! holds the session).

use fe2o3_amqp::types::primitives::{Timestamp, Value};

use super::peek::{peek_raw, PEEK_BATCH};
use super::{as_i64, field, items, Amqp};
use crate::{BackendError, Result};
use qdeck_model::domain::SessionInfo;
use qdeck_model::sanitize;

const PAGE: i32 = 100;
/// Sessions listed at most (each costs a peek and a state request).
const MAX_SESSIONS: usize = 1_000;
/// Messages counted per session at most.
const MAX_COUNT: usize = 1_000;

/// Every session id the broker lists, up to `MAX_SESSIONS`.
pub async fn ids(amqp: &Amqp, entity: &str) -> Result<Vec<String>> {
    let what = format!("listing the sessions of {}", sanitize::clean(entity));
    let mut out = Vec::new();
    let mut skip = 0i32;
    while out.len() < MAX_SESSIONS {
        let body = vec![
            // Sessions updated since the epoch: all of them.
            (
                "last-updated-time",
                Value::Timestamp(Timestamp::from_milliseconds(0)),
            ),
            ("skip", Value::Int(skip)),
            ("top", Value::Int(PAGE)),
        ];
        let answer = amqp
            .request(entity, "com.microsoft:get-message-sessions", body, &what)
            .await?;
        let page: Vec<String> = field(&answer, "sessions-ids")
            .map(items)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        if page.is_empty() {
            break;
        }
        let n = i32::try_from(page.len()).unwrap_or(PAGE);
        out.extend(page);
        skip = field(&answer, "skip")
            .and_then(as_i64)
            .and_then(|s| i32::try_from(s).ok())
            .unwrap_or(skip + n);
        if n < PAGE {
            break;
        }
    }
    Ok(out)
}

/// The messages of one session, counted by peeking (at most `MAX_COUNT`).
async fn count(amqp: &Amqp, entity: &str, session: &str) -> Result<(u64, bool)> {
    let mut from = 0i64;
    let mut n = 0usize;
    while n < MAX_COUNT {
        let got = peek_raw(amqp, entity, from, PEEK_BATCH, Some(session)).await?;
        let Some(last) = got.last().and_then(super::convert::sequence_number) else {
            n += got.len();
            break;
        };
        n += got.len();
        from = last + 1;
    }
    Ok((n.min(MAX_COUNT) as u64, n >= MAX_COUNT))
}

/// The session's state, or why it could not be read.
async fn state(amqp: &Amqp, entity: &str, session: &str) -> std::result::Result<Vec<u8>, String> {
    let what = format!("reading the state of session {}", sanitize::clean(session));
    let answer = amqp
        .request(
            entity,
            "com.microsoft:get-session-state",
            vec![("session-id", Value::String(session.to_string()))],
            &what,
        )
        .await
        .map_err(|e: BackendError| e.to_string())?;
    Ok(match field(&answer, "session-state") {
        Some(Value::Binary(b)) => b.to_vec(),
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    })
}

/// Every session with its message count and state.
pub async fn list(amqp: &Amqp, entity: &str) -> Result<Vec<SessionInfo>> {
    let mut out = Vec::new();
    for id in ids(amqp, entity).await? {
        let (messages, capped) = count(amqp, entity, &id).await?;
        let (state, state_note) = match state(amqp, entity, &id).await {
            Ok(s) => (s, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        out.push(SessionInfo {
            id,
            messages: Some(messages),
            messages_capped: capped,
            state,
            state_note,
        });
    }
    Ok(out)
}
