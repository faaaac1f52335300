//! The queue list: poll results feed the store, and the visible rows decide what the poller
//! fetches first.

use super::state::*;
use super::Effect;
use crate::tui::views::queues::Eta;
use qdeck_engine::derive;
use qdeck_engine::poller::PollEvent;
use qdeck_engine::store::QueueEntry;
use qdeck_model::domain::QueueId;

/// Where a row goes when the table is sorted on a figure: by rank, then value, in the sort's
/// direction. `None` exactly when the row's cell in that column shows no figure (`—`): it
/// goes last either way and the title counts it, so the title never counts a row that shows
/// a figure (`·` for no DLQ, `flat`, `stuck?`).
pub fn sort_key(e: &QueueEntry, col: SortCol) -> Option<(u8, f64)> {
    let l = e.latest.as_ref();
    let figure = |v: Option<f64>| v.map(|x| (1, x));
    let count = |v: Option<u64>| figure(v.map(|x| x as f64));
    match col {
        SortCol::Name => Some((0, 0.0)),
        SortCol::Depth => count(l.and_then(|s| s.depth)),
        SortCol::InFlight => count(l.and_then(|s| s.in_flight)),
        SortCol::Delayed => count(l.and_then(|s| s.delayed)),
        SortCol::Age => figure(l.and_then(|s| s.oldest_age_secs)),
        SortCol::Dlq => match (l.and_then(|s| s.dlq_depth), &e.info.dlq) {
            // `·`, no DLQ: below a DLQ holding nothing.
            (None, None) => Some((0, 0.0)),
            (n, _) => count(n),
        },
        // Only the rates: the whole of `derive` for every queue made a tick at 100,000
        // queues sorted by ETA take a fifth of a second.
        SortCol::InRate => figure(derive::rates(e).in_rate),
        SortCol::OutRate => figure(derive::rates(e).out_rate),
        SortCol::Eta => {
            let r = derive::rates(e);
            // `stuck` only where the cell could say it: it reads the window again.
            let stuck = !e.info.is_dlq && derive::stuck(e);
            Eta::of(r.trend, r.net_rate, r.drain_secs, stuck, e.info.is_dlq).sort_key()
        }
    }
}

/// Re-filter and re-sort the queue rows, keeping the selected queue selected.
/// Returns the selected queue when it is no longer in the table (the cursor stays where it
/// was).
pub(super) fn rebuild_rows(st: &mut Model) -> Option<QueueId> {
    let keep = st.selected_queue().cloned();
    rebuild_rows_keeping(st, keep)
}

/// The rows built again, the cursor on `keep` where it is still listed. The queue under the
/// cursor must be read before the store's entries change: the rows index them.
fn rebuild_rows_keeping(st: &mut Model, keep: Option<QueueId>) -> Option<QueueId> {
    let entries = st.store.entries();
    let mut rows: Vec<usize> = (0..entries.len())
        .filter(|&i| st.queues.filter.matches(entries[i].info.id.as_str()))
        .collect();
    st.queues.sort_unknown = 0;
    st.queues.sort_unpolled = 0;
    if st.queues.sort == SortCol::Name {
        rows.sort_by(|&a, &b| entries[a].info.id.cmp(&entries[b].info.id));
        if st.queues.sort_desc {
            rows.reverse();
        }
    } else {
        let col = st.queues.sort;
        let mut keyed: Vec<(Option<(u8, f64)>, usize)> = rows
            .iter()
            .map(|&i| (sort_key(&entries[i], col), i))
            .collect();
        let unknown = keyed.iter().filter(|k| k.0.is_none());
        st.queues.sort_unknown = unknown.clone().count();
        st.queues.sort_unpolled = unknown.filter(|k| entries[k.1].latest.is_none()).count();
        let desc = st.queues.sort_desc;
        let name = |i: usize| &entries[i].info.id;
        keyed.sort_by(|a, b| match (a.0, b.0) {
            (None, None) => name(a.1).cmp(name(b.1)),
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(_), None) => std::cmp::Ordering::Less,
            (Some((ra, va)), Some((rb, vb))) => {
                let o = ra.cmp(&rb).then(va.total_cmp(&vb));
                let o = if desc { o.reverse() } else { o };
                o.then_with(|| name(a.1).cmp(name(b.1)))
            }
        });
        rows = keyed.into_iter().map(|(_, i)| i).collect();
    }
    st.queues.rows = rows;
    st.queues.rows_dirty = false;
    let mut left = None;
    if let Some(id) = keep {
        match st
            .queues
            .rows
            .iter()
            .position(|&i| st.store.entries()[i].info.id == id)
        {
            Some(p) => st.queues.cursor.sel = p,
            None => left = Some(id),
        }
    }
    let page = st.page_rows();
    st.queues.cursor.clamp(st.queues.rows.len(), page);
    st.dirty = true;
    left
}

pub(super) fn visible(st: &mut Model) -> Option<Effect> {
    let mut ids: Vec<QueueId> = Vec::new();
    match st.view() {
        View::Queues | View::Help => {
            // The table is one row taller than `page_rows` when no problem line sits under
            // it: report that taller table, placed as the view places it, so no row drawn
            // waits for the sweep.
            let (_, from, to) = st
                .queues
                .cursor
                .placed(st.queues.rows.len(), st.page_rows() + 2);
            for &i in &st.queues.rows[from..to] {
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
    // What is on screen keeps its history ring; the store frees the others in time.
    st.store.set_on_screen(&ids, st.now_ms);
    Some(Effect::Visible(ids))
}

pub(super) fn poll(st: &mut Model, ev: PollEvent, fx: &mut Vec<Effect>) {
    let figures = matches!(ev, PollEvent::Stats(_) | PollEvent::Error(_));
    match ev {
        PollEvent::Queues(qs) => {
            let keep = st.selected_queue().cloned();
            st.store.set_queues(qs, st.now_ms);
            let watched = qdeck_engine::alerts::watched_for_history(
                &st.alerts.rules,
                &st.session.profile,
                &st.store,
            );
            st.store.set_watched(watched);
            st.poll.listed = true;
            // A queue gone from the broker's list takes its row with it: said, since the
            // cursor now rests on another queue.
            if let Some(left) = rebuild_rows_keeping(st, keep) {
                super::left_the_list(st, View::Queues, left.as_str(), "queue list");
            }
        }
        PollEvent::Stats(b) => {
            st.store.apply(b, st.now_ms);
            st.queues.rows_dirty = true;
            // Sorted by a live figure: re-sort on the tick, not per batch.
            if st.queues.sort == SortCol::Name {
                st.queues.rows_dirty = false;
            }
        }
        PollEvent::Error(e) => st.store.backend_failed(e.line()),
        PollEvent::Busy(b) => st.poll.busy = b,
        PollEvent::ApiRate(r) => st.poll.api_rate = Some(r),
    }
    if figures {
        alerts(st, fx, false);
    }
    st.dirty = true;
}

/// How often the console's poller asks its broker: every refresh while a queue is on screen;
/// with none (the fleet view, `:alerts`, `:ops`) only on its sweep, so a stale rule on the
/// console's profile waits three sweeps there (it fired and resolved with every sweep).
fn poll_period_secs(st: &Model) -> f64 {
    let refresh = st.session.refresh_secs;
    if st.store.nothing_on_screen() {
        qdeck_engine::poller::PollConfig::with_refresh(refresh)
            .sweep_every
            .as_secs_f64()
    } else {
        refresh
    }
}

/// The alert rules on the figures just in (`health_only`: the health rules on the clock,
/// which fire with time alone); a rule starting to fire rings the bell or sends a desktop
/// notification when `[notify]` asks for it.
pub(super) fn alerts(st: &mut Model, fx: &mut Vec<Effect>, health_only: bool) {
    if st.alerts.rules.is_empty() {
        return;
    }
    let health_rules: Vec<qdeck_engine::alerts::Rule>;
    let rules = if health_only {
        health_rules = st
            .alerts
            .rules
            .iter()
            .filter(|r| r.when.only_health())
            .cloned()
            .collect();
        if health_rules.is_empty() {
            return;
        }
        &health_rules
    } else {
        &st.alerts.rules
    };
    let health = qdeck_engine::alerts::Health {
        unreachable: st.store.backend_error.is_some(),
        // The same rule as `watch`: no success for three of the poller's periods.
        stale: st.store.last_ok_ms.is_some()
            && qdeck_engine::multi_poller::stale(
                st.store.last_ok_ms,
                poll_period_secs(st),
                st.now_ms,
            ),
    };
    let changes = st.alerts.book.evaluate(
        qdeck_engine::alerts::Evaluator::Console,
        rules,
        &st.session.profile,
        &st.store,
        health,
        st.now_ms,
    );
    let notify = st.alerts.notify.clone();
    for t in changes {
        if t.change == qdeck_engine::alerts::Change::Firing && (notify.bell || notify.desktop) {
            fx.push(Effect::Notify {
                bell: notify.bell,
                desktop: notify
                    .desktop
                    .then(|| format!("{} {}: {}", t.severity.as_str(), t.rule, t.summary)),
            });
        }
    }
    let all = st.alerts.every_firing_row();
    if let Some(f) = &mut st.fleet {
        f.set_alerts(&st.session.profile, all);
    }
    super::follow_fire(st);
}
