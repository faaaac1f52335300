//! The pure update: `update(&mut State, Action) -> Vec<Effect>`. No I/O here; effects are
//! carried out by the event loop (or inspected by tests).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::keymap::{Cmd, COMMANDS};
use super::state::*;
use super::theme::Theme;
use crate::backend::ProgressState;
use crate::domain::{
    BrowseEffect, Consumer, Message, Page, QueueId, RedriveRequest, RedriveTarget,
};
use crate::engine::derive::Trend;
use crate::engine::poller::PollEvent;
use crate::sanitize;

#[derive(Debug, Clone)]
pub enum Action {
    Key(KeyEvent),
    Resize(u16, u16),
    /// 1 s clock (unix ms).
    Tick(i64),
    Poll(PollEvent),
    Page {
        queue: QueueId,
        append: bool,
        result: Result<Page, String>,
    },
    Consumers {
        queue: QueueId,
        result: Result<Vec<Consumer>, String>,
    },
    OpProgress(ProgressState),
    /// Summary line of a finished operation.
    OpDone(Result<String, String>),
    DemoWorkers(usize),
    /// Result of a save or copy.
    Notice(Result<String, String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Browse {
        queue: QueueId,
        cursor: Option<String>,
        force: bool,
    },
    Consumers(QueueId),
    Redrive(RedriveRequest),
    Purge(QueueId),
    CancelOp,
    /// Queues on screen: polled first and often.
    Visible(Vec<QueueId>),
    Refresh,
    /// Copy text to the clipboard (OSC 52).
    Copy(String),
    /// Save messages as JSON lines.
    Save {
        queue: QueueId,
        messages: Vec<Message>,
    },
    AddWorker,
    RemoveWorker,
    /// Open another profile of the same configuration.
    SwitchProfile(String),
}

pub fn update(st: &mut State, action: Action) -> Vec<Effect> {
    let mut fx = Vec::new();
    match action {
        Action::Key(k) => {
            if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat {
                key(st, k, &mut fx);
            }
            st.dirty = true;
        }
        Action::Resize(w, h) => {
            st.size = (w, h);
            st.dirty = true;
        }
        Action::Tick(now) => {
            st.now_ms = now;
            // Re-sorting runs over every queue: on user actions and this tick, not per batch.
            if st.rows_dirty {
                rebuild_rows(st);
            }
            // The workers view follows the poll rhythm; message pages do not (browsing may
            // have side effects on some brokers).
            let w = &st.workers;
            if st.view() == View::Workers
                && !w.loading
                && w.fetched_ms
                    .is_none_or(|t| (now - t) as f64 >= st.refresh_secs * 1000.0)
            {
                if let Some(q) = w.queue.clone() {
                    st.workers.loading = true;
                    fx.push(Effect::Consumers(q));
                }
            }
            if st
                .status
                .as_ref()
                .is_some_and(|s| now - s.at_ms > 10_000 && s.level == Level::Info)
            {
                st.status = None;
            }
            // Clocks ("updated 3 s ago") move every second.
            st.dirty = true;
        }
        Action::Poll(ev) => poll(st, ev),
        Action::Page {
            queue,
            append,
            result,
        } => {
            if st.msgs.queue.as_ref() == Some(&queue) {
                st.msgs.loading = false;
                match result {
                    Ok(p) => {
                        if !append {
                            st.msgs.messages.clear();
                            st.msgs.cursor = Cursor::default();
                        }
                        st.msgs.messages.extend(p.messages);
                        st.msgs.next = p.next;
                        st.msgs.effect_note = p.effect_note;
                        st.msgs.error = None;
                        let ids: std::collections::BTreeSet<&str> =
                            st.msgs.messages.iter().map(|m| m.id.as_str()).collect();
                        st.msgs.marked.retain(|m| ids.contains(m.as_str()));
                    }
                    Err(e) => st.msgs.error = Some(e),
                }
                refilter_msgs(st);
                st.dirty = true;
            }
        }
        Action::Consumers { queue, result } => {
            if st.workers.queue.as_ref() == Some(&queue) {
                st.workers.loading = false;
                st.workers.fetched_ms = Some(st.now_ms);
                match result {
                    Ok(l) => {
                        st.workers.list = l;
                        st.workers.error = None;
                    }
                    Err(e) => st.workers.error = Some(e),
                }
                st.dirty = true;
            }
        }
        Action::OpProgress(p) => {
            if let Some(op) = &mut st.op {
                op.progress = p;
                st.dirty = true;
            }
        }
        Action::OpDone(r) => {
            st.op = None;
            match r {
                Ok(t) => set_status(st, Level::Info, t),
                Err(e) => set_status(st, Level::Error, e),
            }
            fx.push(Effect::Refresh);
            if matches!(st.view(), View::Messages | View::Message) {
                if let Some(q) = st.msgs.queue.clone() {
                    st.msgs.loading = true;
                    fx.push(Effect::Browse {
                        queue: q,
                        cursor: None,
                        force: st.msgs.forced,
                    });
                }
            }
        }
        Action::DemoWorkers(n) => {
            st.demo_workers = Some(n);
            st.dirty = true;
        }
        Action::Notice(r) => match r {
            Ok(t) => set_status(st, Level::Info, t),
            Err(e) => set_status(st, Level::Error, e),
        },
    }
    fx.extend(visible(st));
    fx
}

/// Re-filter and re-sort the queue rows, keeping the selected queue selected.
pub fn rebuild_rows(st: &mut State) {
    let keep = st.selected_queue().cloned();
    let entries = st.store.entries();
    let mut rows: Vec<usize> = (0..entries.len())
        .filter(|&i| st.filter.matches(entries[i].info.id.as_str()))
        .collect();
    let key = |i: usize| -> f64 {
        let e = &entries[i];
        let l = e.latest.as_ref();
        let f = |v: Option<u64>| v.map(|x| x as f64);
        let v = match st.sort {
            SortCol::Name => None,
            SortCol::Depth => l.and_then(|s| f(s.depth)),
            SortCol::InFlight => l.and_then(|s| f(s.in_flight)),
            SortCol::Delayed => l.and_then(|s| f(s.delayed)),
            SortCol::Age => l.and_then(|s| s.oldest_age_secs),
            SortCol::Dlq => l.and_then(|s| f(s.dlq_depth)),
            SortCol::InRate | SortCol::OutRate | SortCol::Eta => {
                let d = crate::engine::derive::derive(e, st.store.drain_target_secs);
                match st.sort {
                    SortCol::InRate => d.in_rate,
                    SortCol::OutRate => d.out_rate,
                    _ => match d.trend {
                        Trend::Growing => Some(f64::MAX),
                        _ => d.drain_secs,
                    },
                }
            }
        };
        // Unknown figures sort last either way.
        v.unwrap_or(f64::NAN)
    };
    if st.sort == SortCol::Name {
        rows.sort_by(|&a, &b| entries[a].info.id.cmp(&entries[b].info.id));
        if st.sort_desc {
            rows.reverse();
        }
    } else {
        let mut keyed: Vec<(f64, usize)> = rows.iter().map(|&i| (key(i), i)).collect();
        let desc = st.sort_desc;
        keyed.sort_by(|a, b| match (a.0.is_nan(), b.0.is_nan()) {
            (true, true) => entries[a.1].info.id.cmp(&entries[b.1].info.id),
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ => {
                let o = a.0.total_cmp(&b.0);
                let o = if desc { o.reverse() } else { o };
                o.then_with(|| entries[a.1].info.id.cmp(&entries[b.1].info.id))
            }
        });
        rows = keyed.into_iter().map(|(_, i)| i).collect();
    }
    st.rows = rows;
    st.rows_dirty = false;
    if let Some(id) = keep {
        if let Some(p) = st
            .rows
            .iter()
            .position(|&i| st.store.entries()[i].info.id == id)
        {
            st.cursor.sel = p;
        }
    }
    let page = st.page_rows();
    st.cursor.clamp(st.rows.len(), page);
    st.dirty = true;
}

fn refilter_msgs(st: &mut State) {
    let m = &mut st.msgs;
    m.rows = (0..m.messages.len())
        .filter(|&i| {
            if !m.search.is_active() {
                return true;
            }
            let msg = &m.messages[i];
            let mut hay = format!("{} ", msg.id);
            if let Some(d) = &msg.dead_letter {
                hay.push_str(d.reason.as_deref().unwrap_or(""));
                hay.push(' ');
                hay.push_str(d.description.as_deref().unwrap_or(""));
            }
            for (k, v) in &msg.headers {
                hay.push_str(&format!(" {k}={v}"));
            }
            hay.push(' ');
            hay.push_str(&String::from_utf8_lossy(
                &msg.body[..msg.body.len().min(64 * 1024)],
            ));
            m.search.matches(&hay)
        })
        .collect();
    let page = st.page_rows();
    st.msgs.cursor.clamp(st.msgs.rows.len(), page);
}

fn visible(st: &State) -> Option<Effect> {
    let mut ids: Vec<QueueId> = Vec::new();
    match st.view() {
        View::Queues | View::Help => {
            let page = st.page_rows();
            let from = st.cursor.offset.min(st.rows.len());
            let to = (from + page).min(st.rows.len());
            for &i in &st.rows[from..to] {
                if let Some(e) = st.store.entries().get(i) {
                    ids.push(e.info.id.clone());
                }
            }
        }
        _ => {
            for q in [st.focus.as_ref(), st.msgs.queue.as_ref()]
                .into_iter()
                .flatten()
            {
                if !ids.contains(q) {
                    ids.push(q.clone());
                }
                if let Some(d) = st.store.get(q).and_then(|e| e.info.dlq.clone()) {
                    if !ids.contains(&d) {
                        ids.push(d);
                    }
                }
            }
        }
    }
    Some(Effect::Visible(ids))
}

fn poll(st: &mut State, ev: PollEvent) {
    match ev {
        PollEvent::Queues(qs) => {
            st.store.set_queues(qs);
            st.listed = true;
            rebuild_rows(st);
        }
        PollEvent::Stats(b) => {
            st.store.apply(b);
            st.rows_dirty = true;
            // Sorted by a live figure: re-sort on the tick, not per batch.
            if st.sort == SortCol::Name {
                st.rows_dirty = false;
            }
        }
        PollEvent::Error(e) => st.store.backend_failed(e),
        PollEvent::Busy(b) => st.busy = b,
        PollEvent::ApiRate(r) => st.api_rate = Some(r),
    }
    st.dirty = true;
}

pub fn set_status(st: &mut State, level: Level, text: impl Into<String>) {
    st.status = Some(Status {
        text: sanitize::clean(&text.into()).into_owned(),
        level,
        at_ms: st.now_ms,
    });
    st.dirty = true;
}

fn key(st: &mut State, k: KeyEvent, fx: &mut Vec<Effect>) {
    if st.dialog.is_some() {
        dialog_key(st, k, fx);
        return;
    }
    if st.input.is_some() {
        input_key(st, k, fx);
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

fn push(st: &mut State, v: View) {
    if st.view() != v {
        st.stack.push(v);
    }
}

fn run_cmd(st: &mut State, cmd: Cmd, fx: &mut Vec<Effect>) {
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
                    browse(st, q, fx);
                }
            }
            View::Messages => open_message(st),
            _ => {}
        },
        Cmd::Back => {
            if st.view() == View::Queues {
                if st.filter.is_active() {
                    st.filter = Filter::default();
                    rebuild_rows(st);
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
                rebuild_rows(st);
            }
        }
        Cmd::Browse => {
            if let Some(q) = st.context_queue().cloned() {
                browse(st, q, fx);
            }
        }
        Cmd::Dlq => {
            let Some(q) = st.context_queue().cloned() else {
                return;
            };
            let info = st.store.get(&q).map(|e| e.info.clone());
            match info {
                Some(i) if i.is_dlq => browse(st, q, fx),
                Some(i) => match i.dlq {
                    Some(d) => browse(st, d, fx),
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
                if let Some(m) = current_msg(st) {
                    let id = m.id.clone();
                    if !st.msgs.marked.remove(&id) {
                        st.msgs.marked.insert(id);
                    }
                    move_sel(st, 1);
                }
            }
        }
        Cmd::Copy => {
            if let Some(m) = current_msg(st) {
                let text = String::from_utf8_lossy(&m.body).into_owned();
                fx.push(Effect::Copy(text));
            }
        }
        Cmd::Save => {
            if let (Some(q), true) = (
                st.msgs.queue.clone(),
                matches!(st.view(), View::Messages | View::Message),
            ) {
                let msgs: Vec<Message> = if st.msgs.marked.is_empty() {
                    current_msg(st).into_iter().cloned().collect()
                } else {
                    st.msgs
                        .messages
                        .iter()
                        .filter(|m| st.msgs.marked.contains(&m.id))
                        .cloned()
                        .collect()
                };
                if !msgs.is_empty() {
                    fx.push(Effect::Save {
                        queue: q,
                        messages: msgs,
                    });
                }
            }
        }
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
        Cmd::Redrive => open_redrive(st, None),
        Cmd::Purge => {
            if let Some(q) = st.context_queue().cloned() {
                let count = st
                    .store
                    .get(&q)
                    .and_then(|e| e.latest.as_ref())
                    .and_then(|s| {
                        let parts = [s.depth, s.in_flight, s.delayed];
                        parts
                            .iter()
                            .any(|p| p.is_some())
                            .then(|| parts.iter().flatten().sum())
                    });
                st.dialog = Some(Dialog {
                    kind: DialogKind::Purge { queue: q, count },
                    typed: String::new(),
                    needs_name: st.protected,
                });
            }
        }
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

fn current_msg(st: &State) -> Option<&Message> {
    let i = match st.view() {
        View::Message => st.body.index,
        _ => *st.msgs.rows.get(st.msgs.cursor.sel)?,
    };
    st.msgs.messages.get(i)
}

fn open_message(st: &mut State) {
    let Some(&i) = st.msgs.rows.get(st.msgs.cursor.sel) else {
        return;
    };
    let Some(m) = st.msgs.messages.get(i) else {
        return;
    };
    let (kind, lines) = sanitize::body_lines(&m.body);
    st.body = BodyState {
        index: i,
        kind: Some(kind),
        lines,
        scroll: 0,
    };
    push(st, View::Message);
}

fn browse(st: &mut State, q: QueueId, fx: &mut Vec<Effect>) {
    if let BrowseEffect::SideEffect(note) = &st.caps.browse {
        st.dialog = Some(Dialog {
            kind: DialogKind::Browse {
                queue: q,
                note: note.clone(),
            },
            typed: String::new(),
            needs_name: false,
        });
        return;
    }
    if let BrowseEffect::Unsupported(why) = &st.caps.browse {
        let why = why.clone();
        set_status(st, Level::Warn, format!("cannot browse: {why}"));
        return;
    }
    start_browse(st, q, false, fx);
}

fn start_browse(st: &mut State, q: QueueId, force: bool, fx: &mut Vec<Effect>) {
    st.msgs = MsgState {
        queue: Some(q.clone()),
        loading: true,
        forced: force,
        ..Default::default()
    };
    if st.view() == View::Message {
        st.stack.pop();
    }
    push(st, View::Messages);
    fx.push(Effect::Browse {
        queue: q,
        cursor: None,
        force,
    });
}

/// Open the redrive dialog; `to` presets a target queue (`:redrive QUEUE`).
fn open_redrive(st: &mut State, to: Option<QueueId>) {
    let in_msgs = matches!(st.view(), View::Messages | View::Message);
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    let Some(info) = st.store.get(&q).map(|e| e.info.clone()) else {
        set_status(st, Level::Warn, format!("{q}: not in the queue list yet"));
        return;
    };
    // Redrive moves out of a DLQ: the selected queue if it is one, else its DLQ.
    let source = if info.is_dlq || in_msgs {
        q.clone()
    } else if let Some(d) = info.dlq.clone() {
        d
    } else {
        set_status(
            st,
            Level::Warn,
            format!("{q} has no dead-letter queue to redrive"),
        );
        return;
    };
    let mut targets = vec![RedriveTarget::Origin];
    let sources = st
        .store
        .get(&source)
        .map(|e| e.info.dlq_sources.clone())
        .unwrap_or_default();
    for s in sources {
        targets.push(RedriveTarget::Queue(s));
    }
    if !info.is_dlq && !in_msgs && targets.len() == 1 {
        targets.push(RedriveTarget::Queue(q.clone()));
    }
    let mut target = 0;
    if let Some(to) = to {
        let t = RedriveTarget::Queue(to);
        target = match targets.iter().position(|x| *x == t) {
            Some(i) => i,
            None => {
                targets.push(t);
                targets.len() - 1
            }
        };
    }
    let only_ids = (in_msgs && !st.msgs.marked.is_empty())
        .then(|| st.msgs.marked.iter().cloned().collect::<Vec<_>>());
    let count = match &only_ids {
        Some(v) => Some(v.len() as u64),
        None => st
            .store
            .get(&source)
            .and_then(|e| e.latest.as_ref())
            .and_then(|s| s.depth),
    };
    st.dialog = Some(Dialog {
        kind: DialogKind::Redrive {
            source,
            targets,
            target,
            rate: 0,
            only_ids,
            count,
        },
        typed: String::new(),
        needs_name: st.protected,
    });
}

fn dialog_key(st: &mut State, k: KeyEvent, fx: &mut Vec<Effect>) {
    let Some(d) = st.dialog.as_mut() else {
        return;
    };
    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
        st.dialog = None;
        return;
    }
    match k.code {
        KeyCode::Esc => st.dialog = None,
        KeyCode::Tab | KeyCode::BackTab => {
            if let DialogKind::Redrive {
                targets, target, ..
            } = &mut d.kind
            {
                let n = targets.len().max(1);
                *target = if k.code == KeyCode::Tab {
                    (*target + 1) % n
                } else {
                    (*target + n - 1) % n
                };
            }
        }
        KeyCode::Up | KeyCode::Down => {
            if let DialogKind::Redrive { rate, .. } = &mut d.kind {
                let n = RATES.len();
                *rate = if k.code == KeyCode::Up {
                    (*rate + 1) % n
                } else {
                    (*rate + n - 1) % n
                };
            }
        }
        KeyCode::Backspace => {
            d.typed.pop();
        }
        KeyCode::Char(c) if d.needs_name => d.typed.push(c),
        KeyCode::Char('y') | KeyCode::Enter => {
            if !d.ready() {
                return;
            }
            let Some(d) = st.dialog.take() else {
                return;
            };
            confirm(st, d, fx);
        }
        KeyCode::Char('n') => st.dialog = None,
        _ => {}
    }
}

fn confirm(st: &mut State, d: Dialog, fx: &mut Vec<Effect>) {
    match d.kind {
        DialogKind::Browse { queue, .. } => start_browse(st, queue, false, fx),
        DialogKind::Purge { queue, .. } => {
            if st.read_only {
                return;
            }
            if st.op.is_some() {
                set_status(st, Level::Warn, "an operation is already running");
                return;
            }
            st.op = Some(OpState {
                label: format!("purge {}", queue),
                progress: ProgressState::default(),
                started_ms: st.now_ms,
                cancelling: false,
            });
            fx.push(Effect::Purge(queue));
        }
        DialogKind::Redrive {
            source,
            targets,
            target,
            rate,
            only_ids,
            count: _,
        } => {
            if st.read_only {
                return;
            }
            if st.op.is_some() {
                set_status(st, Level::Warn, "an operation is already running");
                return;
            }
            let target = targets
                .get(target)
                .cloned()
                .unwrap_or(RedriveTarget::Origin);
            let label = match &target {
                RedriveTarget::Origin => format!("redrive {source} → origin"),
                RedriveTarget::Queue(q) => format!("redrive {source} → {q}"),
            };
            st.op = Some(OpState {
                label,
                progress: ProgressState::default(),
                started_ms: st.now_ms,
                cancelling: false,
            });
            st.msgs.marked.clear();
            fx.push(Effect::Redrive(RedriveRequest {
                source,
                target,
                max: None,
                rate: RATES.get(rate).copied().flatten(),
                only_ids,
            }));
        }
    }
}

fn input_key(st: &mut State, k: KeyEvent, fx: &mut Vec<Effect>) {
    let Some(inp) = st.input.as_mut() else {
        return;
    };
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Esc => {
            let kind = inp.kind;
            st.input = None;
            // Esc in a filter clears it.
            match kind {
                InputKind::Filter => {
                    st.filter = Filter::default();
                    rebuild_rows(st);
                }
                InputKind::Search => {
                    st.msgs.search = Filter::default();
                    refilter_msgs(st);
                }
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
                command(st, inp.text.trim(), fx);
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
fn live_filter(st: &mut State) {
    let Some(inp) = &st.input else {
        return;
    };
    match inp.kind {
        InputKind::Filter => {
            st.filter = Filter::new(&inp.text);
            rebuild_rows(st);
        }
        InputKind::Search => {
            st.msgs.search = Filter::new(&inp.text);
            refilter_msgs(st);
        }
        InputKind::Command => {}
    }
}

fn command(st: &mut State, text: &str, fx: &mut Vec<Effect>) {
    let mut words = text.split_whitespace();
    let Some(head) = words.next() else {
        return;
    };
    let arg: Vec<&str> = words.collect();
    let arg = arg.join(" ");
    match head {
        "q" | "q!" | "quit" | "exit" => st.quit = true,
        "help" | "h" => push(st, View::Help),
        "dlq" => run_cmd(st, Cmd::Dlq, fx),
        "workers" | "w" | "consumers" => run_cmd(st, Cmd::Workers, fx),
        "browse" | "messages" | "m" => run_cmd(st, Cmd::Browse, fx),
        "force" | "browse!" => {
            if let Some(q) = st.context_queue().cloned() {
                start_browse(st, q, true, fx);
            }
        }
        "queues" | "home" => st.stack.truncate(1),
        "filter" => {
            st.filter = Filter::new(&arg);
            st.stack.truncate(1);
            rebuild_rows(st);
        }
        "sort" => {
            let mut a = arg.split_whitespace();
            match a.next().and_then(SortCol::parse) {
                Some(c) => {
                    st.sort = c;
                    st.sort_desc = match a.next() {
                        Some("asc") => false,
                        Some("desc") => true,
                        _ => c != SortCol::Name,
                    };
                    rebuild_rows(st);
                }
                None => set_status(
                    st,
                    Level::Warn,
                    format!("sort by: {}", SortCol::ALL.map(|c| c.name()).join(", ")),
                ),
            }
        }
        "theme" => match Theme::load(&arg, st.theme_dir.as_deref()) {
            Ok(t) => {
                st.theme = t;
                set_status(st, Level::Info, format!("theme {arg}"));
            }
            Err(e) => set_status(st, Level::Warn, e),
        },
        "profile" | "ctx" => {
            if arg.is_empty() || arg == st.profile {
                let msg = format!(
                    "profile {} ({}); profiles: {}",
                    st.profile,
                    st.broker,
                    st.profiles.join(", ")
                );
                set_status(st, Level::Info, msg);
            } else if !st.profiles.contains(&arg) {
                let msg = format!(
                    "unknown profile {arg:?}; profiles: {}",
                    st.profiles.join(", ")
                );
                set_status(st, Level::Warn, msg);
            } else if st.op.is_some() {
                set_status(st, Level::Warn, "wait for the running operation to finish");
            } else {
                set_status(st, Level::Info, format!("switching to profile {arg}…"));
                fx.push(Effect::SwitchProfile(arg));
            }
        }
        "purge" => run_cmd(st, Cmd::Purge, fx),
        "redrive" if !st.read_only => {
            if arg.is_empty() {
                run_cmd(st, Cmd::Redrive, fx)
            } else if st.store.get(&QueueId::new(arg.as_str())).is_some() {
                open_redrive(st, Some(QueueId::new(arg)))
            } else {
                set_status(st, Level::Warn, format!("unknown queue {arg:?}"))
            }
        }
        other => set_status(
            st,
            Level::Warn,
            format!("unknown command :{other} (try :help)"),
        ),
    }
}
