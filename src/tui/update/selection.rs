//! Choosing messages in the browser: one at a time, a range, or all shown. Copy, move,
//! delete and redrive act on the chosen ones.

use super::state::*;
use super::{messages, navigate, status};

/// Space: select or unselect the message under the cursor, then move to the next row.
pub(super) fn mark(st: &mut Model) {
    if st.view() != View::Messages {
        return;
    }
    if let Some(m) = messages::current_msg(st) {
        let id = m.id.clone();
        let verb = if st.msgs.marked.remove(&id) {
            "unselected"
        } else {
            st.msgs.marked.insert(id.clone());
            "selected"
        };
        let n = st.msgs.marked.len();
        status(
            st,
            Level::Info,
            format!("{verb} {id} ({n} selected) · moved to the next row"),
        );
        navigate::move_sel(st, 1);
    }
}

/// `v`: the first press marks where the range starts, the second selects every row between.
pub(super) fn mark_range(st: &mut Model) {
    if st.view() != View::Messages {
        return;
    }
    let here = st.msgs.cursor.sel;
    if st.msgs.rows.is_empty() {
        return;
    }
    match st.msgs.range_from.take() {
        None => {
            st.msgs.range_from = Some(here);
            status(st, Level::Info, "range: move, then v to select (Esc drops)");
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
            status(st, Level::Info, format!("{n} messages selected"));
        }
    }
}

/// `A`: select every message the browser shows (the search's matches); when all of them are
/// selected already, unselect them.
pub(super) fn select_all(st: &mut Model) {
    if st.view() != View::Messages {
        return;
    }
    let shown: Vec<String> = st
        .msgs
        .rows
        .iter()
        .filter_map(|&i| st.msgs.messages.get(i))
        .map(|m| m.id.clone())
        .collect();
    if shown.is_empty() {
        return;
    }
    let all = shown.iter().all(|id| st.msgs.marked.contains(id));
    if all {
        for id in &shown {
            st.msgs.marked.remove(id);
        }
    } else {
        st.msgs.marked.extend(shown.iter().cloned());
    }
    let n = st.msgs.marked.len();
    let more = if st.msgs.next.is_some() {
        " (more pages not loaded: n loads the next)"
    } else {
        ""
    };
    let verb = if all { "unselected" } else { "selected" };
    status(
        st,
        Level::Info,
        format!("{verb} the {} shown · {n} selected{more}", shown.len()),
    );
}
