//! qdeck: a terminal operations console for message queues and their workers.

pub mod backend;
pub mod cli;
pub mod config;
pub mod demo;
pub mod domain;
pub mod engine;
pub mod sanitize;
pub mod tls;
pub mod triage;
pub mod tui;
