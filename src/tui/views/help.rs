//! `?` help, generated from the keymap (so user overrides show up): the keys of the view it
//! was opened from first, then the keys that work everywhere, then the `:` commands. It
//! scrolls (j/k, PgUp/PgDn, g/G) so nothing is cut at 80×24.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, centered, clear, styled};
use crate::tui::keymap::{Cmd, COMMANDS};
use crate::tui::state::{Model, View};
use qdeck_model::config::Access;

const WIDTH: u16 = 78;

/// The on-fire score, as `engine::severity` computes it.
const FIRE_FORMULA: &[&str] = &[
    "severity (SEV) = 40·G + 30·A + 30·S, 0‥100:",
    "  G  DLQ depth rose since the last poll: 0.5 + log10(rise)/4, at most 1",
    "  A  age of oldest / (2 × [fire] max_age_secs), at most 1",
    "  S  1 when depth > 0 and rising; 0.5 when nothing goes out",
    "     (out-rate 0, no consumer, or out-rate unknown and depth not falling)",
];

/// Commands that only mean something in `view`, in the order help lists them.
pub fn view_cmds(view: View) -> &'static [Cmd] {
    match view {
        View::Queues => &[
            Cmd::Enter,
            Cmd::Filter,
            Cmd::SortNext,
            Cmd::SortReverse,
            Cmd::Browse,
            Cmd::Dlq,
            Cmd::Scheduled,
            Cmd::Reasons,
            Cmd::Workers,
            Cmd::Redrive,
            Cmd::Purge,
            Cmd::Wide,
        ],
        View::Detail => &[
            Cmd::Enter,
            Cmd::Browse,
            Cmd::Dlq,
            Cmd::Scheduled,
            Cmd::Reasons,
            Cmd::Workers,
            Cmd::Window,
            Cmd::Redrive,
            Cmd::Purge,
        ],
        View::Messages => &[
            Cmd::Enter,
            Cmd::Filter,
            Cmd::SortNext,
            Cmd::SortReverse,
            Cmd::Mark,
            Cmd::MarkRange,
            Cmd::SelectAll,
            Cmd::Copy,
            Cmd::Save,
            Cmd::NextPage,
            Cmd::Edit,
            Cmd::Redrive,
            Cmd::Delete,
            Cmd::Purge,
            Cmd::Wide,
        ],
        View::Message => &[Cmd::Copy, Cmd::Save, Cmd::Edit, Cmd::Redrive, Cmd::Delete],
        View::Workers => &[Cmd::Filter, Cmd::SortNext, Cmd::SortReverse, Cmd::Wide],
        View::Reasons => &[Cmd::Enter, Cmd::Back, Cmd::Refresh, Cmd::Redrive],
        View::Help => &[],
        View::Fleet => &[Cmd::Enter],
        View::Fire => &[Cmd::Enter, Cmd::Filter],
        View::Ops | View::Alerts => &[Cmd::Back],
    }
}

fn view_name(v: View) -> &'static str {
    match v {
        View::Queues => "queues",
        View::Detail => "queue detail",
        View::Messages => "message browser",
        View::Message => "message",
        View::Workers => "workers",
        View::Help => "help",
        View::Reasons => "reasons",
        View::Fleet => "fleet",
        View::Fire => "on-fire view",
        View::Ops => "operations log",
        View::Alerts => "alerts",
    }
}

/// The view help was opened over.
pub fn under(st: &Model) -> View {
    st.stack
        .iter()
        .rev()
        .find(|v| **v != View::Help)
        .copied()
        .unwrap_or(View::Queues)
}

/// Every command bound to a view somewhere; the rest are global.
fn is_view_specific(c: Cmd) -> bool {
    [
        View::Queues,
        View::Detail,
        View::Messages,
        View::Message,
        View::Workers,
    ]
    .iter()
    .any(|v| view_cmds(*v).contains(&c))
}

fn shown(st: &Model, c: Cmd) -> bool {
    let Some(info) = COMMANDS.iter().find(|i| i.cmd == c) else {
        return false;
    };
    if !st.allows(info.needs) {
        return false;
    }
    !(matches!(c, Cmd::AddWorker | Cmd::RemoveWorker) && st.demo_workers.is_none())
}

pub fn lines<'a>(st: &Model) -> Vec<Line<'a>> {
    let t = &st.theme;
    let view = under(st);
    let row = |c: Cmd| -> Option<Line<'a>> {
        let info = COMMANDS.iter().find(|i| i.cmd == c)?;
        let keys = st.keymap.keys(c).join(" ");
        Some(Line::from(vec![
            styled(format!("{keys:>14}  "), t.accent),
            styled(info.help, t.text),
        ]))
    };
    let mut out: Vec<Line> = vec![Line::from(styled(
        format!("── keys of the {} ──", view_name(view)),
        t.title,
    ))];
    out.extend(
        view_cmds(view)
            .iter()
            .filter(|c| shown(st, **c))
            .filter_map(|c| row(*c)),
    );
    if matches!(view, View::Queues | View::Messages) {
        out.push(Line::from(vec![
            styled(format!("{:>14}  ", "1…9 0"), t.accent),
            styled("sort by the column whose header shows that digit", t.text),
        ]));
    }
    if view == View::Queues {
        // The one order that is not plain numbers: said, so `+0.2/s` above `~1s` is expected.
        out.push(Line::from(vec![
            styled(format!("{:>14}  ", "9"), t.accent),
            styled(
                "ETA worst first: growing, stuck?, flat, longest … empty",
                t.text,
            ),
        ]));
        out.push(Line::from(vec![
            styled(format!("{:>14}  ", "! ~ ? ≈"), t.accent),
            styled(
                "needs a person · may clear · stuck? · sampled minutes ago",
                t.text,
            ),
        ]));
    }
    if view == View::Messages {
        out.push(Line::from(vec![
            styled(format!("{:>14}  ", "/h:RE"), t.accent),
            styled(
                "search header names; / alone searches values (id, reason, headers, body)",
                t.text,
            ),
        ]));
    }
    if view == View::Fleet {
        out.push(Line::from(vec![
            styled(format!("{:>14}  ", "f"), t.accent),
            styled("what is on fire across the profiles", t.text),
        ]));
    }
    if matches!(view, View::Fleet | View::Fire) {
        for l in FIRE_FORMULA {
            out.push(Line::from(styled(*l, t.dim)));
        }
    }
    out.push(Line::from(""));
    out.push(Line::from(styled("── everywhere ──", t.title)));
    out.extend(
        COMMANDS
            .iter()
            .map(|i| i.cmd)
            .filter(|c| !is_view_specific(*c) && shown(st, *c))
            .filter_map(row),
    );
    out.push(Line::from(""));
    out.extend(command_lines(st));
    if let Some(note) = tier_note(st.session.access) {
        out.push(Line::from(""));
        out.push(Line::from(styled(note, t.warn)));
    }
    out
}

/// The `:` commands the tier allows, and the prompt's own keys.
fn command_lines<'a>(st: &Model) -> Vec<Line<'a>> {
    let t = &st.theme;
    let mut out = vec![Line::from(styled("── : commands ──", t.title))];
    let cmds: &[(&str, &str)] = &[
        (":q", "quit (asks first while an operation runs)"),
        (":q!", "quit at once"),
        (":dlq", "browse the dead-letter queue"),
        (":scheduled", "scheduled (delayed) messages of the queue"),
        (":reasons", "the DLQ grouped by failure reason"),
        (":workers", "workers of the queue"),
        (":browse", "browse the queue"),
        (":force", "browse despite a refusal"),
        (":filter RE", "filter the queue list"),
        (":sort COL [asc|desc]", "sort the current list"),
        (":theme NAME", "dark, light, mono or a file"),
        (
            ":profile [NAME]",
            "list profiles (re-reads the file) or switch",
        ),
        (":redrive QUEUE", "redrive to a given queue"),
        (
            ":copy Q [PROFILE]",
            "copy the selection to Q (of any profile)",
        ),
        (
            ":move Q [PROFILE]",
            "the same, deleting each confirmed original",
        ),
        (":purge", "purge the queue"),
        (
            ":reset TO",
            "Kafka group: offsets to earliest|latest|N|+N|-N|a time",
        ),
        (":queues", "back to the queue list"),
        (":fleet", "every profile, one row each"),
        (":fire", "every profile's most severe queues, worst first"),
        (":alerts", "each alert rule: firing, pending, resolved"),
    ];
    for (c, h) in cmds {
        let needs = if c.starts_with(":purge") || c.starts_with(":move") || c.starts_with(":reset")
        {
            Access::Full
        } else if c.starts_with(":redrive") {
            Access::Redrive
        } else if c.starts_with(":copy") // only reads here: the target's tier decides
            || [":dlq", ":scheduled", ":browse", ":force", ":reasons"].contains(c)
        {
            Access::Browse
        } else {
            Access::Stats
        };
        if !st.allows(needs) {
            continue;
        }
        out.push(Line::from(vec![
            styled(format!("{c:>20}  "), t.accent),
            styled(*h, t.text),
        ]));
    }
    for (k, h) in [
        ("Tab", "complete a command, queue, profile or theme"),
        ("↑/↓", "earlier commands (kept across runs)"),
    ] {
        out.push(Line::from(vec![
            styled(format!("{k:>20}  "), t.accent),
            styled(h, t.text),
        ]));
    }
    out
}

/// The help's lines wrapped to `width`, a wrapped line's rows starting under its text rather
/// than under its key (or under its own indent).
fn rows(st: &Model, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for line in lines(st) {
        let (head, tail): (Span, Vec<Span>) = match line.spans.split_first() {
            Some((first, rest)) if !rest.is_empty() => (first.clone(), rest.to_vec()),
            _ => {
                let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
                let style = line.spans.first().map(|s| s.style).unwrap_or_default();
                let body = text.trim_start();
                let lead = text.len() - body.len();
                (
                    Span::styled(text[..lead].to_string(), style),
                    vec![Span::styled(body.to_string(), style)],
                )
            }
        };
        let indent = head.width();
        // Too narrow to hang the text: it wraps as it comes.
        if indent == 0 || usize::from(width) < indent + 12 {
            out.extend(wrap_lines(&[line], width));
            continue;
        }
        let wrapped = wrap_lines(&[Line::from(tail)], width - indent as u16);
        for (i, row) in wrapped.into_iter().enumerate() {
            let lead = if i == 0 {
                Span::styled(head.content.to_string(), head.style)
            } else {
                Span::raw(" ".repeat(indent))
            };
            let mut spans = vec![lead];
            spans.extend(row.spans);
            out.push(Line::from(spans));
        }
    }
    out
}

/// The box's width and height in `area`: the whole of an axis where the box would leave only
/// a sliver of the view under it, so its border never doubles the view's (`┌┌`).
fn box_size(area: (u16, u16), rows: usize) -> (u16, u16) {
    let snap = |want: u16, room: u16| {
        if room.saturating_sub(want) < 4 {
            room
        } else {
            want.min(room)
        }
    };
    let w = snap(WIDTH, area.0);
    let h = snap((rows as u16).saturating_add(2), area.1);
    (w, h)
}

/// Rows of text the help box shows at once, and how many rows the help has, for a terminal of
/// `size` (the update clamps the scroll with these).
pub fn geometry(st: &Model, size: (u16, u16)) -> (usize, usize) {
    let w = box_size(size, 0).0.saturating_sub(2);
    let total = rows(st, w).len();
    // Header, footer and the box's borders.
    let page = (size.1 as usize).saturating_sub(4).max(1);
    (page, total)
}

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let w = box_size((area.width, area.height), 0).0;
    let rows = rows(st, w.saturating_sub(2));
    let (w, h) = box_size((area.width, area.height), rows.len());
    let r = centered(area, w, h);
    clear(f, r);
    let page = h.saturating_sub(2) as usize;
    let scroll = st.help.scroll.min(rows.len().saturating_sub(page));
    let pos = if rows.len() > page {
        format!(
            " {}-{} of {} · j/k PgUp/PgDn ",
            scroll + 1,
            (scroll + page).min(rows.len()),
            rows.len()
        )
    } else {
        String::new()
    };
    let b = block(
        st,
        Line::from(vec![
            styled(" help ", t.title),
            styled(format!("· ?/Esc/q close{pos}"), t.dim),
        ]),
    );
    let inner = b.inner(r);
    f.render_widget(b, r);
    let shown: Vec<Line> = rows.into_iter().skip(scroll).take(page).collect();
    f.render_widget(Paragraph::new(shown), inner);
}

/// What the profile's tier leaves out, for the end of the help.
fn tier_note(a: Access) -> Option<&'static str> {
    match a {
        Access::Stats => Some("access = stats: figures only; no message bodies, redrive or purge"),
        Access::Browse => Some("read-only profile: no redrive, purge or cancel"),
        Access::Redrive => Some("access = redrive: no purge or delete"),
        Access::Full => None,
    }
}
