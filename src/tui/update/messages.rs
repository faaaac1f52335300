//! The message browser: pages arriving, search, selection, and the messages a copy or save
//! acts on.

use super::state::*;
use super::{push, status, Effect};
use qdeck_backend::BackendError;
use qdeck_engine::gate::Mutation;
use qdeck_model::config::Access;
use qdeck_model::domain::{BrowseEffect, Message, Page, QueueId};
use qdeck_model::sanitize;

/// Message views are never opened below tier `browse`.
fn refused(st: &mut Model, fx: &mut Vec<Effect>) -> bool {
    if st.allows(Access::Browse) {
        return false;
    }
    super::refuse(
        st,
        "browsing messages",
        Access::Browse,
        Some(Mutation::Browse),
        fx,
    );
    true
}

/// A page arrived: kept only while the browser still shows that queue's messages of the same
/// kind (its own, or its scheduled ones), so a late page never lands in the other list.
pub(super) fn page_loaded(
    st: &mut Model,
    queue: QueueId,
    append: bool,
    result: Result<Page, BackendError>,
    scheduled: bool,
) {
    if st.msgs.queue.as_ref() == Some(&queue) && st.msgs.scheduled == scheduled {
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

/// The prefix that makes the message search look at header names instead of values.
const NAMES_PREFIX: &str = "h:";

/// The message search for `text`: a regex (case-insensitive, `!` inverts) over the values of
/// each message (id, dead-letter reason, header and property values, key, body); after `h:`
/// over the header and property names instead. The filter keeps `text` as typed.
pub(super) fn search_filter(text: &str) -> Filter {
    let (bang, rest) = match text.strip_prefix('!') {
        Some(r) => ("!", r),
        None => ("", text),
    };
    let mut f = match rest.strip_prefix(NAMES_PREFIX) {
        Some(pat) => Filter::new(&format!("{bang}{pat}")),
        None => Filter::new(text),
    };
    if f.is_active() {
        f.text = text.to_string();
    }
    f
}

/// Whether the search looks at names (`h:`) rather than values.
fn searches_names(f: &Filter) -> bool {
    f.text
        .strip_prefix('!')
        .unwrap_or(&f.text)
        .starts_with(NAMES_PREFIX)
}

/// Whether `msg` is a search hit: some value (some name, after `h:`) matches on its own, so a
/// pattern never matches across two fields or a header name.
fn search_hit(f: &Filter, msg: &Message) -> bool {
    let Some(re) = &f.re else {
        return true;
    };
    let hit = if searches_names(f) {
        msg.fields().any(|(_, k, _)| re.is_match(k))
    } else {
        let body = String::from_utf8_lossy(&msg.body[..msg.body.len().min(64 * 1024)]);
        let dead = msg.dead_letter.as_ref();
        [
            Some(msg.id.as_str()),
            msg.key.as_deref(),
            dead.and_then(|d| d.reason.as_deref()),
            dead.and_then(|d| d.description.as_deref()),
            Some(body.as_ref()),
        ]
        .into_iter()
        .flatten()
        .any(|v| re.is_match(v))
            || msg.fields().any(|(_, _, v)| re.is_match(&v.text()))
    };
    hit != f.invert
}

pub(super) fn refilter_msgs(st: &mut Model) {
    let m = &mut st.msgs;
    m.rows = (0..m.messages.len())
        .filter(|&i| search_hit(&m.search, &m.messages[i]))
        .collect();
    super::lists::sort_msgs(st);
    let page = st.page_rows();
    st.msgs.cursor.clamp(st.msgs.rows.len(), page);
    st.dirty = true;
}

pub(super) fn current_msg(st: &Model) -> Option<&Message> {
    if st.view() == View::Message {
        return st.body.msg.as_ref();
    }
    let i = *st.msgs.rows.get(st.msgs.cursor.sel)?;
    st.msgs.messages.get(i)
}

/// `D`: the selected messages (in the list) or the one open (or under the cursor) go to be
/// planned; the dialog opens with the plan's note, or a flash says why the broker cannot.
pub(super) fn plan_delete(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some((queue, msgs)) = chosen_for(st, "D deletes") else {
        return;
    };
    let ids: Vec<String> = msgs.into_iter().map(|m| m.id).collect();
    status(
        st,
        Level::Info,
        format!("checking what deleting {} message(s) does…", ids.len()),
    );
    fx.push(Effect::PlanDelete { queue, ids });
}

/// The browsed queue and the chosen messages for an action that starts an operation, or a
/// flash saying why not (not in the message browser: `what` names the action; another
/// operation running); `None` also when nothing is there to choose.
fn chosen_for(st: &mut Model, what: &str) -> Option<(QueueId, Vec<Message>)> {
    if !matches!(st.view(), View::Messages | View::Message) {
        let msg = format!("{what} chosen messages: open the message browser first (b or d)");
        status(st, Level::Warn, msg);
        return None;
    }
    if st.op.is_some() {
        status(st, Level::Warn, "an operation is already running");
        return None;
    }
    let queue = st.msgs.queue.clone()?;
    let msgs = chosen(st);
    (!msgs.is_empty()).then_some((queue, msgs))
}

/// The messages an action on "the selection" takes: the selected ones in the list, else the
/// one open or under the cursor.
fn chosen(st: &Model) -> Vec<Message> {
    if st.view() == View::Messages && !st.msgs.marked.is_empty() {
        st.msgs
            .messages
            .iter()
            .filter(|m| st.msgs.marked.contains(&m.id))
            .cloned()
            .collect()
    } else {
        current_msg(st).into_iter().cloned().collect()
    }
}

/// `:copy QUEUE [PROFILE]` / `:move QUEUE [PROFILE]` in the message browser: the chosen
/// messages go to be checked (target, tiers, a move's deletion); the dialog opens with that.
/// The tiers are not judged here from this profile's alone: a copy needs `browse` here and
/// `redrive` on the target (`copy::require`, as `qdeck copy`), so a read-only prod profile
/// can copy to a local one; the planner refuses, and audits, what the tiers forbid.
pub(super) fn plan_transfer(st: &mut Model, arg: &str, moving: bool, fx: &mut Vec<Effect>) {
    let verb = if moving { "move" } else { "copy" };
    let mut words = arg.split_whitespace();
    let (Some(to), profile, None) = (words.next(), words.next(), words.next()) else {
        status(st, Level::Warn, format!("usage: :{verb} QUEUE [PROFILE]"));
        return;
    };
    if let Some(p) = profile.filter(|p| !st.session.profiles.iter().any(|x| x == p)) {
        let msg = format!(
            "unknown profile {p:?}; profiles: {}",
            st.session.profiles.join(", ")
        );
        status(st, Level::Warn, msg);
        return;
    }
    if scheduled_refusal(st, &format!(":{verb}")) {
        return;
    }
    let Some((source, messages)) = chosen_for(st, &format!(":{verb} acts on")) else {
        return;
    };
    status(
        st,
        Level::Info,
        format!("checking the {verb} of {} message(s)…", messages.len()),
    );
    fx.push(Effect::PlanTransfer {
        source,
        messages,
        to: QueueId::new(to),
        to_profile: profile
            .filter(|p| *p != st.session.profile)
            .map(String::from),
        moving,
    });
}

pub(super) fn open_message(st: &mut Model) {
    let Some(&i) = st.msgs.rows.get(st.msgs.cursor.sel) else {
        return;
    };
    let Some(m) = st.msgs.messages.get(i) else {
        return;
    };
    let (kind, lines) = sanitize::body_lines(&m.body);
    // A null body has no lines at all, not one empty line.
    let lines = if m.body_is_null() { Vec::new() } else { lines };
    st.body = BodyState {
        msg: Some(m.clone()),
        kind: Some(kind),
        lines,
        scroll: 0,
    };
    push(st, View::Message);
}

pub(super) fn save(st: &Model, fx: &mut Vec<Effect>) {
    if let (Some(q), true) = (
        st.msgs.queue.clone(),
        matches!(st.view(), View::Messages | View::Message),
    ) {
        let msgs = chosen(st);
        if !msgs.is_empty() {
            fx.push(Effect::Save {
                queue: q,
                messages: msgs,
            });
        }
    }
}

/// `e` on a message: hand it to the event loop, which suspends the screen for the editor.
pub(super) fn edit(st: &mut Model, fx: &mut Vec<Effect>) {
    if !matches!(st.view(), View::Messages | View::Message) || scheduled_refusal(st, "e (edit)") {
        return;
    }
    let (Some(q), Some(m)) = (st.msgs.queue.clone(), current_msg(st).cloned()) else {
        return;
    };
    if st.op.is_some() {
        status(st, Level::Warn, "an operation is already running");
        return;
    }
    fx.push(Effect::Edit {
        queue: q,
        message: Box::new(m),
    });
}

pub(super) fn browse(st: &mut Model, q: QueueId, fx: &mut Vec<Effect>) {
    if refused(st, fx) {
        return;
    }
    // This queue's answer, not the broker's in general.
    let caps = st.caps_for(&q);
    if let BrowseEffect::SideEffect(note) = &caps.browse {
        st.dialog = Some(Dialog::new(
            DialogKind::Browse {
                queue: q,
                note: note.clone(),
            },
            false,
        ));
        return;
    }
    if let BrowseEffect::Unsupported(why) = &caps.browse {
        let why = why.clone();
        status(st, Level::Warn, format!("cannot browse: {why}"));
        return;
    }
    start_browse(st, q, false, fx);
}

/// The dead-letter queue of the queue in context (itself when it is one).
pub(super) fn browse_dlq(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    let info = st.store.get(&q).map(|e| e.info.clone());
    match info {
        Some(i) if i.is_dlq => browse(st, q, fx),
        Some(i) => match i.dlq {
            Some(d) => browse(st, d, fx),
            None => status(st, Level::Warn, format!("{q} has no dead-letter queue")),
        },
        None => {}
    }
}

/// `L`: the scheduled (delayed) messages of the queue in context, due soonest first.
pub(super) fn browse_scheduled(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    if refused(st, fx) {
        return;
    }
    open_list(st, q.clone(), false, true);
    fx.push(Effect::Browse {
        queue: q,
        cursor: None,
        force: false,
        scheduled: true,
    });
}

/// Whether `what` is refused because the browser lists scheduled messages: they are not
/// delivered yet, so only cancelling (`D`) acts on them; the flash says so.
pub(super) fn scheduled_refusal(st: &mut Model, what: &str) -> bool {
    if !(st.msgs.scheduled && matches!(st.view(), View::Messages | View::Message)) {
        return false;
    }
    let msg = format!(
        "{what} acts on delivered messages; these wait for their due time: D cancels one, b browses the queue"
    );
    status(st, Level::Warn, msg);
    true
}

/// `D` among scheduled messages: the one under the cursor (or the one selected) goes to be
/// planned, as `qdeck cancel-scheduled` plans it; the dialog asks with the plan's text.
pub(super) fn plan_cancel(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some((queue, msgs)) = chosen_for(st, "D cancels") else {
        return;
    };
    let [m] = msgs.as_slice() else {
        let msg = format!(
            "D cancels one scheduled message at a time: {} are selected (space unselects)",
            msgs.len()
        );
        status(st, Level::Warn, msg);
        return;
    };
    status(st, Level::Info, "checking the scheduled message…");
    fx.push(Effect::PlanCancel {
        queue,
        id: m.id.clone(),
    });
}

/// `n`: the browser's next page, appended.
pub(super) fn next_page(st: &mut Model, fx: &mut Vec<Effect>) {
    if st.view() != View::Messages {
        return;
    }
    if let (Some(q), Some(c)) = (st.msgs.queue.clone(), st.msgs.next.clone()) {
        st.msgs.loading = true;
        fx.push(Effect::Browse {
            queue: q,
            cursor: Some(c),
            force: st.msgs.forced,
            scheduled: st.msgs.scheduled,
        });
    }
}

pub(super) fn start_browse(st: &mut Model, q: QueueId, force: bool, fx: &mut Vec<Effect>) {
    if refused(st, fx) {
        return;
    }
    open_list(st, q.clone(), force, false);
    fx.push(Effect::Browse {
        queue: q,
        cursor: None,
        force,
        scheduled: false,
    });
}

/// The browser, empty and loading, on `q`'s own messages or its scheduled ones.
fn open_list(st: &mut Model, q: QueueId, force: bool, scheduled: bool) {
    st.msgs = MsgState {
        queue: Some(q),
        loading: true,
        forced: force,
        scheduled,
        ..Default::default()
    };
    if st.view() == View::Message {
        st.stack.pop();
    }
    push(st, View::Messages);
}

/// The browser's queue again from its first page, as it was opened (forced or not).
pub(super) fn reload(st: &mut Model, q: QueueId, fx: &mut Vec<Effect>) {
    st.msgs.loading = true;
    if let Some(signature) = st.msgs.group.clone() {
        fx.push(Effect::BrowseGroup {
            queue: q,
            signature,
            origin: st.msgs.group_origin.clone(),
        });
        return;
    }
    fx.push(Effect::Browse {
        queue: q,
        cursor: None,
        force: st.msgs.forced,
        scheduled: st.msgs.scheduled,
    });
}
