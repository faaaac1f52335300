//! Who consumes the queue: lease holders on the local broker, consumers elsewhere.

use ratatui::layout::{Constraint, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use super::{block, fmt_ago, fmt_count, fmt_rate, styled};
use crate::domain::{AckMode, ConsumerListing};
use crate::sanitize::{clean, clean_short};
use crate::tui::state::State;

pub fn render(f: &mut Frame, st: &State, area: Rect) {
    let t = &st.theme;
    let w = &st.workers;
    let q = w
        .queue
        .as_ref()
        .map(|q| clean_short(q.as_str(), 50))
        .unwrap_or_default();
    let mut title = vec![
        styled(" workers ", t.dim),
        styled(format!("{q} "), t.title),
        styled(format!("{} ", w.list.len()), t.dim),
    ];
    if w.loading {
        title.push(styled("loading… ", t.dim));
    }
    let b = block(st, Line::from(title));
    let inner = b.inner(area);
    f.render_widget(b, area);
    if let ConsumerListing::Unsupported(why) = &st.caps.consumers {
        f.render_widget(
            Paragraph::new(format!(
                "this broker does not list consumers: {}",
                clean(why)
            ))
            .style(t.dim)
            .wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    if let Some(e) = &w.error {
        f.render_widget(
            Paragraph::new(format!("cannot list workers: {}", clean(e)))
                .style(t.error)
                .wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    if w.list.is_empty() {
        let msg = if w.loading {
            "loading…"
        } else {
            "nobody consumes this queue right now"
        };
        f.render_widget(Paragraph::new(msg).style(t.dim), inner);
        return;
    }
    let head = Row::new([
        "WORKER", "STATE", "HOLD", "DONE", "FAILED", "RATE/s", "PREFETCH", "ACK", "SEEN",
    ])
    .style(t.header);
    let page = (inner.height as usize).saturating_sub(1).max(1);
    let mut cursor = w.cursor.clone();
    cursor.clamp(w.list.len(), page);
    let from = cursor.offset.min(w.list.len());
    let to = (from + page).min(w.list.len());
    let rows: Vec<Row> = w.list[from..to]
        .iter()
        .map(|c| {
            // The seeds' warnings: unlimited prefetch and auto-ack lose or hoard messages.
            let prefetch = match c.prefetch {
                Some(0) => styled("unlimited!", t.warn),
                Some(n) => styled(n.to_string(), t.text),
                None => styled("—", t.dim),
            };
            let ack = match c.ack_mode {
                AckMode::Manual => styled("manual", t.text),
                AckMode::Auto => styled("auto!", t.warn),
                AckMode::Unknown => styled("—", t.dim),
            };
            let mut name = clean_short(&c.tag, 24);
            if let Some(p) = &c.peer {
                name = format!("{name} {}", clean_short(p, 20));
            }
            Row::new(vec![
                Cell::from(name),
                Cell::from(clean_short(&c.state, 14)),
                Cell::from(fmt_count(c.holding)),
                Cell::from(fmt_count(c.processed)),
                Cell::from(styled(
                    fmt_count(c.failed),
                    if c.failed.unwrap_or(0) > 0 {
                        t.warn
                    } else {
                        t.text
                    },
                )),
                Cell::from(fmt_rate(c.rate)),
                Cell::from(prefetch),
                Cell::from(ack),
                Cell::from(
                    c.last_seen_ms
                        .map(|s| fmt_ago(st.now_ms - s))
                        .unwrap_or_else(|| "—".into()),
                ),
            ])
            .style(t.text)
        })
        .collect();
    let widths = [
        Constraint::Min(12),
        Constraint::Length(14),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(6),
        Constraint::Length(8),
    ];
    let table = Table::new(rows, widths)
        .header(head)
        .row_highlight_style(t.selected)
        .column_spacing(1);
    let mut ts = TableState::default().with_selected(Some(cursor.sel - from));
    f.render_stateful_widget(table, inner, &mut ts);
}
