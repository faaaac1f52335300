//! What the `:` prompt reads and writes outside the state: its history, one command a line in
//! `$XDG_STATE_HOME/qdeck/history`, and the user's theme files for `:theme` completion. A
//! history that cannot be read starts empty and one that cannot be written is logged: the
//! prompt works either way.

use std::path::{Path, PathBuf};

use crate::tui::state::HISTORY_MAX;
use qdeck_model::config::paths;

pub(super) fn history_file() -> PathBuf {
    paths::state_dir().join("history")
}

/// The newest `HISTORY_MAX` commands of `path`, oldest first.
pub(super) fn load_history(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let skip = lines.len().saturating_sub(HISTORY_MAX);
    lines.into_iter().skip(skip).collect()
}

/// Replace `path` with `lines` (written beside it, then renamed, so a crash never leaves half
/// a history).
pub(super) fn save_history(path: &Path, lines: &[String]) {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        let mut text = lines
            .iter()
            .map(|l| l.replace(['\n', '\r'], " "))
            .collect::<Vec<_>>()
            .join("\n");
        text.push('\n');
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        tracing::warn!("cannot write the prompt history {}: {e}", path.display());
    }
}

/// The names of the theme files in `dir` (`NAME.toml`).
pub(super) fn theme_files(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "toml")
                .then(|| p.file_stem()?.to_str().map(String::from))
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_bounded_and_survives_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/history");
        assert!(load_history(&path).is_empty(), "no file yet: empty");
        let many: Vec<String> = (0..HISTORY_MAX + 5).map(|i| format!("theme {i}")).collect();
        save_history(&path, &many);
        let back = load_history(&path);
        assert_eq!(back.len(), HISTORY_MAX);
        assert_eq!(back.last(), many.last());
        // A directory where the file should be: logged, never a panic.
        save_history(dir.path(), &many);
    }
}
