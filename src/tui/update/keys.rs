//! Keys outside dialogs and the input line: the keymap turns them into commands, and each
//! command does what fits the current view.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{dialogs, input, lists, messages, push, queues, reasons, set_status, Effect};
use crate::engine::gate::Mutation;
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
fn help_key(st: &mut State, k: KeyEvent) {
    let (page, total) = crate::tui::views::help::geometry(st, st.size);
    let max = total.saturating_sub(page);
    let cmd = st.keymap.lookup(k);
    let s = &mut st.help_scroll;
    match cmd {
        Some(Cmd::Help) | Some(Cmd::Back) | Some(Cmd::Quit)
            if !matches!(k.code, KeyCode::Char('h') | KeyCode::Left) =>
        {
            st.stack.pop();
            st.help_scroll = 0;
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

fn list_len(st: &State) -> usize {
    match st.view() {
        View::Queues => st.rows.len(),
        View::Fleet => st.fleet.as_ref().map_or(0, |f| f.rows.len()),
        View::Fire => st.fleet.as_ref().map_or(0, |f| f.fire_rows().len()),
        View::Messages => st.msgs.rows.len(),
        View::Workers => st.workers.rows.len(),
        View::Reasons => st.reasons.groups.len(),
        View::Message => st.body.lines.len(),
        _ => 0,
    }
}

/// What the gate records when the console refuses `cmd` (keys that only move around a view
/// the tier cannot open have nothing to record).
fn mutation_of(cmd: Cmd) -> Option<Mutation> {
    match cmd {
        Cmd::Browse | Cmd::Dlq | Cmd::Reasons => Some(Mutation::Browse),
        Cmd::Redrive => Some(Mutation::Redrive),
        Cmd::Edit => Some(Mutation::Edit),
        Cmd::Purge => Some(Mutation::Purge),
        Cmd::Delete => Some(Mutation::Delete),
        _ => None,
    }
}

fn move_sel(st: &mut State, delta: isize) {
    let len = list_len(st);
    let page = st.page_rows();
    match st.view() {
        View::Queues => st.cursor.move_by(delta, len, page),
        View::Fleet => {
            if let Some(f) = &mut st.fleet {
                f.cursor.move_by(delta, len, page);
            }
        }
        View::Fire => {
            if let Some(f) = &mut st.fleet {
                f.fire_cursor.move_by(delta, len, page);
            }
        }
        View::Messages => st.msgs.cursor.move_by(delta, len, page),
        View::Workers => st.workers.cursor.move_by(delta, len, page),
        View::Reasons => st.reasons.cursor.move_by(delta, len, page),
        View::Detail => {
            st.detail_scroll = (st.detail_scroll as isize + delta).clamp(0, 200) as usize;
        }
        View::Message => {
            let max = len.saturating_sub(page) as isize;
            st.body.scroll = (st.body.scroll as isize + delta).clamp(0, max.max(0)) as usize;
        }
        _ => {}
    }
}

pub(super) fn run_cmd(st: &mut State, cmd: Cmd, fx: &mut Vec<Effect>) {
    if let Some(info) = COMMANDS.iter().find(|c| c.cmd == cmd) {
        if !st.allows(info.needs) {
            // Not advertised, and refused here before any dialog or view opens.
            super::refuse(st, info.name, info.needs, mutation_of(cmd), fx);
            return;
        }
    }
    let page = st.page_rows() as isize;
    match cmd {
        Cmd::Quit => dialogs::quit(st),
        Cmd::Help => push(st, View::Help),
        Cmd::Filter => {
            let (kind, text) = match st.view() {
                View::Messages => (InputKind::Search, st.msgs.search.text.clone()),
                View::Workers => (InputKind::WorkerFilter, st.workers.filter.text.clone()),
                View::Queues => (InputKind::Filter, st.filter.text.clone()),
                View::Fire => match &st.fleet {
                    Some(f) => (InputKind::FireFilter, f.fire_filter.text.clone()),
                    None => return,
                },
                // Views without a list of their own have nothing to filter.
                _ => return,
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
                    st.detail_scroll = 0;
                    push(st, View::Detail);
                }
            }
            View::Detail => {
                if let Some(q) = st.focus.clone() {
                    messages::browse(st, q, fx);
                }
            }
            View::Messages => messages::open_message(st),
            View::Reasons => reasons::drill_in(st, fx),
            View::Fleet => super::commands::open_fleet_row(st, fx),
            View::Fire => super::commands::open_fire_row(st, fx),
            _ => {}
        },
        Cmd::Back => {
            // k9s: Esc first clears the view's filter (and a range being selected), then
            // leaves the view.
            match st.view() {
                View::Queues if st.filter.is_active() => {
                    st.filter = Filter::default();
                    queues::rebuild_rows(st);
                }
                View::Messages if st.msgs.range_from.is_some() => st.msgs.range_from = None,
                View::Messages if st.msgs.search.is_active() => {
                    st.msgs.search = Filter::default();
                    messages::refilter_msgs(st);
                }
                View::Fire if st.fleet.as_ref().is_some_and(|f| f.fire_filter.is_active()) => {
                    super::input::set_fire_filter(st, "");
                }
                View::Workers if st.workers.filter.is_active() => {
                    st.workers.filter = Filter::default();
                    lists::rebuild_workers(st);
                }
                // The fleet view sits under the queue table when it is open.
                View::Queues if st.stack.len() > 1 => {
                    st.stack.pop();
                }
                View::Queues | View::Fleet => {}
                View::Reasons => reasons::back(st, fx),
                _ => {
                    st.stack.pop();
                }
            }
        }
        Cmd::SortNext | Cmd::SortReverse => match st.view() {
            View::Queues => {
                if cmd == Cmd::SortNext {
                    st.sort = st.sort.next();
                    st.sort_desc = st.sort != SortCol::Name;
                } else {
                    st.sort_desc = !st.sort_desc;
                }
                queues::rebuild_rows(st);
            }
            View::Messages => {
                if cmd == Cmd::SortNext {
                    let c = lists::sort_next(st.msgs.sort, MSG_SORT.len()).unwrap_or(0);
                    st.msgs.sort = None;
                    lists::sort_by_column(st, c);
                } else {
                    st.msgs.sort_desc = !st.msgs.sort_desc;
                    st.msgs.sort.get_or_insert(0);
                    messages::refilter_msgs(st);
                }
            }
            View::Workers => {
                if cmd == Cmd::SortNext {
                    let c = lists::sort_next(st.workers.sort, WORKER_SORT.len()).unwrap_or(0);
                    st.workers.sort = None;
                    lists::sort_by_column(st, c);
                } else {
                    st.workers.sort_desc = !st.workers.sort_desc;
                    st.workers.sort.get_or_insert(0);
                    lists::rebuild_workers(st);
                }
            }
            _ => {}
        },
        Cmd::Wide => {
            st.wide = !st.wide;
            let msg = if st.wide {
                "wide columns on (Ctrl-W: off)"
            } else {
                "wide columns off"
            };
            set_status(st, Level::Info, msg);
        }
        Cmd::MarkRange => {
            if st.view() == View::Messages {
                let here = st.msgs.cursor.sel;
                if st.msgs.rows.is_empty() {
                    return;
                }
                match st.msgs.range_from.take() {
                    None => {
                        st.msgs.range_from = Some(here);
                        set_status(st, Level::Info, "range: move, then v to select (Esc drops)");
                    }
                    Some(from) => {
                        let (a, b) = (from.min(here), from.max(here));
                        let ids: Vec<String> = st.msgs.rows
                            [a.min(st.msgs.rows.len() - 1)..=b.min(st.msgs.rows.len() - 1)]
                            .iter()
                            .filter_map(|&i| st.msgs.messages.get(i).map(|m| m.id.clone()))
                            .collect();
                        let n = ids.len();
                        st.msgs.marked.extend(ids);
                        set_status(st, Level::Info, format!("{n} messages selected"));
                    }
                }
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
                View::Reasons => reasons::rescan(st, fx),
                _ => {}
            }
        }
        Cmd::Mark => {
            if st.view() == View::Messages {
                if let Some(m) = messages::current_msg(st) {
                    let id = m.id.clone();
                    let verb = if st.msgs.marked.remove(&id) {
                        "unselected"
                    } else {
                        st.msgs.marked.insert(id.clone());
                        "selected"
                    };
                    let n = st.msgs.marked.len();
                    set_status(
                        st,
                        Level::Info,
                        format!("{verb} {id} ({n} selected) · moved to the next row"),
                    );
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
        Cmd::Edit => messages::edit(st, fx),
        Cmd::Reasons => reasons::open(st, fx),
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
        Cmd::Redrive => dialogs::open_redrive(st, None, fx),
        Cmd::Purge => dialogs::open_purge(st),
        Cmd::Delete => messages::plan_delete(st, fx),
        Cmd::SelectAll => messages::select_all(st),
        Cmd::Cancel => {
            if let Some(op) = &mut st.op {
                op.cancelling = true;
                fx.push(Effect::CancelOp);
            }
        }
        Cmd::AddWorker | Cmd::RemoveWorker => {
            if st.demo_workers.is_some() {
                fx.push(if cmd == Cmd::AddWorker {
                    Effect::AddWorker
                } else {
                    Effect::RemoveWorker
                });
            } else {
                // Said, not silently ignored: the demo only starts on an empty, unconfigured
                // local broker.
                set_status(
                    st,
                    Level::Warn,
                    "+/- drive the demo's workers, and no demo runs here: start one with `qdeck demo`",
                );
            }
        }
    }
}
