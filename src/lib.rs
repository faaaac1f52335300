//! qdeck: a terminal operations console for message queues and their workers.
//!
//! The engine lives in the `qdeck-core` crate (crates/qdeck-core); its modules are re-exported
//! here under their own names, so `qdeck::engine` and `crate::engine` mean the same thing
//! in the console, the CLI, tests and benches.

pub use qdeck_core::{
    backend, celery, celery_workers, config, domain, engine, sanitize, tls, triage,
};

pub mod cli;
pub mod demo;
pub mod tui;
