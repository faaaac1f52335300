//! PurgeQueue with SQS's 60 s rule surfaced as a cooldown.

use std::time::Instant;

use aws_sdk_sqs::operation::purge_queue::PurgeQueueError;

use super::client::map_sdk;
use super::{lock, ops, SqsBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// SQS allows one purge per queue per 60 s.
pub const COOLDOWN_SECS: u64 = 60;

fn cooldown_left(b: &SqsBackend, id: &QueueId) -> Option<u64> {
    let at = lock(&b.purges).get(id).copied()?;
    let el = at.elapsed().as_secs();
    (el < COOLDOWN_SECS).then(|| COOLDOWN_SECS - el)
}

pub(crate) async fn purge(
    b: &SqsBackend,
    id: &QueueId,
    progress: &OpProgress,
) -> Result<PurgeReport> {
    if let Some(left) = cooldown_left(b, id) {
        return Err(BackendError::Refused(format!(
            "purge cooldown: {id} was purged less than {COOLDOWN_SECS} s ago; SQS allows one \
             purge per {COOLDOWN_SECS} s, try again in {left} s"
        )));
    }
    let meta = b.resolve(id).await?;
    progress.phase("counting");
    // Approximate count before, for the report (SQS does not say how many it purged).
    let before = b.fetch_attrs(id, &meta).await.ok().map(|a| {
        let n = |k: &str| a.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n("ApproximateNumberOfMessages")
            + n("ApproximateNumberOfMessagesNotVisible")
            + n("ApproximateNumberOfMessagesDelayed")
    });
    progress.set_total(before);
    progress.phase("purging");
    let res = b
        .clients(meta.region)
        .sqs
        .purge_queue()
        .queue_url(&meta.url)
        .send()
        .await;
    b.invalidate(id);
    match res {
        Ok(_) => {
            lock(&b.purges).insert(id.clone(), Instant::now());
            progress.phase("done; SQS finishes within 60 s");
            if let Some(n) = before {
                progress.add_done(n);
            }
            Ok(PurgeReport {
                purged: None,
                note: Some(format!(
                    "SQS purges in the background within up to 60 s; about {} message(s) were \
                     in the queue; next purge possible in {COOLDOWN_SECS} s",
                    before.map_or_else(|| "?".into(), |n| n.to_string())
                )),
            })
        }
        Err(e) => {
            let in_progress = matches!(
                e.as_service_error(),
                Some(PurgeQueueError::PurgeQueueInProgress(_))
            );
            let ce = map_sdk(ops::PURGE, id.as_str(), &e, b.profile_name());
            let in_progress = in_progress
                || ce
                    .code
                    .as_deref()
                    .is_some_and(|c| c.contains("PurgeQueueInProgress"));
            if in_progress {
                progress.phase("cooling down");
                let left = cooldown_left(b, id);
                Err(BackendError::Refused(format!(
                    "purge cooldown: a purge of {id} is in progress or ran less than \
                     {COOLDOWN_SECS} s ago (PurgeQueueInProgress); try again in {}",
                    left.map_or_else(|| format!("up to {COOLDOWN_SECS} s"), |l| format!("{l} s"))
                )))
            } else {
                Err(ce.err)
            }
        }
    }
}
