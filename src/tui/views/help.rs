//! `?` help, generated from the keymap (so user overrides show up).

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{block, centered, clear, styled};
use crate::tui::keymap::{Cmd, COMMANDS};
use crate::tui::state::State;

pub fn render(f: &mut Frame, st: &State, area: Rect) {
    let t = &st.theme;
    let mut lines: Vec<Line> = Vec::new();
    for c in COMMANDS {
        if c.mutating && st.read_only {
            continue;
        }
        if matches!(c.cmd, Cmd::AddWorker | Cmd::RemoveWorker) && st.demo_workers.is_none() {
            continue;
        }
        let keys = st.keymap.keys(c.cmd).join(" ");
        lines.push(Line::from(vec![
            styled(format!("{keys:>14}  "), t.accent),
            styled(c.help, t.text),
        ]));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(styled(
        "  :q  :dlq  :workers  :browse  :force (browse despite a refusal)  :filter RE",
        t.dim,
    )));
    lines.push(Line::from(styled(
        "  :sort COL [asc|desc]  :theme NAME  :profile NAME  :redrive QUEUE",
        t.dim,
    )));
    if st.read_only {
        lines.push(Line::from(styled(
            "  read-only profile: no redrive, purge or cancel",
            t.warn,
        )));
    }
    let h = lines.len() as u16 + 2;
    let r = centered(area, 78, h);
    clear(f, r);
    let b = block(st, Line::from(styled(" help — any key closes ", t.title)));
    let inner = b.inner(r);
    f.render_widget(b, r);
    f.render_widget(Paragraph::new(lines), inner);
}
