//! Broker text is untrusted: bodies, headers and even queue names may carry escape sequences.
//! Everything from a broker passes through here before it reaches a terminal.

/// Make control characters visible: ESC → `␛`, other C0 controls → their Unicode control
/// pictures (`\r` → `␍`), DEL → `␡`, C1 controls and bidi overrides → `\u{…}` text.
/// Newlines and tabs are kept only when `keep_layout` (multi-line body views).
pub fn visible(s: &str, keep_layout: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' if keep_layout => out.push(c),
            '\u{1b}' => out.push('␛'),
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('?')),
            '\u{7f}' => out.push('␡'),
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}' => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// One line for tables: bytes decoded lossily (invalid UTF-8 shown as `�`), made visible.
pub fn line(bytes: &[u8]) -> String {
    visible(&String::from_utf8_lossy(bytes), false)
}

/// Short preview of a body: text made visible, or hex when it is binary.
pub fn preview(body: &[u8], max_chars: usize) -> String {
    let text = match std::str::from_utf8(body) {
        Ok(t) if !looks_binary(t) => visible(t, false),
        _ => hex_preview(body, max_chars / 3 + 1),
    };
    truncate(&text, max_chars)
}

/// Valid UTF-8 is still treated as binary when it holds NUL bytes: no text format uses them.
pub fn looks_binary(t: &str) -> bool {
    t.contains('\0')
}

fn hex_preview(b: &[u8], n: usize) -> String {
    let mut s: String = b.iter().take(n).map(|x| format!("{x:02x} ")).collect();
    s.pop();
    format!("hex: {s}")
}

/// Cut to `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_become_visible() {
        let s = visible("a\x1b[2Jb\x1b]0;title\x07c\rd", false);
        assert!(!s.contains('\x1b'));
        assert!(!s.contains('\x07'));
        assert!(!s.contains('\r'));
        assert_eq!(s, "a␛[2Jb␛]0;title␇c␍d");
    }

    #[test]
    fn bidi_overrides_are_neutralised() {
        let s = visible("abc\u{202e}fed", false);
        assert!(!s.contains('\u{202e}'));
        assert!(s.contains("\\u{202e}"));
    }

    #[test]
    fn binary_previews_as_hex() {
        assert_eq!(preview(&[0xff, 0x00, 0x10], 40), "hex: ff 00 10");
        assert_eq!(preview(b"hello", 40), "hello");
        assert_eq!(preview(b"\x00\x01", 40), "hex: 00 01");
        assert_eq!(preview(b"a\x07b", 40), "a␇b");
    }

    #[test]
    fn truncates_with_ellipsis() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
