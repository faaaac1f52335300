//! The input line: filter and search apply as the user types; a `:` command runs on Enter.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::state::*;
use super::{commands, messages, prompt, queues, Effect};

/// `/` opens the filter (the search, in the browser) of the list on screen, with its text.
pub(super) fn open_filter(st: &mut Model) {
    let (kind, text) = match st.view() {
        View::Messages => (InputKind::Search, st.msgs.search.text.clone()),
        View::Workers => (InputKind::WorkerFilter, st.workers.filter.text.clone()),
        View::Queues => (InputKind::Filter, st.queues.filter.text.clone()),
        View::Fire => match &st.fleet {
            Some(f) => (InputKind::FireFilter, f.fire_filter.text.clone()),
            None => return,
        },
        // Views without a list of their own have nothing to filter.
        _ => return,
    };
    st.input = Some(Input { kind, text });
}

pub(super) fn open_command(st: &mut Model) {
    st.prompt.browsing = None;
    st.prompt.completion = None;
    st.input = Some(Input {
        kind: InputKind::Command,
        text: String::new(),
    });
}

pub(super) fn input_key(st: &mut Model, k: KeyEvent, fx: &mut Vec<Effect>) {
    let Some(inp) = st.input.as_mut() else {
        return;
    };
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if inp.kind == InputKind::Command {
        match k.code {
            KeyCode::Tab => return prompt::complete(st, true),
            KeyCode::BackTab => return prompt::complete(st, false),
            KeyCode::Up => return prompt::browse_history(st, true),
            KeyCode::Down => return prompt::browse_history(st, false),
            // Any other key keeps the completed text and ends the cycle.
            _ => st.prompt.completion = None,
        }
    }
    match k.code {
        KeyCode::Esc => {
            let kind = inp.kind;
            st.input = None;
            // Esc in a filter clears it.
            match kind {
                InputKind::Filter => {
                    st.queues.filter = Filter::default();
                    queues::rebuild_rows(st);
                }
                InputKind::Search => {
                    st.msgs.search = Filter::default();
                    messages::refilter_msgs(st);
                }
                InputKind::WorkerFilter => {
                    st.workers.filter = Filter::default();
                    super::lists::rebuild_workers(st);
                }
                InputKind::FireFilter => set_fire_filter(st, ""),
                InputKind::Command => {}
            }
        }
        KeyCode::Char('c') if ctrl => st.input = None,
        KeyCode::Char('u') if ctrl => {
            inp.text.clear();
            live_filter(st);
        }
        KeyCode::Backspace => {
            inp.text.pop();
            live_filter(st);
        }
        KeyCode::Enter => {
            let Some(inp) = st.input.take() else {
                return;
            };
            if inp.kind == InputKind::Command {
                prompt::remember(st, inp.text.trim(), fx);
                commands::command(st, inp.text.trim(), fx);
            }
        }
        KeyCode::Char(c) if !ctrl => {
            inp.text.push(c);
            live_filter(st);
        }
        _ => {}
    }
}

/// Filters apply as you type.
fn live_filter(st: &mut Model) {
    let Some(inp) = &st.input else {
        return;
    };
    match inp.kind {
        InputKind::Filter => {
            st.queues.filter = Filter::new(&inp.text);
            queues::rebuild_rows(st);
        }
        InputKind::Search => {
            st.msgs.search = messages::search_filter(&inp.text);
            messages::refilter_msgs(st);
        }
        InputKind::WorkerFilter => {
            st.workers.filter = Filter::new(&inp.text);
            super::lists::rebuild_workers(st);
        }
        InputKind::FireFilter => {
            let text = inp.text.clone();
            set_fire_filter(st, &text);
        }
        InputKind::Command => {}
    }
}

/// The on-fire rows are built per frame, so a new filter only resets the cursor.
pub(super) fn set_fire_filter(st: &mut Model, text: &str) {
    if let Some(f) = &mut st.fleet {
        f.fire_filter = Filter::new(text);
        f.fire_cursor = Cursor::default();
        f.fire_sel = None;
    }
}
