//! Sending many messages in batches (`Backend::send_many`) at an optional rate: how many go
//! in one batch, when each batch is due, and the answers matched back to what was sent.

use std::time::Duration;

use qdeck_backend::{Backend, BackendError, OpProgress};
use qdeck_model::domain::{OutgoingMessage, QueueId};
use qdeck_model::rate::{Limiter, Rate};

/// Messages in one batch without a rate: enough to keep a broker's pipeline full, few enough
/// that progress and cancel stay prompt.
const BATCH: usize = 100;

/// Messages per batch: `BATCH`, or with a rate what 100 ms of it allows (at least one), so
/// the rate holds within a tenth of a second.
pub fn batch_len(rate: Option<Rate>) -> usize {
    rate.map_or(BATCH, |r| r.batch(Duration::from_millis(100), BATCH))
}

/// What became of one batch: how many were sent, and the first failure with the position
/// (in the batch) of the message it names. A message the broker did not answer for counts
/// as that failure.
pub struct BatchOutcome {
    pub sent: Vec<usize>,
    pub failed: usize,
    pub first_error: Option<(usize, BackendError)>,
}

/// Wait until `pace` lets the batch go, then send it; a cancel while waiting sends nothing.
pub async fn send_batch(
    backend: &dyn Backend,
    queue: &QueueId,
    batch: Vec<OutgoingMessage>,
    pace: &Limiter,
    progress: &OpProgress,
) -> BatchOutcome {
    let len = batch.len();
    pace.take(len as u64, &progress.cancel_token()).await;
    if progress.cancelled() {
        return BatchOutcome {
            sent: Vec::new(),
            failed: 0,
            first_error: None,
        };
    }
    let answers = match qdeck_backend::sender_of(backend) {
        Ok(sender) => sender.send_many(queue, batch).await,
        Err(e) => vec![Err(e)],
    };
    let mut out = BatchOutcome {
        sent: Vec::with_capacity(len),
        failed: 0,
        first_error: None,
    };
    let answered = answers.len().min(len);
    for (i, a) in answers.into_iter().take(len).enumerate() {
        match a {
            Ok(_) => {
                out.sent.push(i);
                progress.add_done(1);
            }
            Err(e) => {
                out.failed += 1;
                progress.add_failed(1);
                out.first_error.get_or_insert((i, e));
            }
        }
    }
    if answered < len && out.first_error.is_none() {
        out.failed += 1;
        progress.add_failed(1);
        out.first_error = Some((
            answered,
            BackendError::Other("the broker gave no answer for this message".into()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_sets_batches_of_a_tenth_of_a_second() {
        let r = |v| Some(Rate::new(v).unwrap());
        assert_eq!(batch_len(None), 100);
        assert_eq!(batch_len(r(5.0)), 1);
        assert_eq!(batch_len(r(250.0)), 25);
        assert_eq!(batch_len(r(1e9)), 100);
    }
}
