//! The `:` prompt's history (↑/↓) and Tab completion. Both only change the prompt's text;
//! the app keeps the history across runs (`Effect::SaveHistory`, loaded at startup).

use super::state::*;
use super::Effect;

/// The `:` commands Tab completes, by their main name (`commands::command` also takes
/// aliases such as `q` and `ctx`).
pub(super) const COMMANDS: &[&str] = &[
    "alerts",
    "browse",
    "copy",
    "dlq",
    "filter",
    "fire",
    "fleet",
    "force",
    "help",
    "move",
    "ops",
    "profile",
    "purge",
    "queues",
    "quit",
    "q!",
    "reasons",
    "redrive",
    "reset",
    "scheduled",
    "sort",
    "theme",
    "workers",
];

/// ↑ (`older`) or ↓ through the history; the line typed before ↑ comes back after the newest.
pub(super) fn browse_history(st: &mut Model, older: bool) {
    let p = &mut st.prompt;
    let Some(inp) = st.input.as_mut() else {
        return;
    };
    p.completion = None;
    let n = p.history.len();
    let next = match (p.browsing, older) {
        (None, true) if n > 0 => {
            p.draft = inp.text.clone();
            Some(n - 1)
        }
        (None, _) => return,
        (Some(i), true) => Some(i.saturating_sub(1)),
        (Some(i), false) if i + 1 < n => Some(i + 1),
        (Some(_), false) => None,
    };
    p.browsing = next;
    inp.text = match next {
        Some(i) => p.history.get(i).cloned().unwrap_or_default(),
        None => std::mem::take(&mut p.draft),
    };
}

/// A command was run: it becomes the newest history entry (a repeat of the newest is kept
/// once), and the app writes the history out.
pub(super) fn remember(st: &mut Model, text: &str, fx: &mut Vec<Effect>) {
    let p = &mut st.prompt;
    p.browsing = None;
    p.completion = None;
    p.draft.clear();
    if text.is_empty() || p.history.last().is_some_and(|l| l == text) {
        return;
    }
    p.history.push(text.to_string());
    if p.history.len() > HISTORY_MAX {
        let extra = p.history.len() - HISTORY_MAX;
        p.history.drain(..extra);
    }
    fx.push(Effect::SaveHistory(p.history.clone()));
}

/// Tab (`forward`) or Shift-Tab: the first Tab completes the last word with its first
/// candidate, the next ones cycle through the others.
pub(super) fn complete(st: &mut Model, forward: bool) {
    let Some(text) = st.input.as_ref().map(|i| i.text.clone()) else {
        return;
    };
    let c = match st.prompt.completion.take() {
        Some(mut c) if c.candidates.len() > 1 => {
            let n = c.candidates.len();
            c.index = if forward {
                (c.index + 1) % n
            } else {
                (c.index + n - 1) % n
            };
            c
        }
        // One candidate, already filled in: the next Tab starts on what follows it.
        _ => {
            let (stem, word) = match text.rfind(' ') {
                Some(i) => text.split_at(i + 1),
                None => ("", text.as_str()),
            };
            let candidates = matching(&candidates(st, stem), word);
            if candidates.is_empty() {
                return;
            }
            Completion {
                stem: stem.to_string(),
                index: if forward { 0 } else { candidates.len() - 1 },
                candidates,
            }
        }
    };
    let one = c.candidates.len() == 1;
    let mut line = format!("{}{}", c.stem, c.candidates[c.index]);
    if one {
        // The word is done: the next word's completion starts after it.
        line.push(' ');
    }
    if let Some(inp) = st.input.as_mut() {
        inp.text = line;
    }
    st.prompt.browsing = None;
    st.prompt.completion = (!one).then_some(c);
}

/// Candidates starting with `word`: exact case first, else ignoring case.
fn matching(all: &[String], word: &str) -> Vec<String> {
    let exact: Vec<String> = all
        .iter()
        .filter(|c| c.starts_with(word))
        .cloned()
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    let low = word.to_lowercase();
    all.iter()
        .filter(|c| c.to_lowercase().starts_with(&low))
        .cloned()
        .collect()
}

/// What the word after `stem` can be: a command name first, then the command's argument.
fn candidates(st: &Model, stem: &str) -> Vec<String> {
    let words: Vec<&str> = stem.split_whitespace().collect();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    let queues = || {
        let mut v: Vec<String> = st
            .store
            .entries()
            .iter()
            .map(|e| e.info.id.as_str().to_string())
            .collect();
        v.sort();
        v
    };
    match words.as_slice() {
        [] => owned(COMMANDS),
        ["theme"] => {
            let mut v = st.prompt.themes.clone();
            v.sort();
            v.dedup();
            v
        }
        ["profile" | "ctx"] => st.session.profiles.clone(),
        ["copy" | "move", _] => st.session.profiles.clone(),
        ["redrive" | "copy" | "move" | "filter"] => queues(),
        ["sort"] => SortCol::ALL.iter().map(|c| c.name().to_string()).collect(),
        ["sort", _] => owned(&["asc", "desc"]),
        _ => Vec::new(),
    }
}
