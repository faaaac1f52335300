//! Output formats: an aligned table on a terminal, tab-separated plain lines for pipes, CSV,
//! and JSON with stable field names (README "JSON output").

use std::io::{IsTerminal, Write};

use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use super::args::Format;
use crate::sanitize;

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
            line(r.iter().map(|s| s.as_str()).collect(), &mut out);
        }
        out
    }

    fn plain(&self) -> String {
        let mut out = String::new();
        for r in &self.rows {
            out.push_str(&r.join("\t"));
            out.push('\n');
        }
        out
    }

    fn csv(&self) -> String {
        let esc = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = self.headers.join(",");
        out.push('\n');
        for r in &self.rows {
            out.push_str(&r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }
}

pub fn print_json<T: Serialize + ?Sized>(v: &T) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}

pub fn print(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(s.as_bytes());
}

/// `—` for a missing figure: never a zero.
pub fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "—".to_string())
}

pub fn age(secs: Option<f64>) -> String {
    match secs {
        None => "—".to_string(),
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

pub fn name(s: &str) -> String {
    sanitize::clean(s).into_owned()
}

pub fn time_ms(ms: Option<i64>) -> String {
    ms.and_then(crate::domain::ms_to_datetime)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "—".to_string())
}
