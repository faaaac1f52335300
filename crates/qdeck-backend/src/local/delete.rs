//! Delete chosen messages by id (a `purge --where` selection): one transaction per batch,
//! cancellable between batches. A message a worker holds a live lease on is left in place and
//! counted, as redrive does.

use std::sync::Arc;

use rusqlite::{params, OptionalExtension};

use super::worker::{not_found, queue_row};
use super::{now_ms, LocalBackend};
use crate::{OpProgress, Result};
use qdeck_model::domain::{DeleteReport, QueueId};

const BATCH: usize = 500;

impl LocalBackend {
    fn delete_batch(&self, queue: &str, ids: &[String]) -> Result<DeleteReport> {
        let now = now_ms();
        self.write(|tx| {
            if queue_row(tx, queue)?.is_none() {
                return Ok(Err(not_found(queue)));
            }
            let mut r = DeleteReport::default();
            for id in ids {
                let Ok(n) = id.parse::<i64>() else {
                    r.missing += 1;
                    continue;
                };
                let lease_live: Option<bool> = tx
                    .query_row(
                        "SELECT leased_by IS NOT NULL AND visible_ms > ?3 FROM messages
                         WHERE id = ?1 AND queue = ?2",
                        params![n, queue, now],
                        |row| row.get(0),
                    )
                    .optional()?;
                match lease_live {
                    None => r.missing += 1,
                    Some(true) => r.leased += 1,
                    Some(false) => {
                        tx.execute("DELETE FROM messages WHERE id = ?1", [n])?;
                        r.deleted += 1;
                    }
                }
            }
            Ok(Ok(r))
        })
    }
}

pub(super) async fn run(
    b: Arc<LocalBackend>,
    queue: QueueId,
    ids: Vec<String>,
    progress: OpProgress,
) -> Result<DeleteReport> {
    progress.set_total(Some(ids.len() as u64));
    progress.phase("deleting");
    let mut total = DeleteReport::default();
    for chunk in ids.chunks(BATCH) {
        if progress.cancelled() {
            total.cancelled = true;
            break;
        }
        let (b, q, c) = (b.clone(), queue.clone(), chunk.to_vec());
        let r = b.blocking(move |b| b.delete_batch(q.as_str(), &c)).await?;
        total.deleted += r.deleted;
        total.missing += r.missing;
        total.leased += r.leased;
        progress.update(|s| {
            s.done = total.deleted;
            s.failed = total.leased;
        });
    }
    progress.phase(if total.cancelled { "cancelled" } else { "done" });
    Ok(total)
}
