//! What comes back from a running operation: its progress, its summary, and an edited
//! copy's result. Each reloads the message browser, whose page the operation changed.

use super::state::*;
use super::{messages, set_result, Effect};
use qdeck_backend::ProgressState;
use qdeck_model::domain::QueueId;

pub(super) fn progress(st: &mut Model, p: ProgressState) {
    if let Some(op) = &mut st.op {
        op.progress = p;
        st.dirty = true;
    }
}

/// The operation ended; true when the console quits now (the user asked to quit after it).
pub(super) fn done(st: &mut Model, r: OpSummary, fx: &mut Vec<Effect>) -> bool {
    let label = st.op.take().map_or_else(String::new, |op| op.label);
    set_result(st, &label, &r);
    if st.exit.after_op {
        st.exit.summary = Some(r);
        st.exit.quit = true;
        return true;
    }
    fx.push(Effect::Refresh);
    if matches!(st.view(), View::Messages | View::Message) {
        if let Some(q) = st.msgs.queue.clone() {
            after_op_changed_queue(st);
            messages::reload(st, q, fx);
        }
    }
    false
}

pub(super) fn resent(st: &mut Model, queue: QueueId, done: OpSummary, fx: &mut Vec<Effect>) {
    set_result(st, "edit and resend", &done);
    if st.msgs.queue.as_ref() == Some(&queue) {
        after_op_changed_queue(st);
        messages::reload(st, queue, fx);
    }
}

/// An operation changed the queue the open message came from: the message on screen may be
/// gone or moved, so the view returns to the list (which reloads) and the result line says so,
/// rather than keep showing, and acting on, what was true before.
fn after_op_changed_queue(st: &mut Model) {
    if st.view() != View::Message {
        return;
    }
    st.stack.pop();
    st.body = BodyState::default();
    if let Some(status) = &mut st.status {
        status
            .text
            .push_str(" · message view closed: the list is reloaded");
    }
}
