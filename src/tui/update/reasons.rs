//! The reasons view: a DLQ grouped by failure signature while a bounded scan runs; Esc
//! cancels the scan, Enter opens the group's messages in the message browser.

use super::state::*;
use super::{push, status, Effect};
use qdeck_engine::triage::{Group, ReasonsReport};
use qdeck_model::domain::QueueId;

/// `F` / `:reasons`: on a DLQ its own groups; on a queue with a DLQ, the DLQ's.
pub(super) fn open(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    let info = st.store.get(&q).map(|e| e.info.clone());
    // One rule with `qdeck reasons`: a queue's DLQ when it has one, else its own messages.
    let (dlq, scope) = match info {
        Some(i) => match qdeck_engine::triage::reasons_queue(&i) {
            Some(d) if d == q => (d, None),
            Some(d) => (d, Some(format!("the DLQ of {q}"))),
            None => (q, Some("its own messages: no DLQ".to_string())),
        },
        // A queue the list has not shown yet: take it as asked.
        None => (q, None),
    };
    if st.reasons.scanning {
        fx.push(Effect::CancelReasons);
    }
    st.reasons = ReasonsState {
        queue: Some(dlq.clone()),
        scope,
        scanning: true,
        ..Default::default()
    };
    push(st, View::Reasons);
    fx.push(Effect::Reasons(dlq));
}

/// `r` in the view: scan the same DLQ again from the top.
pub(super) fn rescan(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some(q) = st.reasons.queue.clone() else {
        return;
    };
    if st.reasons.scanning {
        fx.push(Effect::CancelReasons);
    }
    st.reasons = ReasonsState {
        queue: Some(q.clone()),
        scope: st.reasons.scope.take(),
        scanning: true,
        ..Default::default()
    };
    fx.push(Effect::Reasons(q));
}

pub(super) fn progress(
    st: &mut Model,
    queue: QueueId,
    groups: Vec<Group>,
    scanned: u64,
    total: Option<u64>,
) {
    let r = &st.reasons;
    if r.queue.as_ref() != Some(&queue) || !r.scanning {
        return;
    }
    replace_groups(st, groups);
    st.reasons.scanned = scanned;
    st.reasons.total = total;
    st.dirty = true;
}

/// New groups replace the old ones (a scan's progress re-ranks them by count): the cursor
/// follows its group by signature and origin, or keeps its place when that group is gone,
/// and then the flash names it.
fn replace_groups(st: &mut Model, groups: Vec<Group>) {
    let r = &mut st.reasons;
    let key = |g: &Group| (g.signature.clone(), g.origin.clone());
    let held = r.groups.get(r.cursor.sel).map(key);
    r.groups = groups;
    let mut left = None;
    if let Some(k) = held {
        match r.groups.iter().position(|g| key(g) == k) {
            Some(p) => r.cursor.sel = p,
            None => left = Some(k.0),
        }
    }
    r.cursor.clamp(r.groups.len(), 1);
    if let Some(sig) = left {
        super::left_the_list(st, View::Reasons, &sig, "reasons list");
    }
}

pub(super) fn done(
    st: &mut Model,
    queue: QueueId,
    result: Result<ReasonsReport, qdeck_backend::BackendError>,
) {
    if st.reasons.queue.as_ref() != Some(&queue) {
        return;
    }
    st.reasons.scanning = false;
    match result {
        Ok(rep) => {
            let r = &mut st.reasons;
            r.note = Some(rep.sample_note());
            r.scanned = rep.scan.scanned;
            r.total = rep.scan.total;
            replace_groups(st, rep.groups);
        }
        Err(e) => st.reasons.error = Some(e),
    }
    let r = &mut st.reasons;
    let n = r.groups.len();
    r.cursor.clamp(n, 1);
    st.dirty = true;
}

/// Esc while scanning stops the scan and keeps what it grouped; after that, Esc leaves.
pub(super) fn back(st: &mut Model, fx: &mut Vec<Effect>) {
    if st.reasons.scanning {
        st.reasons.scanning = false;
        fx.push(Effect::CancelReasons);
        status(
            st,
            Level::Info,
            "scan cancelled: the groups cover what was read",
        );
    } else {
        st.stack.pop();
    }
}

/// Enter on a group: its messages (from a fresh bounded scan) in the message browser.
pub(super) fn drill_in(st: &mut Model, fx: &mut Vec<Effect>) {
    let (Some(q), Some(g)) = (
        st.reasons.queue.clone(),
        st.reasons.groups.get(st.reasons.cursor.sel).cloned(),
    ) else {
        return;
    };
    st.msgs = MsgState {
        queue: Some(q.clone()),
        loading: true,
        group: Some(g.signature.clone()),
        group_origin: g.origin.clone(),
        ..Default::default()
    };
    push(st, View::Messages);
    fx.push(Effect::BrowseGroup {
        queue: q,
        signature: g.signature,
        origin: g.origin,
    });
}
