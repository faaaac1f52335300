//! Browsing the local broker: a plain read, no side effect at all.

use rusqlite::params;

use super::{now_ms, LocalBackend};
use crate::backend::{BackendError, Result};
use crate::domain::*;

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
                let id: i64 = r.get(0)?;
                let headers: Option<String> = r.get(3)?;
                let mut headers: Vec<(String, String)> = headers
                    .and_then(|h| serde_json::from_str(&h).ok())
                    .unwrap_or_default();
                let visible: i64 = r.get(5)?;
                let leased_by: Option<String> = r.get(6)?;
                let state = match (&leased_by, visible > now) {
                    (Some(w), true) => format!("leased by {w}"),
                    (None, true) => "delayed".to_string(),
                    _ => "ready".to_string(),
                };
                headers.insert(0, ("state".to_string(), state));
                let reason: Option<String> = r.get(8)?;
                let origin: Option<String> = r.get(9)?;
                let dead_letter = (reason.is_some() || origin.is_some()).then(|| DeadLetterInfo {
                    reason,
                    description: None,
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
                    headers,
                    body: r.get(2)?,
                    dead_letter,
                })
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
