//! The DLQ grouped by failure signature over a bounded scan. Memory holds one entry per
//! group (signature, origin, counts, times, one sample id), never a body.

use std::collections::HashMap;

use serde::Serialize;

use super::scan::{scan, ScanLimits, ScanSummary};
use super::signature::{header, signature, SignatureConfig};
use qdeck_backend::{Backend, BackendError, OpProgress};
use qdeck_model::domain::{Message, QueueId, QueueInfo};

/// Header qdeck stamps on redriven copies: a message carrying it failed again after a redrive.
pub const REDRIVEN_HEADER: &str = "x-qdeck-redriven";

/// The queue whose failure reasons are read when someone asks for `info`'s: a DLQ's own
/// messages, else the DLQ of a queue that has one (the failures are there; its live messages
/// have not failed yet). `None` for a queue that is neither. The one rule behind the console's
/// `F` and `qdeck reasons` (whose `--live` reads the queue itself).
pub fn reasons_queue(info: &QueueInfo) -> Option<QueueId> {
    if info.is_dlq {
        return Some(info.id.clone());
    }
    info.dlq.clone()
}

/// One failure signature and what the scan saw of it.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// Normalised reason text (the grouping key with `origin`).
    pub signature: String,
    pub origin: Option<String>,
    pub count: u64,
    /// Earliest and latest dead-letter time (enqueue time where the broker records no
    /// dead-letter time), Unix ms.
    pub first_seen_ms: Option<i64>,
    pub last_seen_ms: Option<i64>,
    /// One message id of the group, to look at.
    pub sample_id: String,
    /// Messages of the group that carry `x-qdeck-redriven`: they came back after a redrive.
    pub redriven: u64,
}

impl Group {
    pub fn came_back_after_redrive(&self) -> bool {
        self.redriven > 0
    }
}

/// Groups, largest first, and what the scan covered.
#[derive(Debug, Clone, Serialize)]
pub struct ReasonsReport {
    #[serde(flatten)]
    pub scan: ScanSummary,
    pub groups: Vec<Group>,
}

impl ReasonsReport {
    /// "grouped 5,000 of 48,553 message(s) (scan limit reached): a sample".
    pub fn sample_note(&self) -> String {
        self.scan.sample_note("grouped")
    }
}

/// Accumulates groups page by page; the console can show `groups()` while a scan runs.
#[derive(Debug, Default)]
pub struct Grouper {
    cfg: SignatureConfig,
    by_key: HashMap<(String, Option<String>), Group>,
}

impl Grouper {
    pub fn new(cfg: SignatureConfig) -> Grouper {
        Grouper {
            cfg,
            by_key: HashMap::new(),
        }
    }

    pub fn add(&mut self, m: &Message) {
        let sig = signature(m, &self.cfg);
        let at = m
            .dead_letter
            .as_ref()
            .and_then(|d| d.at_ms)
            .or(m.enqueued_ms);
        let redriven = u64::from(header(m, REDRIVEN_HEADER).is_some());
        let g = self
            .by_key
            .entry((sig.text, sig.origin))
            .or_insert_with_key(|(text, origin)| Group {
                signature: text.clone(),
                origin: origin.clone(),
                count: 0,
                first_seen_ms: None,
                last_seen_ms: None,
                sample_id: m.id.clone(),
                redriven: 0,
            });
        g.count += 1;
        g.redriven += redriven;
        if let Some(t) = at {
            g.first_seen_ms = Some(g.first_seen_ms.map_or(t, |f| f.min(t)));
            g.last_seen_ms = Some(g.last_seen_ms.map_or(t, |l| l.max(t)));
        }
    }

    /// Groups, largest first; ties by signature so the order is stable.
    pub fn groups(&self) -> Vec<Group> {
        let mut v: Vec<Group> = self.by_key.values().cloned().collect();
        v.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.signature.cmp(&b.signature))
                .then_with(|| a.origin.cmp(&b.origin))
        });
        v
    }
}

/// Scan `queue` within `limits` and group what was seen.
pub async fn reasons(
    backend: &dyn Backend,
    queue: &QueueId,
    limits: &ScanLimits,
    cfg: &SignatureConfig,
    progress: &OpProgress,
) -> Result<ReasonsReport, BackendError> {
    let mut grouper = Grouper::new(cfg.clone());
    let summary = scan(backend, queue, limits, progress, |page| {
        for m in page {
            grouper.add(m);
        }
        true
    })
    .await?;
    Ok(ReasonsReport {
        scan: summary,
        groups: grouper.groups(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::domain::DeadLetterInfo;

    fn dead(id: &str, err: &str, origin: &str, at: i64, redriven: bool) -> Message {
        let mut headers = vec![("x-exception-message".to_string(), err.into())];
        if redriven {
            headers.push((REDRIVEN_HEADER.to_string(), "1".into()));
        }
        Message {
            id: id.into(),
            headers,
            dead_letter: Some(DeadLetterInfo {
                reason: Some("rejected".into()),
                origin: Some(QueueId::new(origin)),
                at_ms: Some(at),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn groups_by_normalised_signature_and_origin() {
        let mut g = Grouper::default();
        g.add(&dead("1", "order 1 invalid", "orders", 30, false));
        g.add(&dead("2", "order 22 invalid", "orders", 10, true));
        g.add(&dead("3", "order 3 invalid", "billing", 20, false));
        g.add(&dead("4", "db timeout", "orders", 40, false));
        g.add(&dead("5", "order 5 invalid", "orders", 50, false));
        let groups = g.groups();
        assert_eq!(groups.len(), 3);
        let top = &groups[0];
        assert_eq!(top.signature, "rejected: order <n> invalid");
        assert_eq!(top.origin.as_deref(), Some("orders"));
        assert_eq!(top.count, 3);
        assert_eq!((top.first_seen_ms, top.last_seen_ms), (Some(10), Some(50)));
        assert_eq!(top.sample_id, "1");
        assert!(top.came_back_after_redrive());
        assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 5);
        assert!(!groups[1].came_back_after_redrive());
    }

    #[test]
    fn reasons_of_a_queue_are_its_dlqs_and_of_a_dlq_its_own() {
        let q = |name: &str, dlq: Option<&str>, is_dlq: bool| QueueInfo {
            id: QueueId::new(name),
            dlq: dlq.map(QueueId::new),
            is_dlq,
            ..Default::default()
        };
        let dlq = QueueId::new("orders.dlq");
        assert_eq!(
            reasons_queue(&q("orders", Some("orders.dlq"), false)),
            Some(dlq.clone())
        );
        assert_eq!(reasons_queue(&q("orders.dlq", None, true)), Some(dlq));
        // A DLQ that dead-letters further is read itself: its messages are the failures.
        assert_eq!(
            reasons_queue(&q("a.dlq", Some("a.dlq.dlq"), true)),
            Some(QueueId::new("a.dlq"))
        );
        assert_eq!(reasons_queue(&q("plain", None, false)), None);
    }
}
