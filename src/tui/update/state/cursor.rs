//! A list's selection and scroll offset, shared by every table view.

/// A list with a selection and a scroll offset.
#[derive(Debug, Clone, Default)]
pub struct Cursor {
    pub sel: usize,
    pub offset: usize,
}

impl Cursor {
    /// Where a table `height` cells tall (its header row included) shows `len` rows with this
    /// cursor: the cursor clamped to its page, and the first and one-past-last rows drawn. The
    /// views draw with it and the poller's visible set is taken with it, so the rows drawn are
    /// the rows polled first.
    pub fn placed(&self, len: usize, height: usize) -> (Cursor, usize, usize) {
        let page = height.saturating_sub(1).max(1);
        let mut c = self.clone();
        c.clamp(len, page);
        let from = c.offset.min(len);
        (c, from, (from + page).min(len))
    }

    /// Keep `sel` within `len` and visible in a window of `page` rows.
    pub fn clamp(&mut self, len: usize, page: usize) {
        let page = page.max(1);
        if len == 0 {
            self.sel = 0;
            self.offset = 0;
            return;
        }
        self.sel = self.sel.min(len - 1);
        if self.sel < self.offset {
            self.offset = self.sel;
        }
        if self.sel >= self.offset + page {
            self.offset = self.sel + 1 - page;
        }
        self.offset = self.offset.min(len.saturating_sub(page));
    }
    pub fn move_by(&mut self, delta: isize, len: usize, page: usize) {
        let s = self.sel as isize + delta;
        self.sel = s.clamp(0, len.saturating_sub(1) as isize) as usize;
        self.clamp(len, page);
    }
}
