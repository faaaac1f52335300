//! qdeck: a terminal operations console for message queues and their workers.
//!
//! The application: the one-shot CLI, the console and the demo. The core is in the layered
//! crates under crates/ (`qdeck_model` ← `qdeck_backend` ← `qdeck_engine`), used by name; the
//! console (`tui`) never imports the CLI (`cli`), which scripts/check_layers.sh checks.

pub mod cli;
pub mod demo;
pub mod tui;
