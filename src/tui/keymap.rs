//! The keymap: named commands → keys. Defaults here; `[keys]` in the config replaces the keys
//! of a command (`purge = ["P"]`). The help screen is generated from the same table.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use qdeck_model::config::Access;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cmd {
    Quit,
    Help,
    Filter,
    Command,
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Enter,
    Back,
    SortNext,
    SortReverse,
    Browse,
    Dlq,
    Scheduled,
    Workers,
    Refresh,
    Mark,
    Copy,
    Save,
    NextPage,
    Window,
    Redrive,
    Purge,
    Cancel,
    AddWorker,
    RemoveWorker,
    Wide,
    MarkRange,
    Edit,
    Reasons,
    SelectAll,
    Delete,
}

pub struct CmdInfo {
    pub cmd: Cmd,
    pub name: &'static str,
    pub keys: &'static [&'static str],
    pub help: &'static str,
    /// The lowest permission tier the command works at: hidden from help and the footer,
    /// and refused with a flash, below it.
    pub needs: Access,
}

const fn c(
    cmd: Cmd,
    name: &'static str,
    keys: &'static [&'static str],
    help: &'static str,
    needs: Access,
) -> CmdInfo {
    CmdInfo {
        cmd,
        name,
        keys,
        help,
        needs,
    }
}

pub const COMMANDS: &[CmdInfo] = &[
    c(Cmd::Quit, "quit", &["q", "ctrl-c"], "quit", Access::Stats),
    c(Cmd::Help, "help", &["?"], "this help", Access::Stats),
    c(
        Cmd::Filter,
        "filter",
        &["/"],
        "filter rows (regex, ! inverts)",
        Access::Stats,
    ),
    c(
        Cmd::Command,
        "command",
        &[":"],
        "command mode (see : commands below)",
        Access::Stats,
    ),
    c(Cmd::Up, "up", &["k", "up"], "move up", Access::Stats),
    c(
        Cmd::Down,
        "down",
        &["j", "down"],
        "move down",
        Access::Stats,
    ),
    c(Cmd::Top, "top", &["g", "home"], "first row", Access::Stats),
    c(
        Cmd::Bottom,
        "bottom",
        &["G", "end"],
        "last row",
        Access::Stats,
    ),
    c(
        Cmd::PageUp,
        "page_up",
        &["pgup", "ctrl-b"],
        "page up",
        Access::Stats,
    ),
    c(
        Cmd::PageDown,
        "page_down",
        &["pgdn", "ctrl-f"],
        "page down",
        Access::Stats,
    ),
    c(
        Cmd::Enter,
        "enter",
        &["enter", "l", "right"],
        "open / drill in",
        Access::Stats,
    ),
    c(
        Cmd::Back,
        "back",
        &["esc", "h", "left"],
        "back",
        Access::Stats,
    ),
    c(
        Cmd::SortNext,
        "sort",
        &["s"],
        "sort by the next column (1…9 sort directly)",
        Access::Stats,
    ),
    c(
        Cmd::SortReverse,
        "sort_reverse",
        &["S"],
        "reverse sort",
        Access::Stats,
    ),
    c(
        Cmd::Browse,
        "browse",
        &["b"],
        "browse messages of the queue",
        Access::Browse,
    ),
    c(
        Cmd::Dlq,
        "dlq",
        &["d"],
        "browse the queue's dead-letter queue",
        Access::Browse,
    ),
    c(
        Cmd::Scheduled,
        "scheduled",
        &["L"],
        "scheduled (delayed) messages of the queue, due soonest first; D cancels one",
        Access::Browse,
    ),
    c(
        Cmd::Workers,
        "workers",
        &["w"],
        "workers consuming the queue",
        Access::Stats,
    ),
    c(
        Cmd::Refresh,
        "refresh",
        &["r", "ctrl-r"],
        "refresh now",
        Access::Stats,
    ),
    c(
        Cmd::Mark,
        "mark",
        &["space"],
        "select / unselect the message, then move down",
        Access::Browse,
    ),
    c(
        Cmd::MarkRange,
        "mark_range",
        &["v"],
        "range select: v, move, v selects every row between",
        Access::Browse,
    ),
    c(
        Cmd::SelectAll,
        "select_all",
        &["A"],
        "select every message shown (all the search's matches); again: unselect them",
        Access::Browse,
    ),
    c(
        Cmd::Copy,
        "copy",
        &["y"],
        "copy the message body (OSC 52)",
        Access::Browse,
    ),
    c(
        Cmd::Save,
        "save",
        &["ctrl-s"],
        "save selected messages as JSON lines",
        Access::Browse,
    ),
    c(
        Cmd::NextPage,
        "next_page",
        &["n"],
        "next page of messages",
        Access::Browse,
    ),
    c(
        Cmd::Window,
        "window",
        &["t"],
        "chart window (1/5/10 min)",
        Access::Stats,
    ),
    c(
        Cmd::Redrive,
        "redrive",
        &["R"],
        "redrive (all, or the selected messages)",
        Access::Redrive,
    ),
    c(Cmd::Purge, "purge", &["P"], "purge the queue", Access::Full),
    c(
        Cmd::Delete,
        "delete",
        &["D"],
        "delete the selected messages (or the one under the cursor)",
        Access::Full,
    ),
    c(
        Cmd::Reasons,
        "reasons",
        &["F"],
        "failure reasons: the DLQ grouped by signature",
        Access::Browse,
    ),
    c(
        Cmd::Edit,
        "edit",
        &["e"],
        "edit the message in $EDITOR, then send the copy and delete the original",
        Access::Redrive,
    ),
    c(
        Cmd::Cancel,
        "cancel",
        &["x"],
        "cancel the running operation",
        Access::Redrive,
    ),
    c(
        Cmd::AddWorker,
        "add_worker",
        &["+"],
        "demo: add a worker",
        Access::Stats,
    ),
    c(
        Cmd::RemoveWorker,
        "remove_worker",
        &["-"],
        "demo: remove a worker",
        Access::Stats,
    ),
    c(
        Cmd::Wide,
        "wide",
        &["ctrl-w"],
        "wide columns on/off (hidden columns shown)",
        Access::Stats,
    ),
];

/// A key as written in the config: `q`, `G`, `ctrl-d`, `enter`, `pgdn`, `space`, `f5`.
pub fn parse_key(s: &str) -> Option<KeyEvent> {
    let mut mods = KeyModifiers::NONE;
    let mut rest = s;
    loop {
        let lower = rest.to_ascii_lowercase();
        if let Some(r) = lower.strip_prefix("ctrl-").or(lower.strip_prefix("ctrl+")) {
            mods |= KeyModifiers::CONTROL;
            rest = &rest[rest.len() - r.len()..];
        } else if let Some(r) = lower.strip_prefix("alt-").or(lower.strip_prefix("alt+")) {
            mods |= KeyModifiers::ALT;
            rest = &rest[rest.len() - r.len()..];
        } else {
            break;
        }
    }
    let code = match rest.to_ascii_lowercase().as_str() {
        "enter" | "return" => KeyCode::Enter,
        "esc" | "escape" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "backtab" | "shift-tab" => KeyCode::BackTab,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "pgup" | "pageup" => KeyCode::PageUp,
        "pgdn" | "pagedown" => KeyCode::PageDown,
        "space" => KeyCode::Char(' '),
        "backspace" => KeyCode::Backspace,
        "delete" | "del" => KeyCode::Delete,
        f if f.len() >= 2 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
            KeyCode::F(f[1..].parse().ok()?)
        }
        _ => {
            let mut ch = rest.chars();
            let c = ch.next()?;
            if ch.next().is_some() {
                return None;
            }
            if mods.contains(KeyModifiers::CONTROL) {
                KeyCode::Char(c.to_ascii_lowercase())
            } else {
                KeyCode::Char(c)
            }
        }
    };
    Some(KeyEvent::new(code, mods))
}

/// Normalise a key event for lookup: shift is implied by the character itself.
fn norm(k: KeyEvent) -> (KeyCode, KeyModifiers) {
    let mut m = k.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT);
    let code = match k.code {
        KeyCode::Char(c) if m.contains(KeyModifiers::CONTROL) => {
            KeyCode::Char(c.to_ascii_lowercase())
        }
        KeyCode::BackTab => {
            m = KeyModifiers::NONE;
            KeyCode::BackTab
        }
        c => c,
    };
    (code, m)
}

#[derive(Debug, Clone)]
pub struct KeyMap {
    map: Vec<((KeyCode, KeyModifiers), Cmd)>,
    labels: BTreeMap<Cmd, Vec<String>>,
}

impl Default for KeyMap {
    fn default() -> Self {
        KeyMap::new(&BTreeMap::new()).0
    }
}

impl KeyMap {
    /// Defaults with the config's overrides; the second value lists problems (unknown command
    /// or key) for the status line.
    pub fn new(overrides: &BTreeMap<String, Vec<String>>) -> (KeyMap, Vec<String>) {
        let mut problems = Vec::new();
        for name in overrides.keys() {
            if !COMMANDS.iter().any(|c| c.name == name) {
                problems.push(format!("keys.{name}: no such command"));
            }
        }
        let mut map: Vec<((KeyCode, KeyModifiers), Cmd)> = Vec::new();
        let mut labels = BTreeMap::new();
        // Defaults first, then overrides: an override takes its keys away from any default.
        for pass in [false, true] {
            for info in COMMANDS {
                let overridden = overrides.get(info.name);
                if overridden.is_some() != pass {
                    continue;
                }
                let keys: Vec<String> = match overridden {
                    Some(v) => v.clone(),
                    None => info.keys.iter().map(ToString::to_string).collect(),
                };
                let mut ok = Vec::new();
                for k in keys {
                    match parse_key(&k) {
                        Some(ev) => {
                            let n = norm(ev);
                            if pass {
                                map.retain(|(key, _)| *key != n);
                            }
                            map.push((n, info.cmd));
                            ok.push(k);
                        }
                        None => problems.push(format!("keys.{}: cannot read key {k:?}", info.name)),
                    }
                }
                labels.insert(info.cmd, ok);
            }
        }
        // Labels of defaults whose key an override took.
        for (cmd, ks) in &mut labels {
            ks.retain(|k| {
                parse_key(k).is_some_and(|ev| {
                    let n = norm(ev);
                    map.iter().any(|(key, c)| *key == n && c == cmd)
                })
            });
        }
        (KeyMap { map, labels }, problems)
    }

    pub fn lookup(&self, k: KeyEvent) -> Option<Cmd> {
        let n = norm(k);
        // Later entries are overrides; search from the end.
        self.map
            .iter()
            .rev()
            .find(|(key, _)| *key == n)
            .map(|(_, c)| *c)
    }

    /// The keys bound to `cmd`, as written ("j", "down").
    pub fn keys(&self, cmd: Cmd) -> &[String] {
        self.labels.get(&cmd).map_or(&[], Vec::as_slice)
    }

    /// First key of `cmd`, for hints.
    pub fn hint(&self, cmd: Cmd) -> &str {
        self.keys(cmd).first().map_or("?", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys() {
        assert_eq!(
            parse_key("ctrl-d"),
            Some(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL))
        );
        assert_eq!(
            parse_key("G"),
            Some(KeyEvent::new(KeyCode::Char('G'), KeyModifiers::NONE))
        );
        assert_eq!(parse_key("pgdn").map(|k| k.code), Some(KeyCode::PageDown));
        assert_eq!(parse_key("f5").map(|k| k.code), Some(KeyCode::F(5)));
        assert_eq!(parse_key("nope"), None);
    }

    #[test]
    fn overrides_replace_keys() {
        let mut o = BTreeMap::new();
        o.insert("purge".to_string(), vec!["ctrl-p".to_string()]);
        o.insert("bogus".to_string(), vec!["z".to_string()]);
        let (km, problems) = KeyMap::new(&o);
        assert_eq!(problems.len(), 1);
        assert_eq!(
            km.lookup(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL)),
            Some(Cmd::Purge)
        );
        assert_eq!(
            km.lookup(KeyEvent::new(KeyCode::Char('P'), KeyModifiers::SHIFT)),
            None
        );
        assert_eq!(
            km.lookup(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE)),
            Some(Cmd::Down)
        );
    }
}
