//! The one sanitizer for broker text (queue names, bodies, headers, reasons, errors).
//!
//! Broker text is untrusted: control characters (ESC included) are shown as their visible
//! Unicode "control picture" (`\x1b` → `␛`, `\r` → `␍`), C1 controls and bidi/invisible
//! formatting characters as `⟨U+202E⟩`. Nothing from a broker reaches the terminal raw.

use std::borrow::Cow;

/// Bytes of a body the viewer formats at most (a 10 MB body shows its first part).
pub const VIEW_LIMIT: usize = 256 * 1024;

fn needs_escape(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || u == 0x7f || (0x80..=0x9f).contains(&u) || is_format(c)
}

/// Bidi overrides/isolates/marks and zero-width characters that can hide or reorder text.
fn is_format(c: char) -> bool {
    matches!(c as u32,
        0x061c | 0x200b..=0x200f | 0x2028 | 0x2029 | 0x202a..=0x202e | 0x2060..=0x2069 | 0xfeff)
}

fn push_escaped(out: &mut String, c: char) {
    let u = c as u32;
    if u < 0x20 {
        // U+2400.. are the control pictures: ␀ … ␟ (␛ for ESC, ␍ for CR, ␊ for LF).
        out.push(char::from_u32(0x2400 + u).unwrap_or('?'));
    } else if u == 0x7f {
        out.push('␡');
    } else {
        out.push_str(&format!("⟨U+{u:04X}⟩"));
    }
}

/// One line of broker text, safe to render: every control character made visible,
/// newlines included.
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Clean and cut to at most `max` chars (adds `…` when cut).
pub fn clean_short(s: &str, max: usize) -> String {
    let c = clean(s);
    if c.chars().count() <= max {
        return c.into_owned();
    }
    let mut out: String = c.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Text for one line of a status bar, an error row or a log: secrets redacted, each run of
/// whitespace (line breaks included) one space, and any other control character made visible.
/// Every error that quotes a broker or a URL goes through here.
pub fn one_line(s: &str) -> String {
    clean(&flatten(s)).into_owned()
}

/// `one_line`, cut to at most `max` chars (with `…` when cut).
pub fn one_line_max(s: &str, max: usize) -> String {
    clean_short(&flatten(s), max)
}

fn flatten(s: &str) -> String {
    crate::config::redact::redact(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Multi-line broker text: split on `\n`, each line cleaned (so `\r` shows as `␍`).
pub fn clean_lines(s: &str) -> Vec<String> {
    s.split('\n').map(|l| clean(l).into_owned()).collect()
}

/// How a body is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Text,
    Binary,
}

impl BodyKind {
    pub fn label(self) -> &'static str {
        match self {
            BodyKind::Json => "json",
            BodyKind::Text => "text",
            BodyKind::Binary => "binary",
        }
    }
}

pub fn body_kind(body: &[u8]) -> BodyKind {
    let head = &body[..body.len().min(VIEW_LIMIT)];
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        // A cut in the middle of a multi-byte char is still text.
        Err(e) if e.valid_up_to() + 4 >= head.len() && head.len() < body.len() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return BodyKind::Binary,
    };
    let t = text.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && body.len() <= VIEW_LIMIT
        && serde_json::from_slice::<serde_json::Value>(body).is_ok()
    {
        return BodyKind::Json;
    }
    let controls = text
        .chars()
        .filter(|&c| (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t' | '\x1b'))
        .count();
    if controls * 10 > text.chars().count().max(1) {
        BodyKind::Binary
    } else {
        BodyKind::Text
    }
}

/// The body as display lines: JSON pretty-printed, text cleaned, binary as a hex dump.
/// At most `VIEW_LIMIT` bytes are formatted; a note line says when the rest is cut.
pub fn body_lines(body: &[u8]) -> (BodyKind, Vec<String>) {
    let kind = body_kind(body);
    let head = &body[..body.len().min(VIEW_LIMIT)];
    let mut lines = match kind {
        BodyKind::Json => match serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
        {
            Some(p) => clean_lines(&p),
            None => clean_lines(&String::from_utf8_lossy(head)),
        },
        BodyKind::Text => clean_lines(&String::from_utf8_lossy(head)),
        BodyKind::Binary => hex_lines(head),
    };
    if body.len() > head.len() {
        lines.push(format!(
            "… showing the first {} of {} bytes",
            head.len(),
            body.len()
        ));
    }
    (kind, lines)
}

pub fn hex_lines(b: &[u8]) -> Vec<String> {
    b.chunks(16)
        .enumerate()
        .map(|(i, chunk)| {
            let mut s = format!("{:08x} ", i * 16);
            for (j, x) in chunk.iter().enumerate() {
                if j == 8 {
                    s.push(' ');
                }
                s.push_str(&format!(" {x:02x}"));
            }
            for j in chunk.len()..16 {
                if j == 8 {
                    s.push(' ');
                }
                s.push_str("   ");
            }
            s.push_str("  |");
            for &x in chunk {
                s.push(if (0x20..0x7f).contains(&x) {
                    x as char
                } else {
                    '.'
                });
            }
            s.push('|');
            s
        })
        .collect()
}

/// A whole body as one cell for scripts (CSV, plain lines), never cut. Text keeps every
/// character, control characters made visible; with `keep_breaks` line feeds and tabs stay
/// (CSV quotes them, so a multi-line body arrives whole), without they show as `␊` and `␉` (a
/// message stays one plain line). Binary is the hex of every byte. Empty is empty.
pub fn body_text(body: &[u8], keep_breaks: bool) -> String {
    match std::str::from_utf8(body) {
        _ if body.is_empty() => String::new(),
        Ok(t) if body_kind(body) != BodyKind::Binary => {
            if !keep_breaks {
                return clean(t).into_owned();
            }
            let mut out = String::with_capacity(t.len());
            for c in t.chars() {
                if needs_escape(c) && c != '\n' && c != '\t' {
                    push_escaped(&mut out, c);
                } else {
                    out.push(c);
                }
            }
            out
        }
        _ => {
            let mut out = String::with_capacity(2 + body.len() * 3);
            out.push_str("0x");
            for x in body {
                out.push_str(&format!(" {x:02x}"));
            }
            out
        }
    }
}

/// One-line preview of a body for tables.
pub fn preview(body: &[u8], max: usize) -> String {
    if body.is_empty() {
        return "(empty)".to_string();
    }
    let head = &body[..body.len().min(max * 4 + 4)];
    match body_kind(body) {
        BodyKind::Binary => {
            let hex: Vec<String> = head
                .iter()
                .take(max / 3)
                .map(|x| format!("{x:02x}"))
                .collect();
            clean_short(&format!("0x {}", hex.join(" ")), max)
        }
        _ => {
            let t = String::from_utf8_lossy(head);
            let one: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
            clean_short(&one, max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_text_is_whole_and_safe() {
        let long = "x".repeat(5_000);
        assert_eq!(body_text(long.as_bytes(), false), long);
        assert_eq!(body_text(b"", true), "");
        assert_eq!(body_text(b"a\nb\tc\x1b[2J\r", true), "a\nb\tc␛[2J␍");
        assert_eq!(body_text(b"a\nb\tc", false), "a␊b␉c");
        assert_eq!(body_text(&[0, 1, 2, 0xff], false), "0x 00 01 02 ff");
    }

    #[test]
    fn escapes_controls_visibly() {
        assert_eq!(clean("a\x1b[2Jb"), "a␛[2Jb");
        assert_eq!(clean("x\ry"), "x␍y");
        assert_eq!(clean("\x07\x7f"), "␇␡");
        assert_eq!(clean("\u{9b}31m"), "⟨U+009B⟩31m");
        assert_eq!(clean("abc\u{202e}cba"), "abc⟨U+202E⟩cba");
        assert!(matches!(clean("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn osc_title_sequence_is_visible() {
        let s = clean("\x1b]0;pwned\x07");
        assert!(!s.contains('\x1b'));
        assert_eq!(s, "␛]0;pwned␇");
    }

    #[test]
    fn bodies_by_kind() {
        let (k, l) = body_lines(br#"{"a":1,"b":"\u001b[2J"}"#);
        assert_eq!(k, BodyKind::Json);
        assert!(l.len() >= 3);
        assert!(l.iter().all(|x| !x.contains('\x1b')));
        let (k, l) = body_lines(&[0, 1, 2, 0xff, 0xfe, 3, 4, 5]);
        assert_eq!(k, BodyKind::Binary);
        assert!(l[0].starts_with("00000000  00 01 02 ff"));
        let (k, l) = body_lines(b"line1\r\nline2 \x1b[31mred");
        assert_eq!(k, BodyKind::Text);
        assert_eq!(l, vec!["line1␍", "line2 ␛[31mred"]);
    }

    #[test]
    fn big_bodies_are_cut() {
        let body = vec![b'a'; 10 * 1024 * 1024];
        let (_, l) = body_lines(&body);
        assert!(l.last().unwrap().contains("showing the first"));
        assert!(preview(&body, 20).chars().count() <= 20);
    }
}
