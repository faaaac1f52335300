//! The message (DLQ) browser and the single-message view.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row};
use ratatui::Frame;

use super::columns::{clean_mid, fit, flex_width, kept_row, render_plain_table, sort_head, Col};
use super::wrap::wrap_lines;
use super::{block, fmt_count, fmt_secs, styled};
use crate::tui::state::{error_line, Model};
use qdeck_engine::triage::signature::why;
use qdeck_model::domain::{DeadLetterInfo, Message, Part, Value};
use qdeck_model::sanitize::{clean, clean_short, preview};

/// A time in a list cell: month, day and time of day, UTC (the column says so).
fn fmt_time(ms: Option<i64>) -> String {
    ms.and_then(qdeck_model::domain::ms_to_datetime)
        .map_or_else(|| "—".into(), |d| d.format("%m-%d %H:%M:%S").to_string())
}

/// A time in the message view, where there is room for all of it: year and zone included.
fn fmt_full_time(ms: Option<i64>) -> String {
    ms.and_then(qdeck_model::domain::ms_to_datetime)
        .map_or_else(
            || "—".into(),
            |d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        )
}

/// When a scheduled message falls due, from now: `in 82s`, `in 3h05`, or `due` once passed.
fn fmt_due(due_ms: Option<i64>, now_ms: i64) -> String {
    match due_ms {
        None => "—".into(),
        Some(d) if d <= now_ms => "due".into(),
        Some(d) => format!("in {}", fmt_secs(((d - now_ms) / 1000) as f64)),
    }
}

fn fmt_size(n: usize) -> String {
    match n {
        0..=9999 => format!("{n}B"),
        10_000..=9_999_999 => format!("{}K", n / 1024),
        _ => format!("{}M", n / (1024 * 1024)),
    }
}

pub fn render_list(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let m = &st.msgs;
    let b = block(st, list_title(st));
    let inner = b.inner(area);
    f.render_widget(b, area);

    let notes = wrap_lines(&list_notes(st), inner.width);
    let notes_h = (notes.len() as u16).min(inner.height.saturating_sub(2));
    let [na, ta] = Layout::vertical([Constraint::Length(notes_h), Constraint::Min(1)]).areas(inner);
    f.render_widget(Paragraph::new(notes), na);

    if m.rows.is_empty() {
        let msg = if m.loading {
            "loading messages…"
        } else if m.error.is_some() {
            ""
        } else if m.messages.is_empty() && m.scheduled {
            "no scheduled messages"
        } else if m.messages.is_empty() {
            "no messages"
        } else {
            "no message matches the search"
        };
        f.render_widget(Paragraph::new(msg).style(t.dim), ta);
        return;
    }
    // REASON and ORIGIN say why a message is in a DLQ: they outrank the body preview.
    let dead = m
        .messages
        .iter()
        .any(|x| x.dead_letter.is_some() || why(x, &st.session.reasons).is_some());
    // The ordering key (a Service Bus session, an SQS FIFO group) only where messages carry one.
    let keyed = m.messages.iter().any(|x| x.key.is_some());
    // A Service Bus SessionId says how messages are grouped for delivery: worth more room.
    let sessions = m.messages.iter().any(|x| session_of(x).is_some());
    let head = |name: &str, i: usize| sort_head(name, i, m.sort, m.sort_desc);
    let cols = vec![
        Col::fixed("", 1, 0),
        Col::fixed(head("ID", 0), 12, 0),
        // Scheduled messages are read by when they fall due.
        Col::fixed(
            head(if m.scheduled { "DUE" } else { "ENQUEUED UTC" }, 1),
            14,
            4,
        ),
        Col::fixed(head("RCV", 2), 4, 2),
        Col::fixed(
            key_head(&st.session.broker, sessions),
            12,
            if sessions { 2 } else { 4 },
        ),
        Col::fixed(head("REASON", 3), 18, if dead { 1 } else { 9 }),
        Col::fixed(head("ORIGIN", 4), 14, if dead { 1 } else { 9 }),
        Col::fixed(head("SIZE", 5), 6, 5),
        Col::flex("BODY", 8, 3),
    ];
    let mut keep = fit(&cols, ta.width, st.wide);
    if !keyed && !sessions {
        keep[4] = false;
    }
    if !dead && !st.wide {
        keep[5] = false;
        keep[6] = false;
    }
    let body_w = flex_width(&cols, &keep, ta.width);
    let (cursor, from, to) = m.cursor.placed(m.rows.len(), ta.height as usize);
    let rows: Vec<Row> = m.rows[from..to]
        .iter()
        .filter_map(|&i| m.messages.get(i))
        .map(|msg| {
            let marked = m.marked.contains(&msg.id);
            let style = if marked { t.marked } else { t.text };
            kept_row(list_cells(st, msg, marked, body_w), &keep).style(style)
        })
        .collect();
    render_plain_table(f, ta, rows, (&cols, &keep), t, cursor.sel - from);
}

fn list_title<'a>(st: &Model) -> Line<'a> {
    let t = &st.theme;
    let m = &st.msgs;
    let q = m
        .queue
        .as_ref()
        .map(|q| clean_short(q.as_str(), 50))
        .unwrap_or_default();
    let kind = if m.scheduled {
        " scheduled "
    } else {
        " messages "
    };
    let mut title = vec![
        styled(kind, t.dim),
        styled(format!("{q} "), t.title),
        styled(
            format!(
                "{} loaded{}{} ",
                m.messages.len(),
                if m.next.is_some() { " (more)" } else { "" },
                if m.marked.is_empty() {
                    String::new()
                } else {
                    format!(" · {} selected", m.marked.len())
                }
            ),
            t.dim,
        ),
    ];
    if m.search.is_active() {
        title.push(styled(format!("· {} match ", m.rows.len()), t.dim));
        title.push(styled(format!("/{} ", clean(&m.search.text)), t.accent));
    }
    if let Some(g) = &m.group {
        title.push(styled(format!("group: {} ", clean_short(g, 40)), t.accent));
    }
    if m.loading {
        title.push(styled("loading… ", t.dim));
    }
    Line::from(title)
}

/// Above the list: why the browse failed, and what browsing did on this broker.
fn list_notes<'a>(st: &Model) -> Vec<Line<'a>> {
    let t = &st.theme;
    let m = &st.msgs;
    let mut notes: Vec<Line> = Vec::new();
    if let Some(e) = &m.error {
        let what = if m.scheduled {
            "listing scheduled messages"
        } else {
            "browse"
        };
        notes.push(Line::from(styled(
            format!("{what} failed: {}", clean(&error_line(e))),
            t.error,
        )));
        if e.liftable_by_force() {
            notes.push(Line::from(styled(
                "browsing could push messages toward their DLQ; :force browses anyway",
                t.warn,
            )));
        }
    }
    if let Some(n) = &m.effect_note {
        notes.push(Line::from(styled(clean(n).into_owned(), t.warn)));
    }
    notes
}

/// A Service Bus message's SessionId (a property; the key may be a partition key instead).
fn session_of(msg: &Message) -> Option<&str> {
    msg.properties
        .iter()
        .find(|(k, _)| k == "SessionId")
        .and_then(|(_, v)| match v {
            qdeck_model::domain::Value::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// What the broker calls the messages' ordering key: SESSION where messages carry a Service
/// Bus `SessionId` (a Service Bus key without one is a `PartitionKey`), GROUP for an SQS FIFO
/// group, else KEY.
fn key_head(broker: &str, sessions: bool) -> &'static str {
    if sessions {
        "SESSION"
    } else if broker == "sqs" {
        "GROUP"
    } else {
        "KEY"
    }
}

/// One message's cells; the body preview is `body_w` wide.
fn list_cells<'a>(st: &Model, msg: &Message, marked: bool, body_w: usize) -> Vec<Cell<'a>> {
    let t = &st.theme;
    let dl = msg.dead_letter.as_ref();
    vec![
        Cell::from(styled(if marked { "●" } else { " " }, t.marked)),
        Cell::from(clean_mid(&msg.id, 12)),
        Cell::from(if st.msgs.scheduled {
            fmt_due(msg.due_ms(), st.now_ms)
        } else {
            fmt_time(msg.enqueued_ms)
        }),
        Cell::from(fmt_count(msg.receive_count)),
        Cell::from(clean_mid(
            session_of(msg).or(msg.key.as_deref()).unwrap_or("—"),
            12,
        )),
        // The most specific text recorded (the exception, not `rejected`).
        Cell::from(styled(
            clean_short(why(msg, &st.session.reasons).as_deref().unwrap_or("—"), 18),
            t.dlq,
        )),
        Cell::from(clean_mid(
            dl.and_then(|d| d.origin.as_ref())
                .map_or("—", qdeck_model::domain::QueueId::as_str),
            14,
        )),
        Cell::from(fmt_size(msg.body.len())),
        // A Celery task reads as its call, which says more than its protocol JSON.
        Cell::from(match qdeck_backend::celery::decode(msg) {
            Some(c) => styled(
                clean_short(
                    &format!(
                        "{}({}{}{})",
                        c.task,
                        c.args.as_deref().unwrap_or("?"),
                        if c.kwargs.is_some() { ", " } else { "" },
                        c.kwargs.as_deref().unwrap_or("")
                    ),
                    body_w,
                ),
                t.text,
            ),
            None if msg.body_is_null() => styled("(null)".to_string(), t.dim),
            None => styled(preview(&msg.body, body_w), t.dim),
        }),
    ]
}

/// The rows above the body: why it died first (what the message was opened for), the broker's
/// account of the death, the message's identity, then its fields under labelled sections.
fn meta_lines<'a>(st: &Model, msg: &Message) -> Vec<Line<'a>> {
    let t = &st.theme;
    let mut v = Vec::new();
    let why_text = why(msg, &st.session.reasons);
    if let Some(w) = &why_text {
        v.push(Line::from(vec![
            styled("why ", t.dim),
            styled(clean(w).into_owned(), t.dlq),
        ]));
    }
    if let Some(d) = &msg.dead_letter {
        v.push(death_line(st, d, why_text.as_deref()));
    }
    v.push(Line::from(vec![
        styled("id ", t.dim),
        styled(clean(&msg.id).into_owned(), t.title),
        styled(
            format!(
                " · seq {} · enqueued {}{} · {}",
                msg.seq.map_or_else(|| "—".into(), |s| s.to_string()),
                fmt_full_time(msg.enqueued_ms),
                // A count the broker does not keep (a log's record, a topic's dead letter) is
                // left out rather than shown as a blank count.
                msg.receive_count
                    .map(|n| format!(" · received {} times in this queue", fmt_count(Some(n))))
                    .unwrap_or_default(),
                if msg.body_is_null() {
                    "null body".to_string()
                } else {
                    format!("{} bytes", msg.body.len())
                }
            ),
            t.dim,
        ),
    ]));
    if let Some(k) = &msg.key {
        v.push(Line::from(vec![
            styled(
                format!(
                    "{} ",
                    key_head(&st.session.broker, session_of(msg).is_some()).to_lowercase()
                ),
                t.dim,
            ),
            styled(clean(k).into_owned(), t.text),
        ]));
    }
    if let Some(c) = qdeck_backend::celery::decode(msg) {
        let mut parts = vec![format!("task {}", clean(&c.task))];
        for (label, v) in [
            ("args", &c.args),
            ("kwargs", &c.kwargs),
            ("eta", &c.eta),
            ("expires", &c.expires),
            ("root", &c.root_id),
            ("parent", &c.parent_id),
            ("origin", &c.origin),
        ] {
            if let Some(v) = v {
                parts.push(format!("{label} {}", clean(v)));
            }
        }
        if let Some(r) = c.retries {
            parts.push(format!("retries {r}"));
        }
        parts.extend(c.notes.iter().map(|n| clean(n).into_owned()));
        v.push(Line::from(styled(
            format!("celery (protocol {}): {}", c.protocol, parts.join(" · ")),
            t.accent,
        )));
    }
    for (part, label) in [
        (Part::Meta, "broker fields"),
        (Part::Property, "properties"),
        (Part::Header, "headers"),
    ] {
        let mut fields = msg.fields().filter(|(p, _, _)| *p == part).peekable();
        if fields.peek().is_none() {
            continue;
        }
        v.push(Line::from(styled(format!("── {label} "), t.border)));
        for (_, k, val) in fields {
            // A null (Kafka's null key or value, a null header) is not an empty string.
            let shown = match val {
                Value::Null => styled("null".to_string(), t.dim),
                _ => styled(clean(&val.text()).into_owned(), t.text),
            };
            v.push(Line::from(vec![
                styled(format!("{}: ", clean_short(k, 40)), t.accent),
                shown,
            ]));
        }
    }
    v
}

/// The broker's account of the death: its own reason, where from, how often, when, and its
/// description unless that is the `why` line's text already.
fn death_line<'a>(st: &Model, d: &DeadLetterInfo, why_text: Option<&str>) -> Line<'a> {
    let mut parts = Vec::new();
    if let Some(r) = d.reason.as_deref().filter(|r| Some(*r) != why_text) {
        parts.push(clean(r).into_owned());
    }
    if let Some(x) = d.description.as_deref().filter(|x| Some(*x) != why_text) {
        parts.push(clean(x).into_owned());
    }
    if let Some(o) = &d.origin {
        parts.push(format!("from {}", clean(o.as_str())));
    }
    if let Some(c) = d.count {
        parts.push(format!("{c} time(s)"));
    }
    if let Some(at) = d.at_ms {
        parts.push(format!(
            "at {} ({} ago)",
            fmt_full_time(Some(at)),
            fmt_secs(((st.now_ms - at).max(0) / 1000) as f64)
        ));
    }
    Line::from(styled(
        format!("dead-lettered: {}", parts.join(" · ")),
        st.theme.dlq,
    ))
}

pub fn render_body(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let Some(msg) = st.body.msg.as_ref() else {
        return;
    };
    let kind = st
        .body
        .kind
        .map_or("?", qdeck_model::sanitize::BodyKind::label);
    let head = head_rows(st, msg, area.width.saturating_sub(2));
    let h = area.height.saturating_sub(2) as usize;
    let total = head.len() + st.body.lines.len();
    let scroll = st.body.scroll.min(total.saturating_sub(h));
    let mut title = vec![
        styled(" message ", t.dim),
        styled(format!("{} ", clean_short(&msg.id, 40)), t.title),
        styled(format!("{kind} "), t.dim),
    ];
    if total > h {
        title.push(styled(
            format!(
                "· rows {}-{} of {} (j/k PgUp/PgDn g/G) ",
                scroll + 1,
                (scroll + h).min(total),
                total
            ),
            t.dim,
        ));
    }
    let b = block(st, Line::from(title));
    let inner = b.inner(area);
    f.render_widget(b, area);
    // Only the rows on screen are built: the body may run to thousands of lines. Its lines
    // were sanitized when the message was opened.
    let body_from = scroll.saturating_sub(head.len());
    let shown: Vec<Line> = head
        .into_iter()
        .skip(scroll)
        .chain(
            st.body
                .lines
                .iter()
                .skip(body_from)
                .map(|l| Line::from(styled(l.clone(), t.text))),
        )
        .take(h)
        .collect();
    f.render_widget(Paragraph::new(shown), inner);
}

/// The rows above the body, wrapped to the width (none is hidden however short the
/// terminal): headers and broker fields, then the rule that opens the body. The message
/// scrolls as one document of these rows and the body's lines.
fn head_rows<'a>(st: &Model, msg: &qdeck_model::domain::Message, width: u16) -> Vec<Line<'a>> {
    let kind = st
        .body
        .kind
        .map_or("?", qdeck_model::sanitize::BodyKind::label);
    let mut rows = wrap_lines(&meta_lines(st, msg), width);
    let label = if msg.body_is_null() {
        "── body (null) ".to_string()
    } else {
        format!("── body ({kind}, {} lines) ", st.body.lines.len())
    };
    rows.push(Line::from(styled(label, st.theme.border)));
    rows
}

/// Rows on screen and rows in all of the open message: what its scroll is bounded by.
pub fn body_geometry(st: &Model) -> (usize, usize) {
    let Some(msg) = st.body.msg.as_ref() else {
        return (1, 0);
    };
    let total = head_rows(st, msg, st.size.0.saturating_sub(2)).len() + st.body.lines.len();
    let page = super::main_height(st).saturating_sub(2).max(1);
    (page, total)
}
