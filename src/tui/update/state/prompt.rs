//! The input line (`/`, `:`) and the `:` prompt's history and completion.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Filter,
    /// The workers view's own filter.
    WorkerFilter,
    /// The on-fire view's own filter (matches `profile/queue`).
    FireFilter,
    Command,
    Search,
}

#[derive(Debug, Clone)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
}

/// Commands kept in the `:` prompt's history (the oldest go first).
pub const HISTORY_MAX: usize = 500;

/// The `:` prompt's memory: the commands run before (oldest first, kept across runs by the
/// app), where ↑/↓ stand in them, and the Tab completion under way.
#[derive(Debug, Clone, Default)]
pub struct PromptState {
    pub history: Vec<String>,
    /// The history entry ↑/↓ show; `None`: the line being typed.
    pub browsing: Option<usize>,
    /// What was typed before ↑, given back by ↓ past the newest entry.
    pub draft: String,
    pub completion: Option<Completion>,
    /// Theme names `:theme` completes (the built-in ones, and the user's files the app found).
    pub themes: Vec<String>,
}

/// Tab completion of the prompt's last word: the text before that word, the candidates, and
/// the one shown. Repeated Tab cycles; any other key keeps the text and ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub stem: String,
    pub candidates: Vec<String>,
    pub index: usize,
}
