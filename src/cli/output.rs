//! Output formats: an aligned table on a terminal, tab-separated plain lines for pipes, CSV,
//! and JSON with stable field names (README "JSON output").

use std::io::{IsTerminal, Write};

use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use super::args::Format;
use qdeck_model::sanitize;

/// Table format on a terminal, plain lines otherwise, unless the user chose.
pub fn resolve(f: Option<Format>) -> Format {
    f.unwrap_or_else(|| {
        if std::io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Plain
        }
    })
}

/// Rows of display text. Cells from a broker must already be sanitised.
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: Vec<&'static str>) -> Self {
        Table {
            headers,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub fn render(&self, f: Format) -> String {
        match f {
            Format::Csv => self.csv(),
            Format::Plain => self.plain(),
            _ => self.aligned(),
        }
    }

    fn aligned(&self) -> String {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.width()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < w.len() {
                    w[i] = w[i].max(c.width());
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let n = cells.len();
            for (i, c) in cells.into_iter().enumerate() {
                out.push_str(c);
                if i + 1 < n {
                    out.push_str(&" ".repeat(w[i].saturating_sub(c.width()) + 2));
                }
            }
            out.push('\n');
        };
        line(self.headers.clone(), &mut out);
        for r in &self.rows {
            line(
                r.iter().map(std::string::String::as_str).collect(),
                &mut out,
            );
        }
        out
    }

    fn plain(&self) -> String {
        let mut out = String::new();
        for r in &self.rows {
            // A tab inside a cell would shift every later column.
            let cells: Vec<String> = r
                .iter()
                .map(|c| machine_cell(c).replace('\t', " "))
                .collect();
            out.push_str(&cells.join("\t"));
            out.push('\n');
        }
        out
    }

    fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut ok = w.write_record(&self.headers).is_ok();
        for r in &self.rows {
            ok &= w.write_record(r.iter().map(|c| machine_cell(c))).is_ok();
        }
        match (ok, w.into_inner()) {
            (true, Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            _ => String::new(),
        }
    }
}

/// Machine formats show a missing figure as an empty cell, never as `—`.
fn machine_cell(c: &str) -> &str {
    if c == MISSING {
        ""
    } else {
        c
    }
}

const MISSING: &str = "—";

pub fn print_json<T: Serialize + ?Sized>(v: &T) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    out.write_all(json_safe(&text).as_bytes())?;
    out.write_all(b"\n")
}

/// JSON from qdeck is read by people in terminals too. serde_json leaves bidi controls
/// (U+202E reorders what a terminal shows), C1 controls, DEL and line separators raw inside
/// strings; escape them as `\uXXXX`, which any JSON parser reads back as the same text.
pub fn json_safe(text: &str) -> std::borrow::Cow<'_, str> {
    // Every character escaped here is DEL or beyond ASCII: a byte scan clears the common
    // case (100,000 queue rows are tens of MB) without decoding characters.
    if !text.bytes().any(|b| b >= 0x7f) || !text.chars().any(needs_json_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_json_escape(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn needs_json_escape(c: char) -> bool {
    matches!(c,
        '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}'
        | '\u{feff}')
}

pub fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(s.as_bytes());
}

/// `—` for a missing figure: never a zero (an empty cell in CSV and plain output).
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| MISSING.to_string(), |x| x.to_string())
}

/// An age for people (`7m21s`), or whole seconds for scripts.
pub fn age_in(secs: Option<f64>, f: Format) -> String {
    match secs {
        None => MISSING.to_string(),
        Some(s) if f.is_machine() => format!("{:.0}", s.max(0.0)),
        Some(s) => human_secs(s),
    }
}

pub fn human_secs(s: f64) -> String {
    let s = s.max(0.0);
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else if s < 86_400.0 {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    } else {
        format!(
            "{}d{:02}h",
            (s / 86_400.0) as u64,
            ((s % 86_400.0) / 3600.0) as u64
        )
    }
}

/// A message body as a cell: all of it for scripts (CSV keeps its line breaks inside the
/// quoted cell, plain lines show them as `␊`), a one-line preview in the table a person reads.
/// An empty body is an empty cell in every format.
pub fn body_cell(body: &[u8], f: Format) -> String {
    match f {
        _ if body.is_empty() => String::new(),
        Format::Csv => sanitize::body_text(body, true),
        Format::Plain | Format::Json => sanitize::body_text(body, false),
        Format::Table => sanitize::preview(body, 60),
    }
}

pub fn name(s: &str) -> String {
    sanitize::clean(s).into_owned()
}

/// A time for people, or RFC 3339 for scripts.
pub fn time_in(ms: Option<i64>, f: Format) -> String {
    ms.and_then(qdeck_model::domain::ms_to_datetime)
        .map_or_else(
            || MISSING.to_string(),
            |t| {
                if f.is_machine() {
                    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                } else {
                    t.format("%Y-%m-%d %H:%M:%S").to_string()
                }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_bidi_and_c1_and_parses_back_to_the_same_text() {
        let hostile = "pay\u{202e}gpj.exe \u{9b}31m \u{2066}x\u{2069} \u{7f}";
        let text = serde_json::to_string(&serde_json::json!({ "name": hostile })).unwrap();
        let safe = json_safe(&text);
        assert!(safe.contains("\\u202e") && safe.contains("\\u009b") && safe.contains("\\u2066"));
        assert!(!safe.chars().any(needs_json_escape), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["name"], hostile);
    }

    #[test]
    fn machine_formats_leave_missing_figures_empty() {
        let mut t = Table::new(vec!["NAME", "DEPTH", "NOTE"]);
        t.push(vec!["a,b".into(), opt(None::<u64>), "say \"hi\"".into()]);
        assert_eq!(
            t.render(Format::Csv),
            "NAME,DEPTH,NOTE\n\"a,b\",,\"say \"\"hi\"\"\"\n"
        );
        assert_eq!(t.render(Format::Plain), "a,b\t\tsay \"hi\"\n");
        assert!(t.render(Format::Table).contains('—'));
        assert_eq!(age_in(Some(441.4), Format::Csv), "441");
        assert_eq!(age_in(Some(441.4), Format::Table), "7m21s");
    }
}
