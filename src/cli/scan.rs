//! What `reasons`, `export` and `--where` share: scan bounds from flags and config, the
//! predicate parsed with a one-line error, and a progress line that Ctrl-C cancels.

use std::future::Future;
use std::time::Duration;

use super::args::ScanArgs;
use super::exit::{CliError, INTERRUPTED};
use qdeck_backend::{Backend, OpProgress};
use qdeck_engine::session::Session;
use qdeck_engine::triage::{
    EvalContext, Predicate, ScanLimits, ScanSummary, Selection, SignatureConfig, StopReason,
};
use qdeck_model::domain::QueueId;

/// Browse page size for scans: large pages where the backend allows them (it clamps).
const PAGE: usize = 1_000;

/// `--where` text as a predicate; a parse error is a usage error naming the column.
pub fn predicate(text: &str) -> Result<Predicate, CliError> {
    Predicate::parse(text).map_err(|e| CliError::usage(format!("bad --where predicate: {e}")))
}

/// Scan bounds: the flags, else `[triage]` from the config when `bounded` (reasons,
/// `--where`), else none (export reads the whole queue unless told otherwise).
pub fn limits(s: &Session, a: &ScanArgs, bounded: bool) -> Result<ScanLimits, CliError> {
    if a.limit == Some(0) {
        return Err(CliError::usage("--limit must be at least 1"));
    }
    if a.scan_time.is_some_and(|t| t.is_zero()) {
        return Err(CliError::usage("--scan-time must be above 0"));
    }
    let t = &s.loaded.config.triage;
    let explicit = a.limit.is_some() || a.scan_time.is_some();
    let (max_messages, max_time) = if bounded && !explicit {
        (
            Some(t.scan_limit),
            Some(Duration::from_secs_f64(t.scan_secs)),
        )
    } else {
        (a.limit, a.scan_time)
    };
    Ok(ScanLimits {
        max_messages,
        max_time,
        page: PAGE,
        force: a.force,
    })
}

/// Scan flags mean nothing without `--where` on redrive and purge: say so rather than ignore.
pub fn require_where(a: &ScanArgs) -> Result<(), CliError> {
    if a.limit.is_some() || a.scan_time.is_some() || a.force {
        return Err(CliError::usage(
            "--limit, --scan-time and --force bound the scan of --where; give --where PRED",
        ));
    }
    Ok(())
}

pub fn signature_config(s: &Session) -> SignatureConfig {
    SignatureConfig::for_session(&s.loaded)
}

pub fn eval_context(s: &Session) -> EvalContext {
    EvalContext::now(signature_config(s))
}

/// Run a scan with a progress line on a terminal's stderr; Ctrl-C stops it after the current
/// page and the result says it was cancelled.
pub async fn with_progress<T, F, Fut>(what: &'static str, run: F) -> T
where
    F: FnOnce(OpProgress) -> Fut,
    Fut: Future<Output = T>,
{
    super::progress_line::with_progress(what, "stopping the scan after the current page…", run)
        .await
}

/// What browsing did to the messages (SQS receive counts), on stderr as `peek` says it.
pub fn print_effect(summary: &ScanSummary) {
    if let Some(n) = &summary.effect_note {
        eprintln!("qdeck: note: {}", qdeck_model::sanitize::clean(n));
    }
}

/// Says what the scan did to the messages, and ends the command (exit 130) when the scan was
/// cancelled: nothing has been changed by then, and a partial selection must not be acted on.
pub fn finished(summary: &ScanSummary) -> Result<(), CliError> {
    print_effect(summary);
    if summary.stopped == StopReason::Cancelled {
        return Err(CliError::new(
            INTERRUPTED,
            "scan cancelled; nothing was changed",
        ));
    }
    Ok(())
}

/// The scanned messages of `queue` that match `pred`, with a progress line; see [`finished`].
pub async fn select(
    b: &dyn Backend,
    queue: &QueueId,
    pred: &Predicate,
    limits: &ScanLimits,
    ctx: &EvalContext,
) -> Result<Selection, CliError> {
    let sel = with_progress("scan", |p| async move {
        qdeck_engine::triage::select(b, queue, pred, limits, ctx, &p).await
    })
    .await?;
    finished(&sel.scan)?;
    Ok(sel)
}
