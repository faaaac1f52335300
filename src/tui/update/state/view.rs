//! The views the console stacks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// One row per profile (`:fleet`, `qdeck --fleet`); under the queue table when open.
    Fleet,
    /// Every profile's most severe queues in one table (`:fire`, `f` on the fleet).
    Fire,
    Queues,
    Detail,
    Messages,
    Message,
    Workers,
    Help,
    /// A DLQ grouped by failure signature.
    Reasons,
    /// This session's operations with their full summaries (`:ops`).
    Ops,
    /// Each alert rule's state on this profile (`:alerts`).
    Alerts,
}
