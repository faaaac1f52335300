//! Browsing the local broker: a plain read, no side effect at all.

use rusqlite::params;

use super::{now_ms, LocalBackend};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

impl LocalBackend {
    pub(super) fn browse_sync(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        let after: i64 = match &req.cursor {
            None => 0,
            Some(c) => c
                .parse()
                .map_err(|_| BackendError::Invalid(format!("bad browse cursor {c:?}")))?,
        };
        let max = req.max.clamp(1, 10_000);
        let now = now_ms();
        let conn = self.lock();
        let map_err = |e| self.err(e);
        self.require_queue(&conn, queue.as_str())?;
        let mut st = conn
            .prepare_cached(
                "SELECT id, key, body, headers, enqueued_ms, visible_ms, leased_by, receive_count,
                        dl_reason, dl_origin, dl_ms, dl_count
                 FROM messages WHERE queue = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
            )
            .map_err(map_err)?;
        let mut messages = st
            .query_map(params![queue.as_str(), after, (max + 1) as i64], |r| {
                message_row(r, now)
            })
            .map_err(map_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map_err)?;
        let next = if messages.len() > max {
            messages.truncate(max);
            messages.last().map(|m| m.id.clone())
        } else {
            None
        };
        Ok(Page {
            messages,
            next,
            effect_note: None,
        })
    }
}

impl LocalBackend {
    /// Delayed messages (due in the future, not leased: sent with a delay or released with a
    /// back-off), soonest first. The cursor is `due_ms:id` of the last one returned.
    pub(super) fn browse_scheduled_sync(
        &self,
        queue: &QueueId,
        req: &BrowseRequest,
    ) -> Result<Page> {
        let bad = |c: &str| BackendError::Invalid(format!("bad browse cursor {c:?}"));
        let (after_due, after_id): (i64, i64) = match &req.cursor {
            None => (i64::MIN, 0),
            Some(c) => {
                let (d, i) = c.split_once(':').ok_or_else(|| bad(c))?;
                (
                    d.parse().map_err(|_| bad(c))?,
                    i.parse().map_err(|_| bad(c))?,
                )
            }
        };
        let max = req.max.clamp(1, 10_000);
        let now = now_ms();
        let conn = self.lock();
        let map_err = |e| self.err(e);
        self.require_queue(&conn, queue.as_str())?;
        let mut st = conn
            .prepare_cached(
                "SELECT id, key, body, headers, enqueued_ms, visible_ms, leased_by, receive_count,
                        dl_reason, dl_origin, dl_ms, dl_count
                 FROM messages
                 WHERE queue = ?1 AND visible_ms > ?2 AND leased_by IS NULL
                       AND (visible_ms, id) > (?3, ?4)
                 ORDER BY visible_ms, id LIMIT ?5",
            )
            .map_err(map_err)?;
        let mut rows = st
            .query_map(
                params![queue.as_str(), now, after_due, after_id, (max + 1) as i64],
                |r| Ok((r.get::<_, i64>(5)?, message_row(r, now)?)),
            )
            .map_err(map_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map_err)?;
        let next = if rows.len() > max {
            rows.truncate(max);
            rows.last().map(|(due, m)| format!("{due}:{}", m.id))
        } else {
            None
        };
        let messages = rows
            .into_iter()
            .map(|(due, mut m)| {
                let at = ms_to_datetime(due)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                    .unwrap_or_default();
                let secs = (due - now + 999) / 1000;
                m.meta.insert(1, ("due-at".to_string(), Value::String(at)));
                m.meta
                    .insert(2, ("due-in".to_string(), Value::String(format!("{secs}s"))));
                m
            })
            .collect();
        Ok(Page {
            messages,
            next,
            effect_note: None,
        })
    }
}

/// One `messages` row (the columns both browses select, in order) as a browsed message, its
/// state as the first header.
fn message_row(r: &rusqlite::Row, now: i64) -> rusqlite::Result<Message> {
    let id: i64 = r.get(0)?;
    let headers: Option<String> = r.get(3)?;
    let headers: Vec<(String, Value)> = headers
        .and_then(|h| serde_json::from_str(&h).ok())
        .unwrap_or_default();
    let visible: i64 = r.get(5)?;
    let leased_by: Option<String> = r.get(6)?;
    let state = match (&leased_by, visible > now) {
        (Some(w), true) => format!("leased by {w}"),
        (None, true) => "delayed".to_string(),
        _ => "ready".to_string(),
    };

    let reason: Option<String> = r.get(8)?;
    let origin: Option<String> = r.get(9)?;
    let dead_letter = (reason.is_some() || origin.is_some()).then(|| DeadLetterInfo {
        reason,
        description: None,
        why: None,
        origin: origin.map(QueueId::new),
        count: r.get::<_, Option<i64>>(11).ok().flatten().map(|c| c as u64),
        at_ms: r.get(10).ok().flatten(),
    });
    Ok(Message {
        id: id.to_string(),
        seq: Some(id),
        enqueued_ms: Some(r.get(4)?),
        receive_count: Some(r.get::<_, i64>(7)? as u64),
        key: r.get(1)?,
        properties: Vec::new(),
        headers,
        meta: vec![("state".to_string(), Value::String(state))],
        body: r.get(2)?,
        body_null: false,
        dead_letter,
    })
}
