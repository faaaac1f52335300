//! Each list view keeps its own filter and sort: the queue list (`queues.rs`), the message
//! browser and the workers view (here). `/`, `s`, `S`, the digit keys and Esc act on the list
//! on screen, never on another view's.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::state::*;
use qdeck_backend::BackendError;
use qdeck_engine::triage::{signature, SignatureConfig};
use qdeck_model::domain::{Consumer, Message, QueueId, WorkerState};

/// `scheduled`: the browser lists scheduled messages, whose time column is when they fall due.
fn msg_key(
    m: &Message,
    col: usize,
    scheduled: bool,
    reasons: &SignatureConfig,
) -> (Option<f64>, String) {
    let dl = m.dead_letter.as_ref();
    match col {
        0 => (
            m.seq.map(|s| s as f64).or_else(|| m.id.parse().ok()),
            m.id.clone(),
        ),
        1 if scheduled => (m.due_ms().map(|t| t as f64), m.id.clone()),
        1 => (m.enqueued_ms.map(|t| t as f64), m.id.clone()),
        2 => (m.receive_count.map(|n| n as f64), m.id.clone()),
        // By what the REASON cell shows.
        3 => (
            None,
            signature::why(m, reasons)
                .map(Cow::into_owned)
                .unwrap_or_default(),
        ),
        4 => (
            None,
            dl.and_then(|d| d.origin.as_ref().map(ToString::to_string))
                .unwrap_or_default(),
        ),
        _ => (Some(m.body.len() as f64), m.id.clone()),
    }
}

fn worker_key(c: &Consumer, col: usize) -> (Option<f64>, String) {
    let n = |v: Option<u64>| v.map(|x| x as f64);
    match col {
        0 => (None, c.tag.clone()),
        1 => (None, c.state.clone()),
        2 => (n(c.holding), c.tag.clone()),
        3 => (n(c.processed), c.tag.clone()),
        4 => (n(c.failed), c.tag.clone()),
        5 => (c.rate, c.tag.clone()),
        _ => (c.last_seen_ms.map(|t| t as f64), c.tag.clone()),
    }
}

/// Numbers first when both rows have one (unknown last), else text.
fn cmp_keys(a: &(Option<f64>, String), b: &(Option<f64>, String), desc: bool) -> Ordering {
    let o = match (a.0, b.0) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => return Ordering::Less,
        (None, Some(_)) => return Ordering::Greater,
        (None, None) => a.1.cmp(&b.1),
    };
    let o = if desc { o.reverse() } else { o };
    o.then_with(|| a.1.cmp(&b.1))
}

pub(super) fn sort_msgs(st: &mut Model) {
    let Some(col) = st.msgs.sort else {
        return;
    };
    let m = &mut st.msgs;
    let desc = m.sort_desc;
    let sch = m.scheduled;
    let msgs = &m.messages;
    let reasons = &st.session.reasons;
    m.rows.sort_by(|&a, &b| {
        cmp_keys(
            &msg_key(&msgs[a], col, sch, reasons),
            &msg_key(&msgs[b], col, sch, reasons),
            desc,
        )
    });
}

/// The consumers of `queue` arrived (or failed): shown if the workers view is still on it.
pub(super) fn workers_loaded(
    st: &mut Model,
    queue: QueueId,
    result: Result<Vec<Consumer>, BackendError>,
) {
    if st.workers.queue.as_ref() != Some(&queue) {
        return;
    }
    let keep = selected_worker(st);
    st.workers.loading = false;
    st.workers.fetched_ms = Some(st.now_ms);
    match result {
        Ok(l) => {
            st.workers.list = l;
            st.workers.error = None;
        }
        Err(e) => st.workers.error = Some(e),
    }
    if let Some(left) = rebuild_workers_keeping(st, keep) {
        super::left_the_list(st, View::Workers, &left, "workers list");
    }
    st.dirty = true;
}

/// Re-filter and re-sort the workers, keeping the selected worker selected.
/// Where a worker's state puts it in the unsorted list: working, then waiting, then unknown,
/// then what crashed or left.
fn liveness(s: WorkerState) -> u8 {
    match s {
        WorkerState::Busy | WorkerState::Active => 0,
        WorkerState::Idle | WorkerState::Waiting | WorkerState::Stopping => 1,
        WorkerState::Unknown => 2,
        WorkerState::LeaseLost => 3,
        WorkerState::Gone => 4,
    }
}

/// Returns the selected worker's tag when it is no longer listed.
pub(super) fn rebuild_workers(st: &mut Model) -> Option<String> {
    let keep = selected_worker(st);
    rebuild_workers_keeping(st, keep)
}

/// The tag of the worker under the cursor; read before the list changes, since the rows
/// index it.
fn selected_worker(st: &Model) -> Option<String> {
    let w = &st.workers;
    w.rows
        .get(w.cursor.sel)
        .and_then(|&i| w.list.get(i))
        .map(|c| c.tag.clone())
}

fn rebuild_workers_keeping(st: &mut Model, keep: Option<String>) -> Option<String> {
    let w = &mut st.workers;
    let mut rows: Vec<usize> = (0..w.list.len())
        .filter(|&i| {
            let c = &w.list[i];
            let hay = format!("{} {} {}", c.tag, c.peer.as_deref().unwrap_or(""), c.state);
            w.filter.matches(&hay)
        })
        .collect();
    if let Some(col) = w.sort {
        let list = &w.list;
        let desc = w.sort_desc;
        rows.sort_by(|&a, &b| {
            cmp_keys(&worker_key(&list[a], col), &worker_key(&list[b], col), desc)
        });
    } else {
        // Unsorted: the live first, in the broker's order, then the lost and the gone.
        let list = &w.list;
        rows.sort_by_key(|&i| liveness(list[i].status));
    }
    w.rows = rows;
    let mut left = None;
    if let Some(tag) = keep {
        match w.rows.iter().position(|&i| w.list[i].tag == tag) {
            Some(p) => w.cursor.sel = p,
            None => left = Some(tag),
        }
    }
    let page = st.page_rows();
    st.workers.cursor.clamp(st.workers.rows.len(), page);
    st.dirty = true;
    left
}

/// `s` sorts the list on screen by its next column, `S` reverses the order.
pub(super) fn sort_cmd(st: &mut Model, next_col: bool) {
    match st.view() {
        View::Queues => {
            if next_col {
                st.queues.sort = st.queues.sort.next();
                st.queues.sort_desc = st.queues.sort != SortCol::Name;
            } else {
                st.queues.sort_desc = !st.queues.sort_desc;
            }
            super::queues::rebuild_rows(st);
        }
        View::Messages => {
            if next_col {
                let c = sort_next(st.msgs.sort, MSG_SORT.len()).unwrap_or(0);
                st.msgs.sort = None;
                sort_by_column(st, c);
            } else {
                st.msgs.sort_desc = !st.msgs.sort_desc;
                st.msgs.sort.get_or_insert(0);
                super::messages::refilter_msgs(st);
            }
        }
        View::Workers => {
            if next_col {
                let c = sort_next(st.workers.sort, WORKER_SORT.len()).unwrap_or(0);
                st.workers.sort = None;
                sort_by_column(st, c);
            } else {
                st.workers.sort_desc = !st.workers.sort_desc;
                st.workers.sort.get_or_insert(0);
                rebuild_workers(st);
            }
        }
        _ => {}
    }
}

/// `s`: the next column (numbers sort high first, names A→Z).
pub(super) fn sort_next(cur: Option<usize>, n: usize) -> Option<usize> {
    Some(cur.map_or(0, |c| (c + 1) % n))
}

/// Sort the list on screen by its `col`-th column (0-based); the same column again reverses.
pub(super) fn sort_by_column(st: &mut Model, col: usize) {
    match st.view() {
        View::Queues => {
            let Some(c) = SortCol::ALL.get(col).copied() else {
                return;
            };
            if st.queues.sort == c {
                st.queues.sort_desc = !st.queues.sort_desc;
            } else {
                st.queues.sort = c;
                st.queues.sort_desc = c != SortCol::Name;
            }
            super::queues::rebuild_rows(st);
        }
        View::Messages if col < MSG_SORT.len() => {
            let m = &mut st.msgs;
            if m.sort == Some(col) {
                m.sort_desc = !m.sort_desc;
            } else {
                m.sort = Some(col);
                // Newest first, but what falls due soonest first.
                m.sort_desc = matches!(col, 2 | 5) || (col == 1 && !m.scheduled);
            }
            super::messages::refilter_msgs(st);
        }
        View::Workers if col < WORKER_SORT.len() => {
            let w = &mut st.workers;
            if w.sort == Some(col) {
                w.sort_desc = !w.sort_desc;
            } else {
                w.sort = Some(col);
                w.sort_desc = col >= 2;
            }
            rebuild_workers(st);
        }
        _ => {}
    }
}
