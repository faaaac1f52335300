use std::collections::BTreeMap;
use std::sync::Mutex;

/// Counts API calls per operation ("sqs:GetQueueAttributes", "mgmt:GET /api/queues").
/// Backends bump it on every request they send, so the status line can show calls per minute
/// and SQS/CloudWatch can show an estimated cost.
#[derive(Debug, Default)]
pub struct ApiCalls {
    counts: Mutex<BTreeMap<String, u64>>,
}

impl ApiCalls {
    pub fn bump(&self, op: &str) {
        self.bump_by(op, 1);
    }

    pub fn bump_by(&self, op: &str, n: u64) {
        let mut m = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry(op.to_string()).or_default() += n;
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Calls made, leaving out `billing:*` entries (billing units such as CloudWatch
    /// metrics requested, which are not calls).
    pub fn total(&self) -> u64 {
        self.snapshot()
            .iter()
            .filter(|(k, _)| !k.starts_with("billing:"))
            .map(|(_, v)| v)
            .sum()
    }
}
