//! The detail's text: figures, derived figures with their arithmetic, settings and what the
//! broker can do with this queue.

use ratatui::text::Line;

use super::super::queues::{eta_text, row_problem};
use super::super::{fmt_age, fmt_count, fmt_rate, fmt_secs, styled};
use crate::tui::state::Model;
use crate::tui::theme::Theme;
use qdeck_engine::derive::{Derived, Trend};
use qdeck_engine::store::{QueueEntry, RateSource};
use qdeck_model::domain::{AgeSource, BrowseEffect, Capabilities, QueueStats, RedriveMode};
use qdeck_model::sanitize::{clean, clean_short};

/// Every line of the detail above the charts, before wrapping.
pub(super) fn lines<'a>(
    st: &Model,
    e: &QueueEntry,
    d: Option<&Derived>,
    caps: &Capabilities,
) -> Vec<Line<'a>> {
    let t = &st.theme;
    let l = e.latest.as_ref();
    let mut lines: Vec<Line> = Vec::new();
    if let Some((_, why)) = row_problem(st, e) {
        lines.push(Line::from(styled(why, t.warn)));
    }
    if l.is_none() {
        lines.push(Line::from(styled("waiting for the first figures…", t.dim)));
    }
    lines.push(depth_line(t, e, l));
    lines.push(age_line(t, caps, l));
    if let Some(d) = d {
        let workers = super::super::workers::shown_count(st, &e.info.id, d.workers);
        lines.extend(derived_lines(t, d, workers, e.info.is_dlq));
    }
    lines.extend(settings_lines(t, e));
    lines.extend(capability_notes(t, caps));
    lines
}

fn depth_line<'a>(t: &Theme, e: &QueueEntry, l: Option<&QueueStats>) -> Line<'a> {
    let dlq_txt = match (&e.info.dlq, l.and_then(|s| s.dlq_depth)) {
        (Some(dq), n) => format!(" · DLQ {}: {}", clean_short(dq.as_str(), 30), fmt_count(n)),
        (None, Some(n)) => format!(" · DLQ {}", fmt_count(Some(n))),
        _ => String::new(),
    };
    Line::from(vec![
        styled("depth ", t.dim),
        styled(fmt_count(l.and_then(|s| s.depth)), t.title),
        styled(" · in flight ", t.dim),
        styled(fmt_count(l.and_then(|s| s.in_flight)), t.text),
        styled(" · delayed ", t.dim),
        styled(fmt_count(l.and_then(|s| s.delayed)), t.text),
        styled(dlq_txt, t.dlq),
        styled(
            match l.and_then(|s| s.lost) {
                Some(n) if n > 0 => format!(" · {n} lost to retention"),
                _ => String::new(),
            },
            t.error,
        ),
        styled(retained_text(l), t.dim),
        styled(forwarded_text(l), t.dlq),
    ])
}

/// What the broker counts as dead-lettered recently (Pub/Sub), beside the DLQ's depth.
fn forwarded_text(l: Option<&QueueStats>) -> String {
    match l.and_then(|s| s.forwarded) {
        Some(f) => format!(
            " · forwarded {} in {} min",
            fmt_count(Some(f.count)),
            f.window_secs / 60
        ),
        None => String::new(),
    }
}

/// What a log keeps after its readers read it, said as retention (its depth is `—`).
fn retained_text(l: Option<&QueueStats>) -> String {
    match l.and_then(|s| s.retained) {
        Some(n) => format!(
            " · retains {} (oldest {}): retention, not backlog",
            fmt_count(Some(n)),
            fmt_age(l.and_then(|s| s.retained_age_secs))
        ),
        None => String::new(),
    }
}

fn age_line<'a>(t: &Theme, caps: &Capabilities, l: Option<&QueueStats>) -> Line<'a> {
    let age_src = match &caps.age {
        AgeSource::Exact => String::new(),
        AgeSource::Metric(m) => format!(" (from a metric: {})", clean(m)),
        AgeSource::Unknown(w) => format!(" (unknown: {})", clean(w)),
    };
    let age_note = l
        .and_then(|s| s.age_note.as_deref())
        .map(|n| format!(" — {}", clean(n)))
        .unwrap_or_default();
    Line::from(vec![
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
    ])
}

/// Rates, trend and drain time, workers needed, and the arithmetic behind them.
fn derived_lines<'a>(t: &Theme, d: &Derived, workers: Option<u32>, is_dlq: bool) -> Vec<Line<'a>> {
    let src = match d.rate_source {
        RateSource::Broker => "broker rates",
        RateSource::Counters => "derived from the broker's counters",
        RateSource::DepthDelta => "net rate derived from depth changes",
        RateSource::Unknown => "no rates yet",
    };
    let drain = match d.drain_secs {
        Some(s) if s > 0.0 => format!("drains in ~{} (derived)", fmt_secs(s)),
        Some(_) => "empty".into(),
        None if d.trend == Trend::Growing => format!(
            "growing at {}/s: does not drain at this rate (derived)",
            fmt_rate(d.net_rate)
        ),
        None => format!("time to drain: {} (derived)", eta_text(d, is_dlq)),
    };
    let mut lines = vec![
        Line::from(vec![
            styled("in ", t.dim),
            styled(format!("{}/s", fmt_rate(d.in_rate)), t.text),
            styled(" · out ", t.dim),
            styled(format!("{}/s", fmt_rate(d.out_rate)), t.text),
            styled(" · net ", t.dim),
            styled(
                d.net_rate
                    .map_or_else(|| "—".into(), |n| format!("{n:+.1}/s")),
                t.text,
            ),
            styled(format!("  ({src}, {})", window_text(d)), t.dim),
        ]),
        Line::from(vec![
            styled(format!("trend {:?} · ", d.trend).to_lowercase(), t.text),
            styled(drain, t.accent),
        ]),
        workers_line(t, d, workers),
    ];
    if let Some(a) = &d.arithmetic {
        lines.push(Line::from(styled(format!("  {a}"), t.dim)));
    }
    if d.stuck && !is_dlq {
        lines.push(Line::from(styled(
            "age keeps rising while depth stays flat: a poison message or a stuck key?",
            t.warn,
        )));
    }
    lines
}

/// What the rates are averaged over: the last minute, or the time since the worker count
/// changed (the old workers' rates would describe a queue that is no longer there).
fn window_text(d: &Derived) -> String {
    match d.since_workers_changed {
        Some(_) => "since the worker count changed".into(),
        None => format!("last {} s", qdeck_engine::derive::RATE_WINDOW_SECS),
    }
}

/// `workers`: the count the workers view shows too (`workers::shown_count`).
fn workers_line<'a>(t: &Theme, d: &Derived, workers: Option<u32>) -> Line<'a> {
    let mut w = vec![
        styled("workers ", t.dim),
        styled(fmt_count(workers.map(u64::from)), t.text),
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
    Line::from(w)
}

/// The queue's settings, and the queues it is the dead-letter queue of.
fn settings_lines<'a>(t: &Theme, e: &QueueEntry) -> Vec<Line<'a>> {
    let s = &e.info.settings;
    let mut set = vec![
        format!("kind {:?}", e.info.kind).to_lowercase(),
        format!(
            "lease {}",
            s.lease_secs.map_or_else(|| "—".into(), fmt_secs)
        ),
        format!(
            "max receives {}",
            s.max_receives.map_or_else(|| "—".into(), |m| m.to_string())
        ),
    ];
    if let Some(r) = s.retention_secs {
        set.push(format!("retention {}", fmt_secs(r)));
    }
    if let Some(k) = &s.key_policy {
        set.push(format!("keys {}", clean(k)));
    }
    for (k, v) in &s.extra {
        // Said on its own line below.
        if k != qdeck_model::domain::DLQ_OF {
            set.push(format!("{} {}", clean(k), clean(v)));
        }
    }
    let mut lines = vec![Line::from(styled(set.join(" · "), t.text))];
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
    } else if let Some(of) = e.info.dlq_of() {
        lines.push(Line::from(styled(
            format!("dead-letter queue of: {}", clean(&of)),
            t.dlq,
        )));
    }
    lines
}

/// What browse, redrive and purge do on this queue, and the backend's other notes.
fn capability_notes<'a>(t: &Theme, c: &Capabilities) -> Vec<Line<'a>> {
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
    notes
        .into_iter()
        .map(|n| Line::from(styled(format!("· {n}"), t.dim)))
        .collect()
}
