//! Queue detail: figures, derived figures with their arithmetic, settings, capability notes,
//! and history charts over a selectable window.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use super::queues::{eta_text, row_problem};
use super::wrap::wrap_lines;
use super::{block, fmt_age, fmt_count, fmt_rate, fmt_secs, styled};
use crate::domain::{AgeSource, BrowseEffect, RedriveMode};
use crate::engine::derive::Trend;
use crate::engine::store::{RateSource, Sample, MISSING};
use crate::sanitize::{clean, clean_short};
use crate::tui::state::State;

pub fn render(f: &mut Frame, st: &State, area: Rect) {
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
        f.render_widget(
            Paragraph::new("this queue is no longer in the broker's list").style(t.warn),
            inner,
        );
        return;
    };
    let d = st.store.derived(q);
    let l = e.latest.as_ref();
    let mut lines: Vec<Line> = Vec::new();
    if let Some((_, why)) = row_problem(st, e) {
        lines.push(Line::from(styled(why, t.warn)));
    }
    if l.is_none() {
        lines.push(Line::from(styled("waiting for the first figures…", t.dim)));
    }
    let dlq_txt = match (&e.info.dlq, l.and_then(|s| s.dlq_depth)) {
        (Some(dq), n) => format!(" · DLQ {}: {}", clean_short(dq.as_str(), 30), fmt_count(n)),
        (None, Some(n)) => format!(" · DLQ {}", fmt_count(Some(n))),
        _ => String::new(),
    };
    lines.push(Line::from(vec![
        styled("depth ", t.dim),
        styled(fmt_count(l.and_then(|s| s.depth)), t.title),
        styled(" · in flight ", t.dim),
        styled(fmt_count(l.and_then(|s| s.in_flight)), t.text),
        styled(" · delayed ", t.dim),
        styled(fmt_count(l.and_then(|s| s.delayed)), t.text),
        styled(dlq_txt, t.dlq),
    ]));
    let caps = st.caps_for(q);
    let age_src = match &caps.age {
        AgeSource::Exact => String::new(),
        AgeSource::Metric(m) => format!(" (from a metric: {})", clean(m)),
        AgeSource::Unknown(w) => format!(" (unknown: {})", clean(w)),
    };
    let age_note = l
        .and_then(|s| s.age_note.as_deref())
        .map(|n| format!(" — {}", clean(n)))
        .unwrap_or_default();
    lines.push(Line::from(vec![
        styled("oldest message ", t.dim),
        styled(fmt_age(l.and_then(|s| s.oldest_age_secs)), t.text),
        styled(format!("{age_src}{age_note}"), t.dim),
        styled(
            format!(
                " · consumers {}",
                fmt_count(l.and_then(|s| s.consumers).map(u64::from))
            ),
            t.dim,
        ),
    ]));
    if let Some(d) = &d {
        let src = match d.rate_source {
            RateSource::Broker => "broker rates",
            RateSource::Counters => "derived from the broker's counters",
            RateSource::DepthDelta => "net rate derived from depth changes",
            RateSource::Unknown => "no rates yet",
        };
        lines.push(Line::from(vec![
            styled("in ", t.dim),
            styled(format!("{}/s", fmt_rate(d.in_rate)), t.text),
            styled(" · out ", t.dim),
            styled(format!("{}/s", fmt_rate(d.out_rate)), t.text),
            styled(" · net ", t.dim),
            styled(
                d.net_rate
                    .map(|n| format!("{n:+.1}/s"))
                    .unwrap_or_else(|| "—".into()),
                t.text,
            ),
            styled(format!("  ({src}, last 60 s)"), t.dim),
        ]));
        let drain = match d.drain_secs {
            Some(s) if s > 0.0 => format!("drains in ~{} (derived)", fmt_secs(s)),
            Some(_) => "empty".into(),
            None if d.trend == Trend::Growing => format!(
                "growing at {}/s: does not drain at this rate (derived)",
                fmt_rate(d.net_rate)
            ),
            None => format!("time to drain: {} (derived)", eta_text(d, e.info.is_dlq)),
        };
        lines.push(Line::from(vec![
            styled(format!("trend {:?} · ", d.trend).to_lowercase(), t.text),
            styled(drain, t.accent),
        ]));
        let mut w = vec![
            styled("workers ", t.dim),
            styled(fmt_count(d.workers.map(u64::from)), t.text),
        ];
        if let Some(pw) = d.per_worker_rate {
            w.push(styled(
                format!(" at {pw:.1}/s each (since the count last changed)"),
                t.dim,
            ));
        }
        match d.workers_needed {
            None if d.measuring => w.push(styled(
                " · workers needed: measuring (the worker count just changed)",
                t.dim,
            )),
            Some(n) => w.push(styled(
                format!(" → {n} needed to drain within {}", fmt_secs(d.target_secs)),
                t.accent,
            )),
            None => w.push(styled(
                " · workers needed: — (needs in/out rates and consumers)",
                t.dim,
            )),
        }
        lines.push(Line::from(w));
        if let Some(a) = &d.arithmetic {
            lines.push(Line::from(styled(format!("  {a}"), t.dim)));
        }
        if d.stuck && !e.info.is_dlq {
            lines.push(Line::from(styled(
                "age keeps rising while depth stays flat: a poison message or a stuck key?",
                t.warn,
            )));
        }
    }
    let s = &e.info.settings;
    let mut set = vec![
        format!("kind {:?}", e.info.kind).to_lowercase(),
        format!(
            "lease {}",
            s.lease_secs.map(fmt_secs).unwrap_or_else(|| "—".into())
        ),
        format!(
            "max receives {}",
            s.max_receives
                .map(|m| m.to_string())
                .unwrap_or_else(|| "—".into())
        ),
    ];
    if let Some(r) = s.retention_secs {
        set.push(format!("retention {}", fmt_secs(r)));
    }
    if let Some(k) = &s.key_policy {
        set.push(format!("keys {}", clean(k)));
    }
    for (k, v) in &s.extra {
        set.push(format!("{} {}", clean(k), clean(v)));
    }
    lines.push(Line::from(styled(set.join(" · "), t.text)));
    if !e.info.dlq_sources.is_empty() {
        let srcs: Vec<String> = e
            .info
            .dlq_sources
            .iter()
            .map(|q| clean_short(q.as_str(), 30))
            .collect();
        lines.push(Line::from(styled(
            format!("dead-letter queue of: {}", srcs.join(", ")),
            t.dlq,
        )));
    }
    let c = &caps;
    let mut notes: Vec<String> = Vec::new();
    match &c.browse {
        BrowseEffect::None => notes.push("browse is a true peek".into()),
        BrowseEffect::SideEffect(s) => notes.push(format!("browse: {}", clean(s))),
        BrowseEffect::Unsupported(s) => notes.push(format!("no browse: {}", clean(s))),
    }
    match &c.redrive {
        RedriveMode::Native(s) => notes.push(format!("redrive: native ({})", clean(s))),
        RedriveMode::ClientSide => notes.push("redrive: copy → confirm → delete".into()),
        RedriveMode::Unsupported(s) => notes.push(format!("no redrive: {}", clean(s))),
    }
    if let Some(p) = &c.purge_note {
        notes.push(format!("purge: {}", clean(p)));
    }
    for n in &c.notes {
        notes.push(clean(n).into_owned());
    }
    for n in notes {
        lines.push(Line::from(styled(format!("· {n}"), t.dim)));
    }

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
    let mut shown: Vec<Line> = if rows.len() > h {
        // Too tall: j/k scroll, and the last row says how much is below.
        let scroll = st
            .detail_scroll
            .min(rows.len() - h.saturating_sub(1).max(1));
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
            t.dim,
        )));
        v
    } else {
        rows
    };
    shown.truncate(h);
    f.render_widget(Paragraph::new(shown), info_area);
    if let Some(ca) = chart_area {
        charts(f, st, e.history.iter().copied().collect(), ca);
    }
}

fn charts(f: &mut Frame, st: &State, hist: Vec<Sample>, area: Rect) {
    let t = &st.theme;
    let last_t = hist.last().map(|s| s.t).unwrap_or(0);
    let from = last_t.saturating_sub(st.chart_window_secs as u32);
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
                    max.map(|m| m.to_string()).unwrap_or_else(|| "—".into()),
                    fmt_secs(st.chart_window_secs as f64)
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
