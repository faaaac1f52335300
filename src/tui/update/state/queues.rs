//! The queue table's state: its rows, their order and the cursor.

use super::{Cursor, Filter};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortCol {
    Name,
    Depth,
    InFlight,
    Delayed,
    Age,
    Dlq,
    InRate,
    OutRate,
    Eta,
}

impl SortCol {
    pub const ALL: [SortCol; 9] = [
        SortCol::Name,
        SortCol::Depth,
        SortCol::InFlight,
        SortCol::Delayed,
        SortCol::Age,
        SortCol::Dlq,
        SortCol::InRate,
        SortCol::OutRate,
        SortCol::Eta,
    ];
    pub fn name(self) -> &'static str {
        match self {
            SortCol::Name => "name",
            SortCol::Depth => "depth",
            SortCol::InFlight => "inflight",
            SortCol::Delayed => "delayed",
            SortCol::Age => "age",
            SortCol::Dlq => "dlq",
            SortCol::InRate => "in",
            SortCol::OutRate => "out",
            SortCol::Eta => "eta",
        }
    }
    pub fn parse(s: &str) -> Option<SortCol> {
        SortCol::ALL.into_iter().find(|c| c.name() == s)
    }
    pub fn next(self) -> SortCol {
        let i = SortCol::ALL.iter().position(|c| *c == self).unwrap_or(0);
        SortCol::ALL[(i + 1) % SortCol::ALL.len()]
    }
}

/// The queue table: which queues it shows, in what order, and where the cursor is.
#[derive(Debug, Clone)]
pub struct QueueList {
    /// Indices into `store.entries()`, filtered and sorted.
    pub rows: Vec<usize>,
    /// The rows wait for a rebuild (figures arrived since the last sort).
    pub rows_dirty: bool,
    /// Rows of the last sort on a figure whose cell shows none (`—`, sorted last); said in
    /// the title, so a partial sort over a large broker is not taken for the whole truth.
    pub sort_unknown: usize,
    /// Of those, the rows not polled yet: the title says "yet" only when they all are.
    pub sort_unpolled: usize,
    pub cursor: Cursor,
    pub sort: SortCol,
    pub sort_desc: bool,
    pub filter: Filter,
}

impl Default for QueueList {
    fn default() -> Self {
        QueueList {
            rows: Vec::new(),
            rows_dirty: true,
            sort_unknown: 0,
            sort_unpolled: 0,
            cursor: Cursor::default(),
            sort: SortCol::Name,
            sort_desc: false,
            filter: Filter::default(),
        }
    }
}
