//! qdeck's core: the broker-neutral message model, the broker backends, the operation engine
//! (plans, the gate, audit, poller, store) and triage. It knows nothing of terminals: the
//! console and the CLI live in the `qdeck` crate, and this crate does not depend on ratatui
//! or crossterm.

pub mod backend;
pub mod celery;
pub mod celery_workers;
pub mod config;
pub mod domain;
pub mod engine;
pub mod literal;
pub mod sanitize;
pub mod tls;
pub mod triage;
