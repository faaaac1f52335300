//! The reasons view: one row per failure signature, largest first, with how far the scan got.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Wrap};
use ratatui::Frame;

use super::columns::{fit, flex_width, kept_row, render_plain_table, Col};
use super::wrap::split_for_text;
use super::{block, fmt_ago, plural, styled};
use crate::tui::state::{error_line, Model};
use qdeck_engine::triage::scan::thousands;
use qdeck_model::sanitize::{clean, clean_short};

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let r = &st.reasons;
    let q = r
        .queue
        .as_ref()
        .map(|q| clean_short(q.as_str(), 50))
        .unwrap_or_default();
    let mut title = vec![styled(" reasons ", t.dim), styled(format!("{q} "), t.title)];
    if let Some(scope) = &r.scope {
        title.push(styled(format!("({}) ", clean_short(scope, 40)), t.dim));
    }
    title.extend([styled(
        plural(r.groups.len() as u64, "group", "groups"),
        t.dim,
    )]);
    if r.scanning {
        let of = r
            .total
            .map(|n| format!(" of {}", thousands(n)))
            .unwrap_or_default();
        title.push(styled(
            format!(" · scanning {}{of}… (Esc cancels) ", thousands(r.scanned)),
            t.accent,
        ));
    } else if let Some(n) = &r.note {
        title.push(styled(format!(" · {} ", clean(n)), t.dim));
    } else {
        title.push(styled(" ", t.dim));
    }
    let b = block(st, Line::from(title));
    let inner = b.inner(area);
    f.render_widget(b, area);
    if let Some(e) = &r.error {
        f.render_widget(
            Paragraph::new(format!("cannot scan: {}", clean(&error_line(e))))
                .style(t.error)
                .wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    if r.groups.is_empty() {
        let msg = if r.scanning {
            "reading messages…"
        } else {
            "no dead letters in the scan"
        };
        f.render_widget(Paragraph::new(msg).style(t.dim), inner);
        return;
    }
    // The failure text is the point of this view: it keeps 44 columns before FIRST and
    // LAST (then ORIGIN) give way, and the selected group's text is whole under the table.
    let cols = vec![
        Col::fixed("COUNT", 7, 0),
        Col::fixed("BACK", 5, 1),
        Col::fixed("FIRST", 9, 2),
        Col::fixed("LAST", 9, 2),
        Col::fixed("ORIGIN", 16, 1),
        Col::flex("REASON", 44, 0),
    ];
    let keep = fit(&cols, inner.width, st.wide);
    let reason_w = flex_width(&cols, &keep, inner.width);
    let selected = r
        .groups
        .get(r.cursor.sel)
        .filter(|g| g.signature.chars().count() > reason_w)
        .map(|g| g.signature.clone());
    let (table_area, text_area) = split_for_text(inner, selected);
    let (cursor, from, to) = r.cursor.placed(r.groups.len(), table_area.height as usize);
    let ago = |ms: Option<i64>| ms.map_or_else(|| "—".into(), |m| fmt_ago(st.now_ms - m));
    let sigs: Vec<&str> = r.groups.iter().map(|g| g.signature.as_str()).collect();
    let rows: Vec<Row> = r.groups[from..to]
        .iter()
        .map(|g| {
            // Dead letters that were redriven before and failed again: the fix did not work.
            let back = if g.came_back_after_redrive() {
                styled(format!("↺{}", g.redriven), t.warn)
            } else {
                styled("", t.dim)
            };
            let cells = vec![
                Cell::from(thousands(g.count)),
                Cell::from(back),
                Cell::from(ago(g.first_seen_ms)),
                Cell::from(ago(g.last_seen_ms)),
                Cell::from(
                    g.origin
                        .as_deref()
                        .map_or_else(|| "—".into(), |o| clean_short(o, 16)),
                ),
                Cell::from(super::reason_text::distinct(&g.signature, &sigs, reason_w)),
            ];
            kept_row(cells, &keep).style(t.text)
        })
        .collect();
    render_plain_table(f, table_area, rows, (&cols, &keep), t, cursor.sel - from);
    if let Some((area, lines)) = text_area {
        f.render_widget(Paragraph::new(lines).style(t.text), area);
    }
}
