//! Delete chosen messages (ids from a browse: MessageId, else SequenceNumber) of a dead-letter
//! queue over REST, which has no delete by id: peek-lock one message at a time, complete the
//! chosen ones, hold the others locked so the pass moves on, and unlock every held message at
//! the end. Each released message's DeliveryCount rises by one; a dead-letter queue never
//! dead-letters, which is why active queues are refused (see `delete_refusal`).

use std::collections::HashSet;

use futures::future::join_all;

use super::runtime::{self, Received};
use crate::servicebus::http::Rest;
use crate::{OpProgress, Result};
use qdeck_model::domain::DeleteReport;

/// Messages held locked at once: past this many the pass stops (as a browse cannot reach
/// deeper), and ids not reached count as missing.
const MAX_HELD: usize = 500;

/// What a refusal and the confirmation say it costs.
pub async fn delete_ids(
    rest: &Rest,
    entity: &str,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let mut wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut report = DeleteReport::default();
    let mut held: Vec<Received> = Vec::new();
    let mut failure = None;
    progress.set_total(Some(wanted.len() as u64));
    while !wanted.is_empty() && held.len() < MAX_HELD {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let m = match runtime::peek_lock(rest, entity, 1).await {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let by_id = m.message_id().filter(|id| wanted.contains(id.as_str()));
        let by_seq = m
            .sequence_number()
            .map(|s| s.to_string())
            .filter(|s| wanted.contains(s.as_str()));
        let Some(key) = by_id.or(by_seq) else {
            held.push(m);
            continue;
        };
        match runtime::complete(rest, &m).await {
            Ok(()) => {
                wanted.remove(key.as_str());
                report.deleted += 1;
                progress.add_done(1);
            }
            Err(e) => {
                // Lock lost: the message stays; it is counted as missing below.
                failure = Some(e);
                break;
            }
        }
    }
    let unlocked = join_all(held.iter().map(|m| runtime::unlock(rest, m))).await;
    let stuck = unlocked.iter().filter(|r| r.is_err()).count();
    if stuck > 0 {
        tracing::warn!(
            "{stuck} message(s) of {entity} could not be unlocked; they stay locked until LockDuration passes"
        );
    }
    report.missing = wanted.len() as u64;
    match failure {
        Some(e) if report.deleted == 0 => Err(e),
        _ => Ok(report),
    }
}
