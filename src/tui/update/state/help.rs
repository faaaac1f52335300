//! The help view's state.

/// The help view.
#[derive(Debug, Clone, Default)]
pub struct HelpState {
    /// First row shown.
    pub scroll: usize,
}
