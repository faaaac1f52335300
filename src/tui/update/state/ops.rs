//! Operations: the one running, how each ended, the status line and the session's log (`:ops`).

use qdeck_backend::ProgressState;
use qdeck_engine::ops::Verdict;

/// How an operation ended: its one-line summary, its verdict and the exit code quitting
/// after it gives (the CLI's for the same outcome).
#[derive(Debug, Clone, PartialEq)]
pub struct OpSummary {
    pub text: String,
    pub verdict: Verdict,
    pub exit_code: u8,
}

impl OpSummary {
    pub fn new(text: impl Into<String>, verdict: Verdict) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict,
            exit_code: qdeck_engine::exit::of_verdict(verdict),
        }
    }
    /// An action the profile's tier refuses, with the CLI's exit code for a refusal.
    pub fn refused(text: impl Into<String>) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict: Verdict::Failed,
            exit_code: qdeck_engine::exit::REFUSED,
        }
    }
    pub fn of(outcome: &qdeck_engine::ops::Outcome, text: impl Into<String>) -> OpSummary {
        OpSummary {
            text: text.into(),
            verdict: outcome.verdict(),
            exit_code: qdeck_engine::exit::of_outcome(outcome),
        }
    }
    pub fn ok(&self) -> bool {
        self.verdict == Verdict::Ok
    }
    /// The status line's level: anything short of `Ok` is shown as an error, so a partial
    /// result never reads as done.
    pub fn level(&self) -> Level {
        if self.ok() {
            Level::Info
        } else {
            Level::Error
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpState {
    pub label: String,
    pub progress: ProgressState,
    pub started_ms: i64,
    pub cancelling: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone)]
pub struct Status {
    pub text: String,
    pub level: Level,
    pub at_ms: i64,
    /// An operation's result: it stays until replaced or dismissed, where a flash expires.
    pub sticky: bool,
}

/// This session's operations across every profile it switched to, newest last (`:ops`).
#[derive(Debug, Clone, Default)]
pub struct OpsLog {
    pub entries: Vec<LoggedOp>,
    /// First row shown.
    pub scroll: usize,
}

/// One finished operation: what ran, on which profile, when it ended, and its full summary.
#[derive(Debug, Clone)]
pub struct LoggedOp {
    /// The profile it ran on: the log outlives profile switches, so each entry names its own.
    pub profile: String,
    pub label: String,
    /// Read from the audit log at start: done before this console (by it, the CLI or
    /// someone else), shown as the recent past.
    pub earlier: bool,
    pub ended_ms: i64,
    pub summary: OpSummary,
}

impl LoggedOp {
    fn from_audit(e: qdeck_engine::audit::AuditEntry) -> LoggedOp {
        let verdict = match e.result.as_str() {
            "ok" => Verdict::Ok,
            "partial" => Verdict::Partial,
            "cancelled" => Verdict::Cancelled,
            _ => Verdict::Failed,
        };
        let counts = match &e.counts {
            serde_json::Value::Object(m) if !m.is_empty() => format!(" {}", e.counts),
            _ => String::new(),
        };
        let error = e
            .error
            .as_deref()
            .map(|x| format!(" — {x}"))
            .unwrap_or_default();
        let text = format!(
            "{} {} by {}: {}{counts}{error}",
            e.action, e.queue, e.user, e.result
        );
        let summary = if e.result == "refused" {
            OpSummary::refused(text)
        } else {
            OpSummary::new(text, verdict)
        };
        LoggedOp {
            ended_ms: chrono::DateTime::parse_from_rfc3339(&e.time)
                .map_or(0, |d| d.timestamp_millis()),
            profile: e.profile,
            label: String::new(),
            earlier: true,
            summary,
        }
    }
}

impl OpsLog {
    /// Kept per session; a long night of single-message redrives stays well under this.
    pub const MAX: usize = 500;

    /// The recent past from the audit log, as the console starts: the same record the CLI
    /// and every other qdeck writes, so `:ops` is one store, not a second one.
    pub fn from_audit(entries: Vec<qdeck_engine::audit::AuditEntry>) -> OpsLog {
        let mut log = OpsLog::default();
        for e in entries {
            log.push(LoggedOp::from_audit(e));
        }
        log
    }

    /// Entries of this session (the rest came from the audit log at start).
    pub fn this_session(&self) -> usize {
        self.entries.iter().filter(|e| !e.earlier).count()
    }

    pub fn push(&mut self, op: LoggedOp) {
        if self.entries.len() >= Self::MAX {
            self.entries.remove(0);
        }
        self.entries.push(op);
    }
}
