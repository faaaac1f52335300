//! Publish the messages of an export file through the gate: the read-only check first, then
//! batches of sends (rate limited, cancellable, progress), one audit line for the whole run.
//! The first batch with a failed send stops the run: what was sent is reported (within that
//! batch, messages after the failed one may have been sent), the rest stays unsent.

use serde::Serialize;
use serde_json::json;

use crate::gate::{Gate, Mutation};
use crate::ops::Outcome;
use crate::triage::batches::{batch_len, send_batch};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{OutgoingMessage, QueueId};
use qdeck_model::rate::{Limiter, Rate};

#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub sent: u64,
    pub failed: u64,
    pub cancelled: bool,
    /// The send that failed: its line in the file and the broker's error.
    pub failed_line: Option<usize>,
    pub error: Option<String>,
}

/// `msgs` are (line number, message), already validated. `file` names the source in the
/// audit line.
pub async fn import(
    gate: &Gate,
    queue: &QueueId,
    msgs: Vec<(usize, OutgoingMessage)>,
    rate: Option<Rate>,
    file: &str,
    progress: &OpProgress,
) -> Result<ImportReport, BackendError> {
    gate.require(Mutation::Import, queue)?;
    qdeck_backend::sender_of(gate.backend().as_ref())?;
    progress.set_total(Some(msgs.len() as u64));
    progress.phase("sending");
    let pace = Limiter::new(rate);
    let mut report = ImportReport::default();
    let per = batch_len(rate);
    let mut rest = msgs.into_iter();
    loop {
        let (lines, batch): (Vec<usize>, Vec<OutgoingMessage>) = rest.by_ref().take(per).unzip();
        if batch.is_empty() {
            break;
        }
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        let o = send_batch(gate.backend().as_ref(), queue, batch, &pace, progress).await;
        report.sent += o.sent.len() as u64;
        report.failed += o.failed as u64;
        if let Some((i, e)) = o.first_error {
            let line = lines[i];
            report.failed_line = Some(line);
            report.error = Some(format!("line {line}: {e}"));
            break;
        }
    }
    gate.record(
        Mutation::Import,
        queue,
        None,
        json!({"sent": report.sent, "failed": report.failed, "file": file}),
        Outcome::Import(report.clone()).verdict(),
        report.error.clone(),
    );
    Ok(report)
}
