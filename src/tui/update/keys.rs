//! Keys outside dialogs and the input line: the keymap turns them into commands, and each
//! command does what fits the current view.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::navigate::move_sel;
use super::state::*;
use super::{dialogs, input, lists, messages, navigate, push, reasons, selection, status, Effect};
use crate::tui::keymap::{Cmd, COMMANDS};
use qdeck_engine::gate::Mutation;

pub(super) fn key(st: &mut Model, k: KeyEvent, fx: &mut Vec<Effect>) {
    if st.dialog.is_some() {
        dialogs::dialog_key(st, k, fx);
        return;
    }
    if st.input.is_some() {
        input::input_key(st, k, fx);
        return;
    }
    if st.view() == View::Help {
        help_key(st, k);
        return;
    }
    let Some(cmd) = st.keymap.lookup(k) else {
        // `f` on the fleet: what is on fire across its profiles (unbound elsewhere).
        if st.view() == View::Fleet && k.code == KeyCode::Char('f') && k.modifiers.is_empty() {
            push(st, View::Fire);
            return;
        }
        // Digits sort the list on screen by the column whose header shows that digit.
        if let KeyCode::Char(c @ '0'..='9') = k.code {
            if k.modifiers.difference(KeyModifiers::SHIFT).is_empty() {
                let n = c.to_digit(10).unwrap_or(0) as usize;
                lists::sort_by_column(st, if n == 0 { 9 } else { n - 1 });
            }
        }
        return;
    };
    run_cmd(st, cmd, fx);
}

/// Help scrolls with the movement keys and closes with ?, Esc or q; other keys do nothing
/// (a stray key must not close what the user is reading).
fn help_key(st: &mut Model, k: KeyEvent) {
    let (page, total) = crate::tui::views::help::geometry(st, st.size);
    let max = total.saturating_sub(page);
    let cmd = st.keymap.lookup(k);
    let s = &mut st.help.scroll;
    match cmd {
        Some(Cmd::Help | Cmd::Back | Cmd::Quit)
            if !matches!(k.code, KeyCode::Char('h') | KeyCode::Left) =>
        {
            st.stack.pop();
            st.help.scroll = 0;
        }
        Some(Cmd::Down) => *s = (*s + 1).min(max),
        Some(Cmd::Up) => *s = s.saturating_sub(1),
        Some(Cmd::PageDown) => *s = (*s + page).min(max),
        Some(Cmd::PageUp) => *s = s.saturating_sub(page),
        Some(Cmd::Top) => *s = 0,
        Some(Cmd::Bottom) => *s = max,
        _ => {}
    }
}

/// What the gate records when the console refuses `cmd` (keys that only move around a view
/// the tier cannot open have nothing to record).
fn mutation_of(cmd: Cmd) -> Option<Mutation> {
    match cmd {
        Cmd::Browse | Cmd::Dlq | Cmd::Scheduled | Cmd::Reasons => Some(Mutation::Browse),
        Cmd::Redrive => Some(Mutation::Redrive),
        Cmd::Edit => Some(Mutation::Edit),
        Cmd::Purge => Some(Mutation::Purge),
        Cmd::Delete => Some(Mutation::Delete),
        _ => None,
    }
}

pub(super) fn run_cmd(st: &mut Model, cmd: Cmd, fx: &mut Vec<Effect>) {
    if let Some(info) = COMMANDS.iter().find(|c| c.cmd == cmd) {
        if !st.allows(info.needs) {
            // Not advertised, and refused here before any dialog or view opens.
            super::refuse(st, info.name, info.needs, mutation_of(cmd), fx);
            return;
        }
    }
    // The fleet's rows are profiles: a key about one queue has no queue to act on there (the
    // queue table's cursor, under it, belongs to another view).
    if st.view() == View::Fleet && queue_scoped(cmd) {
        let msg = "choose a queue first: Enter opens this profile's queues (f: what is on fire)";
        status(st, Level::Info, msg);
        return;
    }
    // The on-fire rows may belong to other profiles: Enter opens the row's queue in its own
    // profile first, so a key never acts on the queue table's row under the view.
    if st.view() == View::Fire && queue_scoped(cmd) {
        let msg = "open the queue first: Enter shows it (in its profile), then act on it";
        status(st, Level::Info, msg);
        return;
    }
    let page = st.page_rows() as isize;
    match cmd {
        Cmd::Quit => dialogs::quit(st),
        Cmd::Help => push(st, View::Help),
        Cmd::Filter => input::open_filter(st),
        Cmd::Command => input::open_command(st),
        Cmd::Up => move_sel(st, -1),
        Cmd::Down => move_sel(st, 1),
        Cmd::PageUp => move_sel(st, -page),
        Cmd::PageDown => move_sel(st, page),
        Cmd::Top => move_sel(st, isize::MIN / 2),
        Cmd::Bottom => move_sel(st, isize::MAX / 2),
        Cmd::Enter => navigate::enter(st, fx),
        Cmd::Back => navigate::back(st, fx),
        Cmd::SortNext => lists::sort_cmd(st, true),
        Cmd::SortReverse => lists::sort_cmd(st, false),
        Cmd::Wide => toggle_wide(st),
        Cmd::MarkRange => selection::mark_range(st),
        Cmd::Mark => selection::mark(st),
        Cmd::SelectAll => selection::select_all(st),
        Cmd::Browse => {
            if let Some(q) = st.context_queue().cloned() {
                messages::browse(st, q, fx);
            }
        }
        Cmd::Dlq => messages::browse_dlq(st, fx),
        Cmd::Scheduled => messages::browse_scheduled(st, fx),
        Cmd::Workers => open_workers(st, fx),
        Cmd::Refresh => refresh(st, fx),
        Cmd::Copy => {
            if let Some(m) = messages::current_msg(st) {
                let text = String::from_utf8_lossy(&m.body).into_owned();
                fx.push(Effect::Copy(text));
            }
        }
        Cmd::Save => messages::save(st, fx),
        Cmd::Edit => messages::edit(st, fx),
        Cmd::Reasons => reasons::open(st, fx),
        Cmd::NextPage => messages::next_page(st, fx),
        Cmd::Window => {
            st.detail.chart_window_secs = match st.detail.chart_window_secs {
                60 => 300,
                300 => 600,
                _ => 60,
            };
        }
        Cmd::Redrive => dialogs::open_redrive(st, None, fx),
        Cmd::Purge => dialogs::open_purge(st, fx),
        Cmd::Delete if st.msgs.scheduled && in_browser(st) => messages::plan_cancel(st, fx),
        Cmd::Delete => messages::plan_delete(st, fx),
        Cmd::Cancel => {
            if let Some(op) = &mut st.op {
                op.cancelling = true;
                fx.push(Effect::CancelOp);
            } else if st.status.as_ref().is_some_and(|s| s.sticky) {
                // With nothing running, the same key dismisses the last operation's result.
                st.status = None;
            }
        }
        Cmd::AddWorker | Cmd::RemoveWorker => demo_worker(st, cmd == Cmd::AddWorker, fx),
    }
}

/// Commands that act on the queue in context.
fn queue_scoped(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Workers
            | Cmd::Browse
            | Cmd::Dlq
            | Cmd::Scheduled
            | Cmd::Reasons
            | Cmd::Redrive
            | Cmd::Purge
    )
}

fn in_browser(st: &Model) -> bool {
    matches!(st.view(), View::Messages | View::Message)
}

fn toggle_wide(st: &mut Model) {
    st.wide = !st.wide;
    let msg = if st.wide {
        "wide columns on (Ctrl-W: off)"
    } else {
        "wide columns off"
    };
    status(st, Level::Info, msg);
}

/// The workers view of the queue in context, loading its consumers.
fn open_workers(st: &mut Model, fx: &mut Vec<Effect>) {
    if let Some(q) = st.context_queue().cloned() {
        st.focus = Some(q.clone());
        st.workers = WorkersState {
            queue: Some(q.clone()),
            loading: true,
            ..Default::default()
        };
        push(st, View::Workers);
        fx.push(Effect::Consumers(q));
    }
}

/// Poll now, and reload what the view on screen shows.
fn refresh(st: &mut Model, fx: &mut Vec<Effect>) {
    fx.push(Effect::Refresh);
    match st.view() {
        View::Messages => {
            if let Some(q) = st.msgs.queue.clone() {
                messages::reload(st, q, fx);
            }
        }
        View::Workers => {
            if let Some(q) = st.workers.queue.clone() {
                st.workers.loading = true;
                fx.push(Effect::Consumers(q));
            }
        }
        View::Reasons => reasons::rescan(st, fx),
        _ => {}
    }
}

/// `+`/`-` add or remove one of the demo's workers.
fn demo_worker(st: &mut Model, add: bool, fx: &mut Vec<Effect>) {
    if st.demo_workers.is_some() {
        fx.push(if add {
            Effect::AddWorker
        } else {
            Effect::RemoveWorker
        });
    } else {
        // Said, not silently ignored: the demo only starts on an empty, unconfigured
        // local broker.
        status(
            st,
            Level::Warn,
            "+/- drive the demo's workers, and no demo runs here: start one with `qdeck demo`",
        );
    }
}
