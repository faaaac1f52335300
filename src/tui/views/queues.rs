//! The home view: one row per queue. Only the visible rows are built, so a frame costs the
//! same with 10 queues or 10,000.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::{block, fmt_age, fmt_count, fmt_rate, fmt_secs, spark, styled};
use crate::engine::derive::{derive, Trend};
use crate::engine::store::{unpack, QueueEntry};
use crate::sanitize::{clean, clean_short};
use crate::tui::state::{SortCol, State};

/// Problem of a row, for the marker column and the "why" line.
pub fn row_problem(st: &State, e: &QueueEntry) -> Option<(char, String)> {
    if let Some(err) = &e.error {
        return Some(('!', format!("error: {}", clean(err))));
    }
    if st.is_stale(e.updated_ms) {
        let why = match &st.store.backend_error {
            Some(b) => clean(b).into_owned(),
            None => "no fresh figures".to_string(),
        };
        let age = e
            .updated_ms
            .map(|t| {
                format!(
                    "stale, figures {} old",
                    fmt_secs(((st.now_ms - t).max(0) / 1000) as f64)
                )
            })
            .unwrap_or_else(|| "stale".into());
        return Some(('~', format!("{age}: {why}")));
    }
    None
}

pub fn eta_text(d: &crate::engine::derive::Derived, is_dlq: bool) -> String {
    // Nothing consumes a DLQ: rising age with flat depth is normal there.
    if d.stuck && !is_dlq {
        return "stuck?".into();
    }
    match d.trend {
        Trend::Growing => format!("+{}/s", fmt_rate(d.net_rate)),
        Trend::Draining => d
            .drain_secs
            .map(|s| format!("~{}", fmt_secs(s)))
            .unwrap_or_else(|| "draining".into()),
        Trend::Flat => match d.drain_secs {
            Some(0.0) => "empty".into(),
            _ => "flat".into(),
        },
        Trend::Unknown => "—".into(),
    }
}

pub fn render(f: &mut Frame, st: &State, area: Rect) {
    let t = &st.theme;
    let sel_problem = st
        .selected_queue()
        .and_then(|q| st.store.get(q))
        .and_then(|e| row_problem(st, e).map(|p| (e, p)));
    let (table_area, why_area) = if sel_problem.is_some() && area.height > 4 {
        let [a, b] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    };
    let arrow = if st.sort_desc { "↓" } else { "↑" };
    let title = Line::from(vec![
        styled(" queues ", t.title),
        styled(
            format!(
                "{} of {} · sort {} {arrow} ",
                st.rows.len(),
                st.store.len(),
                st.sort.name()
            ),
            t.dim,
        ),
    ]);
    let b = block(st, title);
    let inner = b.inner(table_area);
    f.render_widget(b, table_area);

    if st.rows.is_empty() {
        let (msg, style) = if let Some(e) = &st.store.backend_error {
            (format!("cannot reach the broker: {}", clean(e)), t.error)
        } else if !st.listed {
            ("loading the queue list…".to_string(), t.dim)
        } else if st.store.is_empty() {
            ("no queues on this broker".to_string(), t.dim)
        } else {
            (
                format!("no queue matches /{}", clean(&st.filter.text)),
                t.dim,
            )
        };
        f.render_widget(
            Paragraph::new(msg)
                .style(style)
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return;
    }

    let wide = inner.width >= 110;
    let mid = inner.width >= 90;
    let mut cols: Vec<(&str, Option<SortCol>, Constraint)> = vec![
        ("", None, Constraint::Length(1)),
        ("QUEUE", Some(SortCol::Name), Constraint::Min(10)),
        ("DEPTH", Some(SortCol::Depth), Constraint::Length(7)),
        ("INFLT", Some(SortCol::InFlight), Constraint::Length(6)),
    ];
    if mid {
        cols.push(("DELAY", Some(SortCol::Delayed), Constraint::Length(6)));
    }
    cols.push(("AGE", Some(SortCol::Age), Constraint::Length(6)));
    cols.push(("DLQ", Some(SortCol::Dlq), Constraint::Length(6)));
    cols.push(("IN/s", Some(SortCol::InRate), Constraint::Length(6)));
    cols.push(("OUT/s", Some(SortCol::OutRate), Constraint::Length(6)));
    if wide {
        cols.push(("TREND", None, Constraint::Length(12)));
    }
    cols.push(("ETA", Some(SortCol::Eta), Constraint::Length(8)));

    let header = Row::new(cols.iter().map(|(name, c, _)| {
        let mark = if *c == Some(st.sort) { arrow } else { "" };
        Cell::from(format!("{name}{mark}"))
    }))
    .style(t.header);

    let page = (inner.height as usize).saturating_sub(1).max(1);
    let mut cursor = st.cursor.clone();
    cursor.clamp(st.rows.len(), page);
    let from = cursor.offset.min(st.rows.len());
    let to = (from + page).min(st.rows.len());
    let name_w = inner.width.saturating_sub(
        cols.iter()
            .map(|(_, _, c)| match c {
                Constraint::Length(n) => n + 1,
                _ => 1,
            })
            .sum::<u16>(),
    ) as usize;

    let rows: Vec<Row> = st.rows[from..to]
        .iter()
        .filter_map(|&i| st.store.entries().get(i))
        .map(|e| queue_row(st, e, mid, wide, name_w.max(4)))
        .collect();
    let widths: Vec<Constraint> = cols.iter().map(|(_, _, c)| *c).collect();
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(t.selected)
        .column_spacing(1);
    let mut ts = TableState::default().with_selected(Some(cursor.sel - from));
    f.render_stateful_widget(table, inner, &mut ts);

    if let (Some(a), Some((e, (_, why)))) = (why_area, sel_problem) {
        let line = Line::from(vec![
            styled(format!("{}: ", clean_short(e.info.id.as_str(), 40)), t.warn),
            styled(why, t.warn),
        ]);
        f.render_widget(Paragraph::new(line), a);
    }
}

fn queue_row<'a>(st: &State, e: &QueueEntry, mid: bool, wide: bool, name_w: usize) -> Row<'a> {
    let t = &st.theme;
    let l = e.latest.as_ref();
    let d = derive(e, st.store.drain_target_secs);
    let problem = row_problem(st, e);
    let base: Style = if problem.is_some() { t.stale } else { t.text };
    let marker = match &problem {
        Some((c, _)) => styled(c.to_string(), t.warn),
        None if d.stuck && !e.info.is_dlq => styled("?", t.warn),
        None => Span::raw(" "),
    };
    let mut name = clean_short(e.info.id.as_str(), name_w);
    if e.info.is_dlq && !e.info.dlq_sources.is_empty() && name.chars().count() + 4 < name_w {
        let src = e.info.dlq_sources[0].as_str();
        let more = if e.info.dlq_sources.len() > 1 {
            "…"
        } else {
            ""
        };
        let room = name_w - name.chars().count() - 3;
        name = format!(
            "{name} ⇠ {}{more}",
            clean_short(src, room.saturating_sub(1))
        );
    }
    let depth = l.and_then(|s| s.depth);
    let name_style = if e.info.is_dlq && depth.unwrap_or(0) > 0 {
        t.dlq
    } else {
        base
    };
    let dlq_depth = l.and_then(|s| s.dlq_depth);
    let dlq_style = if dlq_depth.unwrap_or(0) > 0 {
        t.dlq
    } else {
        base
    };
    let mut cells = vec![
        Cell::from(marker),
        Cell::from(styled(name, name_style)),
        Cell::from(styled(fmt_count(depth), base)),
        Cell::from(styled(fmt_count(l.and_then(|s| s.in_flight)), base)),
    ];
    if mid {
        cells.push(Cell::from(styled(
            fmt_count(l.and_then(|s| s.delayed)),
            base,
        )));
    }
    cells.push(Cell::from(styled(
        fmt_age(l.and_then(|s| s.oldest_age_secs)),
        base,
    )));
    cells.push(Cell::from(styled(
        if e.info.dlq.is_some() || dlq_depth.is_some() {
            fmt_count(dlq_depth)
        } else {
            "·".into()
        },
        dlq_style,
    )));
    cells.push(Cell::from(styled(fmt_rate(d.in_rate), base)));
    cells.push(Cell::from(styled(fmt_rate(d.out_rate), base)));
    if wide {
        let n = e.history.len();
        let vals: Vec<Option<f64>> = e
            .history
            .iter()
            .skip(n.saturating_sub(12))
            .map(|s| unpack(s.depth))
            .collect();
        cells.push(Cell::from(styled(spark(&vals), t.chart)));
    }
    let eta_style = match d.trend {
        _ if d.stuck && !e.info.is_dlq => t.warn,
        Trend::Growing => t.warn,
        Trend::Draining => t.good,
        _ => base,
    };
    cells.push(Cell::from(styled(eta_text(&d, e.info.is_dlq), eta_style)));
    Row::new(cells)
}
