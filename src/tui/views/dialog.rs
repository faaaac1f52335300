//! Confirmation dialogs: count and target shown; protected profiles type the queue name.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, centered, clear, fmt_count, styled};
use crate::domain::{RedriveMode, RedriveTarget};
use crate::sanitize::{clean, clean_short};
use crate::tui::state::{Dialog, DialogKind, PlanShown, State, RATES};

pub fn render(f: &mut Frame, st: &State, d: &Dialog, area: Rect) {
    let t = &st.theme;
    let mut lines: Vec<Line> = Vec::new();
    let title;
    match &d.kind {
        DialogKind::Purge { queue, count } => {
            title = " purge ";
            lines.push(Line::from(vec![
                styled("Purge ", t.text),
                styled(clean_short(queue.as_str(), 60), t.title),
                styled("?", t.text),
            ]));
            lines.push(Line::from(styled(
                format!("This deletes {} messages for good.", fmt_count(*count)),
                t.warn,
            )));
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
        }
        DialogKind::Redrive {
            source,
            targets,
            target,
            rate,
            only_ids,
            count,
            plan,
        } => {
            title = " redrive ";
            let what = match only_ids {
                Some(v) => format!("{} selected messages", v.len()),
                None => format!("all {} messages", fmt_count(*count)),
            };
            lines.push(Line::from(vec![
                styled(format!("Redrive {what} from "), t.text),
                styled(clean_short(source.as_str(), 50), t.title),
            ]));
            let tgt = match targets.get(*target) {
                Some(RedriveTarget::Queue(q)) => clean_short(q.as_str(), 50),
                _ => "origin (each message back to the queue it came from)".into(),
            };
            lines.push(Line::from(vec![
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
            ]));
            let r = match RATES.get(*rate).copied().flatten() {
                Some(r) => format!("{r:.0} msg/s"),
                None => "unlimited".into(),
            };
            lines.push(Line::from(vec![
                styled("rate ", t.dim),
                styled(r, t.accent),
                styled("   (↑/↓ to change)", t.dim),
            ]));
            // What the plan says, not what the broker can do in general: the plan knows this
            // queue and this target (a Service Bus target that needs sessions, a new
            // MessageId, a quorum queue's delivery limit).
            match plan {
                PlanShown::Planning => {
                    lines.push(Line::from(styled("planning with the broker…", t.dim)))
                }
                PlanShown::Refused(why) => lines.push(Line::from(styled(
                    format!("cannot redrive: {}", clean(why)),
                    t.error,
                ))),
                PlanShown::Ready(p) => {
                    let how = match &p.mode {
                        RedriveMode::Native(s) => format!("the broker moves them ({})", clean(s)),
                        RedriveMode::ClientSide => {
                            "copy → broker confirms → delete: a crash may duplicate, never lose"
                                .into()
                        }
                        RedriveMode::Unsupported(s) => format!("not supported: {}", clean(s)),
                    };
                    lines.push(Line::from(styled(how, t.dim)));
                    for n in &p.notes {
                        lines.push(Line::from(styled(format!("· {}", clean(n)), t.warn)));
                    }
                }
            }
        }
        DialogKind::Quit => {
            title = " quit ";
            let what = match &st.op {
                Some(op) => {
                    let p = &op.progress;
                    let n = |v: u64| crate::tui::views::fmt_thousands(v);
                    let of = p.total.map(|t| format!("/{}", n(t))).unwrap_or_default();
                    format!("{} running: {}{of}", clean(&op.label), n(p.done))
                }
                None => "the operation has finished".to_string(),
            };
            lines.push(Line::from(vec![
                styled(what, t.accent),
                styled(" — cancel it and quit?", t.text),
            ]));
            lines.push(Line::from(styled(
                "qdeck waits for the current batch, then prints the summary and exits.",
                t.dim,
            )));
        }
        DialogKind::Edit {
            source,
            original,
            edited,
            targets,
            target,
        } => {
            title = " edit and resend ";
            lines.push(Line::from(vec![
                styled("Send the edited copy of ", t.text),
                styled(clean_short(&original.id, 30), t.title),
                styled(" from ", t.text),
                styled(clean_short(source.as_str(), 40), t.title),
            ]));
            let tgt = targets
                .get(*target)
                .map(|q| clean_short(q.as_str(), 50))
                .unwrap_or_default();
            let origin = if *target == 0 { "  (origin)" } else { "" };
            lines.push(Line::from(vec![
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
            ]));
            let removed = original
                .headers
                .iter()
                .filter(|(k, _)| k != "state" && !edited.headers.iter().any(|(e, _)| e == k))
                .count();
            lines.push(Line::from(styled(
                format!(
                    "{} bytes, {} headers ({removed} removed); the original is deleted once the broker confirmed the copy",
                    edited.body.len(),
                    edited.headers.len()
                ),
                t.dim,
            )));
        }
        DialogKind::Transfer(tr) => {
            let verb = if tr.moving { "Move" } else { "Copy" };
            title = if tr.moving { " move " } else { " copy " };
            lines.push(Line::from(vec![
                styled(
                    format!("{verb} {} message(s) from ", tr.messages.len()),
                    t.text,
                ),
                styled(clean_short(&tr.from_label, 50), t.title),
            ]));
            lines.push(Line::from(vec![
                styled("to  ", t.dim),
                styled(clean_short(&tr.to_label, 60), t.accent),
            ]));
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
        }
        DialogKind::Delete { queue, ids, note } => {
            title = " delete ";
            lines.push(Line::from(vec![
                styled(format!("Delete {} message(s) from ", ids.len()), t.text),
                styled(clean_short(queue.as_str(), 50), t.title),
                styled("?", t.text),
            ]));
            lines.push(Line::from(styled(
                "They are gone for good; no other message is deleted.",
                t.warn,
            )));
            let mut shown: Vec<String> = ids.iter().take(4).map(|i| clean_short(i, 24)).collect();
            if ids.len() > shown.len() {
                shown.push(format!("… and {} more", ids.len() - shown.len()));
            }
            lines.push(Line::from(vec![
                styled("ids ", t.dim),
                styled(shown.join(", "), t.accent),
            ]));
            if let Some(n) = note {
                lines.push(Line::from(styled(clean(n).into_owned(), t.dim)));
            }
        }
        DialogKind::Browse { queue, note } => {
            title = " browse ";
            lines.push(Line::from(vec![
                styled("Browse ", t.text),
                styled(clean_short(queue.as_str(), 60), t.title),
                styled("?", t.text),
            ]));
            lines.push(Line::from(styled(
                format!("On this broker browsing has a side effect: {}", clean(note)),
                t.warn,
            )));
        }
    }
    if d.needs_name {
        lines.push(Line::from(""));
        lines.push(Line::from(styled(
            if matches!(d.kind, DialogKind::Edit { .. }) {
                "Type the target queue's name to confirm."
            } else if let DialogKind::Transfer(tr) = &d.kind {
                if tr.typed.as_ref() == Some(&tr.to) {
                    "Protected profile: type the target queue's name to confirm."
                } else {
                    "Protected profile: type the queue name to confirm."
                }
            } else {
                "Protected profile: type the queue name to confirm."
            },
            t.warn,
        )));
        lines.push(Line::from(vec![
            styled("> ", t.accent),
            styled(clean(&d.typed).into_owned(), t.title),
            styled("█", t.dim),
        ]));
    }
    let legend = legend(st, d);
    let w = area.width.min(72);
    let text_w = w.saturating_sub(2).max(1);
    let rows = wrap_lines(&lines, text_w);
    let legend_rows = wrap_lines(&legend, text_w);
    // Border, text, a blank row, then the legend; the legend is never the part cut off.
    let want = rows.len() + 1 + legend_rows.len() + 2;
    let h = (want as u16).min(area.height);
    let r = centered(area, w, h);
    clear(f, r);
    let b = block(st, Line::from(styled(title, t.title))).border_style(t.warn);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let legend_h = (legend_rows.len() as u16).min(inner.height);
    let text_h = inner.height - legend_h;
    let [ta, la] =
        Layout::vertical([Constraint::Length(text_h), Constraint::Length(legend_h)]).areas(inner);
    // Text that does not fit scrolls (PgUp/PgDn); a marker says there is more.
    let room = ta.height.saturating_sub(1) as usize;
    let fits = rows.len() < ta.height as usize;
    let scroll = if fits {
        0
    } else {
        d.scroll.min(rows.len().saturating_sub(room.max(1)))
    };
    let mut shown: Vec<Line> = rows
        .iter()
        .skip(scroll)
        .take(room.max(1))
        .cloned()
        .collect();
    if !fits && ta.height > 1 {
        let more = rows.len() - scroll - shown.len();
        shown.push(Line::from(styled(
            if more > 0 {
                format!("↓ {more} more lines (PgDn)")
            } else {
                "↑ PgUp for the start".to_string()
            },
            t.dim,
        )));
    }
    f.render_widget(Paragraph::new(shown), ta);
    f.render_widget(Paragraph::new(legend_rows), la);
}

/// The buttons and keys: Cancel has the focus when the dialog opens.
fn legend<'a>(st: &State, d: &Dialog) -> Vec<Line<'a>> {
    let t = &st.theme;
    let (cancel_style, confirm_style) = if d.confirm_focused {
        (t.dim, t.selected)
    } else {
        (t.selected, t.dim)
    };
    let verb = match &d.kind {
        DialogKind::Purge { .. } => "purge",
        DialogKind::Delete { .. } => "delete",
        DialogKind::Transfer(t) if t.moving => "move",
        DialogKind::Transfer(_) => "copy",
        DialogKind::Redrive { .. } => "redrive",
        DialogKind::Browse { .. } => "browse",
        DialogKind::Edit { .. } => "send",
        DialogKind::Quit => "cancel it and quit",
    };
    if d.needs_name {
        let ok = if d.ready() {
            styled("Enter confirms", t.accent)
        } else {
            styled("type the name, then Enter", t.dim)
        };
        return vec![Line::from(vec![ok, styled(" · Esc cancels", t.dim)])];
    }
    vec![Line::from(vec![
        styled("[ Cancel ]", cancel_style),
        styled("  ", t.dim),
        styled(format!("[ {verb} ]"), confirm_style),
        styled("  y confirm · n/Esc cancel", t.dim),
    ])]
}
