//! The operations log (`:ops`): every operation this session ran on any profile, newest first,
//! each with its profile, its full summary wrapped (the status line may have cut it), its
//! verdict and when it ended.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::wrap::wrap_lines;
use super::{block, fmt_ago, plural, styled};
use crate::tui::state::Model;
use qdeck_engine::ops::Verdict;
use qdeck_model::sanitize::clean;

pub fn render(f: &mut Frame, st: &Model, area: Rect) {
    let t = &st.theme;
    let log = &st.ops_log;
    let title = Line::from(vec![
        styled(" operations ", t.title),
        styled(
            {
                let earlier = log.entries.len() - log.this_session();
                let past = if earlier > 0 {
                    format!(" · {earlier} earlier from the audit log")
                } else {
                    String::new()
                };
                format!(
                    "{} this session{past} ",
                    plural(log.this_session() as u64, "operation", "operations")
                )
            },
            t.dim,
        ),
    ]);
    let b = block(st, title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if log.entries.is_empty() {
        f.render_widget(
            Paragraph::new("no operation has run in this session").style(t.dim),
            inner,
        );
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    for op in log.entries.iter().rev().skip(log.scroll) {
        let (mark, style) = match op.summary.verdict {
            Verdict::Ok => ("ok", t.good),
            _ => ("!!", t.error),
        };
        let label = if op.label.is_empty() {
            String::new()
        } else {
            format!("{} · ", clean(&op.label))
        };
        let label = format!("{} · {label}", clean(&op.profile));
        lines.push(Line::from(vec![
            styled(format!("{mark} "), style),
            styled(
                format!(
                    "{label}{} · exit code {}",
                    fmt_ago(st.now_ms - op.ended_ms),
                    op.summary.exit_code
                ),
                t.dim,
            ),
        ]));
        lines.push(Line::from(styled(
            format!("   {}", clean(&op.summary.text)),
            t.text,
        )));
        if lines.len() > inner.height as usize * 2 {
            break;
        }
    }
    let rows = wrap_lines(&lines, inner.width);
    f.render_widget(Paragraph::new(rows), inner);
}
