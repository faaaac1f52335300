//! The alerts view (`:alerts`): each `[[alerts]]` rule with where it stands on every profile
//! this process evaluates (firing since, pending for, resolved at, or quiet), the console's
//! own profile first. The states come from the one alert book the console and its fleet
//! poller share, so this view, the badge and the on-fire list never disagree.

use std::collections::BTreeMap;

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, fmt_ago, fmt_secs, plural, styled};
use crate::tui::state::Model;
use qdeck_engine::alerts::{Key, Phase, Rule, Tracker};
use qdeck_model::sanitize::clean;

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let a = &st.alerts;
    // Everything drawn from the book is read under one lock (the lines own their text).
    let (firing, pending, lines) = a.book.read_with_evaluated(|tr, evaluated| {
        let (firing, pending) = tr.phases().fold((0, 0), |(f, p), (_, ph)| match ph {
            Phase::Firing { .. } => (f + 1, p),
            Phase::Pending { .. } => (f, p + 1),
        });
        let mut lines: Vec<Line> = Vec::new();
        for rule in &a.rules {
            rule_lines(st, tr, evaluated, rule, &mut lines);
        }
        (firing, pending, lines)
    });
    let title = Line::from(vec![
        styled(" alerts ", t.title),
        styled(
            format!(
                "{} · {firing} firing · {pending} pending ",
                plural(a.rules.len() as u64, "rule", "rules"),
            ),
            if firing > 0 { t.error } else { t.dim },
        ),
    ]);
    let b = block(st, title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if a.rules.is_empty() {
        f.render_widget(
            Paragraph::new("no alert rules: add [[alerts]] tables to the config (config.example.toml shows how)")
                .style(t.dim)
                .wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    let rows = wrap_lines(&lines, inner.width);
    let skip = a.scroll.min(rows.len().saturating_sub(1));
    f.render_widget(
        Paragraph::new(rows.into_iter().skip(skip).collect::<Vec<_>>()),
        inner,
    );
}

/// Where a key stands: the queue on the console's profile, `profile/queue` elsewhere, the
/// profile alone for its health rules.
fn place(own: &str, k: &Key) -> String {
    match (k.profile == own, k.queue.is_empty()) {
        (true, true) => k.profile.clone(),
        (true, false) => k.queue.clone(),
        (false, true) => k.profile.clone(),
        (false, false) => format!("{}/{}", k.profile, k.queue),
    }
}

/// The console's own profile first, then the others by name.
fn order<'a, T>(own: &str, mut v: Vec<(&'a Key, T)>) -> Vec<(&'a Key, T)> {
    v.sort_by(|a, b| {
        (a.0.profile != own, &a.0.profile, &a.0.queue).cmp(&(
            b.0.profile != own,
            &b.0.profile,
            &b.0.queue,
        ))
    });
    v
}

/// A rule's heading, then one line per place it fires, holds or resolved (or "quiet").
fn rule_lines<'a>(
    st: &'a Model,
    tr: &Tracker,
    evaluated: &BTreeMap<String, i64>,
    rule: &'a Rule,
    lines: &mut Vec<Line<'a>>,
) {
    let t = &st.theme;
    let own = st.session.profile.as_str();
    let wait = if rule.for_secs > 0.0 {
        format!(" for {}", fmt_secs(rule.for_secs))
    } else {
        String::new()
    };
    lines.push(Line::from(vec![
        styled(format!("{} ", clean(&rule.name)), t.title),
        styled(
            format!(
                "{} · when {}{wait}",
                rule.severity.as_str(),
                clean(rule.when.source())
            ),
            t.dim,
        ),
    ]));
    let since = |ms: i64| fmt_secs(((st.now_ms - ms).max(0) / 1000) as f64);
    let phases = order(
        own,
        tr.phases().filter(|(k, _)| k.rule == rule.name).collect(),
    );
    let mut any = false;
    for (k, phase) in phases {
        any = true;
        let (label, style, when) = match phase {
            Phase::Firing { since_ms } => ("FIRING ", t.error, format!("for {}", since(*since_ms))),
            Phase::Pending { since_ms } => {
                ("pending", t.warn, format!("holds for {}", since(*since_ms)))
            }
        };
        lines.push(Line::from(vec![
            styled(format!("  {label} "), style),
            styled(format!("{} ", clean(&place(own, k))), t.text),
            styled(format!("{when}{}", as_of(st, evaluated, k)), t.dim),
        ]));
    }
    let resolved = order(
        own,
        tr.resolved()
            .filter(|(k, _)| k.rule == rule.name && !tr.phases().any(|(p, _)| p == *k))
            .collect(),
    );
    for (k, r) in resolved {
        any = true;
        lines.push(Line::from(vec![
            styled("  resolved ", t.good),
            styled(format!("{} ", clean(&place(own, k))), t.text),
            styled(
                format!("{} · {}", fmt_ago(st.now_ms - r.at_ms), clean(&r.summary)),
                t.dim,
            ),
        ]));
    }
    if !any {
        lines.push(Line::from(styled("  quiet", t.dim)));
    }
}

/// Another profile's state is only as fresh as its last evaluation: without the fleet
/// poller nobody evaluates it, and the line says when that last happened.
fn as_of(st: &Model, evaluated: &BTreeMap<String, i64>, k: &Key) -> String {
    if k.profile == st.session.profile || st.fleet.is_some() {
        return String::new();
    }
    match evaluated.get(&k.profile) {
        Some(&at) => format!(" · as of {} (:fleet polls it)", fmt_ago(st.now_ms - at)),
        None => String::new(),
    }
}
