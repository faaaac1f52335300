//! Moving around: the cursor of the view on screen, Enter into the row under it, and Esc
//! back out.

use super::state::*;
use super::{commands, messages, push, queues, reasons, Effect};

fn list_len(st: &Model) -> usize {
    match st.view() {
        View::Queues => st.queues.rows.len(),
        View::Fleet => st.fleet.as_ref().map_or(0, |f| f.rows.len()),
        View::Fire => st
            .fleet
            .as_ref()
            .map_or(0, |f| f.fire_rows(st.now_ms).len()),
        View::Messages => st.msgs.rows.len(),
        View::Workers => st.workers.rows.len(),
        View::Reasons => st.reasons.groups.len(),
        View::Message => st.body.lines.len(),
        _ => 0,
    }
}

pub(super) fn move_sel(st: &mut Model, delta: isize) {
    let len = list_len(st);
    let page = st.page_rows();
    match st.view() {
        View::Queues => st.queues.cursor.move_by(delta, len, page),
        View::Fleet => {
            if let Some(f) = &mut st.fleet {
                f.cursor.move_by(delta, len, page);
            }
        }
        View::Fire => {
            let now = st.now_ms;
            if let Some(f) = &mut st.fleet {
                f.fire_cursor.move_by(delta, len, page);
                f.fire_selected_now(now);
            }
        }
        View::Messages => st.msgs.cursor.move_by(delta, len, page),
        View::Workers => st.workers.cursor.move_by(delta, len, page),
        View::Reasons => st.reasons.cursor.move_by(delta, len, page),
        View::Detail => {
            st.detail.scroll = (st.detail.scroll as isize + delta).clamp(0, 200) as usize;
        }
        View::Alerts => {
            st.alerts.scroll = (st.alerts.scroll as isize + delta).clamp(0, 10_000) as usize;
        }
        View::Ops => {
            let max = st.ops_log.entries.len().saturating_sub(1) as isize;
            st.ops_log.scroll = (st.ops_log.scroll as isize + delta).clamp(0, max) as usize;
        }
        View::Message => {
            // Headers and body scroll as one document.
            let (page, total) = crate::tui::views::messages::body_geometry(st);
            let max = total.saturating_sub(page) as isize;
            st.body.scroll = (st.body.scroll as isize + delta).clamp(0, max.max(0)) as usize;
        }
        _ => {}
    }
}

/// Enter opens what the row under the cursor leads to.
pub(super) fn enter(st: &mut Model, fx: &mut Vec<Effect>) {
    match st.view() {
        View::Queues => {
            if let Some(q) = st.selected_queue().cloned() {
                st.focus = Some(q);
                st.detail.scroll = 0;
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
        View::Fleet => commands::open_fleet_row(st, fx),
        View::Fire => commands::open_fire_row(st, fx),
        _ => {}
    }
}

/// k9s: Esc first clears the view's filter (and a range being selected), then leaves the
/// view.
pub(super) fn back(st: &mut Model, fx: &mut Vec<Effect>) {
    match st.view() {
        View::Queues if st.queues.filter.is_active() => {
            st.queues.filter = Filter::default();
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
            super::lists::rebuild_workers(st);
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
