//! What is on fire: the most severe queues of every profile in one table, worst first (the
//! score is `engine::severity`). Each profile's poller keeps its worst `FIRE_ROWS` queues, so
//! the table stays small whatever the number of queues behind it.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_plain_table, Col};
use super::{block, fmt_age, fmt_count, fmt_rate, plural, styled};
use crate::sanitize::clean;
use crate::tui::state::State;

pub fn render(f: &mut Frame, st: &State, area: Rect) {
    let t = &st.theme;
    let Some(fl) = &st.fleet else {
        return;
    };
    let rows_all = fl.fire_rows();
    let mut title = vec![
        styled(" on fire ", t.title),
        styled(
            format!("{} ", plural(rows_all.len() as u64, "queue", "queues")),
            t.dim,
        ),
    ];
    if fl.fire_filter.is_active() {
        title.push(styled(
            format!("/{} ", clean(&fl.fire_filter.text)),
            t.accent,
        ));
    }
    let b = block(st, Line::from(title));
    let inner = b.inner(area);
    f.render_widget(b, area);
    if rows_all.is_empty() {
        let msg = if fl.rows.iter().all(|r| r.updated_ms.is_none()) {
            "waiting for the first poll of each profile…"
        } else {
            "no queue matches"
        };
        f.render_widget(Paragraph::new(msg).style(t.dim), inner);
        return;
    }
    let cols = vec![
        Col::fixed("SEV", 4, 0),
        Col::fixed("PROFILE", 12, 0),
        Col::flex("QUEUE", 16, 0),
        Col::fixed("DEPTH", 9, 0),
        Col::fixed("Δ", 7, 1),
        Col::fixed("OLDEST", 8, 0),
        Col::fixed("OUT/s", 7, 2),
        Col::fixed("DLQ", 3, 3),
    ];
    let keep = fit(&cols, inner.width, st.wide);
    let queue_w = flex_width(&cols, &keep, inner.width);
    let (cursor, from, to) = fl.fire_cursor.placed(rows_all.len(), inner.height as usize);
    let max_age = |p: &str| {
        fl.rows
            .iter()
            .find(|r| r.profile == p)
            .map_or(300.0, |r| r.max_age_secs)
    };
    let rows: Vec<Row> = rows_all[from..to]
        .iter()
        .map(|(profile, e)| {
            let sev_style = if e.severity >= 40.0 {
                t.error
            } else if e.severity >= 15.0 {
                t.warn
            } else {
                t.dim
            };
            let change_style = match e.change {
                Some(c) if c > 0 && e.is_dlq => t.error,
                Some(c) if c > 0 => t.warn,
                _ => t.text,
            };
            let late = e.age_secs.is_some_and(|a| a >= max_age(profile));
            let cells = vec![
                Cell::from(styled(format!("{:>3.0}", e.severity), sev_style)),
                Cell::from(styled(clean_mid(profile, 12), t.title)),
                Cell::from(clean_mid(e.queue.as_str(), queue_w as usize)),
                Cell::from(fmt_count(e.depth)),
                Cell::from(styled(
                    e.change.map_or_else(|| "—".into(), |d| format!("{d:+}")),
                    change_style,
                )),
                Cell::from(styled(
                    fmt_age(e.age_secs),
                    if late { t.warn } else { t.text },
                )),
                Cell::from(fmt_rate(e.out_rate)),
                Cell::from(if e.is_dlq {
                    styled("dlq", t.dlq)
                } else {
                    styled("", t.text)
                }),
            ];
            kept_row(cells, &keep).style(t.text)
        })
        .collect();
    render_plain_table(f, inner, rows, (&cols, &keep), t, cursor.sel - from);
}
