//! Confirm dialogs (browse with side effects, purge, redrive): opening them with the facts the
//! user must see, and acting only once the answer is complete.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::state::*;
use super::{messages, set_result, status, Effect};
use qdeck_backend::{BackendError, ProgressState};
use qdeck_engine::edit::{self, EditorOutcome};
use qdeck_model::domain::{QueueId, RedriveRequest, RedriveTarget};
use qdeck_model::sanitize::clean_short;

/// q / Ctrl-C while an operation runs ask first; with nothing running they quit.
pub(super) fn quit(st: &mut Model) {
    if st.op.is_some() {
        st.dialog = Some(Dialog::new(DialogKind::Quit, false));
    } else {
        st.exit.quit = true;
    }
}

/// `P`: the dialog opens at once and asks the engine for the plan (the count the CLI's
/// prompt gives), never the poller's last figure; `y` waits for it.
pub(super) fn open_purge(st: &mut Model, fx: &mut Vec<Effect>) {
    if let Some(q) = st.context_queue().cloned() {
        fx.push(Effect::PlanPurge(q.clone()));
        st.dialog = Some(Dialog::new(
            DialogKind::Purge {
                queue: q,
                plan: PlanShown::Planning,
            },
            st.session.protected,
        ));
    }
}

/// The purge dialog's plan came back; dropped when the dialog has closed or shows another
/// queue.
pub(super) fn purge_planned(
    st: &mut Model,
    queue: QueueId,
    result: Result<HeldPlan, BackendError>,
) {
    plan_arrived(st, &queue, result, |k| match k {
        DialogKind::Purge { queue, plan } => Some((queue, plan)),
        _ => None,
    });
}

/// A dialog's plan came back: it shows when the dialog open is still the one that asked
/// (`pick` gives that kind's queue and plan) about the same queue, else it is dropped.
fn plan_arrived(
    st: &mut Model,
    queue: &QueueId,
    result: Result<HeldPlan, BackendError>,
    pick: impl FnOnce(&mut DialogKind) -> Option<(&QueueId, &mut PlanShown)>,
) {
    let Some((q, plan)) = st.dialog.as_mut().and_then(|d| pick(&mut d.kind)) else {
        return;
    };
    if q != queue {
        return;
    }
    *plan = match result {
        Ok(p) => PlanShown::Ready(p),
        Err(e) => PlanShown::Refused(error_line(&e)),
    };
}

/// `:reset TO` on a Kafka group row: the dialog opens at once and asks the engine for the plan
/// (the one `qdeck reset-offsets --dry-run` prints); `y` waits for it.
pub(super) fn open_reset(st: &mut Model, arg: &str, fx: &mut Vec<Effect>) {
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    if !st.allows(qdeck_model::config::Access::Full) {
        // The tier's refusal, worded, kept in `:ops` and audited as every other key's is.
        super::refuse(
            st,
            "resetting offsets",
            qdeck_model::config::Access::Full,
            Some(qdeck_engine::gate::Mutation::ResetOffsets),
            fx,
        );
        return;
    }
    let to = match qdeck_model::domain::ResetTo::parse(arg) {
        Ok(to) => to,
        Err(why) => {
            status(st, Level::Warn, format!(":reset {why}"));
            return;
        }
    };
    fx.push(Effect::PlanReset(q.clone(), to));
    st.dialog = Some(Dialog::new(
        DialogKind::ResetOffsets {
            queue: q,
            to,
            plan: PlanShown::Planning,
        },
        st.session.protected,
    ));
}

/// The reset dialog's plan came back; dropped when the dialog has closed or shows another
/// row.
pub(super) fn reset_planned(
    st: &mut Model,
    queue: QueueId,
    result: Result<HeldPlan, BackendError>,
) {
    plan_arrived(st, &queue, result, |k| match k {
        DialogKind::ResetOffsets { queue, plan, .. } => Some((queue, plan)),
        _ => None,
    });
}

/// Open the redrive dialog; `to` presets a target queue (`:redrive QUEUE`).
pub(super) fn open_redrive(st: &mut Model, to: Option<QueueId>, fx: &mut Vec<Effect>) {
    let in_msgs = matches!(st.view(), View::Messages | View::Message);
    if messages::scheduled_refusal(st, "R (redrive)") {
        return;
    }
    let Some(q) = st.context_queue().cloned() else {
        return;
    };
    let Some(info) = st.store.get(&q).map(|e| e.info.clone()) else {
        status(st, Level::Warn, format!("{q}: not in the queue list yet"));
        return;
    };
    // Redrive moves out of a DLQ: the selected queue if it is one, else its DLQ.
    let source = if info.is_dlq || in_msgs {
        q.clone()
    } else if let Some(d) = info.dlq.clone() {
        d
    } else {
        status(
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
    let only_ids = redriven_ids(st);
    if only_ids.as_ref().is_some_and(Vec::is_empty) {
        status(
            st,
            Level::Warn,
            "nothing to redrive: the list shows no message",
        );
        return;
    }
    let scope = redrive_scope(st, only_ids.as_ref().map(Vec::len));
    let count = match &only_ids {
        Some(v) => Some(v.len() as u64),
        None => st
            .store
            .get(&source)
            .and_then(|e| e.latest.as_ref())
            .and_then(|s| s.depth),
    };
    let kind = DialogKind::Redrive {
        source,
        targets,
        target,
        rate: 0,
        only_ids,
        count,
        scope,
        plan: PlanShown::Planning,
    };
    fx.extend(redrive_request(&kind).map(Effect::PlanRedrive));
    st.dialog = Some(Dialog::new(kind, st.session.protected));
}

/// The messages `R` redrives by id: in the single-message view the one open (a message view
/// acts on its message, as `D` does), in the list the selected ones; in a list narrowed to a
/// reason group or a search, with none selected, the rows it shows (never the whole queue
/// behind them); `None` is the whole queue.
fn redriven_ids(st: &Model) -> Option<Vec<String>> {
    match Narrowing::of(st.view(), &st.msgs)? {
        Narrowing::OneMessage => super::messages::current_msg(st).map(|m| vec![m.id.clone()]),
        Narrowing::Marked => Some(st.msgs.marked.iter().cloned().collect()),
        Narrowing::Listed { .. } => Some(
            st.msgs
                .rows
                .iter()
                .filter_map(|&i| st.msgs.messages.get(i))
                .map(|m| m.id.clone())
                .collect(),
        ),
        Narrowing::ReasonGroups => None,
    }
}

/// What the dialog says the redrive covers when that is not simply what is selected: the rows
/// of a group or search list, or, from the reasons view, every group at once.
fn redrive_scope(st: &Model, shown: Option<usize>) -> Option<String> {
    match (Narrowing::of(st.view(), &st.msgs)?, shown) {
        (Narrowing::ReasonGroups, _) => Some(
            "every reason group: the whole DLQ, not only the group under the cursor (Enter opens a group to redrive it alone)"
                .into(),
        ),
        (Narrowing::Listed { group, search }, Some(n)) => {
            let what = [
                group.map(|g| format!("reason group {}", clean_short(&g, 60))),
                search.map(|s| format!("search /{}", clean_short(&s, 40))),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ");
            Some(format!(
                "the {n} message(s) this list shows ({what}), not the rest of the queue"
            ))
        }
        _ => None,
    }
}

/// The request the redrive dialog stands for (its target, rate and selection; capped by the
/// count it shows once planned).
fn redrive_request(kind: &DialogKind) -> Option<RedriveRequest> {
    let DialogKind::Redrive {
        source,
        targets,
        target,
        rate,
        only_ids,
        ..
    } = kind
    else {
        return None;
    };
    Some(RedriveRequest {
        source: source.clone(),
        target: targets
            .get(*target)
            .cloned()
            .unwrap_or(RedriveTarget::Origin),
        // Planned without a cap: the plan's own exact count caps the run (`ops::run`), so
        // messages that dead-letter again while it runs are left for the next one.
        max: None,
        rate: RATES.get(*rate).copied().flatten(),
        only_ids: only_ids.clone(),
        window: None,
    })
}

/// The plan for the redrive dialog came back: show its count and notes, or why it cannot
/// run. Dropped when the dialog has closed or now shows another target.
pub(super) fn redrive_planned(
    st: &mut Model,
    req: RedriveRequest,
    result: Result<HeldPlan, BackendError>,
) {
    let Some(d) = st.dialog.as_mut() else {
        return;
    };
    let current = redrive_request(&d.kind);
    let DialogKind::Redrive { count, plan, .. } = &mut d.kind else {
        return;
    };
    let Some(current) = current
        .filter(|c| c.source == req.source && c.target == req.target && c.only_ids == req.only_ids)
    else {
        return;
    };
    match result {
        Ok(p) => {
            // The rate may have changed while the plan was coming: the dialog's rate runs.
            let p = if current.rate == req.rate {
                p
            } else {
                HeldPlan::new(p.into_planned().with_rate(current.rate))
            };
            *count = Some(p.planned().count().ready);
            *plan = PlanShown::Ready(p);
        }
        Err(e) => *plan = PlanShown::Refused(error_line(&e)),
    }
}

/// The plan for deleting chosen messages came back: ask, with what it does to the others, or
/// say why the broker cannot. Dropped when the user has left that queue's messages meanwhile.
pub(super) fn open_delete(
    st: &mut Model,
    queue: QueueId,
    ids: Vec<String>,
    result: Result<HeldPlan, BackendError>,
) {
    if st.msgs.queue.as_ref() != Some(&queue)
        || !matches!(st.view(), View::Messages | View::Message)
    {
        return;
    }
    match result {
        Ok(plan) => {
            st.status = None;
            st.dialog = Some(Dialog::new(
                DialogKind::Delete { queue, ids, plan },
                st.session.protected,
            ));
        }
        Err(e) => {
            let why = error_line(&e);
            status(
                st,
                Level::Warn,
                format!("cannot delete from {queue}: {why}"),
            );
        }
    }
}

/// The plan for cancelling a scheduled message came back: ask with its text, or say why not.
/// Dropped when the user has left that queue's scheduled messages meanwhile.
pub(super) fn open_cancel(
    st: &mut Model,
    queue: QueueId,
    id: String,
    result: Result<HeldPlan, BackendError>,
) {
    if st.msgs.queue.as_ref() != Some(&queue)
        || !st.msgs.scheduled
        || !matches!(st.view(), View::Messages | View::Message)
    {
        return;
    }
    match result {
        Ok(plan) => {
            st.status = None;
            st.dialog = Some(Dialog::new(
                DialogKind::CancelScheduled { queue, id, plan },
                st.session.protected,
            ));
        }
        Err(e) => {
            let why = error_line(&e);
            status(st, Level::Warn, format!("cannot cancel {id}: {why}"));
        }
    }
}

/// The checked copy/move came back: ask, or say why it cannot go ahead.
pub(super) fn open_transfer(
    st: &mut Model,
    moving: bool,
    result: Result<Box<TransferAsk>, BackendError>,
) {
    match result {
        Ok(t) => {
            if st.msgs.queue.as_ref() != Some(&t.source) {
                return;
            }
            st.status = None;
            let typed = t.typed.is_some();
            st.dialog = Some(Dialog::new(DialogKind::Transfer(t), typed));
        }
        Err(e) => {
            let verb = if moving { "move" } else { "copy" };
            status(
                st,
                Level::Warn,
                format!("cannot {verb}: {}", error_line(&e)),
            );
        }
    }
}

/// The editor closed: ask where to send the copy, or say why nothing will be sent.
pub(super) fn edited(
    st: &mut Model,
    source: QueueId,
    original: Box<qdeck_model::domain::Message>,
    result: Result<EditorOutcome, String>,
) {
    let edited = match result {
        Ok(EditorOutcome::Changed(e)) => e,
        Ok(EditorOutcome::Unchanged) => {
            status(
                st,
                Level::Warn,
                "the file was left unchanged; nothing was sent",
            );
            return;
        }
        Err(e) => {
            status(st, Level::Warn, e);
            return;
        }
    };
    let origin = edit::resolve_target(&source, &original, &RedriveTarget::Origin);
    let mut targets = vec![origin.clone()];
    let mut others: Vec<QueueId> = st
        .store
        .entries()
        .iter()
        .map(|e| e.info.id.clone())
        .filter(|q| *q != origin)
        .collect();
    others.sort();
    targets.extend(others);
    st.dialog = Some(Dialog::new(
        DialogKind::Edit {
            source,
            original,
            edited: Box::new(edited),
            targets,
            target: 0,
        },
        true,
    ));
}

/// The edited text came back unreadable: offer to open it again (the focused button, so
/// Enter never drops the user's work), or to drop it.
pub(super) fn edit_unreadable(
    st: &mut Model,
    source: QueueId,
    original: Box<qdeck_model::domain::Message>,
    text: String,
    why: String,
) {
    let mut d = Dialog::new(
        DialogKind::EditUnreadable {
            source,
            original,
            text,
            why,
        },
        false,
    );
    d.confirm_focused = true;
    st.dialog = Some(d);
}

/// The dialog closes without acting, and says so: a dialog that just vanished leaves the
/// user wondering whether it ran.
fn cancel(st: &mut Model) {
    let Some(d) = st.dialog.take() else {
        return;
    };
    let what = match d.kind {
        DialogKind::Quit => "quit cancelled; the operation keeps running",
        DialogKind::Edit { .. } => "cancelled; nothing was sent",
        DialogKind::EditUnreadable { .. } => "cancelled; the edit was dropped, nothing was sent",
        DialogKind::Browse { .. } => "cancelled; nothing was browsed",
        _ => "cancelled; nothing changed",
    };
    status(st, Level::Info, what);
}

pub(super) fn dialog_key(st: &mut Model, k: KeyEvent, fx: &mut Vec<Effect>) {
    let Some(d) = st.dialog.as_mut() else {
        return;
    };
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && k.code == KeyCode::Char('c') {
        cancel(st);
        return;
    }
    // Keys that are text while a protected profile types the queue name.
    let typing = d.needs_name;
    match k.code {
        KeyCode::Esc => cancel(st),
        KeyCode::Tab | KeyCode::BackTab => {
            let cycle = |target: &mut usize, n: usize| {
                let n = n.max(1);
                *target = if k.code == KeyCode::Tab {
                    (*target + 1) % n
                } else {
                    (*target + n - 1) % n
                };
            };
            match &mut d.kind {
                DialogKind::Redrive {
                    targets,
                    target,
                    plan,
                    ..
                } => {
                    let before = *target;
                    cycle(target, targets.len());
                    if *target != before {
                        *plan = PlanShown::Planning;
                        fx.extend(redrive_request(&d.kind).map(Effect::PlanRedrive));
                    }
                }
                DialogKind::Edit {
                    targets, target, ..
                } => cycle(target, targets.len()),
                _ => {}
            }
        }
        KeyCode::Up | KeyCode::Down => {
            if let DialogKind::Redrive { rate, plan, .. } = &mut d.kind {
                let n = RATES.len();
                *rate = if k.code == KeyCode::Up {
                    (*rate + 1) % n
                } else {
                    (*rate + n - 1) % n
                };
                // The rate is part of the plan (and of its sentence); nothing else changes,
                // so the plan shown is re-rated in place rather than asked for again.
                if let PlanShown::Ready(held) = plan {
                    let chosen = RATES.get(*rate).copied().flatten();
                    *held = HeldPlan::new(held.planned().clone().with_rate(chosen));
                }
            }
        }
        KeyCode::Left | KeyCode::Right => d.confirm_focused = !d.confirm_focused,
        KeyCode::Char('h' | 'l') if !typing => {
            d.confirm_focused = !d.confirm_focused;
        }
        KeyCode::PageDown => d.scroll += 3,
        KeyCode::PageUp => d.scroll = d.scroll.saturating_sub(3),
        KeyCode::Backspace => {
            d.typed.pop();
        }
        KeyCode::Char(c) if typing && !ctrl => d.typed.push(c),
        KeyCode::Char('y' | 'Y') if d.ready() => {
            if let Some(d) = st.dialog.take() {
                confirm(st, d, fx);
            }
        }
        KeyCode::Enter => {
            // Enter presses the focused button, and Cancel has the focus by default: the key
            // people press to open things never purges. A typed queue name is deliberate
            // enough to confirm with Enter.
            let go = if typing { d.ready() } else { d.confirm_focused };
            if typing && !go {
                return;
            }
            if go {
                if let Some(d) = st.dialog.take() {
                    confirm(st, d, fx);
                }
            } else {
                cancel(st);
            }
        }
        KeyCode::Char('n' | 'N' | 'q') => cancel(st),
        _ => {}
    }
}

/// A confirmed operation starts when the tier allows it and no other one runs (said in a
/// flash); its label shows in the status line until it ends.
fn begin_op(st: &mut Model, need: qdeck_model::config::Access, label: String) -> bool {
    if !st.allows(need) {
        // Never silent: the refusal is the action's result, in the status line and in `:ops`,
        // worded as the CLI's gate words it and with the exit code the CLI gives (5).
        let why = format!(
            "{label}: refused: profile {:?} has access = \"{}\": this needs access = \"{}\"",
            st.session.profile,
            st.session.access.as_str(),
            need.as_str()
        );
        set_result(st, &label, &OpSummary::refused(why));
        return false;
    }
    if st.op.is_some() {
        status(st, Level::Warn, "an operation is already running");
        return false;
    }
    st.op = Some(OpState {
        label,
        progress: ProgressState::default(),
        started_ms: st.now_ms,
        cancelling: false,
    });
    true
}

fn confirm(st: &mut Model, d: Dialog, fx: &mut Vec<Effect>) {
    // Purge and redrive run only on the plan the dialog shows.
    if let Some(why) = plan_not_ready(&d.kind) {
        status(st, Level::Warn, why);
        st.dialog = Some(d);
        return;
    }
    match d.kind {
        DialogKind::Browse { queue, .. } => messages::start_browse(st, queue, false, fx),
        DialogKind::Edit {
            source,
            original,
            edited,
            targets,
            target,
        } => {
            if !st.allows(qdeck_model::config::Access::Redrive) {
                return;
            }
            if let Some(t) = targets.get(target) {
                fx.push(Effect::Resend {
                    source,
                    original,
                    edited,
                    target: t.clone(),
                });
            }
        }
        DialogKind::Quit => confirm_quit(st, fx),
        DialogKind::EditUnreadable {
            source,
            original,
            text,
            ..
        } => {
            if st.allows(qdeck_model::config::Access::Redrive) {
                fx.push(Effect::EditAgain {
                    queue: source,
                    message: original,
                    draft: text,
                });
            }
        }
        DialogKind::Transfer(t) => confirm_transfer(st, t, fx),
        DialogKind::Delete { queue, ids, plan } => confirm_delete(st, queue, ids, plan, fx),
        DialogKind::CancelScheduled { queue, id, plan } => {
            if !begin_op(
                st,
                qdeck_model::config::Access::Full,
                format!("cancel {id} in {queue}"),
            ) {
                return;
            }
            st.msgs.marked.remove(&id);
            fx.push(Effect::RunPlan(plan));
        }
        DialogKind::ResetOffsets { queue, plan, .. } => {
            let Some(plan) = plan.held().cloned() else {
                return;
            };
            if !begin_op(
                st,
                qdeck_model::config::Access::Full,
                format!("reset offsets of {queue}"),
            ) {
                return;
            }
            fx.push(Effect::RunPlan(plan));
        }
        DialogKind::Purge { queue, plan } => {
            let Some(plan) = plan.held().cloned() else {
                return;
            };
            if !begin_op(
                st,
                qdeck_model::config::Access::Full,
                format!("purge {queue}"),
            ) {
                return;
            }
            fx.push(Effect::RunPlan(plan));
        }
        DialogKind::Redrive { source, plan, .. } => {
            if let Some(plan) = plan.held().cloned() {
                confirm_redrive(st, &source, plan, fx);
            }
        }
    }
}

/// Why a purge or redrive dialog cannot be confirmed yet: its plan is still coming, or
/// refused.
fn plan_not_ready(kind: &DialogKind) -> Option<String> {
    let (verb, plan) = match kind {
        DialogKind::Redrive { plan, .. } => ("redrive", plan),
        DialogKind::Purge { plan, .. } => ("purge", plan),
        DialogKind::ResetOffsets { plan, .. } => ("reset offsets", plan),
        _ => return None,
    };
    match plan {
        PlanShown::Ready(_) => None,
        PlanShown::Planning => {
            Some("still planning with the broker; confirm once the count shows".to_string())
        }
        PlanShown::Refused(why) => Some(format!("cannot {verb}: {why}")),
    }
}

fn confirm_quit(st: &mut Model, fx: &mut Vec<Effect>) {
    // Cancel the run; the console quits when its summary arrives.
    st.exit.after_op = true;
    match &mut st.op {
        Some(op) => {
            op.cancelling = true;
            fx.push(Effect::CancelOp);
        }
        None => st.exit.quit = true,
    }
}

fn confirm_transfer(st: &mut Model, t: Box<TransferAsk>, fx: &mut Vec<Effect>) {
    // A copy to another profile only reads this one (the prod → local repro path); the
    // target profile's tier was checked by the plan the dialog shows.
    let need = if t.moving {
        qdeck_model::config::Access::Full
    } else if t.to_profile.is_some() {
        qdeck_model::config::Access::Browse
    } else {
        qdeck_model::config::Access::Redrive
    };
    let verb = if t.moving { "move" } else { "copy" };
    if !begin_op(
        st,
        need,
        format!("{verb} {} → {}", t.messages.len(), t.to_label),
    ) {
        return;
    }
    if t.moving {
        st.msgs.marked.clear();
    }
    fx.push(Effect::Transfer(t));
}

fn confirm_delete(
    st: &mut Model,
    queue: QueueId,
    ids: Vec<String>,
    plan: HeldPlan,
    fx: &mut Vec<Effect>,
) {
    let label = format!("delete {} from {queue}", ids.len());
    if !begin_op(st, qdeck_model::config::Access::Full, label) {
        return;
    }
    st.msgs.marked.retain(|m| !ids.contains(m));
    fx.push(Effect::RunPlan(plan));
}

fn confirm_redrive(st: &mut Model, source: &QueueId, plan: HeldPlan, fx: &mut Vec<Effect>) {
    let target = match plan.planned() {
        qdeck_engine::ops::Planned::Redrive { req, .. } => req.target.clone(),
        _ => RedriveTarget::Origin,
    };
    let label = match &target {
        RedriveTarget::Origin => format!("redrive {source} → origin"),
        RedriveTarget::Queue(q) => format!("redrive {source} → {q}"),
    };
    if !begin_op(st, qdeck_model::config::Access::Redrive, label) {
        return;
    }
    st.msgs.marked.clear();
    fx.push(Effect::RunPlan(plan));
}
