//! qdeck's engine: what the console and the one-shot commands share — operations (plan,
//! execute, report), the gate, audit, the poller and store, alerts and triage. It sits above
//! `qdeck-backend` and `qdeck-model` and knows nothing of terminals (no ratatui, no crossterm).

pub mod alerts;
pub mod audit;
pub mod budget;
pub mod config_check;
pub mod depth_window;
pub mod derive;
pub mod edit;
pub mod exit;
pub mod fleet;
pub mod gate;
pub mod multi_poller;
pub mod ops;
pub mod partitions;
pub mod poller;
pub mod ring;
pub mod schedule;
pub mod session;
pub mod severity;
pub mod store;
#[cfg(test)]
pub(crate) mod testing;
pub mod triage;
pub mod worker_pool;
