//! The fleet home: one row per profile, each from its own poller. A dead or slow broker shows
//! as its own row's error or `stale`; the figures kept are those of its last good poll.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_plain_table, Col};
use super::wrap::split_for_text;
use super::{block, fmt_age, fmt_ago, fmt_count, plural, styled};
use crate::tui::state::Model;
use crate::tui::theme::Theme;
use qdeck_engine::fleet::{BrokerProblem, FleetRow};
use qdeck_model::domain::BrokerKind;
use qdeck_model::sanitize::clean_short;

/// The longest state the column holds, `no answer for 47h59`.
const STATE_MIN: u16 = 20;

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let Some(fl) = &st.fleet else {
        return;
    };
    let title = Line::from(vec![
        styled(" fleet ", t.title),
        styled(
            format!("{} ", plural(fl.rows.len() as u64, "profile", "profiles")),
            t.dim,
        ),
    ]);
    let b = block(st, title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if fl.rows.is_empty() {
        f.render_widget(Paragraph::new("no profile configured").style(t.dim), inner);
        return;
    }
    let cols = vec![
        Col::fixed("PROFILE", 14, 0),
        // The profile's name usually says its kind: the first to give way, so that cost,
        // call rate and a whole state fit 120 columns.
        Col::fixed("KIND", 10, 5),
        Col::fixed("QUEUES", 7, 1),
        Col::fixed("DEPTH", 8, 0),
        // Counts take at most 6 cells (`99999`, `9999k`, `10.0M`): one goes to OLDEST.
        Col::fixed("DLQ", 7, 0),
        Col::fixed("DLQ Δ", 6, 2),
        // Room for `47h59 dlq`: the oldest message may be a DLQ's, and says so.
        Col::fixed("OLDEST", 9, 1),
        Col::fixed("IN QUEUE", 14, 2),
        Col::fixed("GROWING", 7, 2),
        Col::fixed("CALLS/m", 7, 4),
        // SQS/CloudWatch bill per request; the other kinds cost nothing per call.
        Col::fixed("$/h", 7, 4),
        // The state takes the room left, and never less than its longest words: columns go
        // before a state is cut (the selected row's error is in full under the table).
        Col::flex("STATE", STATE_MIN, 0),
    ];
    let keep = fit(&cols, inner.width, st.wide);
    let state_w = flex_width(&cols, &keep, inner.width);
    // The selected profile's error in full under the table: its row cuts it.
    let selected_error = fl
        .rows
        .get(fl.cursor.sel)
        .and_then(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.profile)));
    let (table_area, error_area) = split_for_text(inner, selected_error);
    let (cursor, from, to) = fl.cursor.placed(fl.rows.len(), table_area.height as usize);
    let rows: Vec<Row> = fl.rows[from..to]
        .iter()
        .map(|r| {
            let stale = r.stale(st.now_ms);
            // In the on-fire view's words (`down 2m`, `no answer for 45s`, `stale 5m`).
            let (state, style) = match (r.broker_problem(st.now_ms), r.updated_ms) {
                (Some(p @ BrokerProblem::Stale { .. }), _) => {
                    (super::fire::problem_summary(st.now_ms, &p), t.stale)
                }
                (Some(p), _) => (super::fire::problem_summary(st.now_ms, &p), t.error),
                (None, None) => ("connecting…".to_string(), t.dim),
                (None, Some(u)) => (format!("ok {}", fmt_ago(st.now_ms - u)), t.good),
            };
            let figures = if r.error.is_some() || stale {
                t.stale
            } else {
                t.text
            };
            let dlq_style = if r.dlq_change.unwrap_or(0) > 0 {
                t.warn
            } else if r.dlq_depth.unwrap_or(0) > 0 {
                t.dlq
            } else {
                figures
            };
            let cells = vec![
                Cell::from(styled(clean_mid(&r.profile, 14), t.title)),
                Cell::from(r.kind.map_or("—", BrokerKind::as_str)),
                Cell::from(fmt_count(r.queues.map(|n| n as u64))),
                Cell::from(styled(fmt_count(r.depth), figures)),
                Cell::from(styled(fmt_count(r.dlq_depth), dlq_style)),
                Cell::from(styled(
                    r.dlq_change
                        .map_or_else(|| "—".into(), |d| format!("{d:+}")),
                    dlq_style,
                )),
                oldest_cell(r, t),
                Cell::from(
                    r.worst_age
                        .as_ref()
                        .map_or_else(|| "—".into(), |(_, q)| clean_mid(q.as_str(), 14)),
                ),
                Cell::from(fmt_count(r.growing.map(|n| n as u64))),
                Cell::from(match (r.calls_per_min, r.calls_budget) {
                    (Some(c), Some(max)) => format!("{c:.0}/{max}"),
                    (Some(c), None) => format!("{c:.0}"),
                    (None, _) => "—".into(),
                }),
                Cell::from(r.usd_per_hour.map(fmt_usd).unwrap_or_default()),
                Cell::from(styled(clean_short(&state, state_w), style)),
            ];
            kept_row(cells, &keep).style(t.text)
        })
        .collect();
    render_plain_table(f, table_area, rows, (&cols, &keep), t, cursor.sel - from);
    if let Some((area, lines)) = error_area {
        f.render_widget(Paragraph::new(lines).style(t.error), area);
    }
}

/// The oldest message of the profile, marked `dlq` (in the DLQ colour) when a DLQ holds it:
/// the IN QUEUE column naming it is the first to go on a narrow terminal.
fn oldest_cell<'a>(r: &FleetRow, t: &Theme) -> Cell<'a> {
    let age = fmt_age(r.worst_age.as_ref().map(|(a, _)| *a));
    if r.worst_age.is_some() && r.worst_age_in_dlq {
        Cell::from(styled(format!("{age} dlq"), t.dlq))
    } else {
        Cell::from(age)
    }
}

/// Dollars with enough digits to tell a cheap profile from a free one.
fn fmt_usd(d: f64) -> String {
    if d >= 10.0 {
        format!("{d:.0}")
    } else if d >= 0.1 {
        format!("{d:.2}")
    } else {
        format!("{d:.4}")
    }
}
