//! The audit log: one JSON line per mutation, appended with O_APPEND so concurrent qdeck
//! processes do not interleave lines.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use qdeck_model::config::redact::redact;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditEntry {
    /// RFC 3339, UTC.
    pub time: String,
    pub user: String,
    pub profile: String,
    pub broker: String,
    pub queue: String,
    /// "redrive", "purge", "send".
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Counts the action reported (moved, failed, purged…).
    pub counts: serde_json::Value,
    /// "ok", "partial", "cancelled", "refused" or "error".
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

/// The OS user: `$USER`/`$LOGNAME`, else the passwd entry of our uid, else `uid:N`.
pub fn os_user() -> String {
    if let Ok(u) = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")) {
        if !u.is_empty() {
            return u;
        }
    }
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        });
    let Some(uid) = uid else {
        return "unknown".to_string();
    };
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
            })
        })
        .unwrap_or(format!("uid:{uid}"))
}

impl AuditLog {
    pub fn new(path: PathBuf) -> Self {
        AuditLog { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last `n` entries, oldest first, read from the file's tail (at most its last
    /// 512 KiB: a long log is not read whole to show a console's recent past). Lines that do
    /// not parse (a torn last line, an older format) are passed over.
    pub fn recent(&self, n: usize) -> Vec<AuditEntry> {
        use std::io::{Read, Seek, SeekFrom};
        const TAIL: u64 = 512 * 1024;
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map_or(0, |m| m.len());
        let from = len.saturating_sub(TAIL);
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(&buf);
        let mut lines: Vec<&str> = text.lines().collect();
        // A read that starts mid-file starts mid-line.
        if from > 0 && !lines.is_empty() {
            lines.remove(0);
        }
        let mut out: Vec<AuditEntry> = lines
            .iter()
            .rev()
            .filter_map(|l| serde_json::from_str(l).ok())
            .take(n)
            .collect();
        out.reverse();
        out
    }

    /// Append one entry. Fails loudly: a mutation whose record cannot be written is reported.
    pub fn append(&self, mut entry: AuditEntry) -> std::io::Result<()> {
        if let Some(e) = entry.error.take() {
            entry.error = Some(redact(&e));
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(line.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: &str) -> AuditEntry {
        AuditEntry {
            time: "2026-12-06T10:00:00.000Z".into(),
            user: "tester".into(),
            profile: "local".into(),
            broker: "local".into(),
            queue: "q".into(),
            action: action.into(),
            target: None,
            counts: serde_json::json!({}),
            result: "ok".into(),
            error: None,
        }
    }

    #[test]
    fn recent_reads_the_last_entries_and_passes_over_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::new(dir.path().join("audit.log"));
        assert!(log.recent(5).is_empty(), "no file yet");
        for a in ["purge", "redrive", "send"] {
            log.append(entry(a)).unwrap();
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"{\"time\": \"torn")
            .unwrap();
        let got: Vec<String> = log.recent(2).into_iter().map(|e| e.action).collect();
        assert_eq!(got, ["redrive", "send"]);
    }
}
