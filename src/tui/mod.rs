//! The live console. (Entry point only until the console lands.)

use crate::demo::DemoHandle;
use crate::engine::session::Session;

/// Run the console until the user quits. `demo` is set when qdeck started its demo workload.
pub async fn run(_session: Session, _demo: Option<DemoHandle>) -> anyhow::Result<()> {
    anyhow::bail!("the console is not built yet; use the one-shot commands (qdeck --help)")
}
