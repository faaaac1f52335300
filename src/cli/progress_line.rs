//! A long CLI action with its progress line on stderr and Ctrl-C as a cancel: the action stops
//! at its next safe point and still reports what it did, and the line is cleared before that
//! report is printed.

use std::future::Future;
use std::io::IsTerminal;

use qdeck_backend::OpProgress;

/// Runs `run` with a fresh progress handle; `stopping` is printed when Ctrl-C arrives.
pub async fn with_progress<T, F, Fut>(what: &'static str, stopping: &'static str, run: F) -> T
where
    F: FnOnce(OpProgress) -> Fut,
    Fut: Future<Output = T>,
{
    let (progress, rx) = OpProgress::new();
    let ticker = super::cmd_mutate::spawn_progress(what, rx);
    let cancel = progress.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nqdeck: {stopping}");
            cancel.cancel();
        }
    });
    let out = run(progress).await;
    ctrl_c.abort();
    ticker.abort();
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    out
}
