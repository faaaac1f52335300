//! What is on fire: first every profile whose broker does not answer (nothing of it can be
//! seen, so it outranks any queue), then the most severe queues of every profile in one
//! table, worst first (the score is `engine::severity`). Each profile's poller keeps its worst `FIRE_ROWS` queues, so
//! the table stays small whatever the number of queues behind it.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_plain_table, Col};
use super::{block, fmt_age, fmt_count, fmt_rate, fmt_secs, plural, styled};
use crate::tui::state::{FireRow, FiringAlert, FleetState, Model};
use qdeck_engine::alerts::Severity;
use qdeck_engine::fleet::{BrokerProblem, FireEntry};
use qdeck_model::domain::QueueId;
use qdeck_model::sanitize::{clean, clean_short};

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let Some(fl) = &st.fleet else {
        return;
    };
    let rows_all = fl.fire_rows(st.now_ms);
    let down = rows_all
        .iter()
        .filter(|r| matches!(r, FireRow::Broker { .. }))
        .count();
    let alerting = rows_all
        .iter()
        .filter(|r| matches!(r, FireRow::Alert(_)))
        .count();
    // The long words where they fit, the short ones on a narrow terminal: a title is never
    // cut inside a word. Each count: how many, its long word (one, many), its short word.
    let queues = rows_all.len() - down - alerting;
    let kinds = [
        (
            alerting,
            ("alert firing", "alerts firing"),
            "firing",
            t.error,
        ),
        (
            down,
            ("broker not answering", "brokers not answering"),
            "down",
            t.error,
        ),
    ];
    let counts = |short: bool| {
        let mut parts: Vec<(String, ratatui::style::Style)> = kinds
            .iter()
            .filter(|(n, ..)| *n > 0)
            .map(|&(n, (one, many), brief, style)| {
                let (one, many) = if short { (brief, brief) } else { (one, many) };
                (plural(n as u64, one, many), style)
            })
            .collect();
        parts.push((plural(queues as u64, "queue", "queues"), t.dim));
        parts
    };
    let width = |parts: &[(String, ratatui::style::Style)]| {
        " on fire ".len()
            + parts
                .iter()
                .map(|(p, _)| p.chars().count() + 3)
                .sum::<usize>()
    };
    let mut parts = counts(false);
    if width(&parts) + 2 > area.width as usize {
        parts = counts(true);
    }
    let mut title = vec![styled(" on fire ", t.title)];
    let last = parts.len() - 1;
    for (i, (text, style)) in parts.into_iter().enumerate() {
        title.push(styled(format!("{text} "), style));
        if i < last {
            title.push(styled("· ", t.dim));
        }
    }
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
    let queue_w = flex_width(&cols, &keep, inner.width) as usize;
    // The selected broker row's error in full under the table: it is cut in the row.
    let selected = rows_all.get(fl.fire_cursor.sel.min(rows_all.len() - 1));
    let (table_area, error_area) = super::wrap::split_for_text(
        inner,
        selected.and_then(|r| match r {
            FireRow::Alert(a) => Some(alert_text(st, a)),
            FireRow::Broker { profile, problem } => Some(problem_text(st, profile, problem)),
            FireRow::Queue { .. } => None,
        }),
    );
    let (cursor, from, to) = fl
        .fire_cursor
        .placed(rows_all.len(), table_area.height as usize);
    let rows: Vec<Row> = rows_all[from..to]
        .iter()
        .map(|r| match r {
            FireRow::Alert(a) => alert_row(st, fl, a, queue_w, &keep),
            FireRow::Broker { profile, problem } => {
                broker_row(st, profile, problem, queue_w, &keep)
            }
            FireRow::Queue { profile, entry } => queue_row(st, fl, profile, entry, queue_w, &keep),
        })
        .collect();
    render_plain_table(f, table_area, rows, (&cols, &keep), t, cursor.sel - from);
    if let Some((area, lines)) = error_area {
        f.render_widget(Paragraph::new(lines).style(t.error), area);
    }
}

/// An alert rule firing: its severity, where, which rule and for how long.
fn alert_row<'a>(
    st: &Model,
    fl: &FleetState,
    a: &FiringAlert,
    queue_w: usize,
    keep: &[bool],
) -> Row<'a> {
    let t = &st.theme;
    let (sev, style) = match a.severity {
        Severity::Critical => ("crit", t.error),
        Severity::Warning => ("warn", t.warn),
        Severity::Info => ("info", t.dim),
    };
    // The queue's figures now, where its profile's poller kept them among its worst.
    let entry = a.queue.as_ref().and_then(|q| {
        fl.rows
            .iter()
            .find(|r| r.profile == a.profile)
            .and_then(|r| r.fire.iter().find(|e| &e.queue == q))
    });
    let place = a.queue.as_ref().map_or(a.profile.as_str(), QueueId::as_str);
    let dash = || Cell::from("—");
    let cells = vec![
        Cell::from(styled(sev, style)),
        Cell::from(styled(clean_mid(&a.profile, 12), t.title)),
        Cell::from(styled(
            format!("⚑ {}", clean_mid(place, queue_w.saturating_sub(2))),
            style,
        )),
        entry.map_or_else(dash, |e| Cell::from(fmt_count(e.depth))),
        entry.map_or_else(dash, |e| {
            Cell::from(e.change.map_or_else(|| "—".into(), |d| format!("{d:+}")))
        }),
        entry.map_or_else(dash, |e| Cell::from(fmt_age(e.age_secs))),
        entry.map_or_else(dash, |e| Cell::from(fmt_rate(e.out_rate))),
        Cell::from(if entry.is_some_and(|e| e.is_dlq) {
            styled("dlq", t.dlq)
        } else {
            styled("", t.text)
        }),
    ];
    kept_row(cells, keep).style(t.text)
}

/// The selected alert's story under the table: which rule, for how long, and the line it
/// printed when it started firing (its figures then, not now: the row has those).
fn alert_text(st: &Model, a: &FiringAlert) -> String {
    let since = fmt_secs(((st.now_ms - a.since_ms).max(0) / 1000) as f64);
    format!(
        "{} {}, firing for {since}; when it fired: {}",
        a.severity.as_str(),
        a.rule,
        a.summary
    )
}

/// A profile whose broker does not answer: no figures, only what is wrong and since when.
fn broker_row<'a>(
    st: &Model,
    profile: &str,
    problem: &BrokerProblem,
    queue_w: usize,
    keep: &[bool],
) -> Row<'a> {
    let t = &st.theme;
    let cells = vec![
        Cell::from(styled("  !", t.error)),
        Cell::from(styled(clean_mid(profile, 12), t.title)),
        Cell::from(styled(
            clean_short(&problem_summary(st.now_ms, problem), queue_w),
            t.error,
        )),
        Cell::from("—"),
        Cell::from("—"),
        Cell::from("—"),
        Cell::from("—"),
        Cell::from(""),
    ];
    kept_row(cells, keep).style(t.text)
}

/// How long the broker has been a problem, in seconds.
fn problem_age(now_ms: i64, p: &BrokerProblem) -> Option<f64> {
    let since = match p {
        BrokerProblem::Failing { since_ms, .. } | BrokerProblem::Silent { since_ms, .. } => {
            *since_ms
        }
        BrokerProblem::Stale { since_ms } => Some(*since_ms),
    };
    since.map(|s| ((now_ms - s).max(0) / 1000) as f64)
}

/// The problem in the few words a row has room for: `down 2m`, `no answer for 45s`,
/// `stale 5m`. The selected row's whole story is under the table.
pub(super) fn problem_summary(now_ms: i64, p: &BrokerProblem) -> String {
    let age = problem_age(now_ms, p).map(fmt_secs);
    match (p, age) {
        (BrokerProblem::Silent { .. }, Some(a)) => format!("no answer for {a}"),
        (BrokerProblem::Silent { after_secs, .. }, None) => format!("no answer in {after_secs}s"),
        (BrokerProblem::Failing { .. }, Some(a)) => format!("down {a}"),
        (BrokerProblem::Failing { .. }, None) => "down".into(),
        (BrokerProblem::Stale { .. }, Some(a)) => format!("stale {a}"),
        (BrokerProblem::Stale { .. }, None) => "stale".into(),
    }
}

/// The whole story of a broker row, for the lines under the table: what failed (the error
/// says it: `broker unreachable: …`, `not authorised: …`) and for how long.
fn problem_text(st: &Model, profile: &str, p: &BrokerProblem) -> String {
    let age = problem_age(st.now_ms, p).map(fmt_secs);
    let story = match p {
        BrokerProblem::Failing { error, .. } => error.clone(),
        BrokerProblem::Silent { after_secs, .. } => {
            format!("no answer within {after_secs}s: the broker accepts connections but does not answer")
        }
        BrokerProblem::Stale { .. } => "no poll has succeeded since".into(),
    };
    match age {
        Some(a) => format!("{profile}: {story} (for {a})"),
        None => format!("{profile}: {story}"),
    }
}

fn queue_row<'a>(
    st: &Model,
    fl: &FleetState,
    profile: &str,
    e: &FireEntry,
    queue_w: usize,
    keep: &[bool],
) -> Row<'a> {
    let t = &st.theme;
    let max_age = fl
        .rows
        .iter()
        .find(|r| r.profile == profile)
        .map_or(300.0, |r| r.max_age_secs);
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
    let late = e.age_secs.is_some_and(|a| a >= max_age);
    let cells = vec![
        Cell::from(styled(format!("{:>3.0}", e.severity), sev_style)),
        Cell::from(styled(clean_mid(profile, 12), t.title)),
        Cell::from(clean_mid(e.queue.as_str(), queue_w)),
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
    kept_row(cells, keep).style(t.text)
}
