//! qdeck's model: the broker-neutral message and queue types (`domain`, `Value`), rates and the
//! rate limiter (`rate`), secrets and the configuration (`config`), sanitising of broker text
//! (`sanitize`), the expression grammar that predicates and alert conditions share (`expr`),
//! and the error types that go with them. No broker I/O, no terminal: every other qdeck crate
//! builds on this one and it depends on none of them.

pub mod config;
pub mod domain;
pub mod expr;
pub mod literal;
pub mod queue_error;
pub mod rate;
pub mod sanitize;
