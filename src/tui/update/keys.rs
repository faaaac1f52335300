//! Keys outside dialogs and the input line: the keymap turns them into commands, and each
//! command does what fits the current view.

use crossterm::event::KeyEvent;

use super::{dialogs, input, messages, push, queues, set_status, Effect};
use crate::tui::keymap::{Cmd, COMMANDS};
use crate::tui::state::*;

pub(super) fn key(st: &mut State, k: KeyEvent, fx: &mut Vec<Effect>) {
    if st.dialog.is_some() {
        dialogs::dialog_key(st, k, fx);
        return;
    }
    if st.input.is_some() {
        input::input_key(st, k, fx);
        return;
    }
    if st.view() == View::Help {
        st.stack.pop();
        return;
    }
    let Some(cmd) = st.keymap.lookup(k) else {
        return;
    };
    run_cmd(st, cmd, fx);
}

fn list_len(st: &State) -> usize {
    match st.view() {
        View::Queues => st.rows.len(),
        View::Messages => st.msgs.rows.len(),
        View::Workers => st.workers.list.len(),
        View::Message => st.body.lines.len(),
        _ => 0,
    }
}

fn move_sel(st: &mut State, delta: isize) {
    let len = list_len(st);
    let page = st.page_rows();
    match st.view() {
        View::Queues => st.cursor.move_by(delta, len, page),
        View::Messages => st.msgs.cursor.move_by(delta, len, page),
        View::Workers => st.workers.cursor.move_by(delta, len, page),
        View::Message => {
            let max = len.saturating_sub(page) as isize;
            st.body.scroll = (st.body.scroll as isize + delta).clamp(0, max.max(0)) as usize;
        }
        _ => {}
    }
}

pub(super) fn run_cmd(st: &mut State, cmd: Cmd, fx: &mut Vec<Effect>) {
    let info = COMMANDS.iter().find(|c| c.cmd == cmd);
    if info.is_some_and(|i| i.mutating) && st.read_only {
        // Not shown and not reachable: the gate would refuse anyway.
        return;
    }
    let page = st.page_rows() as isize;
    match cmd {
        Cmd::Quit => st.quit = true,
        Cmd::Help => push(st, View::Help),
        Cmd::Filter => {
            let (kind, text) = match st.view() {
                View::Messages => (InputKind::Search, st.msgs.search.text.clone()),
                _ => (InputKind::Filter, st.filter.text.clone()),
            };
            st.input = Some(Input { kind, text });
        }
        Cmd::Command => {
            st.input = Some(Input {
                kind: InputKind::Command,
                text: String::new(),
            })
        }
        Cmd::Up => move_sel(st, -1),
        Cmd::Down => move_sel(st, 1),
        Cmd::PageUp => move_sel(st, -page),
        Cmd::PageDown => move_sel(st, page),
        Cmd::Top => move_sel(st, isize::MIN / 2),
        Cmd::Bottom => move_sel(st, isize::MAX / 2),
        Cmd::Enter => match st.view() {
            View::Queues => {
                if let Some(q) = st.selected_queue().cloned() {
                    st.focus = Some(q);
                    push(st, View::Detail);
                }
            }
            View::Detail => {
                if let Some(q) = st.focus.clone() {
                    messages::browse(st, q, fx);
                }
            }
            View::Messages => messages::open_message(st),
            _ => {}
        },
        Cmd::Back => {
            if st.view() == View::Queues {
                if st.filter.is_active() {
                    st.filter = Filter::default();
                    queues::rebuild_rows(st);
                }
            } else {
                st.stack.pop();
            }
        }
        Cmd::SortNext | Cmd::SortReverse => {
            if st.view() == View::Queues {
                if cmd == Cmd::SortNext {
                    st.sort = st.sort.next();
                    st.sort_desc = st.sort != SortCol::Name;
                } else {
                    st.sort_desc = !st.sort_desc;
                }
                queues::rebuild_rows(st);
            }
        }
        Cmd::Browse => {
            if let Some(q) = st.context_queue().cloned() {
                messages::browse(st, q, fx);
            }
        }
        Cmd::Dlq => {
            let Some(q) = st.context_queue().cloned() else {
                return;
            };
            let info = st.store.get(&q).map(|e| e.info.clone());
            match info {
                Some(i) if i.is_dlq => messages::browse(st, q, fx),
                Some(i) => match i.dlq {
                    Some(d) => messages::browse(st, d, fx),
                    None => set_status(st, Level::Warn, format!("{q} has no dead-letter queue")),
                },
                None => {}
            }
        }
        Cmd::Workers => {
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
        Cmd::Refresh => {
            fx.push(Effect::Refresh);
            match st.view() {
                View::Messages => {
                    if let Some(q) = st.msgs.queue.clone() {
                        st.msgs.loading = true;
                        fx.push(Effect::Browse {
                            queue: q,
                            cursor: None,
                            force: st.msgs.forced,
                        });
                    }
                }
                View::Workers => {
                    if let Some(q) = st.workers.queue.clone() {
                        st.workers.loading = true;
                        fx.push(Effect::Consumers(q));
                    }
                }
                _ => {}
            }
        }
        Cmd::Mark => {
            if st.view() == View::Messages {
                if let Some(m) = messages::current_msg(st) {
                    let id = m.id.clone();
                    if !st.msgs.marked.remove(&id) {
                        st.msgs.marked.insert(id);
                    }
                    move_sel(st, 1);
                }
            }
        }
        Cmd::Copy => {
            if let Some(m) = messages::current_msg(st) {
                let text = String::from_utf8_lossy(&m.body).into_owned();
                fx.push(Effect::Copy(text));
            }
        }
        Cmd::Save => messages::save(st, fx),
        Cmd::NextPage => {
            if st.view() == View::Messages {
                if let (Some(q), Some(c)) = (st.msgs.queue.clone(), st.msgs.next.clone()) {
                    st.msgs.loading = true;
                    fx.push(Effect::Browse {
                        queue: q,
                        cursor: Some(c),
                        force: st.msgs.forced,
                    });
                }
            }
        }
        Cmd::Window => {
            st.chart_window_secs = match st.chart_window_secs {
                60 => 300,
                300 => 600,
                _ => 60,
            };
        }
        Cmd::Redrive => dialogs::open_redrive(st, None),
        Cmd::Purge => dialogs::open_purge(st),
        Cmd::Cancel => {
            if let Some(op) = &mut st.op {
                op.cancelling = true;
                fx.push(Effect::CancelOp);
            }
        }
        Cmd::AddWorker => {
            if st.demo_workers.is_some() {
                fx.push(Effect::AddWorker);
            }
        }
        Cmd::RemoveWorker => {
            if st.demo_workers.is_some() {
                fx.push(Effect::RemoveWorker);
            }
        }
    }
}
