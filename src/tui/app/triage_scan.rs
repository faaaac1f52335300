//! The reasons view's scans, run on the executor's tasks: grouping a DLQ by failure
//! signature, and the messages of one group for the browser.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::PAGE_SIZE;
use crate::tui::update::Action;
use qdeck_backend::{BackendError, OpProgress};
use qdeck_engine::gate::{Gate, Mutation};
use qdeck_engine::session::Session;
use qdeck_engine::triage::{scan, Grouper, ReasonsReport, ScanLimits, SignatureConfig};
use qdeck_model::domain::{Message, Page, QueueId};

/// The profile's `[triage]` scan bounds and extra reason headers, as the CLI reads them.
pub(super) fn triage_settings(session: &Session) -> (ScanLimits, SignatureConfig) {
    let t = &session.loaded.config.triage;
    (
        ScanLimits {
            max_messages: Some(t.scan_limit),
            max_time: Some(Duration::from_secs_f64(t.scan_secs)),
            ..Default::default()
        },
        SignatureConfig::for_session(&session.loaded),
    )
}

/// Group a DLQ over the configured bounded scan, sending the groups so far after each page (at
/// most every 100 ms) so the first ones show while the rest is read.
pub(super) async fn scan_reasons(
    gate: &Gate,
    queue: &QueueId,
    limits: &ScanLimits,
    cfg: &SignatureConfig,
    progress: &OpProgress,
    tx: &mpsc::Sender<Action>,
) -> Result<ReasonsReport, BackendError> {
    gate.require(Mutation::Browse, queue)?;
    let mut grouper = Grouper::new(cfg.clone());
    let mut last = Instant::now() - Duration::from_secs(1);
    let summary = scan(gate.backend().as_ref(), queue, limits, progress, |page| {
        for m in page {
            grouper.add(m);
        }
        if last.elapsed() >= Duration::from_millis(100) {
            last = Instant::now();
            let p = progress.snapshot();
            // A full channel only delays the next picture; the final one is awaited.
            let _ = tx.try_send(Action::ReasonsProgress {
                queue: queue.clone(),
                groups: grouper.groups(),
                scanned: p.done,
                total: p.total,
            });
        }
        true
    })
    .await?;
    Ok(ReasonsReport {
        scan: summary,
        groups: grouper.groups(),
    })
}

/// Messages of one reasons group, for the message browser: the same bounded scan, keeping
/// at most `PAGE_SIZE` matching messages.
pub(super) async fn group_page(
    gate: &Gate,
    queue: &QueueId,
    limits: &ScanLimits,
    cfg: &SignatureConfig,
    signature: &str,
    origin: Option<&str>,
) -> Result<Page, BackendError> {
    gate.require(Mutation::Browse, queue)?;
    let mut messages: Vec<Message> = Vec::new();
    let summary = scan(
        gate.backend().as_ref(),
        queue,
        limits,
        &OpProgress::detached(),
        |page| {
            for m in page {
                let s = qdeck_engine::triage::signature(m, cfg);
                if messages.len() < PAGE_SIZE
                    && s.text == signature
                    && s.origin.as_deref() == origin
                {
                    messages.push(m.clone());
                }
            }
            // Enough for one page: stop reading.
            messages.len() < PAGE_SIZE
        },
    )
    .await?;
    Ok(Page {
        messages,
        next: None,
        effect_note: summary.effect_note,
    })
}
