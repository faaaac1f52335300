//! Incident triage on a dead-letter queue: failure signatures, grouping over a bounded scan,
//! and a predicate language to select messages. Engine level: no console or CLI code here, so
//! both front-ends build on the same functions. Copying and importing are operations
//! (`ops::copy`, `ops::import_run`); the expression grammar is `qdeck_model::expr`, the header
//! rules are the backend's (`qdeck_backend::headers`).

pub mod batches;
pub mod predicate;
pub mod reasons;
pub mod scan;
pub mod select;
pub mod signature;
pub mod transfer;

pub use predicate::{EvalContext, Predicate, PredicateError};
pub use reasons::{reasons, reasons_queue, Group, Grouper, ReasonsReport, REDRIVEN_HEADER};
pub use scan::{scan, ScanLimits, ScanSummary, StopReason};
pub use select::{select, Selection};
pub use signature::{signature, Signature, SignatureConfig};
