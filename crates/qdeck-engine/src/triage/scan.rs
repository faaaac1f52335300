//! A bounded scan of a queue by browsing: at most `max_messages` and/or `max_time`, page by
//! page, reporting progress and stopping on cancel. Browsing follows exactly the rules of
//! `qdeck peek`: the backend refuses where a browse could dead-letter unless `force`, and what
//! browsing did (SQS receive counts) comes back in `effect_note`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde::Serialize;

use qdeck_backend::{Backend, BackendError, OpProgress};
use qdeck_model::domain::{BrowseRequest, Message, QueueId};

/// How far a scan may go.
#[derive(Debug, Clone)]
pub struct ScanLimits {
    /// Stop after this many messages (`None`: no cap).
    pub max_messages: Option<u64>,
    /// Stop after this long (checked between pages).
    pub max_time: Option<Duration>,
    /// Messages asked for per browse call.
    pub page: usize,
    /// Browse even where the backend says it could push messages toward the DLQ.
    pub force: bool,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            max_messages: Some(5_000),
            max_time: Some(Duration::from_secs(30)),
            page: 500,
            force: false,
        }
    }
}

/// Why a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The browse reached the end of the queue.
    End,
    /// `max_messages` reached.
    Limit,
    /// `max_time` ran out.
    Time,
    Cancelled,
    /// The broker's browse has no cursor (SQS): one page is a sample of the queue.
    BrowseSample,
}

/// What a scan saw, without the messages themselves.
#[derive(Debug, Clone, Serialize)]
pub struct ScanSummary {
    pub queue: QueueId,
    /// Distinct messages seen.
    pub scanned: u64,
    /// Messages in the queue when the scan started, when the broker says.
    pub total: Option<u64>,
    /// Whether `total` is exact.
    pub total_exact: bool,
    pub stopped: StopReason,
    /// What browsing did to the messages (SQS: receive count +1), first note only.
    pub effect_note: Option<String>,
    pub elapsed_ms: u64,
}

impl ScanSummary {
    /// True when every message of the queue was seen.
    pub fn complete(&self) -> bool {
        self.stopped == StopReason::End
    }

    /// "all 1,204 messages" or "grouped 5,000 of 48,553 (scan limit)": says plainly when the
    /// result is a sample. `verb` is what was done with them ("grouped", "matched against").
    pub fn sample_note(&self, verb: &str) -> String {
        let why = match self.stopped {
            StopReason::End => "",
            StopReason::Limit => " (scan limit reached)",
            StopReason::Time => " (scan time ran out)",
            StopReason::Cancelled => " (cancelled)",
            StopReason::BrowseSample => " (this broker's browse returns a sample)",
        };
        match (self.stopped, self.total) {
            (StopReason::End, _) => format!("{verb} all {} message(s)", thousands(self.scanned)),
            (_, Some(t)) => format!(
                "{verb} {} of {}{} message(s){why}: a sample",
                thousands(self.scanned),
                if self.total_exact { "" } else { "≈" },
                thousands(t.max(self.scanned))
            ),
            (_, None) => format!(
                "{verb} {} message(s){why}: a sample of an unknown total",
                thousands(self.scanned)
            ),
        }
    }
}

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Browse `queue` within `limits`, handing each page to `on_page` (pages never hold a message
/// twice; a backend that samples, such as SQS, may show one again on a later page and it is
/// skipped). `on_page` returns false to stop (reported as `Limit`: the caller has enough).
/// Progress: `done` counts messages seen, `total` the queue's count.
pub async fn scan(
    backend: &dyn Backend,
    queue: &QueueId,
    limits: &ScanLimits,
    progress: &OpProgress,
    mut on_page: impl FnMut(&[Message]) -> bool,
) -> Result<ScanSummary, BackendError> {
    let started = Instant::now();
    let count = backend.count(queue).await?;
    progress.set_total(Some(count.ready));
    progress.phase("scanning");
    let mut seen: HashSet<String> = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut effect_note = None;
    let mut scanned = 0u64;
    let stopped = loop {
        if progress.cancelled() {
            break StopReason::Cancelled;
        }
        if limits.max_time.is_some_and(|t| started.elapsed() >= t) {
            break StopReason::Time;
        }
        let room = limits
            .max_messages
            .map_or(u64::MAX, |m| m.saturating_sub(scanned));
        if room == 0 {
            break StopReason::Limit;
        }
        let want = (limits.page.max(1) as u64).min(room) as usize;
        let page = backend
            .browse(
                queue,
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: want,
                    force: limits.force,
                },
            )
            .await?;
        effect_note = effect_note.or(page.effect_note);
        let fresh: Vec<Message> = page
            .messages
            .into_iter()
            .filter(|m| seen.insert(m.id.clone()))
            .take(room.min(usize::MAX as u64) as usize)
            .collect();
        scanned += fresh.len() as u64;
        let more = fresh.is_empty() || on_page(&fresh);
        progress.update(|s| s.done = scanned);
        if !more {
            break StopReason::Limit;
        }
        match page.next {
            Some(c) if !fresh.is_empty() => cursor = Some(c),
            _ => break StopReason::End,
        }
    };
    // A scan that stopped on its limit exactly at the queue's last message saw everything.
    // A browse without a cursor ends after one page whatever the queue holds.
    let stopped = match stopped {
        StopReason::Limit if count.exact && scanned >= count.ready => StopReason::End,
        StopReason::End if !count.exact && scanned < count.ready => StopReason::BrowseSample,
        s => s,
    };
    Ok(ScanSummary {
        queue: queue.clone(),
        scanned,
        total: Some(count.ready),
        total_exact: count.exact,
        stopped,
        effect_note,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(scanned: u64, total: Option<u64>, stopped: StopReason) -> ScanSummary {
        ScanSummary {
            queue: QueueId::new("q"),
            scanned,
            total,
            total_exact: true,
            stopped,
            effect_note: None,
            elapsed_ms: 0,
        }
    }

    #[test]
    fn sample_wording() {
        assert_eq!(
            summary(5000, Some(48_553), StopReason::Limit).sample_note("grouped"),
            "grouped 5,000 of 48,553 message(s) (scan limit reached): a sample"
        );
        assert_eq!(
            summary(1204, Some(1204), StopReason::End).sample_note("grouped"),
            "grouped all 1,204 message(s)"
        );
        assert!(summary(7, None, StopReason::Time)
            .sample_note("matched")
            .contains("unknown total"));
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
