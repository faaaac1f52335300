//! Browse as a true peek: `com.microsoft:peek-message` on `ENTITY/$management` from a sequence
//! number, which takes no lock and counts no delivery. The cursor is the next sequence number
//! to peek from. Peek returns active, deferred and scheduled messages alike (each says which
//! in `State`); the scheduled listing keeps only the scheduled ones.

use fe2o3_amqp::types::messaging::{Body, Message};
use fe2o3_amqp::types::primitives::Value;
use serde_amqp::from_slice;

use super::convert::{self, AmqpMessage};
use super::{field, items, Amqp};
use crate::{BackendError, Result};
use qdeck_model::domain::{BrowseRequest, Page};
use qdeck_model::sanitize;

/// Messages asked for per request: Service Bus answers up to this many in one response.
pub const PEEK_BATCH: usize = 250;
/// Requests one scheduled listing page may make while it skips unscheduled messages.
const SCHEDULED_SCAN_REQUESTS: usize = 40;

const OP: &str = "com.microsoft:peek-message";

/// Decode one message of a `$management` answer (the `message` binary is a whole encoded
/// AMQP message).
pub fn decode(bytes: &[u8]) -> Result<AmqpMessage> {
    from_slice::<
        fe2o3_amqp::types::messaging::message::__private::Deserializable<Message<Body<Value>>>,
    >(bytes)
    .map(|d| d.0)
    .map_err(|e| {
        BackendError::Protocol(format!(
            "Service Bus sent a message that is not valid AMQP: {}",
            super::errors::one_line(&e.to_string())
        ))
    })
}

/// The messages of a `$management` answer's `messages` list.
pub fn messages_of(body: &Value) -> Result<Vec<(AmqpMessage, Option<uuid::Uuid>)>> {
    let mut out = Vec::new();
    let Some(list) = field(body, "messages") else {
        return Ok(out);
    };
    for item in items(list) {
        let Some(Value::Binary(b)) = field(item, "message") else {
            continue;
        };
        let lock = match field(item, "lock-token") {
            Some(Value::Uuid(u)) => Some(uuid::Uuid::from_bytes(*u.as_inner())),
            _ => None,
        };
        out.push((decode(b)?, lock));
    }
    Ok(out)
}

/// Up to `n` messages from sequence number `from` on, raw (for one session when `session`).
pub async fn peek_raw(
    amqp: &Amqp,
    entity: &str,
    from: i64,
    n: usize,
    session: Option<&str>,
) -> Result<Vec<AmqpMessage>> {
    let mut body = vec![
        ("from-sequence-number", Value::Long(from)),
        (
            "message-count",
            Value::Int(i32::try_from(n.max(1)).unwrap_or(i32::MAX)),
        ),
    ];
    if let Some(s) = session {
        body.push(("session-id", Value::String(s.to_string())));
    }
    let what = format!("peeking {}", sanitize::clean(entity));
    let answer = amqp.request(entity, OP, body, &what).await?;
    Ok(messages_of(&answer)?.into_iter().map(|(m, _)| m).collect())
}

fn cursor_of(req: &BrowseRequest) -> Result<i64> {
    match req.cursor.as_deref() {
        None | Some("") => Ok(0),
        Some(c) => c.parse().map_err(|_| {
            BackendError::Invalid("browse cursor is not valid for Service Bus".into())
        }),
    }
}

/// One page of at most `req.max` messages that pass `keep`, peeking from the cursor on;
/// `max_requests` bounds the peeks one page may make while `keep` refuses messages.
async fn page_where(
    amqp: &Amqp,
    entity: &str,
    req: &BrowseRequest,
    session: Option<&str>,
    keep: fn(&AmqpMessage) -> bool,
    max_requests: usize,
) -> Result<Page> {
    let mut from = cursor_of(req)?;
    let mut messages = Vec::new();
    let mut at_end = false;
    for _ in 0..max_requests {
        if messages.len() >= req.max {
            break;
        }
        let want = (req.max - messages.len()).min(PEEK_BATCH);
        let got = peek_raw(amqp, entity, from, want, session).await?;
        if got.is_empty() {
            at_end = true;
            break;
        }
        for m in &got {
            if let Some(n) = convert::sequence_number(m) {
                from = from.max(n + 1);
            }
            if keep(m) && messages.len() < req.max {
                messages.push(convert::to_message(m, entity, None));
            }
        }
        if convert::sequence_number(&got[got.len() - 1]).is_none() {
            // Without sequence numbers the next page cannot be asked for.
            at_end = true;
            break;
        }
    }
    Ok(Page {
        next: (!at_end && req.max > 0).then(|| from.to_string()),
        messages,
        effect_note: None,
    })
}

/// A page of the entity as it is: nothing locked, no delivery counted.
pub async fn browse(
    amqp: &Amqp,
    entity: &str,
    req: &BrowseRequest,
    session: Option<&str>,
) -> Result<Page> {
    if req.max == 0 {
        return Ok(Page::default());
    }
    page_where(amqp, entity, req, session, |_| true, 1).await
}

/// A page of the scheduled messages only.
pub async fn browse_scheduled(amqp: &Amqp, entity: &str, req: &BrowseRequest) -> Result<Page> {
    if req.max == 0 {
        return Ok(Page::default());
    }
    let scheduled = |m: &AmqpMessage| convert::state_name(m) == Some("Scheduled");
    page_where(amqp, entity, req, None, scheduled, SCHEDULED_SCAN_REQUESTS).await
}
