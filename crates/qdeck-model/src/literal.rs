//! Values built from literals written in qdeck's own source.

use regex::Regex;

/// A regex from a pattern literal in qdeck's source. Such a pattern cannot fail at run time
/// in a way the user could act on: it is checked the first time a unit test reaches it, and a
/// bad one is a build defect, so this is the one place a failed compile may panic.
#[allow(clippy::expect_used)]
pub fn regex(pattern: &'static str) -> Regex {
    Regex::new(pattern).expect("a regex literal in qdeck's source compiles")
}
