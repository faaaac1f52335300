//! A predicate handed to a backend that can evaluate it while it consumes, so a filtered
//! redrive reads the queue once instead of scanning it and then reading it again by id.
//! The backend layer sees only a test on a `Message`; parsing and evaluation context stay in
//! `triage`.

use std::fmt;
use std::sync::Arc;

use qdeck_model::domain::Message;

type Test = dyn Fn(&Message) -> bool + Send + Sync;

#[derive(Clone)]
pub struct MessageFilter {
    /// The predicate as the user wrote it (plan text, audit line).
    pub source: String,
    test: Arc<Test>,
    /// Examine at most this many messages (`--limit`); `None`: every message ready at the start.
    pub max_examined: Option<u64>,
    /// Go ahead where returning the non-matching messages counts toward a delivery limit
    /// (`--force`, as for a browse).
    pub force: bool,
}

impl MessageFilter {
    pub fn new(
        source: impl Into<String>,
        test: impl Fn(&Message) -> bool + Send + Sync + 'static,
    ) -> Self {
        MessageFilter {
            source: source.into(),
            test: Arc::new(test),
            max_examined: None,
            force: false,
        }
    }

    pub fn matches(&self, m: &Message) -> bool {
        (self.test)(m)
    }
}

impl fmt::Debug for MessageFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageFilter")
            .field("source", &self.source)
            .field("max_examined", &self.max_examined)
            .field("force", &self.force)
            .finish_non_exhaustive()
    }
}
