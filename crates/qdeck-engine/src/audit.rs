//! The audit log: one JSON line per mutation, appended with O_APPEND so concurrent qdeck
//! processes do not interleave lines.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use qdeck_model::config::redact::redact;

#[derive(Debug, Clone, Serialize)]
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
