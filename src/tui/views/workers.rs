//! Who consumes the queue: lease holders on the local broker, consumers elsewhere.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Wrap};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_plain_table, sort_head, Col};
use super::{block, fmt_ago, fmt_count, fmt_rate, styled};
use crate::tui::state::{error_line, Model};
use qdeck_model::domain::{AckMode, Consumer, ConsumerListing, QueueId, WorkerState};
use qdeck_model::sanitize::{clean, clean_short};

const STATE_W: usize = 15;

/// How many workers `queue` has, the one figure every view shows: the live workers this view
/// listed for it (gone and lease-lost ones apart), once it has listed them; else the count
/// from the broker's figures. A summary never says `—` beside a list of one.
pub fn shown_count(st: &Model, queue: &QueueId, from_figures: Option<u32>) -> Option<u32> {
    let w = &st.workers;
    if w.queue.as_ref() != Some(queue) || w.fetched_ms.is_none() || w.error.is_some() {
        return from_figures;
    }
    let live = w
        .list
        .iter()
        .filter(|c| !matches!(c.status, WorkerState::Gone | WorkerState::LeaseLost))
        .count();
    Some(u32::try_from(live).unwrap_or(u32::MAX))
}

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let w = &st.workers;
    let b = block(st, title(st));
    let inner = b.inner(area);
    f.render_widget(b, area);
    if let Some(p) = placeholder(st) {
        f.render_widget(p, inner);
        return;
    }
    let head = |name: &str, i: usize| sort_head(name, i, w.sort, w.sort_desc);
    let cols = vec![
        Col::flex(head("WORKER", 0), 16, 0),
        // Wide enough for the longest state the brokers give, `lease lost ×NNN`.
        Col::fixed(head("STATE", 1), STATE_W as u16, 0),
        Col::fixed(head("HOLD", 2), 5, 2),
        Col::fixed(head("DONE", 3), 7, 3),
        Col::fixed(head("FAILED", 4), 7, 3),
        Col::fixed(head("RATE/s", 5), 7, 1),
        Col::fixed("PREFETCH", 10, 4),
        Col::fixed("ACK", 6, 4),
        Col::fixed(head("SEEN", 6), 8, 2),
    ];
    let keep = fit(&cols, inner.width, st.wide);
    let name_w = flex_width(&cols, &keep, inner.width);
    let (cursor, from, to) = w.cursor.placed(w.rows.len(), inner.height as usize);
    let rows: Vec<Row> = w.rows[from..to]
        .iter()
        .filter_map(|&i| w.list.get(i))
        .map(|c| kept_row(cells(st, c, name_w), &keep).style(t.text))
        .collect();
    render_plain_table(f, inner, rows, (&cols, &keep), t, cursor.sel - from);
}

fn title<'a>(st: &Model) -> Line<'a> {
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
        styled(
            if w.filter.is_active() {
                format!("{} of {} ", w.rows.len(), w.list.len())
            } else {
                format!("{} ", w.list.len())
            },
            t.dim,
        ),
    ];
    if w.filter.is_active() {
        title.push(styled(format!("/{} ", clean(&w.filter.text)), t.accent));
    }
    if w.loading {
        title.push(styled("loading… ", t.dim));
    }
    Line::from(title)
}

/// What shows instead of the table: the broker cannot list consumers, the listing failed, or
/// there is no row to show.
fn placeholder<'a>(st: &Model) -> Option<Paragraph<'a>> {
    let t = &st.theme;
    let w = &st.workers;
    if let ConsumerListing::Unsupported(why) = &st.caps.consumers {
        return Some(
            Paragraph::new(format!(
                "this broker does not list consumers: {}",
                clean(why)
            ))
            .style(t.dim)
            .wrap(Wrap { trim: true }),
        );
    }
    if let Some(e) = &w.error {
        return Some(
            Paragraph::new(format!("cannot list workers: {}", clean(&error_line(e))))
                .style(t.error)
                .wrap(Wrap { trim: true }),
        );
    }
    if w.rows.is_empty() {
        let msg = if w.loading && w.list.is_empty() {
            "loading…"
        } else if !w.list.is_empty() {
            "no worker matches the filter (Esc clears it)"
        } else {
            "nobody consumes this queue right now"
        };
        return Some(Paragraph::new(msg).style(t.dim));
    }
    None
}

/// One worker's cells; the name column is `name_w` wide.
fn cells<'a>(st: &Model, c: &Consumer, name_w: usize) -> Vec<Cell<'a>> {
    let t = &st.theme;
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
    // Tag and peer share the whole column; each keeps its distinguishing end.
    let name = match &c.peer {
        Some(p) => {
            let tag_w = (name_w * 3 / 5).max(8);
            let tag = clean_mid(&c.tag, tag_w);
            let rest = name_w.saturating_sub(tag.chars().count() + 1);
            format!("{tag} {}", clean_mid(p, rest))
        }
        None => clean_mid(&c.tag, name_w),
    };
    // Styled by the typed state, never by its display text (which carries the broker's
    // wording and durations).
    let state_style = match c.status {
        WorkerState::LeaseLost => t.error,
        WorkerState::Gone | WorkerState::Idle | WorkerState::Stopping => t.dim,
        WorkerState::Active | WorkerState::Busy | WorkerState::Waiting | WorkerState::Unknown => {
            t.text
        }
    };
    vec![
        Cell::from(name),
        Cell::from(styled(clean_short(&c.state, STATE_W), state_style)),
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
                .map_or_else(|| "—".into(), |s| fmt_ago(st.now_ms - s)),
        ),
    ]
}
