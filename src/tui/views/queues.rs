//! The home view: one row per queue. Only the visible rows are built, so a frame costs the
//! same with 10 queues or 10,000.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_table, sort_head, Col};
use super::{block, fmt_age, fmt_ago, fmt_count, fmt_rate, fmt_secs, fmt_thousands, spark, styled};
use crate::tui::state::{Model, SortCol};
use qdeck_engine::derive::{derive, Trend};
use qdeck_engine::store::{unpack, QueueEntry};
use qdeck_model::domain::QueueError;
use qdeck_model::sanitize::{clean, clean_short};

/// A queue's own error by its kind: `!` for what waits for a person (a key, a right, a queue
/// that is gone), `~` for what the next poll may clear (the network, the broker's load).
fn problem_of(err: &QueueError) -> (char, String) {
    let mark = if err.kind.is_transient() { '~' } else { '!' };
    let words = err.kind.words();
    (mark, format!("{words}: {}", clean(&err.message)))
}

/// The marker of a row whose figures were sampled by a metrics service, not read live.
pub const SAMPLED_MARK: &str = "≈";

/// How old a row's sampled figures are (`as of 3m ago`), or nothing for figures read live.
fn sampled_text(l: Option<&qdeck_model::domain::QueueStats>, now_ms: i64) -> String {
    match l.and_then(|s| s.sampled) {
        Some(s) => format!(
            " · as of {} (sampled every {})",
            fmt_ago(now_ms - s.at_ms),
            fmt_secs(f64::from(s.every_secs))
        ),
        None => String::new(),
    }
}

/// Problem of a row, for the marker column and the "why" line.
pub fn row_problem(st: &Model, e: &QueueEntry) -> Option<(char, String)> {
    if let Some(err) = &e.error {
        return Some(problem_of(err));
    }
    if st.is_stale(e.updated_ms) {
        let why = match &st.store.backend_error {
            Some(b) => clean(b).into_owned(),
            None => "no fresh figures".to_string(),
        };
        let age = e.updated_ms.map_or_else(
            || "stale".into(),
            |t| {
                format!(
                    "stale, figures {} old",
                    fmt_secs(((st.now_ms - t).max(0) / 1000) as f64)
                )
            },
        );
        return Some(('~', format!("{age}: {why}")));
    }
    None
}

pub fn eta_text(d: &qdeck_engine::derive::Derived, is_dlq: bool) -> String {
    Eta::of(d.trend, d.net_rate, d.drain_secs, d.stuck, is_dlq).text()
}

/// What the ETA cell says. The variants are in the order of the ETA sort ascending, the
/// sooner empty the earlier: empty, then the shortest time to drain, …, flat, stuck, then
/// growing, fastest last. Descending (the sort's default) is worst first. `Unknown` (`—`)
/// sorts last either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Eta {
    Empty,
    /// Drains in this many seconds at the current net rate.
    Drains(f64),
    /// Draining, with no depth to say when it is done.
    Draining,
    /// Neither growing nor draining: never empty at this rate.
    Flat,
    /// Age keeps rising while depth stays flat (never said of a DLQ: nothing consumes it).
    Stuck,
    /// Growing by this many messages a second.
    Growing(f64),
    Unknown,
}

impl Eta {
    pub fn of(
        trend: Trend,
        net_rate: Option<f64>,
        drain_secs: Option<f64>,
        stuck: bool,
        is_dlq: bool,
    ) -> Eta {
        if stuck && !is_dlq {
            return Eta::Stuck;
        }
        match trend {
            Trend::Growing => Eta::Growing(net_rate.unwrap_or(0.0)),
            Trend::Draining => drain_secs.map_or(Eta::Draining, Eta::Drains),
            Trend::Flat if drain_secs == Some(0.0) => Eta::Empty,
            Trend::Flat => Eta::Flat,
            Trend::Unknown => Eta::Unknown,
        }
    }

    /// Rank, then value within the rank, ascending; `None` for no figure.
    pub fn sort_key(self) -> Option<(u8, f64)> {
        match self {
            Eta::Empty => Some((0, 0.0)),
            Eta::Drains(secs) => Some((1, secs)),
            Eta::Draining => Some((2, 0.0)),
            Eta::Flat => Some((3, 0.0)),
            Eta::Stuck => Some((4, 0.0)),
            Eta::Growing(rate) => Some((5, rate)),
            Eta::Unknown => None,
        }
    }

    pub fn text(self) -> String {
        match self {
            Eta::Empty => "empty".into(),
            Eta::Drains(secs) => format!("~{}", fmt_secs(secs)),
            Eta::Draining => "draining".into(),
            Eta::Flat => "flat".into(),
            Eta::Stuck => "stuck?".into(),
            Eta::Growing(rate) => format!("+{}/s", fmt_rate(Some(rate))),
            Eta::Unknown => "—".into(),
        }
    }
}

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let sel_problem = st
        .selected_queue()
        .and_then(|q| st.store.get(q))
        .and_then(|e| row_problem(st, e).map(|p| (e, p)));
    let (area, why_area) = if sel_problem.is_some() && area.height > 4 {
        let [a, b] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    };
    // Room to spare under the rows: a summary of the selected queue answers "is it draining
    // and why not" without a keypress. It goes as soon as rows need the room.
    let need = st.queues.rows.len().min(1000) as u16 + 3;
    let (table_area, summary_area) =
        if area.height >= need + SUMMARY_H && st.selected_queue().is_some() {
            let [a, b] = Layout::vertical([Constraint::Length(need), Constraint::Min(SUMMARY_H)])
                .areas(area);
            (a, Some(b))
        } else {
            (area, None)
        };
    if let Some(sa) = summary_area {
        summary(f, st, sa);
    }
    let arrow = if st.queues.sort_desc { "↓" } else { "↑" };
    let mut title = vec![
        styled(" queues ", t.title),
        styled(
            format!(
                "{} of {} · sort {} {arrow} ",
                st.queues.rows.len(),
                st.store.len(),
                st.queues.sort.name()
            ),
            t.dim,
        ),
    ];
    if st.queues.sort_unknown > 0 {
        // The whole sentence where it fits, the count and its meaning in short where not.
        let n = fmt_thousands(st.queues.sort_unknown as u64);
        let used: usize = title.iter().map(Span::width).sum();
        // "yet" only while the sweep has not reached them: a broker that never reports a
        // figure (RabbitMQ's delayed count) leaves rows that will not get one.
        let (long, short) = if st.queues.sort_unpolled == st.queues.sort_unknown {
            ("without figures yet", "unpolled")
        } else {
            ("without a figure", "no figure")
        };
        let long = format!("· {n} {long}, sorted last ");
        let text = if used + long.chars().count() + 4 <= table_area.width as usize {
            long
        } else {
            format!("· {n} {short} ")
        };
        title.push(styled(text, t.warn));
    }
    let title = Line::from(title);
    let b = block(st, title);
    let inner = b.inner(table_area);
    f.render_widget(b, table_area);

    if st.queues.rows.is_empty() {
        let (msg, style) = if let Some(e) = &st.store.backend_error {
            // The error says what failed ("broker unreachable: …", "not authorised: …").
            (clean(e).into_owned(), t.error)
        } else if !st.poll.listed {
            ("loading the queue list…".to_string(), t.dim)
        } else if st.store.is_empty() {
            ("no queues on this broker".to_string(), t.dim)
        } else {
            (
                format!("no queue matches /{}", clean(&st.queues.filter.text)),
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

    let cols = queue_cols(st);
    let keep = fit(&cols, inner.width, st.wide);
    let header = Row::new(
        cols.iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| Cell::from(c.head.clone())),
    )
    .style(t.header);

    let (cursor, from, to) = st
        .queues
        .cursor
        .placed(st.queues.rows.len(), inner.height as usize);
    let name_w = flex_width(&cols, &keep, inner.width);

    let rows: Vec<Row> = st.queues.rows[from..to]
        .iter()
        .filter_map(|&i| st.store.entries().get(i))
        .map(|e| {
            let cells = queue_row(st, e, name_w.max(4));
            kept_row(cells, &keep)
        })
        .collect();
    render_table(f, inner, rows, header, (&cols, &keep), t, cursor.sel - from);

    if let (Some(a), Some((e, (_, why)))) = (why_area, sel_problem) {
        let line = Line::from(vec![
            styled(format!("{}: ", clean_short(e.info.id.as_str(), 40)), t.warn),
            styled(why, t.warn),
        ]);
        f.render_widget(Paragraph::new(line), a);
    }
}

/// Rows the summary pane needs (borders included).
const SUMMARY_H: u16 = 8;

/// The selected queue at a glance: depth, in-flight and age over time, DLQ, workers needed,
/// the last error.
fn summary(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let Some(e) = st.selected_queue().and_then(|q| st.store.get(q)) else {
        return;
    };
    let b = block(
        st,
        Line::from(vec![
            styled(" selected ", t.dim),
            styled(format!("{} ", clean_mid(e.info.id.as_str(), 60)), t.title),
        ]),
    );
    let inner = b.inner(area);
    f.render_widget(b, area);
    let label_w = 14usize;
    let n = (inner.width as usize).saturating_sub(label_w + 12).max(4);
    let hist: Vec<_> = e.history.iter().copied().collect();
    let tail = &hist[hist.len().saturating_sub(n)..];
    let l = e.latest.as_ref();
    let series = |name: &str, vals: Vec<Option<f64>>, now: String| {
        Line::from(vec![
            styled(format!("{name:<label_w$}"), t.dim),
            styled(spark(&vals), t.chart),
            styled(format!(" {now}"), t.text),
        ])
    };
    let d = derive(e, st.store.drain_target_secs);
    let mut lines = vec![
        series(
            "depth",
            tail.iter().map(|s| unpack(s.depth)).collect(),
            fmt_count(l.and_then(|s| s.depth)),
        ),
        series(
            "in flight",
            tail.iter().map(|s| unpack(s.in_flight)).collect(),
            fmt_count(l.and_then(|s| s.in_flight)),
        ),
        series(
            "oldest age",
            tail.iter()
                .map(|s| (!s.age_secs.is_nan()).then_some(s.age_secs as f64))
                .collect(),
            format!(
                "{}{}",
                fmt_age(l.and_then(|s| s.oldest_age_secs)),
                sampled_text(l, st.now_ms)
            ),
        ),
    ];
    let dlq = match (&e.info.dlq, l.and_then(|s| s.dlq_depth)) {
        (Some(q), n) => format!("DLQ {} holds {}", clean_mid(q.as_str(), 30), fmt_count(n)),
        (None, Some(n)) => format!("DLQ holds {}", fmt_count(Some(n))),
        _ => "no DLQ".into(),
    };
    let workers = match (
        super::workers::shown_count(st, &e.info.id, d.workers),
        d.workers_needed,
    ) {
        (Some(w), Some(n)) => format!("workers {w} · {n} needed"),
        (Some(w), None) if d.measuring => format!("workers {w} · needed: measuring"),
        (Some(w), None) => format!("workers {w}"),
        _ => "workers —".into(),
    };
    lines.push(Line::from(vec![
        styled(format!("{dlq} · {workers} · "), t.text),
        styled(eta_text(&d, e.info.is_dlq), t.accent),
    ]));
    if let Some(err) = &e.error {
        lines.push(Line::from(styled(
            format!("last error: {}", clean(&err.to_string())),
            t.error,
        )));
    }
    // A tall terminal gets the detail view's charts under the figures rather than blank rows.
    let text_h = lines.len() as u16;
    if inner.height >= text_h + 8 {
        let [text_area, chart_area] =
            Layout::vertical([Constraint::Length(text_h), Constraint::Min(8)]).areas(inner);
        f.render_widget(Paragraph::new(lines), text_area);
        super::detail::charts(f, st, hist, chart_area);
    } else {
        f.render_widget(Paragraph::new(lines), inner);
    }
}

/// The queue table's columns: the name never goes; DEPTH, DLQ and ETA outlast the rates.
fn queue_cols(st: &Model) -> Vec<Col> {
    let pos = |c: SortCol| SortCol::ALL.iter().position(|x| *x == c).unwrap_or(0);
    let head = |name: &str, c: SortCol| {
        sort_head(name, pos(c), Some(pos(st.queues.sort)), st.queues.sort_desc)
    };
    vec![
        Col::fixed("", 1, 0),
        Col::flex(head("QUEUE", SortCol::Name), 14, 0),
        Col::fixed(head("DEPTH", SortCol::Depth), 7, 0),
        Col::fixed(head("INFLT", SortCol::InFlight), 7, 3),
        Col::fixed(head("DELAY", SortCol::Delayed), 7, 6),
        Col::fixed(head("AGE", SortCol::Age), 6, 2),
        Col::fixed(head("DLQ", SortCol::Dlq), 6, 1),
        Col::fixed(head("IN/s", SortCol::InRate), 7, 4),
        Col::fixed(head("OUT/s", SortCol::OutRate), 7, 4),
        Col::fixed("TREND", 12, 7),
        Col::fixed(head("ETA", SortCol::Eta), 8, 1),
    ]
}

/// Every cell of a row, in `queue_cols` order.
fn queue_row<'a>(st: &Model, e: &QueueEntry, name_w: usize) -> Vec<Cell<'a>> {
    let t = &st.theme;
    let l = e.latest.as_ref();
    let d = derive(e, st.store.drain_target_secs);
    let problem = row_problem(st, e);
    let base: Style = if problem.is_some() { t.stale } else { t.text };
    let marker = match &problem {
        Some((c, _)) => styled(c.to_string(), t.warn),
        None if d.stuck && !e.info.is_dlq => styled("?", t.warn),
        // Figures a metrics service sampled minutes ago (Pub/Sub's Cloud Monitoring): the row
        // is what was true then, and says so; the summary pane says how long ago.
        None if l.is_some_and(|s| s.sampled.is_some()) => styled(SAMPLED_MARK, t.dim),
        None => Span::raw(" "),
    };
    let mut name = clean_mid(e.info.id.as_str(), name_w);
    if e.info.is_dlq && name.chars().count() + 4 < name_w {
        // Without a source to name, `?`: the detail panel says why.
        let src = e
            .info
            .dlq_sources
            .first()
            .map_or("?", qdeck_model::domain::QueueId::as_str);
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
        // Records lost to retention (a Kafka group behind its topic's log start) turn the
        // depth red: the lag no longer counts everything the group missed.
        match l.and_then(|s| s.retained).filter(|_| depth.is_none()) {
            // A log's messages are retention, not backlog: dim and in parentheses, so the
            // column never reads as depth (its readers' rows carry that).
            Some(kept) => Cell::from(styled(format!("({})", fmt_count(Some(kept))), t.dim)),
            None => Cell::from(styled(
                fmt_count(depth),
                if l.and_then(|s| s.lost).unwrap_or(0) > 0 {
                    t.error
                } else {
                    base
                },
            )),
        },
        Cell::from(styled(fmt_count(l.and_then(|s| s.in_flight)), base)),
        Cell::from(styled(fmt_count(l.and_then(|s| s.delayed)), base)),
    ];
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
    {
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
    cells
}

#[cfg(test)]
mod tests {
    use super::problem_of;
    use qdeck_model::domain::{QueueError, QueueErrorKind};

    /// The marker and the words come from the kind: what the next poll may clear is `~`, what
    /// waits for a person is `!`; the broker's text is only shown.
    #[test]
    fn a_queue_error_is_marked_and_worded_by_its_kind() {
        let (mark, why) = problem_of(&QueueError::new(QueueErrorKind::Permission, "AccessDenied"));
        assert_eq!((mark, why.as_str()), ('!', "no permission: AccessDenied"));
        let (mark, why) = problem_of(&QueueError::new(QueueErrorKind::Unreachable, "refused"));
        assert_eq!((mark, why.as_str()), ('~', "unreachable: refused"));
        // Text that reads like another kind changes nothing.
        let (mark, _) = problem_of(&QueueError::new(QueueErrorKind::NotFound, "timed out"));
        assert_eq!(mark, '!');
    }
}
