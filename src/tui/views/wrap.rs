//! Wrapping done before layout, so a box is sized from the rows it will really take. Boxes
//! sized by line count and rendered with `Wrap` lose their last lines when a line wraps.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use qdeck_model::sanitize::clean;

/// Split `lines` into rows of at most `width` cells, breaking at spaces when a word fits on
/// the next row and inside the word when it does not. Styles are kept per span.
pub fn wrap_lines(lines: &[Line<'_>], width: u16) -> Vec<Line<'static>> {
    let width = width.max(1) as usize;
    let mut out = Vec::new();
    for line in lines {
        // Words with their style; a word keeps its trailing spaces so rows join naturally.
        let mut words: Vec<Vec<(char, Style)>> = Vec::new();
        let mut cur: Vec<(char, Style)> = Vec::new();
        for span in &line.spans {
            let style = line.style.patch(span.style);
            for c in span.content.chars() {
                if c != ' ' && cur.last().is_some_and(|(p, _)| *p == ' ') {
                    words.push(std::mem::take(&mut cur));
                }
                cur.push((c, style));
            }
        }
        if !cur.is_empty() {
            words.push(cur);
        }
        let mut rows: Vec<Vec<(char, Style)>> = vec![Vec::new()];
        let mut used = 0usize;
        for word in words {
            let ww: usize = word.iter().map(|(c, _)| cw(*c)).sum();
            let trimmed: usize = ww - word.iter().rev().take_while(|(c, _)| *c == ' ').count();
            if used > 0 && used + trimmed > width && trimmed <= width {
                rows.push(Vec::new());
                used = 0;
            }
            for (c, s) in word {
                let w = cw(c);
                if used + w > width {
                    if c == ' ' {
                        continue;
                    }
                    rows.push(Vec::new());
                    used = 0;
                }
                if let Some(r) = rows.last_mut() {
                    r.push((c, s));
                }
                used += w;
            }
        }
        for r in rows {
            out.push(to_line(r));
        }
    }
    out
}

fn cw(c: char) -> usize {
    c.width().unwrap_or(0)
}

fn to_line(cells: Vec<(char, Style)>) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut text = String::new();
    let mut style: Option<Style> = None;
    for (c, s) in cells {
        if style.is_some_and(|st| st != s) {
            spans.push(Span::styled(
                std::mem::take(&mut text),
                style.unwrap_or_default(),
            ));
        }
        style = Some(s);
        text.push(c);
    }
    if !text.is_empty() {
        spans.push(Span::styled(text, style.unwrap_or_default()));
    }
    Line::from(spans)
}

/// Rows `lines` take at `width` once wrapped.
pub fn wrapped_height(lines: &[Line<'_>], width: u16) -> usize {
    wrap_lines(lines, width).len()
}

/// At most `max` of the wrapped `rows`; when some are dropped, the last row kept ends in
/// `mark` (`…`, or `… (:ops)` where the whole text can be read) within `width`.
pub fn clip_rows(rows: &mut Vec<Line<'static>>, max: usize, width: u16, mark: &str, style: Style) {
    if rows.len() <= max {
        return;
    }
    rows.truncate(max);
    if let Some(last) = rows.last_mut() {
        let text: String = last.spans.iter().map(|sp| sp.content.as_ref()).collect();
        let keep = (width as usize).saturating_sub(mark.chars().count());
        let mut cut: String = text.chars().take(keep).collect();
        cut.push_str(mark);
        *last = Line::from(Span::styled(cut, style));
    }
}

/// Room at the bottom of `inner` for `text` in full, wrapped (at most a third of the
/// height, and the last row says when even that cut it), a blank row above it: the area
/// left for the table, and the text's. Tables cut their long cells; the selected row's
/// error or failure text is read whole here.
pub fn split_for_text(
    inner: Rect,
    text: Option<String>,
) -> (Rect, Option<(Rect, Vec<Line<'static>>)>) {
    let Some(text) = text else {
        return (inner, None);
    };
    let max = (inner.height / 3).max(1) as usize;
    let mut rows = wrap_lines(&[Line::from(clean(&text).into_owned())], inner.width.max(1));
    clip_rows(&mut rows, max, inner.width, "…", Style::default());
    let h = rows.len() as u16;
    if inner.height <= h + 2 {
        return (inner, None);
    }
    let [table, _, error] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(h),
    ])
    .areas(inner);
    (table, Some((error, rows)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn wraps_at_words_and_counts_rows() {
        let lines = vec![Line::from(
            "redrive to origin (each message back to the queue)",
        )];
        let rows = wrap_lines(&lines, 20);
        assert!(rows.iter().all(|r| r.width() <= 20));
        assert_eq!(text(&rows[0]).trim_end(), "redrive to origin");
        assert_eq!(wrapped_height(&lines, 20), rows.len());
        assert_eq!(wrapped_height(&lines, 200), 1);
    }

    #[test]
    fn long_words_are_cut_and_empty_lines_kept() {
        let lines = vec![Line::from("x".repeat(25)), Line::from("")];
        let rows = wrap_lines(&lines, 10);
        assert_eq!(rows.len(), 4);
        assert_eq!(text(&rows[2]), "xxxxx");
    }
}
