//! `qdeck replay SUBSCRIPTION --to-time RFC3339`: seek a Pub/Sub subscription back to a time
//! (tier `full`), planned, confirmed and audited through the one operation path.

use super::args::Format;
use super::cmd_mutate::run_planned;
use super::exit::{CliError, CliResult};
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops;
use qdeck_engine::session::Session;
use qdeck_model::domain::QueueId;
use qdeck_model::sanitize::clean;

/// `--to-time` as Unix ms, or a usage error naming the flag.
pub fn to_ms(t: &str) -> Result<i64, CliError> {
    chrono::DateTime::parse_from_rfc3339(t.trim())
        .map(|d| d.timestamp_millis())
        .map_err(|e| {
            CliError::usage(format!(
                "--to-time {:?}: not an RFC 3339 time ({e}), e.g. 2026-12-06T10:00:00Z",
                clean(t)
            ))
        })
}

pub async fn replay(
    s: &Session,
    queue: &str,
    to_time: &str,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let to = to_ms(to_time)?;
    let id = QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Replay, &id)?;
    }
    let planned = ops::plan_seek(&s.gate, &id, to).await?;
    run_planned(s, planned, dry_run, yes, f, "nothing to replay").await
}
