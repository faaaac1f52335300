//! Rendering: pure functions from `&Model` to a frame. Every piece of broker text goes through
//! `sanitize` before it reaches a span.

mod alerts;
pub mod columns;
mod detail;
mod dialog;
mod fire;
mod fleet;
pub mod help;
pub mod messages;
mod ops;
pub mod queues;
mod reason_text;
mod reasons;
mod workers;
pub mod wrap;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::keymap::{Cmd, COMMANDS};
use super::state::{Completion, InputKind, Level, Model, View};
use qdeck_model::config::Access;
use qdeck_model::sanitize::clean;

/// Smallest area we draw the console into; below it a one-line notice.
const MIN_W: u16 = 20;
const MIN_H: u16 = 6;

pub fn render(f: &mut Frame, st: &Model) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        let p = Paragraph::new(format!(
            "qdeck: {}×{} is too small",
            area.width, area.height
        ))
        .style(st.theme.warn);
        f.render_widget(p, area);
        return;
    }
    // The status rows sit between the view and the key hints: a flash never covers the
    // breadcrumb or the hints, and a long one wraps.
    let status = status_rows(st, area.width);
    let [top, main, status_area, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(status.len() as u16),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, st, top);
    let view = st.view();
    let under = if view == View::Help {
        st.stack
            .iter()
            .rev()
            .nth(1)
            .copied()
            .unwrap_or(View::Queues)
    } else {
        view
    };
    match under {
        View::Fleet => fleet::render(f, st, main),
        View::Fire => fire::render(f, st, main),
        View::Queues | View::Help => queues::render(f, st, main),
        View::Detail => detail::render(f, st, main),
        View::Messages => messages::render_list(f, st, main),
        View::Message => messages::render_body(f, st, main),
        View::Workers => workers::render(f, st, main),
        View::Reasons => reasons::render(f, st, main),
        View::Ops => ops::render(f, st, main),
        View::Alerts => alerts::render(f, st, main),
    }
    if view == View::Help {
        help::render(f, st, main);
    }
    if !status.is_empty() {
        f.render_widget(Paragraph::new(status), status_area);
    }
    footer(f, st, bottom);
    if let Some(d) = &st.dialog {
        dialog::render(f, st, d, main);
    }
}

fn header(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let mut spans = vec![Span::styled(" qdeck ", t.badge)];
    spans.push(Span::styled(
        format!(" {} ", clean(&st.session.profile)),
        t.title,
    ));
    // `local local` and `local-a local` say it twice: the broker kind only when the name
    // does not say it.
    let named = (st.session.profile.to_lowercase()).contains(&st.session.broker.to_lowercase());
    if !named {
        spans.push(Span::styled(format!("{} ", st.session.broker), t.dim));
    }
    if let Some(b) = tier_badge(st.session.access) {
        spans.push(Span::styled(b, t.badge_read_only));
        spans.push(Span::raw(" "));
    } else if st.session.protected {
        spans.push(Span::styled(" PROTECTED ", t.badge_protected));
        spans.push(Span::raw(" "));
    }
    let firing = st.alerts_firing();
    if firing > 0 {
        spans.push(Span::styled(
            format!(" ⚑ {firing} firing "),
            t.badge_protected,
        ));
        spans.push(Span::raw(" "));
    }
    if let Some(n) = st.demo_workers {
        spans.push(Span::styled(
            format!(" demo · {} ", plural(n as u64, "worker", "workers")),
            t.badge_demo,
        ));
        spans.push(Span::raw(" "));
    }
    // The end of the path is where the user is: a path too long for the row loses its
    // beginning (`…› message › operations`), never its end.
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let room = (area.width as usize).saturating_sub(used);
    spans.push(Span::styled(keep_tail(&breadcrumb(st), room), t.accent));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `s` in `max` chars: whole when it fits, else `…` and its last `max - 1` chars.
fn keep_tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n + 1 - max.max(1)).collect();
    format!("…{tail}")
}

/// Rows of the view area between the header, the status rows and the footer.
pub fn main_height(st: &Model) -> usize {
    (st.size.1 as usize)
        .saturating_sub(2)
        .saturating_sub(status_rows(st, st.size.0).len())
}

/// At most this many rows of status: a longer one ends in `…` and is read in full in the
/// operations log (an operation's result) or stays a flash.
const STATUS_ROWS: usize = 2;

/// The status rows: the flash (or a broker error) wrapped to the width, an operation's
/// result with the key that dismisses it. Empty when there is nothing to say.
fn status_rows(st: &Model, width: u16) -> Vec<Line<'static>> {
    let Some((text, style)) = flash(st) else {
        return Vec::new();
    };
    let sticky = st.status.as_ref().is_some_and(|s| s.sticky);
    let hint = if sticky && st.op.is_none() {
        format!(
            "  ({} dismiss · :ops log)",
            st.keymap.hint(super::keymap::Cmd::Cancel)
        )
    } else {
        String::new()
    };
    let line = Line::from(vec![
        Span::styled(format!(" {text}"), style),
        Span::styled(hint, st.theme.dim),
    ]);
    let mut rows = wrap::wrap_lines(&[line], width);
    let mark = if sticky { "… (:ops)" } else { "…" };
    wrap::clip_rows(&mut rows, STATUS_ROWS, width, mark, style);
    rows
}

/// The flash to show now, if any: the latest status message, else a broker error.
fn flash(st: &Model) -> Option<(String, Style)> {
    let t = &st.theme;
    if let Some(s) = &st.status {
        let style = match s.level {
            Level::Info => t.accent,
            Level::Warn => t.warn,
            Level::Error => t.error,
        };
        return Some((s.text.clone(), style));
    }
    // The fleet and on-fire views tell every profile's errors in their rows: the current
    // profile's error is not pinned over them.
    if matches!(st.view(), View::Fleet | View::Fire) {
        return None;
    }
    st.store
        .backend_error
        .as_ref()
        .map(|e| (clean(e).into_owned(), t.error))
}

/// `1 worker`, `3 workers`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Cut to `max` chars with `…`.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The path to the view on top, one part per view on the stack (`fleet › on fire › orders`,
/// `fleet › queues /ord › messages orders-dlq`): built from the stack itself, so whatever
/// was left or opened, the header names what is under the view.
fn breadcrumb(st: &Model) -> String {
    let short =
        |q: &qdeck_model::domain::QueueId| qdeck_model::sanitize::clean_short(q.as_str(), 30);
    let mut parts: Vec<String> = Vec::with_capacity(st.stack.len());
    for v in &st.stack {
        match v {
            View::Fleet => parts.push("fleet".into()),
            View::Fire => parts.push("on fire".into()),
            View::Queues if st.queues.filter.is_active() => {
                parts.push(format!("queues /{}", clean(&st.queues.filter.text)));
            }
            View::Queues => parts.push("queues".into()),
            View::Detail => {
                if let Some(q) = &st.focus {
                    parts.push(short(q));
                }
            }
            View::Messages => {
                if let Some(q) = &st.msgs.queue {
                    let what = if st.msgs.scheduled {
                        "scheduled"
                    } else {
                        "messages"
                    };
                    parts.push(format!("{what} {}", short(q)));
                }
            }
            View::Message => parts.push("message".into()),
            View::Workers => parts.push("workers".into()),
            View::Reasons => {
                if let Some(q) = &st.reasons.queue {
                    parts.push(format!("reasons {}", short(q)));
                }
            }
            View::Help => parts.push("help".into()),
            View::Ops => parts.push("operations".into()),
            View::Alerts => parts.push("alerts".into()),
        }
    }
    parts.join(" › ")
}

fn footer(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    if let Some(inp) = &st.input {
        let prefix = match inp.kind {
            InputKind::Filter
            | InputKind::Search
            | InputKind::WorkerFilter
            | InputKind::FireFilter => "/",
            InputKind::Command => ":",
        };
        let mut spans = vec![
            Span::styled(prefix, t.accent),
            Span::styled(clean(&inp.text).into_owned(), t.text),
            Span::styled("█", t.dim),
        ];
        let bad = match inp.kind {
            InputKind::Filter => st.queues.filter.literal,
            InputKind::Search => st.msgs.search.literal,
            InputKind::WorkerFilter => st.workers.filter.literal,
            InputKind::FireFilter => st.fleet.as_ref().is_some_and(|f| f.fire_filter.literal),
            _ => false,
        };
        if bad {
            spans.push(Span::styled("  (not a regex: matching literally)", t.warn));
        }
        if let Some(c) = st.prompt.completion.as_ref().filter(|_| st.input.is_some()) {
            let used = 2 + inp.text.chars().count();
            spans.extend(completions(
                st,
                c,
                (area.width as usize).saturating_sub(used),
            ));
        }
        f.render_widget(Paragraph::new(Line::from(spans)), area);
        return;
    }
    if let Some(op) = &st.op {
        // A running operation has the whole row: its count and cancel key always show.
        f.render_widget(Paragraph::new(progress_line(st, op, area.width)), area);
        return;
    }
    let right = right_status(st);
    // Below 100 columns the keys come first: the call rate and cost give way to them.
    let right = if area.width < 100 {
        without_figures(&right)
    } else {
        right
    };
    // Two spaces always part the hints from the clock: words never run together.
    let rw = (right.chars().count() as u16 + 2).min(area.width / 2);
    let right = fit_status(&right, rw.saturating_sub(2) as usize);
    let [l, r] = Layout::horizontal([Constraint::Min(1), Constraint::Length(rw)]).areas(area);
    let left = Line::from(Span::styled(fit_hints(&hints(st), l.width as usize), t.dim));
    f.render_widget(Paragraph::new(left), l);
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(right, t.dim)))
            .alignment(ratatui::layout::Alignment::Right),
        r,
    );
}

/// The Tab candidates after the prompt, the one filled in highlighted: the run of them that
/// holds it and fits in `room` cells, with `…` where more are cut.
fn completions<'a>(st: &Model, c: &Completion, room: usize) -> Vec<Span<'a>> {
    let t = &st.theme;
    let count = format!("  {}/{} ", c.index + 1, c.candidates.len());
    let room = room.saturating_sub(count.chars().count() + 2);
    let fits = |from: usize, to: usize| {
        c.candidates[from..=to]
            .iter()
            .map(|x| x.chars().count() + 1)
            .sum::<usize>()
            <= room
    };
    let start = if fits(0, c.index) { 0 } else { c.index };
    let mut spans = vec![Span::styled(count, t.dim)];
    if start > 0 {
        spans.push(Span::styled("… ", t.dim));
    }
    let mut end = start;
    while end < c.candidates.len() && (end == start || fits(start, end)) {
        let style = if end == c.index { t.selected } else { t.dim };
        spans.push(Span::styled(clean(&c.candidates[end]).into_owned(), style));
        spans.push(Span::raw(" "));
        end += 1;
    }
    if end < c.candidates.len() {
        spans.push(Span::styled("…", t.dim));
    }
    spans
}

/// A running operation in one row, the essentials first: the count (`1,200/20,000`, or
/// `1,200 done`), failures, and the cancel key; then, as room allows, the phase, the bar
/// and the label.
fn progress_line<'a>(st: &Model, op: &super::state::OpState, width: u16) -> Line<'a> {
    let t = &st.theme;
    let p = &op.progress;
    let count = match p.total {
        Some(total) if total > 0 => {
            format!("{}/{}", fmt_thousands(p.done), fmt_thousands(total))
        }
        _ => format!("{} done", fmt_thousands(p.done)),
    };
    let failed = if p.failed > 0 {
        format!(" · {} failed", fmt_thousands(p.failed))
    } else {
        String::new()
    };
    let cancel = if op.cancelling {
        " · cancelling…".to_string()
    } else {
        format!(" · {} cancel", st.keymap.hint(Cmd::Cancel))
    };
    let essential = format!("{count}{failed}{cancel}");
    let mut room = (width as usize).saturating_sub(essential.chars().count() + 1);
    let mut take = |text: String| -> Option<String> {
        let n = text.chars().count();
        (n <= room).then(|| {
            room -= n;
            text
        })
    };
    let label = take(format!("{} ", clean(&op.label)));
    let bar = match p.total {
        Some(total) if total > 0 => {
            let w = 20usize;
            let filled = ((p.done.min(total) as f64 / total as f64) * w as f64) as usize;
            take(format!("{}{} ", "█".repeat(filled), "░".repeat(w - filled)))
        }
        _ => None,
    };
    let phase = if p.phase.is_empty() {
        None
    } else {
        take(format!(" · {}", clean(&p.phase)))
    };
    let mut spans = Vec::new();
    if let Some(l) = label {
        spans.push(Span::styled(l, t.accent));
    }
    if let Some(b) = bar {
        spans.push(Span::styled(b, t.good));
    }
    spans.push(Span::styled(count, t.text));
    if let Some(ph) = phase {
        spans.push(Span::styled(ph, t.dim));
    }
    spans.push(Span::styled(failed, t.error));
    spans.push(Span::styled(cancel, t.accent));
    Line::from(spans)
}

fn right_status(st: &Model) -> String {
    let mut parts = Vec::new();
    if st.poll.busy {
        parts.push("⟳".to_string());
    }
    // "updated" only once the queue list itself has arrived: figures alone are not a list.
    match st.store.last_ok_ms {
        Some(t) if st.poll.listed => parts.push(format!("updated {}", fmt_ago(st.now_ms - t))),
        _ if st.store.backend_error.is_none() => parts.push("loading…".into()),
        _ => {}
    }
    if let Some(b) = st.poll.api_rate {
        parts.push(match st.session.call_budget {
            Some(max) => format!("{:.0}/{max} calls/min", b.calls_per_min),
            None => format!("{:.0} calls/min", b.calls_per_min),
        });
        if let Some(usd) = b.usd_per_hour {
            parts.push(format!("≈${usd:.4}/h"));
        }
    }
    if st.op.is_none() {
        parts.push(format!("{} help", st.keymap.hint(Cmd::Help)));
    }
    parts.join(" · ")
}

/// The right of the footer in `max` cells: its last part (`? help`) stays, the parts before
/// it go first (the busy mark, then the others from the right), and only then is it cut.
fn fit_status(s: &str, max: usize) -> String {
    let mut parts: Vec<&str> = s.split(" · ").collect();
    while parts.len() > 1 && parts.join(" · ").chars().count() > max {
        let i = parts
            .iter()
            .position(|p| *p == "⟳")
            .unwrap_or(parts.len() - 2);
        parts.remove(i);
    }
    cut(&parts.join(" · "), max)
}

/// The right of the footer without the call rate and its cost.
fn without_figures(s: &str) -> String {
    s.split(" · ")
        .filter(|p| !p.ends_with("calls/min") && !p.starts_with("≈$"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The header badge for a profile that cannot do everything.
fn tier_badge(a: Access) -> Option<&'static str> {
    match a {
        Access::Stats => Some(" STATS ONLY "),
        Access::Browse => Some(" READ-ONLY "),
        Access::Redrive => Some(" NO PURGE "),
        Access::Full => None,
    }
}

fn hints(st: &Model) -> String {
    let k = |c| st.keymap.hint(c).to_string();
    // Keys the tier forbids, or the broker cannot do, are not advertised.
    let can = |c: &Cmd| match c {
        Cmd::Delete if !st.msgs.scheduled => st.session.deletes_by_id,
        Cmd::Edit => st.session.deletes_by_id && st.session.sends,
        _ => true,
    };
    let allowed = |c: &Cmd| {
        can(c)
            && COMMANDS
                .iter()
                .find(|i| i.cmd == *c)
                .is_none_or(|i| st.allows(i.needs))
    };
    let pairs: Vec<(Cmd, &str)> = match st.view() {
        View::Queues => vec![
            (Cmd::Enter, "open"),
            (Cmd::Filter, "filter"),
            (Cmd::SortNext, "sort"),
            (Cmd::Browse, "browse"),
            (Cmd::Dlq, "dlq"),
            (Cmd::Workers, "workers"),
        ],
        View::Detail => vec![
            (Cmd::Browse, "browse"),
            (Cmd::Dlq, "dlq"),
            (Cmd::Workers, "workers"),
            (Cmd::Window, "window"),
        ],
        // Scheduled messages are only looked at or cancelled.
        View::Messages | View::Message if st.msgs.scheduled => vec![
            (Cmd::Enter, "open"),
            (Cmd::Delete, "cancel"),
            (Cmd::Filter, "search"),
            (Cmd::Mark, "select↓"),
            (Cmd::Copy, "copy"),
            (Cmd::Save, "save"),
            (Cmd::NextPage, "more"),
            (Cmd::Back, "back"),
        ],
        // What a DLQ's messages are opened for comes first: at 80 columns the footer keeps
        // redrive, delete, edit and reasons.
        View::Messages => vec![
            (Cmd::Enter, "open"),
            (Cmd::Redrive, "redrive"),
            (Cmd::Delete, "delete"),
            (Cmd::Edit, "edit"),
            (Cmd::Reasons, "reasons"),
            (Cmd::Filter, "search"),
            (Cmd::Mark, "select↓"),
            (Cmd::MarkRange, "range"),
            (Cmd::Copy, "copy"),
            (Cmd::Save, "save"),
            (Cmd::NextPage, "more"),
        ],
        View::Message => vec![
            (Cmd::Redrive, "redrive"),
            (Cmd::Delete, "delete"),
            (Cmd::Edit, "edit"),
            (Cmd::Reasons, "reasons"),
            (Cmd::Back, "back"),
            (Cmd::Copy, "copy"),
            (Cmd::Save, "save"),
        ],
        View::Workers => vec![(Cmd::Filter, "filter"), (Cmd::SortNext, "sort")],
        View::Reasons => vec![(Cmd::Enter, "messages"), (Cmd::Refresh, "rescan")],
        View::Help => vec![],
        View::Fleet => vec![(Cmd::Enter, "open profile")],
        View::Fire => vec![(Cmd::Enter, "open"), (Cmd::Filter, "filter")],
        View::Ops | View::Alerts => vec![],
    };
    let mut v: Vec<String> = pairs
        .into_iter()
        .filter(|(c, _)| allowed(c))
        .map(|(c, label)| format!("{} {label}", k(c)))
        .collect();
    // `f` is not a keymap command: the fleet alone reads it.
    if st.view() == View::Fleet {
        v.push("f on fire".to_string());
    }
    let msg_view = matches!(st.view(), View::Messages | View::Message);
    if !matches!(
        st.view(),
        View::Workers | View::Help | View::Fleet | View::Fire | View::Ops | View::Alerts
    ) {
        if st.allows(Access::Redrive) && !msg_view {
            v.push(format!("{} redrive", k(Cmd::Redrive)));
        }
        if st.allows(Access::Full) {
            v.push(format!("{} purge", k(Cmd::Purge)));
        }
    }
    if st.demo_workers.is_some() {
        v.push(format!(
            "{}/{} workers",
            k(Cmd::AddWorker),
            k(Cmd::RemoveWorker)
        ));
    }
    let home = st.stack.len() == 1;
    if !home && st.view() != View::Message {
        v.push(format!("{} back", k(Cmd::Back)));
    }
    v.join("  ")
}

/// Whole hints only: cut at the last hint that fits, never inside one.
fn fit_hints(h: &str, width: usize) -> String {
    if h.chars().count() <= width {
        return h.to_string();
    }
    let mut out = String::new();
    for part in h.split("  ") {
        let add = if out.is_empty() {
            part.chars().count()
        } else {
            part.chars().count() + 2
        };
        if out.chars().count() + add > width {
            break;
        }
        if !out.is_empty() {
            out.push_str("  ");
        }
        out.push_str(part);
    }
    out
}

/// A bordered block with a title.
pub(crate) fn block<'a>(st: &Model, title: Line<'a>) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(st.theme.border)
        .title(title)
}

/// Centered rect of at most `w`×`h` inside `area`.
pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

pub(crate) fn clear(f: &mut Frame, r: Rect) {
    f.render_widget(Clear, r);
}

pub fn fmt_count(v: Option<u64>) -> String {
    match v {
        None => "—".into(),
        Some(n) if n < 100_000 => n.to_string(),
        Some(n) if n < 10_000_000 => format!("{:.0}k", n as f64 / 1e3),
        Some(n) => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// 1,200 rather than 1200: progress figures are read at a glance.
pub fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn fmt_secs(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "—".into();
    }
    let s = s.round() as u64;
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m", s / 60),
        6000..=172_799 => format!("{}h{:02}", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86400),
    }
}

pub fn fmt_age(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), fmt_secs)
}

pub fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(r) if r.abs() >= 1000.0 => format!("{:.1}k", r / 1000.0),
        Some(r) if r.abs() >= 100.0 => format!("{r:.0}"),
        Some(r) => format!("{r:.1}"),
    }
}

pub fn fmt_ago(ms: i64) -> String {
    format!("{} ago", fmt_secs((ms.max(0) / 1000) as f64))
}

/// Unicode bars for the last `n` values (None shows as a gap).
pub fn spark(values: &[Option<f64>]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(x) if max <= 0.0 => {
                let _ = x;
                BARS[0]
            }
            Some(x) => BARS[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

pub(crate) fn styled<'a>(text: impl Into<String>, style: Style) -> Span<'a> {
    Span::styled(text.into(), style)
}
