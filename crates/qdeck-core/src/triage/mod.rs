//! Incident triage on a dead-letter queue: failure signatures, grouping over a bounded scan,
//! and a predicate language to select messages. Engine level: no console or CLI code here, so
//! both front-ends build on the same functions.

pub mod batches;
pub mod copy;
pub mod expr;
pub mod headers;
pub mod import;
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
