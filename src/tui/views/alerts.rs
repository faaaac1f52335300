//! The alerts view (`:alerts`): each `[[alerts]]` rule with where it stands on this profile
//! (firing since, pending for, resolved at, or quiet) and, while the fleet is polled, where it
//! fires on the other profiles.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, fmt_ago, fmt_secs, plural, styled};
use crate::tui::state::{FiringAlert, Model};
use qdeck_engine::alerts::{Phase, Rule};
use qdeck_model::sanitize::clean;

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let a = &st.alerts;
    let pending = a
        .tracker
        .phases()
        .filter(|(_, p)| matches!(p, Phase::Pending { .. }))
        .count();
    let profile = st.session.profile.as_str();
    // Only the fleet poller knows what fires on the other profiles; their pending and
    // resolved phases stay in its tracker.
    let elsewhere: Vec<&FiringAlert> = st
        .fleet
        .as_ref()
        .map(|f| f.alerts.iter().filter(|x| x.profile != profile).collect())
        .unwrap_or_default();
    let firing = a.firing() + elsewhere.len();
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
    let mut lines: Vec<Line> = Vec::new();
    for rule in &a.rules {
        rule_lines(st, rule, &elsewhere, &mut lines);
    }
    let rows = wrap_lines(&lines, inner.width);
    let skip = a.scroll.min(rows.len().saturating_sub(1));
    f.render_widget(
        Paragraph::new(rows.into_iter().skip(skip).collect::<Vec<_>>()),
        inner,
    );
}

/// A rule's heading, then one line per place it fires, holds or resolved (or "quiet").
fn rule_lines<'a>(
    st: &'a Model,
    rule: &'a Rule,
    elsewhere: &[&'a FiringAlert],
    lines: &mut Vec<Line<'a>>,
) {
    let t = &st.theme;
    let a = &st.alerts;
    let profile = st.session.profile.as_str();
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
    let mut any = false;
    for (k, phase) in a.tracker.phases() {
        if k.rule != rule.name || k.profile != profile {
            continue;
        }
        any = true;
        let place = if k.queue.is_empty() {
            profile
        } else {
            k.queue.as_str()
        };
        let (label, style, when) = match phase {
            Phase::Firing { since_ms } => (
                "FIRING ",
                t.error,
                format!(
                    "for {}",
                    fmt_secs(((st.now_ms - since_ms).max(0) / 1000) as f64)
                ),
            ),
            Phase::Pending { since_ms } => (
                "pending",
                t.warn,
                format!(
                    "holds for {}",
                    fmt_secs(((st.now_ms - since_ms).max(0) / 1000) as f64)
                ),
            ),
        };
        lines.push(Line::from(vec![
            styled(format!("  {label} "), style),
            styled(format!("{} ", clean(place)), t.text),
            styled(when, t.dim),
        ]));
    }
    for (k, r) in a.tracker.resolved() {
        if k.rule != rule.name || k.profile != profile || a.tracker.phases().any(|(p, _)| p == k) {
            continue;
        }
        any = true;
        lines.push(Line::from(vec![
            styled("  resolved ", t.good),
            styled(
                format!(
                    "{} ",
                    clean(if k.queue.is_empty() {
                        profile
                    } else {
                        &k.queue
                    })
                ),
                t.text,
            ),
            styled(
                format!("{} · {}", fmt_ago(st.now_ms - r.at_ms), clean(&r.summary)),
                t.dim,
            ),
        ]));
    }
    for x in elsewhere.iter().filter(|x| x.rule == rule.name) {
        any = true;
        let place = match &x.queue {
            Some(q) => format!("{}/{}", x.profile, q.as_str()),
            None => x.profile.clone(),
        };
        lines.push(Line::from(vec![
            styled("  FIRING  ", t.error),
            styled(format!("{} ", clean(&place)), t.text),
            styled(
                format!(
                    "for {}",
                    fmt_secs(((st.now_ms - x.since_ms).max(0) / 1000) as f64)
                ),
                t.dim,
            ),
        ]));
    }
    if !any {
        lines.push(Line::from(styled("  quiet", t.dim)));
    }
}
