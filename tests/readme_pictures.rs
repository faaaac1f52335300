//! The README's pictures of the console are the console's own frames: each is drawn by the real
//! views into ratatui's test buffer from a fixed scene (the console fixtures' queues, fleet and
//! dead letters at a frozen clock) and written as SVG, cell by cell with its colours.
//!
//! `cargo test` compares them with the files in docs/pictures and fails when a view changed
//! without them; `scripts/readme_pictures.sh` writes them again.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::fmt::Write as _;
use std::path::PathBuf;

use common::console::*;
use qdeck::tui::state::State;
use qdeck::tui::{update, Action};
use qdeck_model::domain::QueueId;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const CELL_W: f32 = 8.4;
const CELL_H: f32 = 17.0;
const FG: &str = "#d0d0d0";
const BG: &str = "#1c1c1c";

/// The 16 ANSI colours as a dark terminal theme shows them.
fn named(c: Color) -> Option<&'static str> {
    Some(match c {
        Color::Black => "#1c1c1c",
        Color::Red => "#e06c75",
        Color::Green => "#98c379",
        Color::Yellow => "#e5c07b",
        Color::Blue => "#61afef",
        Color::Magenta => "#c678dd",
        Color::Cyan => "#56b6c2",
        Color::Gray => "#b0b0b0",
        Color::DarkGray => "#6b6b6b",
        Color::LightRed => "#ff8f99",
        Color::LightGreen => "#b5e890",
        Color::LightYellow => "#ffd98f",
        Color::LightBlue => "#8ccaff",
        Color::LightMagenta => "#e0a3ff",
        Color::LightCyan => "#8ae3ee",
        Color::White => "#f0f0f0",
        _ => return None,
    })
}

/// An xterm-256 index as RGB (16–231 the colour cube, 232–255 the grey ramp).
fn indexed(i: u8) -> String {
    let named16 = [
        Color::Black,
        Color::Red,
        Color::Green,
        Color::Yellow,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::Gray,
        Color::DarkGray,
        Color::LightRed,
        Color::LightGreen,
        Color::LightYellow,
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::White,
    ];
    if i < 16 {
        return named(named16[i as usize]).unwrap().to_string();
    }
    if i >= 232 {
        let v = 8 + (i - 232) * 10;
        return format!("#{v:02x}{v:02x}{v:02x}");
    }
    let n = i - 16;
    let step = |k: u8| if k == 0 { 0 } else { 55 + k * 40 };
    format!(
        "#{:02x}{:02x}{:02x}",
        step(n / 36),
        step((n / 6) % 6),
        step(n % 6)
    )
}

fn hex(c: Color, default: &str) -> String {
    match c {
        Color::Reset => default.to_string(),
        Color::Rgb(r, g, b) => format!("#{r:02x}{g:02x}{b:02x}"),
        Color::Indexed(i) => indexed(i),
        other => named(other).unwrap_or(default).to_string(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One cell's look: foreground, background, bold, underline (reversed already swapped).
fn look(buf: &Buffer, x: u16, y: u16) -> (String, String, bool, bool) {
    let c = &buf[(x, y)];
    let (mut fg, mut bg) = (hex(c.fg, FG), hex(c.bg, BG));
    if c.modifier.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
    }
    if c.modifier.contains(Modifier::DIM) {
        fg = "#7a7a7a".to_string();
    }
    (
        fg,
        bg,
        c.modifier.contains(Modifier::BOLD),
        c.modifier.contains(Modifier::UNDERLINED),
    )
}

/// The buffer as an SVG: a rectangle per run of one background, a text element per run of
/// one look, each stretched to its cells so columns line up in any monospace font.
fn svg(buf: &Buffer) -> String {
    let (w, h) = (buf.area.width, buf.area.height);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">"#,
        f32::from(w) * CELL_W,
        f32::from(h) * CELL_H
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="{BG}"/>"#);
    for y in 0..h {
        let mut x = 0;
        while x < w {
            let (fg, bg, bold, under) = look(buf, x, y);
            let mut end = x + 1;
            let mut text = buf[(x, y)].symbol().to_string();
            while end < w && look(buf, end, y) == (fg.clone(), bg.clone(), bold, under) {
                text.push_str(buf[(end, y)].symbol());
                end += 1;
            }
            let (px, py) = (f32::from(x) * CELL_W, f32::from(y) * CELL_H);
            let len = f32::from(end - x) * CELL_W;
            if bg != BG {
                let _ = writeln!(
                    out,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{len:.1}" height="{CELL_H}" fill="{bg}"/>"#
                );
            }
            if !text.trim().is_empty() {
                let _ = writeln!(
                    out,
                    r#"<text x="{px:.1}" y="{:.1}" textLength="{len:.1}" lengthAdjust="spacingAndGlyphs" fill="{fg}"{}{} xml:space="preserve">{}</text>"#,
                    py + CELL_H - 4.0,
                    if bold { r#" font-weight="bold""# } else { "" },
                    if under {
                        r#" text-decoration="underline""#
                    } else {
                        ""
                    },
                    escape(&text)
                );
            }
            x = end;
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The on-call path the README shows: the queue table, the on-fire view, the reasons of a DLQ
/// and one dead letter.
fn scenes() -> Vec<(&'static str, State, u16, u16)> {
    let queues = populated();
    let fire = fire_state();
    let mut reasons = populated();
    select(&mut reasons, "orders-dlq");
    update(&mut reasons, key('F'));
    let now = reasons.now_ms;
    let group = |sig: &str, count: u64, last_min: i64| qdeck_engine::triage::Group {
        signature: sig.into(),
        origin: Some("orders".into()),
        count,
        first_seen_ms: Some(now - 3_600_000),
        last_seen_ms: Some(now - last_min * 60_000),
        sample_id: "1".into(),
        redriven: 0,
    };
    let groups = vec![
        group("rejected: customer <uuid> not found in billing", 80, 1),
        group("max receives exceeded (3)", 15, 4),
        group("timeout calling inventory-service after <n> ms", 6, 12),
    ];
    let scan = qdeck_engine::triage::ScanSummary {
        queue: QueueId::new("orders-dlq"),
        scanned: 101,
        total: Some(101),
        total_exact: true,
        stopped: qdeck_engine::triage::StopReason::End,
        effect_note: None,
        elapsed_ms: 180,
    };
    update(
        &mut reasons,
        Action::ReasonsDone {
            queue: QueueId::new("orders-dlq"),
            result: Ok(qdeck_engine::triage::ReasonsReport { scan, groups }),
        },
    );
    let mut message = populated();
    open_dlq(&mut message);
    update(&mut message, code(crossterm::event::KeyCode::Enter));
    vec![
        ("queues", queues, 100, 28),
        ("on-fire", fire, 100, 20),
        ("reasons", reasons, 100, 22),
        ("message", message, 100, 28),
    ]
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/pictures")
}

#[test]
fn the_readme_pictures_are_the_consoles_own_frames() {
    let write = std::env::var_os("QDECK_WRITE_PICTURES").is_some();
    let mut stale = Vec::new();
    for (name, st, w, h) in scenes() {
        let t = draw(&st, w, h);
        assert_no_controls(&t);
        let picture = svg(t.backend().buffer());
        let path = dir().join(format!("{name}.svg"));
        if write {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &picture).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(picture.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the console draws these differently from the committed pictures (run scripts/readme_pictures.sh and review the change): {stale:?}"
    );
}
