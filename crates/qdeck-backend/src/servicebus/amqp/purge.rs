//! Purge (receive-and-delete until the entity answers empty) and deleting chosen messages of
//! a dead-letter queue (peek-lock, complete the chosen, abandon the rest) over AMQP.

use std::collections::HashSet;
use std::time::Duration;

use super::convert;
use super::receive::{LockReceiver, Locked};
use super::{Amqp, Mode};
use crate::{OpProgress, Result};
use qdeck_model::domain::{DeleteReport, PurgeReport};

const BATCH: usize = 500;
const FIRST_WAIT: Duration = Duration::from_secs(1);
const NEXT_WAIT: Duration = Duration::from_millis(20);
/// Messages held locked at once by a delete before the pass stops.
const MAX_HELD: usize = 5_000;

/// Receive-and-delete until the entity answers empty; a session-enabled entity session by
/// session (`sessions`: the ids the broker listed).
pub async fn purge(
    amqp: &Amqp,
    entity: &str,
    sessions: Option<Vec<String>>,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    progress.phase("receiving and deleting");
    let mut purged = 0u64;
    let mut failure = None;
    let targets: Vec<Option<String>> = match sessions {
        Some(ids) => ids.into_iter().map(Some).collect(),
        None => vec![None],
    };
    for session in targets {
        if progress.cancelled() || failure.is_some() {
            break;
        }
        match drain(amqp, entity, session.as_deref(), progress).await {
            Ok(n) => purged += n,
            Err((n, e)) => {
                purged += n;
                failure = Some(e);
            }
        }
    }
    progress.phase("done");
    let note = match failure {
        Some(e) if purged == 0 => return Err(e),
        Some(e) => format!("stopped early after {purged} messages: {e}"),
        None if progress.cancelled() => {
            "cancelled; messages received so far were deleted".to_string()
        }
        None => "received and deleted until the entity answered empty; messages locked by other receivers, deferred and scheduled messages were not purged".to_string(),
    };
    Ok(PurgeReport {
        purged: Some(purged),
        note: Some(note),
    })
}

/// Receive and delete from one receiver until it answers empty: how many, or the error and
/// how many before it.
async fn drain(
    amqp: &Amqp,
    entity: &str,
    session: Option<&str>,
    progress: &OpProgress,
) -> std::result::Result<u64, (u64, crate::BackendError)> {
    let mut rx = LockReceiver::open_session(amqp, entity, Mode::ReceiveAndDelete, session)
        .await
        .map_err(|e| (0, e))?;
    let mut purged = 0u64;
    let mut failure = None;
    while !progress.cancelled() {
        amqp.bump("amqp.receive-delete", 1);
        match rx.batch(BATCH, FIRST_WAIT, NEXT_WAIT).await {
            Ok(got) if got.is_empty() => break,
            Ok(got) => {
                purged += got.len() as u64;
                progress.add_done(got.len() as u64);
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    rx.close().await;
    match failure {
        Some(e) => Err((purged, e)),
        None => Ok(purged),
    }
}

/// Whether every id names a deferred message of `entity` (found by peek).
pub async fn all_deferred(amqp: &Amqp, entity: &str, ids: &[String]) -> Result<bool> {
    let wanted: HashSet<String> = ids.iter().cloned().collect();
    let seqs = super::redrive::deferred_seqs(amqp, entity, &wanted).await?;
    Ok(!ids.is_empty() && seqs.len() == wanted.len())
}

fn chosen(wanted: &HashSet<&str>, l: &Locked) -> Option<String> {
    let by_id = convert::message_id(&l.msg).filter(|id| wanted.contains(id.as_str()));
    let by_seq = convert::sequence_number(&l.msg)
        .map(|s| s.to_string())
        .filter(|s| wanted.contains(s.as_str()));
    by_id.or(by_seq)
}

/// Complete the messages with these ids (MessageId, else sequence number); the others are
/// held locked so the pass moves on, then abandoned (their DeliveryCount +1).
pub async fn delete_ids(
    amqp: &Amqp,
    entity: &str,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let mut wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut report = DeleteReport::default();
    progress.set_total(Some(wanted.len() as u64));
    // Deferred messages are not delivered to a receiver: taken by sequence number instead.
    let all: HashSet<String> = ids.iter().cloned().collect();
    let seqs = super::redrive::deferred_seqs(amqp, entity, &all).await?;
    if !seqs.is_empty() {
        for (m, token) in super::scheduled::receive_deferred(amqp, entity, &seqs).await? {
            let Some(t) = token else { continue };
            super::receive::settle_by_token(amqp, entity, &[t], "completed").await?;
            let id = convert::message_id(&m);
            let seq = convert::sequence_number(&m).map(|n| n.to_string());
            for k in [id, seq].into_iter().flatten() {
                wanted.remove(k.as_str());
            }
            report.deleted += 1;
            progress.add_done(1);
        }
    }
    let mut rx = LockReceiver::open(amqp, entity, Mode::PeekLock).await?;
    let mut held: Vec<Locked> = Vec::new();
    let mut failure = None;
    while !wanted.is_empty() && held.len() < MAX_HELD {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        amqp.bump("amqp.receive", 1);
        let got = match rx.batch(100, FIRST_WAIT, NEXT_WAIT).await {
            Ok(g) if g.is_empty() => break,
            Ok(g) => g,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        for l in got {
            let Some(key) = chosen(&wanted, &l) else {
                held.push(l);
                continue;
            };
            match rx.complete(&l).await {
                Ok(()) => {
                    wanted.remove(key.as_str());
                    report.deleted += 1;
                    progress.add_done(1);
                }
                Err(e) => {
                    failure.get_or_insert(e);
                    held.push(l);
                }
            }
        }
    }
    let stuck = rx.abandon_all(&held).await;
    if stuck > 0 {
        tracing::warn!(
            "{stuck} message(s) of {entity} could not be abandoned; they stay locked until LockDuration passes"
        );
    }
    rx.close().await;
    report.missing = wanted.len() as u64;
    match failure {
        Some(e) if report.deleted == 0 => Err(e),
        _ => Ok(report),
    }
}
