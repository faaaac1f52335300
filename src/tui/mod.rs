//! The live console: event loop (`app`), UI state and the pure `update`, views, keymap,
//! and themes. Broker text goes through `qdeck_model::sanitize`.

pub mod app;
pub mod frame_stats;
pub mod keymap;
pub mod theme;
pub mod transfer;
pub mod update;
pub mod views;

/// The console's state lives in `update`, the one module that writes it; its read-only path.
pub use update::state;

use crate::demo::DemoHandle;
use qdeck_engine::session::Session;

pub use state::State;
pub use update::{update, Action, Effect};

/// Run the console until the user quits. `demo` is set when qdeck started its demo workload.
/// Returns the summary of the operation the user quit after, if any (the caller prints it on
/// the restored terminal and exits with its code).
/// `fleet` opens on the fleet view with one row per named profile (empty: every configured
/// profile); `:fleet` later polls the same list. `note` stays in the status bar as the
/// console opens (why no demo runs).
pub async fn run(
    session: Session,
    demo: Option<DemoHandle>,
    fleet: Option<Vec<String>>,
    note: Option<String>,
) -> anyhow::Result<Option<state::OpSummary>> {
    app::run(session, demo, fleet, note).await
}
