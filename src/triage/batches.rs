//! Sending many messages in batches (`Backend::send_many`) at an optional rate: how many go
//! in one batch, when each batch is due, and the answers matched back to what was sent.

use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError, OpProgress};
use crate::domain::{OutgoingMessage, QueueId};

/// Messages in one batch without a rate: enough to keep a broker's pipeline full, few enough
/// that progress and cancel stay prompt.
const BATCH: usize = 100;

/// Messages per batch: `BATCH`, or with a rate what 100 ms of it allows (at least one), so
/// the rate holds within a tenth of a second.
pub fn batch_len(rate: Option<f64>) -> usize {
    match usable(rate) {
        Some(r) => ((r / 10.0).floor() as usize).clamp(1, BATCH),
        None => BATCH,
    }
}

fn usable(rate: Option<f64>) -> Option<f64> {
    rate.filter(|r| *r > 0.0 && r.is_finite())
}

/// What became of one batch: how many were sent, and the first failure with the position
/// (in the batch) of the message it names. A message the broker did not answer for counts
/// as that failure.
pub struct BatchOutcome {
    pub sent: Vec<usize>,
    pub failed: usize,
    pub first_error: Option<(usize, BackendError)>,
}

/// Wait until the batch starting at message `done` is due, then send it.
pub async fn send_batch(
    backend: &dyn Backend,
    queue: &QueueId,
    batch: Vec<OutgoingMessage>,
    done: usize,
    started: Instant,
    rate: Option<f64>,
    progress: &OpProgress,
) -> BatchOutcome {
    if let Some(r) = usable(rate) {
        let due = started + Duration::from_secs_f64(done as f64 / r);
        tokio::time::sleep_until(due.into()).await;
    }
    let len = batch.len();
    let answers = backend.send_many(queue, batch).await;
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
        assert_eq!(batch_len(None), 100);
        assert_eq!(batch_len(Some(5.0)), 1);
        assert_eq!(batch_len(Some(250.0)), 25);
        assert_eq!(batch_len(Some(1e9)), 100);
        assert_eq!(batch_len(Some(f64::NAN)), 100);
    }
}
