//! Queue detail: figures, derived figures with their arithmetic, settings, capability notes,
//! and history charts over a selectable window.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, fmt_secs, styled};
use crate::tui::state::Model;
use qdeck_engine::store::{Sample, MISSING};
use qdeck_model::sanitize::clean_short;

mod info;
mod partitions;

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let Some(q) = &st.focus else {
        return;
    };
    let title = Line::from(vec![
        styled(" queue ", t.dim),
        styled(format!("{} ", clean_short(q.as_str(), 60)), t.title),
    ]);
    let b = block(st, title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let Some(e) = st.store.get(q) else {
        let why = if st.poll.listed {
            "this queue is no longer in the broker's list"
        } else {
            "loading the queue list…"
        };
        f.render_widget(Paragraph::new(why).style(t.warn), inner);
        return;
    };
    let caps = st.caps_for(q);
    let mut lines = info::lines(st, e, st.store.derived(q).as_ref(), &caps);
    lines.extend(partitions::lines(st));

    // Sized from the wrapped rows: the last notes are the ones a line count loses.
    let rows = wrap_lines(&lines, inner.width);
    let info_h = (rows.len() as u16).min(inner.height);
    let chart_h = inner.height.saturating_sub(info_h);
    let (info_area, chart_area) = if chart_h >= 6 {
        let [a, b] =
            Layout::vertical([Constraint::Length(info_h), Constraint::Min(6)]).areas(inner);
        (a, Some(b))
    } else {
        (inner, None)
    };
    let h = info_area.height as usize;
    let shown = scrolled(rows, h, st.detail.scroll, t.dim);
    f.render_widget(Paragraph::new(shown), info_area);
    if let Some(ca) = chart_area {
        charts(f, st, e.history.iter().copied().collect(), ca);
    }
}

/// The rows that fit in `h`: when they are too many, j/k scroll and the last row says how
/// much is below.
fn scrolled(rows: Vec<Line<'static>>, h: usize, scroll: usize, dim: Style) -> Vec<Line<'static>> {
    let mut shown: Vec<Line> = if rows.len() > h {
        let scroll = scroll.min(rows.len() - h.saturating_sub(1).max(1));
        let mut v: Vec<Line> = rows
            .iter()
            .skip(scroll)
            .take(h.saturating_sub(1))
            .cloned()
            .collect();
        let below = rows.len() - scroll - v.len();
        v.push(Line::from(styled(
            if below > 0 {
                format!("↓ {below} more lines (j/k scroll)")
            } else {
                "↑ k scrolls back".to_string()
            },
            dim,
        )));
        v
    } else {
        rows
    };
    shown.truncate(h);
    shown
}

pub(super) fn charts(f: &mut Frame, st: &Model, hist: Vec<Sample>, area: Rect) {
    let t = &st.theme;
    let last_t = hist.last().map_or(0, |s| s.t);
    let from = last_t.saturating_sub(st.detail.chart_window_secs as u32);
    let w: Vec<&Sample> = hist.iter().filter(|s| s.t >= from).collect();
    let [top, bottom] = Layout::vertical([Constraint::Fill(1), Constraint::Fill(1)]).areas(area);
    let [a, b] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(top);
    let [c, d] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(bottom);
    let u = |v: u32| (v != MISSING).then_some(v as u64);
    let series: [(&str, Vec<Option<u64>>, Rect); 4] = [
        ("depth", w.iter().map(|s| u(s.depth)).collect(), a),
        ("in flight", w.iter().map(|s| u(s.in_flight)).collect(), b),
        (
            "oldest age s",
            w.iter()
                .map(|s| (!s.age_secs.is_nan()).then_some(s.age_secs.max(0.0) as u64))
                .collect(),
            c,
        ),
        ("DLQ depth", w.iter().map(|s| u(s.dlq_depth)).collect(), d),
    ];
    for (name, data, r) in series {
        let max = data.iter().flatten().max().copied();
        let title = Line::from(vec![
            styled(format!(" {name} "), t.title),
            styled(
                format!(
                    "max {} · last {} ",
                    max.map_or_else(|| "—".into(), |m| m.to_string()),
                    fmt_secs(st.detail.chart_window_secs as f64)
                ),
                t.dim,
            ),
        ]);
        let bl = block(st, title);
        let inner = bl.inner(r);
        // Newest at the right edge.
        let n = inner.width as usize;
        let data: Vec<Option<u64>> = data[data.len().saturating_sub(n)..].to_vec();
        f.render_widget(bl, r);
        f.render_widget(Sparkline::default().data(&data).style(t.chart), inner);
    }
}
