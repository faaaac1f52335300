//! Confirmation dialogs: count and target shown; protected profiles type the queue name.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, centered, clear, styled};
use crate::tui::state::{Dialog, DialogKind, Model};
use qdeck_model::sanitize::clean;

mod body;

pub fn render(f: &mut Frame, st: &Model, d: &Dialog, area: Rect) {
    let (title, mut lines) = body::body(st, &d.kind);
    if d.needs_name {
        lines.extend(name_prompt(st, d));
    }
    let legend = legend(st, d);
    draw(f, st, area, title, &lines, &legend, d.scroll);
}

/// A protected profile (and every edit) types a name to confirm: what to type, and the
/// text typed so far.
fn name_prompt<'a>(st: &Model, d: &Dialog) -> Vec<Line<'a>> {
    let t = &st.theme;
    vec![
        Line::from(""),
        Line::from(styled(
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
        )),
        Line::from(vec![
            styled("> ", t.accent),
            styled(clean(&d.typed).into_owned(), t.title),
            styled("█", t.dim),
        ]),
    ]
}

/// The box centred in `area`, sized to its wrapped text and legend.
fn draw(
    f: &mut Frame,
    st: &Model,
    area: Rect,
    title: &str,
    lines: &[Line],
    legend: &[Line],
    scroll: usize,
) {
    let t = &st.theme;
    let w = area.width.min(72);
    let text_w = w.saturating_sub(2).max(1);
    let rows = wrap_lines(lines, text_w);
    let legend_rows = wrap_lines(legend, text_w);
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
        scroll.min(rows.len().saturating_sub(room.max(1)))
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
fn legend<'a>(st: &Model, d: &Dialog) -> Vec<Line<'a>> {
    let t = &st.theme;
    let (cancel_style, confirm_style) = if d.confirm_focused {
        (t.dim, t.selected)
    } else {
        (t.selected, t.dim)
    };
    let verb = match &d.kind {
        DialogKind::Purge { .. } => "purge",
        DialogKind::ResetOffsets { .. } => "reset",
        DialogKind::Delete { .. } => "delete",
        DialogKind::CancelScheduled { .. } => "cancel it",
        DialogKind::Transfer(t) if t.moving => "move",
        DialogKind::Transfer(_) => "copy",
        DialogKind::Redrive { .. } => "redrive",
        DialogKind::Browse { .. } => "browse",
        DialogKind::Edit { .. } => "send",
        DialogKind::EditUnreadable { .. } => "edit again",
        DialogKind::Quit => "stop it and quit",
    };
    // "Cancel" would read as the operation's own cancel next to "stop it and quit".
    let keep = match &d.kind {
        DialogKind::Quit => "Keep running",
        DialogKind::CancelScheduled { .. } => "Keep it",
        DialogKind::EditUnreadable { .. } => "Discard",
        _ => "Cancel",
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
        styled(format!("[ {keep} ]"), cancel_style),
        styled("  ", t.dim),
        styled(format!("[ {verb} ]"), confirm_style),
        styled(
            match &d.kind {
                DialogKind::Quit => "  y stop · n/Esc keep running",
                DialogKind::EditUnreadable { .. } => "  y edit again · n/Esc discard",
                DialogKind::CancelScheduled { .. } => "  y cancel it · n/Esc keep it",
                _ => "  y confirm · n/Esc cancel",
            },
            t.dim,
        ),
    ])]
}
