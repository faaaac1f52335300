//! Publish the messages of an export file through the gate: the read-only check first, then
//! one send each (rate limited, cancellable, progress), one audit line for the whole run.
//! The first failed send stops the run: what was sent is reported, the rest stays unsent.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::backend::{BackendError, OpProgress};
use crate::domain::{OutgoingMessage, QueueId};
use crate::engine::gate::{Gate, Mutation};

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
    rate: Option<f64>,
    file: &str,
    progress: &OpProgress,
) -> Result<ImportReport, BackendError> {
    gate.require(Mutation::Import, queue)?;
    progress.set_total(Some(msgs.len() as u64));
    progress.phase("sending");
    let started = Instant::now();
    let mut report = ImportReport::default();
    for (i, (line, msg)) in msgs.into_iter().enumerate() {
        if progress.cancelled() {
            report.cancelled = true;
            break;
        }
        if let Some(r) = rate.filter(|r| *r > 0.0 && r.is_finite()) {
            let due = started + Duration::from_secs_f64(i as f64 / r);
            tokio::time::sleep_until(due.into()).await;
        }
        match gate.backend().send(queue, msg).await {
            Ok(_) => {
                report.sent += 1;
                progress.add_done(1);
            }
            Err(e) => {
                report.failed += 1;
                progress.add_failed(1);
                report.failed_line = Some(line);
                report.error = Some(format!("line {line}: {e}"));
                break;
            }
        }
    }
    let result = if report.failed > 0 && report.sent > 0 {
        "partial"
    } else if report.failed > 0 {
        "error"
    } else if report.cancelled {
        "cancelled"
    } else {
        "ok"
    };
    gate.record_outcome(
        Mutation::Import,
        queue,
        json!({"sent": report.sent, "failed": report.failed, "file": file}),
        result,
        report.error.clone(),
    );
    Ok(report)
}
