//! Table columns with priorities: when the terminal is narrow the least important columns go
//! first, numbers before names, and the name keeps its distinguishing end (`ord…s.dlq`).
//! Ctrl-W (`State::wide`) shows every column whatever the width.

use ratatui::layout::Constraint;

use qdeck_model::sanitize::clean;

#[derive(Debug, Clone)]
pub struct Col {
    pub head: String,
    /// Fixed width, or the least width of the one flexible column.
    pub width: u16,
    pub flex: bool,
    /// 0 is never dropped; higher numbers go first.
    pub prio: u8,
}

impl Col {
    pub fn fixed(head: impl Into<String>, width: u16, prio: u8) -> Col {
        Col {
            head: head.into(),
            width,
            flex: false,
            prio,
        }
    }
    pub fn flex(head: impl Into<String>, min: u16, prio: u8) -> Col {
        Col {
            head: head.into(),
            width: min,
            flex: true,
            prio,
        }
    }
}

/// Which columns to show in `avail` cells (one cell of spacing after each).
pub fn fit(cols: &[Col], avail: u16, wide: bool) -> Vec<bool> {
    let mut keep = vec![true; cols.len()];
    if wide {
        return keep;
    }
    let need = |keep: &[bool]| -> u16 {
        cols.iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c.width + 1)
            .sum()
    };
    while need(&keep) > avail {
        // The lowest priority still shown; among equals the rightmost.
        let drop = cols
            .iter()
            .enumerate()
            .filter(|(i, c)| keep[*i] && c.prio > 0)
            .max_by_key(|(i, c)| (c.prio, *i))
            .map(|(i, _)| i);
        match drop {
            Some(i) => keep[i] = false,
            None => break,
        }
    }
    keep
}

pub fn constraints(cols: &[Col], keep: &[bool]) -> Vec<Constraint> {
    cols.iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(c, _)| {
            if c.flex {
                Constraint::Min(c.width)
            } else {
                Constraint::Length(c.width)
            }
        })
        .collect()
}

/// Width the flexible column gets once the kept fixed columns are placed.
pub fn flex_width(cols: &[Col], keep: &[bool], avail: u16) -> usize {
    let fixed: u16 = cols
        .iter()
        .zip(keep)
        .filter(|(c, k)| **k && !c.flex)
        .map(|(c, _)| c.width + 1)
        .sum();
    let min = cols
        .iter()
        .zip(keep)
        .find(|(c, k)| **k && c.flex)
        .map_or(4, |(c, _)| c.width);
    (avail.saturating_sub(fixed + 1)).max(min) as usize
}

/// `¹`…`⁹`, `⁰`: the digit key that sorts by a column, shown in its header.
pub fn sort_digit(i: usize) -> &'static str {
    const D: [&str; 10] = ["¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹", "⁰"];
    D.get(i).copied().unwrap_or("")
}

/// A sortable column's header: its name, the digit that sorts by it, and the direction arrow
/// when the table is sorted by it (`DEPTH²↓`).
pub fn sort_head(name: &str, i: usize, sorted_by: Option<usize>, desc: bool) -> String {
    let mark = match sorted_by {
        Some(c) if c == i && desc => "↓",
        Some(c) if c == i => "↑",
        _ => "",
    };
    format!("{name}{}{mark}", sort_digit(i))
}

/// Clean and cut in the middle, keeping both ends: `orders` and `orders.dlq` stay apart at
/// any width (`ord…s.dlq`).
pub fn clean_mid(s: &str, max: usize) -> String {
    let c = clean(s);
    let n = c.chars().count();
    if n <= max {
        return c.into_owned();
    }
    if max <= 1 {
        return "…".chars().take(max).collect();
    }
    let keep = max - 1;
    // The end usually tells names apart (`.dlq`, `-2`): it gets the larger half.
    let head = (keep - 1) / 2;
    let tail = keep - head;
    let mut out: String = c.chars().take(head).collect();
    out.push('…');
    out.extend(c.chars().skip(n - tail));
    out
}

/// A row of the kept columns' cells.
pub fn kept_row<'a>(
    cells: Vec<ratatui::widgets::Cell<'a>>,
    keep: &[bool],
) -> ratatui::widgets::Row<'a> {
    ratatui::widgets::Row::new(
        cells
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c),
    )
}

/// The kept columns' headings.
pub fn header_row(cols: &[Col], keep: &[bool]) -> ratatui::widgets::Row<'static> {
    kept_row(
        cols.iter()
            .map(|c| ratatui::widgets::Cell::from(c.head.clone()))
            .collect(),
        keep,
    )
}

/// Draw a list view's table under the plain header of its kept columns.
pub fn render_plain_table(
    f: &mut ratatui::Frame,
    area: ratatui::layout::Rect,
    rows: Vec<ratatui::widgets::Row>,
    (cols, keep): (&[Col], &[bool]),
    t: &crate::tui::theme::Theme,
    selected: usize,
) {
    let header = header_row(cols, keep).style(t.header);
    render_table(f, area, rows, header, (cols, keep), t, selected);
}

/// Draw a list view's table: kept columns, the theme's header and selection, `selected` the
/// cursor's row among `rows`.
pub fn render_table(
    f: &mut ratatui::Frame,
    area: ratatui::layout::Rect,
    rows: Vec<ratatui::widgets::Row>,
    header: ratatui::widgets::Row,
    (cols, keep): (&[Col], &[bool]),
    t: &crate::tui::theme::Theme,
    selected: usize,
) {
    let table = ratatui::widgets::Table::new(rows, constraints(cols, keep))
        .header(header)
        .row_highlight_style(t.selected)
        .column_spacing(1);
    let mut ts = ratatui::widgets::TableState::default().with_selected(Some(selected));
    f.render_stateful_widget(table, area, &mut ts);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_ellipsis_keeps_the_end() {
        assert_eq!(clean_mid("orders.dlq", 9), "ord…s.dlq");
        assert_eq!(clean_mid("orders", 9), "orders");
        assert_ne!(clean_mid("orders.dlq", 6), clean_mid("orders", 6));
        assert_eq!(clean_mid("abcdef", 1), "…");
    }

    #[test]
    fn lowest_priority_goes_first_and_wide_keeps_all() {
        let cols = vec![
            Col::flex("NAME", 10, 0),
            Col::fixed("A", 5, 1),
            Col::fixed("B", 5, 3),
            Col::fixed("C", 5, 2),
        ];
        assert_eq!(fit(&cols, 30, false), vec![true, true, true, true]);
        assert_eq!(fit(&cols, 24, false), vec![true, true, false, true]);
        assert_eq!(fit(&cols, 12, false), vec![true, false, false, false]);
        assert_eq!(fit(&cols, 12, true), vec![true; 4]);
    }
}
