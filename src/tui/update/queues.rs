//! The queue list: poll results feed the store, and the visible rows decide what the poller
//! fetches first.

use super::Effect;
use crate::domain::QueueId;
use crate::engine::derive::Trend;
use crate::engine::poller::PollEvent;
use crate::tui::state::*;

/// Re-filter and re-sort the queue rows, keeping the selected queue selected.
pub fn rebuild_rows(st: &mut State) {
    let keep = st.selected_queue().cloned();
    let entries = st.store.entries();
    let mut rows: Vec<usize> = (0..entries.len())
        .filter(|&i| st.queues.filter.matches(entries[i].info.id.as_str()))
        .collect();
    let key = |i: usize| -> f64 {
        let e = &entries[i];
        let l = e.latest.as_ref();
        let f = |v: Option<u64>| v.map(|x| x as f64);
        let v = match st.queues.sort {
            SortCol::Name => None,
            SortCol::Depth => l.and_then(|s| f(s.depth)),
            SortCol::InFlight => l.and_then(|s| f(s.in_flight)),
            SortCol::Delayed => l.and_then(|s| f(s.delayed)),
            SortCol::Age => l.and_then(|s| s.oldest_age_secs),
            SortCol::Dlq => l.and_then(|s| f(s.dlq_depth)),
            // Only the rates: the whole of `derive` for every queue made a tick at 100,000
            // queues sorted by ETA take a fifth of a second.
            SortCol::InRate | SortCol::OutRate | SortCol::Eta => {
                let d = crate::engine::derive::rates(e);
                match st.queues.sort {
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
    st.queues.sort_unknown = 0;
    if st.queues.sort == SortCol::Name {
        rows.sort_by(|&a, &b| entries[a].info.id.cmp(&entries[b].info.id));
        if st.queues.sort_desc {
            rows.reverse();
        }
    } else {
        let mut keyed: Vec<(f64, usize)> = rows.iter().map(|&i| (key(i), i)).collect();
        st.queues.sort_unknown = keyed.iter().filter(|k| k.0.is_nan()).count();
        let desc = st.queues.sort_desc;
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
    st.queues.rows = rows;
    st.queues.rows_dirty = false;
    if let Some(id) = keep {
        if let Some(p) = st
            .queues
            .rows
            .iter()
            .position(|&i| st.store.entries()[i].info.id == id)
        {
            st.queues.cursor.sel = p;
        }
    }
    let page = st.page_rows();
    st.queues.cursor.clamp(st.queues.rows.len(), page);
    st.dirty = true;
}

pub(super) fn visible(st: &mut State) -> Option<Effect> {
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
    st.store.set_on_screen(&ids);
    Some(Effect::Visible(ids))
}

pub(super) fn poll(st: &mut State, ev: PollEvent) {
    match ev {
        PollEvent::Queues(qs) => {
            st.store.set_queues(qs);
            st.poll.listed = true;
            rebuild_rows(st);
        }
        PollEvent::Stats(b) => {
            st.store.apply(b);
            st.queues.rows_dirty = true;
            // Sorted by a live figure: re-sort on the tick, not per batch.
            if st.queues.sort == SortCol::Name {
                st.queues.rows_dirty = false;
            }
        }
        PollEvent::Error(e) => st.store.backend_failed(e),
        PollEvent::Busy(b) => st.poll.busy = b,
        PollEvent::ApiRate(r) => st.poll.api_rate = Some(r),
    }
    st.dirty = true;
}
