//! Confirmation dialogs: count and target shown; protected profiles type the queue name.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::{block, centered, clear, fmt_count, styled};
use crate::domain::{RedriveMode, RedriveTarget};
use crate::sanitize::{clean, clean_short};
use crate::tui::state::{Dialog, DialogKind, State, RATES};

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
            if let Some(n) = &st.caps.purge_note {
                lines.push(Line::from(styled(clean(n).into_owned(), t.dim)));
            }
            if let Some(c) = st.caps.purge_cooldown_secs {
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
            let how = match &st.caps.redrive {
                RedriveMode::Native(s) => format!("the broker moves them ({})", clean(s)),
                RedriveMode::ClientSide => {
                    "copy → broker confirms → delete: a crash may duplicate, never lose".into()
                }
                RedriveMode::Unsupported(s) => format!("not supported: {}", clean(s)),
            };
            lines.push(Line::from(styled(how, t.dim)));
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
    lines.push(Line::from(""));
    if d.needs_name {
        lines.push(Line::from(styled(
            "Protected profile: type the queue name to confirm.",
            t.warn,
        )));
        lines.push(Line::from(vec![
            styled("> ", t.accent),
            styled(clean(&d.typed).into_owned(), t.title),
            styled("█", t.dim),
        ]));
        let ok = if d.ready() { "Enter to confirm" } else { "" };
        lines.push(Line::from(styled(format!("{ok}  Esc cancels"), t.dim)));
    } else {
        lines.push(Line::from(styled(
            "y / Enter confirm · n / Esc cancel",
            t.dim,
        )));
    }
    let h = lines.len() as u16 + 2;
    let r = centered(area, 72, h);
    clear(f, r);
    let b = block(st, Line::from(styled(title, t.title))).border_style(t.warn);
    let inner = b.inner(r);
    f.render_widget(b, r);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
