//! What each kind of dialog says above its buttons: the title and the text lines.

use ratatui::text::Line;

use super::super::{fmt_count, styled};
use crate::tui::state::{DialogKind, HeldPlan, Model, Narrowing, PlanShown, TransferAsk, RATES};
use crate::tui::theme::Theme;
use qdeck_engine::edit::Edited;
use qdeck_engine::ops::Planned;
use qdeck_model::domain::{Message, QueueId, RedriveMode, RedriveTarget};
use qdeck_model::sanitize::{clean, clean_short};

/// The dialog's title and text for its kind.
pub(super) fn body<'a>(st: &Model, kind: &DialogKind) -> (&'static str, Vec<Line<'a>>) {
    let t = &st.theme;
    match kind {
        DialogKind::Purge { queue, plan } => (" purge ", purge(st, queue, plan)),
        DialogKind::ResetOffsets { queue, to, plan } => {
            (" reset offsets ", reset(t, queue, *to, plan))
        }
        DialogKind::Redrive {
            source,
            targets,
            target,
            rate,
            only_ids,
            count,
            scope,
            plan,
        } => {
            let mut lines = match plan.held() {
                Some(p) => vec![question(t, p)],
                None => redrive_route(t, source, targets, *target, only_ids, *count),
            };
            if let Some(s) = scope {
                // Escaped where it was made (clean_short of the group and the search).
                lines.push(Line::from(styled(s.clone(), t.warn)));
            }
            lines.push(redrive_choices(t, targets.len(), *rate));
            lines.extend(redrive_plan(t, plan));
            (" redrive ", lines)
        }
        DialogKind::Quit => (" quit ", quit(st)),
        DialogKind::Edit {
            source,
            original,
            edited,
            targets,
            target,
        } => (
            " edit and resend ",
            edit(t, source, original, edited, targets, *target),
        ),
        DialogKind::Transfer(tr) => (if tr.moving { " move " } else { " copy " }, transfer(t, tr)),
        DialogKind::Delete { ids, plan, .. } => (" delete ", delete(t, ids, plan)),
        DialogKind::Browse { queue, note } => (" browse ", browse(t, queue, note)),
        DialogKind::CancelScheduled { plan, .. } => {
            (" cancel scheduled ", cancel_scheduled(t, plan))
        }
        DialogKind::EditUnreadable { original, why, .. } => {
            (" edit: cannot read it ", unreadable(t, original, why))
        }
    }
}

fn unreadable<'a>(t: &Theme, original: &Message, why: &str) -> Vec<Line<'a>> {
    vec![
        Line::from(vec![
            styled("The edited copy of ", t.text),
            styled(clean_short(&original.id, 30), t.title),
            styled(" cannot be read back:", t.text),
        ]),
        Line::from(styled(clean(why).into_owned(), t.error)),
        Line::from(styled(
            "Edit again opens your text as you left it; discard drops it. Nothing was sent.",
            t.dim,
        )),
    ]
}

/// The plan's own question, the line the CLI's prompt asks too (already escaped).
fn question<'a>(t: &Theme, plan: &HeldPlan) -> Line<'a> {
    Line::from(styled(plan.planned().question(), t.text))
}

fn reset<'a>(
    t: &Theme,
    queue: &QueueId,
    to: qdeck_model::domain::ResetTo,
    plan: &PlanShown,
) -> Vec<Line<'a>> {
    let row = clean_short(queue.as_str(), 60);
    match plan {
        PlanShown::Ready(p) => vec![
            Line::from(styled(p.planned().question(), t.warn)),
            Line::from(styled(
                "Kafka moves the offsets only while the group has no member.",
                t.dim,
            )),
        ],
        PlanShown::Planning => vec![
            Line::from(vec![styled(
                format!("Reset the offsets of {row} to {to}?"),
                t.text,
            )]),
            Line::from(styled("reading offsets with the broker…", t.dim)),
        ],
        PlanShown::Refused(why) => vec![Line::from(styled(
            format!("cannot reset the offsets of {row}: {}", clean(why)),
            t.error,
        ))],
    }
}

fn purge<'a>(st: &Model, queue: &QueueId, plan: &PlanShown) -> Vec<Line<'a>> {
    let t = &st.theme;
    let mut lines = match plan {
        PlanShown::Ready(p) => vec![Line::from(styled(p.planned().question(), t.warn))],
        PlanShown::Planning => vec![
            Line::from(vec![
                styled("Purge ", t.text),
                styled(clean_short(queue.as_str(), 60), t.title),
                styled("?", t.text),
            ]),
            Line::from(styled("counting with the broker…", t.dim)),
        ],
        PlanShown::Refused(why) => vec![Line::from(styled(
            format!(
                "cannot purge {}: {}",
                clean_short(queue.as_str(), 60),
                clean(why)
            ),
            t.error,
        ))],
    };
    if let Some(narrow) = Narrowing::of(st.view(), &st.msgs) {
        lines.push(Line::from(styled(
            format!("the whole queue: every message, not only {}", narrow.seen()),
            t.warn,
        )));
    }
    let caps = st.caps_for(queue);
    if let Some(n) = &caps.purge_note {
        lines.push(Line::from(styled(clean(n).into_owned(), t.dim)));
    }
    if let Some(c) = caps.purge_cooldown_secs {
        lines.push(Line::from(styled(
            format!("the broker allows one purge per {c} s"),
            t.dim,
        )));
    }
    lines
}

/// What is redriven, from where and to where.
fn redrive_route<'a>(
    t: &Theme,
    source: &QueueId,
    targets: &[RedriveTarget],
    target: usize,
    only_ids: &Option<Vec<String>>,
    count: Option<u64>,
) -> Vec<Line<'a>> {
    let what = match only_ids.as_deref() {
        Some([id]) => format!("this message ({})", clean_short(id, 24)),
        Some(v) => format!("{} selected messages", v.len()),
        None => format!("all {} messages", fmt_count(count)),
    };
    let tgt = match targets.get(target) {
        Some(RedriveTarget::Queue(q)) => clean_short(q.as_str(), 50),
        _ => "origin (each message back to the queue it came from)".into(),
    };
    vec![
        Line::from(vec![
            styled(format!("Redrive {what} from "), t.text),
            styled(clean_short(source.as_str(), 50), t.title),
        ]),
        Line::from(vec![
            styled("to  ", t.dim),
            styled(tgt, t.accent),
            styled(
                if targets.len() > 1 {
                    "   (Tab: other target)"
                } else {
                    ""
                },
                t.dim,
            ),
        ]),
    ]
}

/// The dialog's own choices: the target (when there are several) and the rate.
fn redrive_choices<'a>(t: &Theme, targets: usize, rate: usize) -> Line<'a> {
    let r = match RATES.get(rate).copied().flatten() {
        Some(r) => format!("{r:.0} msg/s"),
        None => "unlimited".into(),
    };
    let mut spans = vec![
        styled("rate ", t.dim),
        styled(r, t.accent),
        styled("   (↑/↓ to change", t.dim),
    ];
    if targets > 1 {
        spans.push(styled("; Tab: other target", t.dim));
    }
    spans.push(styled(")", t.dim));
    Line::from(spans)
}

/// What the plan says, not what the broker can do in general: the plan knows this queue and
/// this target (a Service Bus target that needs sessions, a new MessageId, a quorum queue's
/// delivery limit).
fn redrive_plan<'a>(t: &Theme, plan: &PlanShown) -> Vec<Line<'a>> {
    match plan {
        PlanShown::Planning => vec![Line::from(styled("planning with the broker…", t.dim))],
        PlanShown::Refused(why) => vec![Line::from(styled(
            format!("cannot redrive: {}", clean(why)),
            t.error,
        ))],
        // The plan's sentence (above) carries its count, target, mode and notes; what it
        // cannot say in words is that a client-side move may duplicate but never lose.
        PlanShown::Ready(p) => match p.planned() {
            Planned::Redrive { plan, .. } if plan.mode == RedriveMode::ClientSide => {
                vec![Line::from(styled(
                    "copy → broker confirms → delete: a crash may duplicate, never lose",
                    t.dim,
                ))]
            }
            _ => Vec::new(),
        },
    }
}

fn quit<'a>(st: &Model) -> Vec<Line<'a>> {
    let t = &st.theme;
    let what = match &st.op {
        Some(op) => {
            let p = &op.progress;
            let n = |v: u64| crate::tui::views::fmt_thousands(v);
            let of = p.total.map(|t| format!("/{}", n(t))).unwrap_or_default();
            format!("{} running: {}{of}", clean(&op.label), n(p.done))
        }
        None => "the operation has finished".to_string(),
    };
    vec![
        Line::from(vec![
            styled(what, t.accent),
            styled(" — stop it and quit?", t.text),
        ]),
        Line::from(styled(
            "qdeck waits for the current batch, then prints the summary and exits.",
            t.dim,
        )),
    ]
}

fn edit<'a>(
    t: &Theme,
    source: &QueueId,
    original: &Message,
    edited: &Edited,
    targets: &[QueueId],
    target: usize,
) -> Vec<Line<'a>> {
    let tgt = targets
        .get(target)
        .map(|q| clean_short(q.as_str(), 50))
        .unwrap_or_default();
    let origin = if target == 0 { "  (origin)" } else { "" };
    let removed = original
        .headers
        .iter()
        .filter(|(k, _)| k != "state" && !edited.headers.iter().any(|(e, _)| e == k))
        .count();
    vec![
        Line::from(vec![
            styled("Send the edited copy of ", t.text),
            styled(clean_short(&original.id, 30), t.title),
            styled(" from ", t.text),
            styled(clean_short(source.as_str(), 40), t.title),
        ]),
        Line::from(vec![
            styled("to  ", t.dim),
            styled(tgt, t.accent),
            styled(origin, t.dim),
            styled(
                if targets.len() > 1 {
                    "   (Tab: other queue)"
                } else {
                    ""
                },
                t.dim,
            ),
        ]),
        Line::from(styled(
            format!(
                "{} bytes, {} headers ({removed} removed); the original is deleted once the broker confirmed the copy",
                edited.body.len(),
                edited.headers.len()
            ),
            t.dim,
        )),
    ]
}

fn transfer<'a>(t: &Theme, tr: &TransferAsk) -> Vec<Line<'a>> {
    // The plan the dialog holds speaks for itself, as in `qdeck copy`'s prompt.
    if let Some(p) = &tr.plan {
        let mut lines = vec![question(t, p)];
        if let Planned::Transfer(tp) = p.planned() {
            for n in tp.notes() {
                lines.push(Line::from(styled(format!("· {n}"), t.dim)));
            }
        }
        return lines;
    }
    let verb = if tr.moving { "Move" } else { "Copy" };
    let mut lines = vec![
        Line::from(vec![
            styled(
                format!("{verb} {} message(s) from ", tr.messages.len()),
                t.text,
            ),
            styled(clean_short(&tr.from_label, 50), t.title),
        ]),
        Line::from(vec![
            styled("to  ", t.dim),
            styled(clean_short(&tr.to_label, 60), t.accent),
        ]),
    ];
    if tr.moving {
        lines.push(Line::from(styled(
            "Each original is deleted after the target confirmed its copy.",
            t.warn,
        )));
        if let Some(n) = &tr.delete_note {
            lines.push(Line::from(styled(clean(n).into_owned(), t.dim)));
        }
    }
    for h in &tr.header_lines {
        lines.push(Line::from(styled(clean(h).into_owned(), t.dim)));
    }
    lines
}

fn delete<'a>(t: &Theme, ids: &[String], plan: &HeldPlan) -> Vec<Line<'a>> {
    let mut shown: Vec<String> = ids.iter().take(4).map(|i| clean_short(i, 24)).collect();
    if ids.len() > shown.len() {
        shown.push(format!("… and {} more", ids.len() - shown.len()));
    }
    vec![
        Line::from(styled(plan.planned().question(), t.warn)),
        Line::from(vec![
            styled("ids ", t.dim),
            styled(shown.join(", "), t.accent),
        ]),
    ]
}

fn cancel_scheduled<'a>(t: &Theme, plan: &HeldPlan) -> Vec<Line<'a>> {
    vec![
        question(t, plan),
        Line::from(styled("No other message changes.", t.dim)),
    ]
}

fn browse<'a>(t: &Theme, queue: &QueueId, note: &str) -> Vec<Line<'a>> {
    vec![
        Line::from(vec![
            styled("Browse ", t.text),
            styled(clean_short(queue.as_str(), 60), t.title),
            styled("?", t.text),
        ]),
        Line::from(styled(
            format!("On this broker browsing has a side effect: {}", clean(note)),
            t.warn,
        )),
    ]
}
