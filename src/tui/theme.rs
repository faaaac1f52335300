//! Themes: semantic roles → styles. Built-in themes are embedded from `themes/*.toml`; files
//! in `$XDG_CONFIG_HOME/qdeck/themes/NAME.toml` override a built-in of the same name or add
//! new ones. `NO_COLOR` selects `mono`, which uses only bold, reverse and underline.

use std::collections::BTreeMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("mono", include_str!("../../themes/mono.toml")),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub text: Style,
    pub dim: Style,
    pub header: Style,
    pub selected: Style,
    pub border: Style,
    pub title: Style,
    pub accent: Style,
    pub good: Style,
    pub warn: Style,
    pub error: Style,
    pub stale: Style,
    pub dlq: Style,
    pub chart: Style,
    pub badge: Style,
    pub badge_read_only: Style,
    pub badge_protected: Style,
    pub badge_demo: Style,
    pub marked: Style,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, String>,
}

fn color(word: &str) -> Option<Color> {
    let w = word.to_ascii_lowercase();
    if let Some(hex) = w.strip_prefix('#') {
        if hex.len() == 6 {
            let v = u32::from_str_radix(hex, 16).ok()?;
            return Some(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
        }
        return None;
    }
    Some(match w.as_str() {
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "darkgray" | "darkgrey" => Color::DarkGray,
        "lightred" => Color::LightRed,
        "lightgreen" => Color::LightGreen,
        "lightyellow" => Color::LightYellow,
        "lightblue" => Color::LightBlue,
        "lightmagenta" => Color::LightMagenta,
        "lightcyan" => Color::LightCyan,
        "white" => Color::White,
        "reset" | "default" => Color::Reset,
        _ => return None,
    })
}

/// Parse "bold black on cyan".
pub fn parse_style(spec: &str) -> Result<Style, String> {
    let mut st = Style::default();
    let mut words = spec.split_whitespace();
    while let Some(w) = words.next() {
        st = match w.to_ascii_lowercase().as_str() {
            "bold" => st.add_modifier(Modifier::BOLD),
            "dim" => st.add_modifier(Modifier::DIM),
            "italic" => st.add_modifier(Modifier::ITALIC),
            "underline" => st.add_modifier(Modifier::UNDERLINED),
            "reverse" => st.add_modifier(Modifier::REVERSED),
            "on" => {
                let c = words.next().ok_or("\"on\" needs a colour")?;
                st.bg(color(c).ok_or(format!("unknown colour {c:?}"))?)
            }
            other => st.fg(color(other).ok_or(format!("unknown style word {other:?}"))?),
        };
    }
    Ok(st)
}

impl Theme {
    /// Parse a theme file; roles it leaves out come from `base`.
    pub fn parse(text: &str, base: Option<&Theme>) -> Result<Theme, String> {
        let f: ThemeFile = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let mut t = base.cloned().unwrap_or_else(Theme::plain);
        if let Some(n) = f.name {
            t.name = n;
        }
        for (role, spec) in &f.roles {
            let st = parse_style(spec).map_err(|e| format!("role {role}: {e}"))?;
            let slot = match role.as_str() {
                "text" => &mut t.text,
                "dim" => &mut t.dim,
                "header" => &mut t.header,
                "selected" => &mut t.selected,
                "border" => &mut t.border,
                "title" => &mut t.title,
                "accent" => &mut t.accent,
                "good" => &mut t.good,
                "warn" => &mut t.warn,
                "error" => &mut t.error,
                "stale" => &mut t.stale,
                "dlq" => &mut t.dlq,
                "chart" => &mut t.chart,
                "badge" => &mut t.badge,
                "badge_read_only" => &mut t.badge_read_only,
                "badge_protected" => &mut t.badge_protected,
                "badge_demo" => &mut t.badge_demo,
                "marked" => &mut t.marked,
                other => return Err(format!("unknown role {other:?}")),
            };
            *slot = st;
        }
        Ok(t)
    }

    /// No styling at all (base for parsing).
    fn plain() -> Theme {
        let s = Style::default();
        Theme {
            name: "plain".into(),
            text: s,
            dim: s,
            header: s,
            selected: s.add_modifier(Modifier::REVERSED),
            border: s,
            title: s,
            accent: s,
            good: s,
            warn: s,
            error: s,
            stale: s,
            dlq: s,
            chart: s,
            badge: s.add_modifier(Modifier::REVERSED),
            badge_read_only: s,
            badge_protected: s,
            badge_demo: s,
            marked: s,
        }
    }

    pub fn builtin(name: &str) -> Option<Theme> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        Theme::parse(text, None).ok()
    }

    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    pub fn dark() -> Theme {
        Theme::builtin("dark").unwrap_or_else(Theme::plain)
    }

    pub fn mono() -> Theme {
        Theme::builtin("mono").unwrap_or_else(Theme::plain)
    }

    /// The theme called `name`: a user file in `dir` first (over the built-in of that name, or
    /// over dark), then the built-in. `Err` says why it fell back to dark.
    pub fn load(name: &str, dir: Option<&Path>) -> Result<Theme, String> {
        if let Some(dir) = dir {
            let f = dir.join(format!("{name}.toml"));
            if let Ok(text) = std::fs::read_to_string(&f) {
                let base = Theme::builtin(name).unwrap_or_else(Theme::dark);
                return Theme::parse(&text, Some(&base))
                    .map(|mut t| {
                        t.name = name.to_string();
                        t
                    })
                    .map_err(|e| format!("{}: {e}", f.display()));
            }
        }
        Theme::builtin(name).ok_or_else(|| {
            format!(
                "unknown theme {name:?}; built-in: {}",
                Theme::builtin_names().join(", ")
            )
        })
    }

    /// Theme for startup: `NO_COLOR` wins, then the configured name, else dark.
    pub fn startup(name: &str, dir: Option<&Path>) -> (Theme, Option<String>) {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return (Theme::mono(), None);
        }
        match Theme::load(name, dir) {
            Ok(t) => (t, None),
            Err(e) => (Theme::dark(), Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for (n, text) in BUILTIN {
            let t = Theme::parse(text, None).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(&t.name, n);
        }
    }

    #[test]
    fn mono_uses_no_colour() {
        let t = Theme::mono();
        for st in [
            t.text,
            t.header,
            t.selected,
            t.error,
            t.badge_demo,
            t.stale,
            t.warn,
        ] {
            assert_eq!(st.fg, None);
            assert_eq!(st.bg, None);
        }
    }

    #[test]
    fn user_file_overrides_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dark.toml"),
            "[roles]\nerror = \"bold magenta\"\n",
        )
        .unwrap();
        let t = Theme::load("dark", Some(dir.path())).unwrap();
        assert_eq!(t.error.fg, Some(Color::Magenta));
        assert_eq!(t.header, Theme::dark().header);
        assert!(Theme::load("nope", Some(dir.path())).is_err());
        assert!(parse_style("bold purple").is_err());
    }
}
