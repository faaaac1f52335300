//! Purge and delete by sequence. A stream purges with `STREAM.PURGE`; a capture stream (a
//! DLQ) purges its dead letters one by one, the original first and then its advisory, so an
//! advisory that arrives during the purge is never dropped without its message. Deleting by
//! id removes stream sequences, or on a DLQ the dead letter (original and advisory).

use serde_json::{json, Value as Json};

use super::{browse, msg, NatsBackend, Target};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

const PAGE: usize = 256;

pub async fn purge(b: &NatsBackend, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
    let Target::Stream(s) = Target::parse(queue) else {
        return Err(BackendError::Unsupported(
            "a consumer holds no messages of its own: purge its stream, or its DLQ".into(),
        ));
    };
    let info = b.stream(&s).await?;
    if !super::dlq::is_capture(&info) {
        let v = b.conn.api(&format!("STREAM.PURGE.{s}"), &json!({})).await?;
        return Ok(PurgeReport {
            purged: v.get("purged").and_then(Json::as_u64),
            note: None,
        });
    }
    let total = match super::dlq::dead_counts(b, &info).await? {
        Some(c) => c.total,
        None => info.state.messages,
    };
    progress.set_total(Some(total));
    progress.phase("deleting dead letters");
    let mut purged = 0u64;
    let mut from = info.state.first_seq.max(1);
    loop {
        let (page, next) = browse::walk_dead(b, &info, from, PAGE).await?;
        for a in &page {
            if progress.cancelled() {
                return Ok(PurgeReport {
                    purged: Some(purged),
                    note: Some("cancelled".into()),
                });
            }
            delete_dead_letter(b, &s, a.seq).await?;
            purged += 1;
            progress.add_done(1);
        }
        match next.and_then(|n| n.parse::<u64>().ok()) {
            Some(n) => from = n,
            None => break,
        }
    }
    Ok(PurgeReport {
        purged: Some(purged),
        note: Some(
            "each dead letter's original message was deleted from its stream, then its advisory"
                .into(),
        ),
    })
}

/// The plain stream a subject purge acts on: not a consumer, not a capture stream (whose
/// messages are advisories; its dead letters go with their originals, by a plain purge).
async fn subject_target(b: &NatsBackend, queue: &QueueId, subject: &str) -> Result<String> {
    let Target::Stream(s) = Target::parse(queue) else {
        return Err(BackendError::Unsupported(format!(
            "{queue} is a consumer: purge by subject acts on its stream"
        )));
    };
    if subject.trim().is_empty() || subject.contains(char::is_whitespace) {
        return Err(BackendError::Invalid(format!(
            "subject filter {:?} is not a NATS subject",
            qdeck_model::sanitize::clean_short(subject, 60)
        )));
    }
    if super::dlq::is_capture(&b.stream(&s).await?) {
        return Err(BackendError::Unsupported(format!(
            "{s} captures dead-letter advisories: purge it whole (each original goes with its advisory), or delete dead letters by id"
        )));
    }
    Ok(s)
}

/// Messages of stream `queue` on subjects `subject` matches, from the per-subject counts.
pub async fn count_subject(b: &NatsBackend, queue: &QueueId, subject: &str) -> Result<u64> {
    let s = subject_target(b, queue, subject).await?;
    let v = b
        .conn
        .api(
            &format!("STREAM.INFO.{s}"),
            &json!({"subjects_filter": subject}),
        )
        .await?;
    Ok(v.pointer("/state/subjects")
        .and_then(Json::as_object)
        .map_or(0, |m| m.values().filter_map(Json::as_u64).sum()))
}

/// `STREAM.PURGE` with a subject filter: the server removes the matching messages at once.
pub async fn purge_subject(b: &NatsBackend, queue: &QueueId, subject: &str) -> Result<PurgeReport> {
    let s = subject_target(b, queue, subject).await?;
    let v = b
        .conn
        .api(&format!("STREAM.PURGE.{s}"), &json!({"filter": subject}))
        .await?;
    Ok(PurgeReport {
        purged: v.get("purged").and_then(Json::as_u64),
        note: Some(format!(
            "only subjects matching {}",
            qdeck_model::sanitize::clean_short(subject, 80)
        )),
    })
}

/// Delete the original a capture-stream advisory names, then the advisory. `false` when the
/// advisory was already gone, or is no dead letter (a nak names a message still in play:
/// neither it nor its message is touched).
async fn delete_dead_letter(b: &NatsBackend, capture: &str, seq: u64) -> Result<bool> {
    let Some(adv) = browse::advisory_at(b, capture, seq).await? else {
        return Ok(false);
    };
    if !adv.is_dead_letter() {
        return Ok(false);
    }
    match msg::delete(b, &adv.stream, adv.stream_seq).await {
        Ok(_) | Err(BackendError::NotFound(_)) => {}
        Err(e) => return Err(e),
    }
    msg::delete(b, capture, seq).await
}

pub async fn delete_ids(
    b: &NatsBackend,
    queue: &QueueId,
    ids: &[String],
    progress: &OpProgress,
) -> Result<DeleteReport> {
    let (stream, capture) = match Target::parse(queue) {
        Target::Stream(s) => {
            let cap = super::dlq::is_capture(&b.stream(&s).await?);
            (s, cap)
        }
        Target::Consumer(s, c) => {
            b.consumer(&s, &c).await?;
            (s, false)
        }
    };
    progress.set_total(Some(ids.len() as u64));
    let mut rep = DeleteReport::default();
    for id in ids {
        if progress.cancelled() {
            rep.cancelled = true;
            break;
        }
        let seq: u64 = id
            .parse()
            .map_err(|_| BackendError::Invalid(format!("{id:?} is not a stream sequence")))?;
        let gone = if capture {
            delete_dead_letter(b, &stream, seq).await?
        } else {
            msg::delete(b, &stream, seq).await?
        };
        if gone {
            rep.deleted += 1;
        } else {
            rep.missing += 1;
        }
        progress.add_done(1);
    }
    Ok(rep)
}
