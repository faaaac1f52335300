//! Consumer-group commands (Kafka): `reset-offsets` and `delete-group`, planned, confirmed,
//! run and audited through the engine like `purge`.

use super::args::Format;
use super::cmd_mutate::run_planned;
use super::exit::{CliError, CliResult};
use qdeck_backend::BackendError;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Planned};
use qdeck_engine::session::Session;
use qdeck_model::domain::{QueueId, ResetTo};
use qdeck_model::sanitize::clean;

/// The one target `--to`, `--to-time` or `--shift` names; a usage error for none or several.
pub fn reset_target(
    to: Option<&str>,
    to_time: Option<&str>,
    shift: Option<i64>,
) -> Result<ResetTo, CliError> {
    match (to, to_time, shift) {
        (Some(t), None, None) => match t {
            "earliest" => Ok(ResetTo::Earliest),
            "latest" => Ok(ResetTo::Latest),
            n => match n.parse::<i64>() {
                Ok(o) if o >= 0 => Ok(ResetTo::Offset(o)),
                _ => Err(CliError::usage(format!(
                    "--to {:?}: expected earliest, latest or an offset (0 or more)",
                    clean(n)
                ))),
            },
        },
        (None, Some(t), None) => chrono::DateTime::parse_from_rfc3339(t)
            .map(|d| ResetTo::Time(d.timestamp_millis()))
            .map_err(|e| {
                CliError::usage(format!(
                    "--to-time {:?}: not an RFC 3339 time ({e}), e.g. 2026-12-06T10:00:00Z",
                    clean(t)
                ))
            }),
        (None, None, Some(n)) => Ok(ResetTo::Shift(n)),
        _ => Err(CliError::usage(
            "give exactly one of --to earliest|latest|OFFSET, --to-time RFC3339, --shift N",
        )),
    }
}

/// A plan the broker refused (a group with members): audited as a refusal, like a missing
/// confirmation, unless it was only a dry run.
fn planned_or_refused(
    s: &Session,
    m: Mutation,
    id: &QueueId,
    dry_run: bool,
    planned: Result<Planned, BackendError>,
) -> Result<Planned, CliError> {
    match planned {
        Ok(p) => Ok(p),
        Err(BackendError::Refused(why)) if !dry_run => Err(s.gate.refuse(m, id, &why).into()),
        Err(e) => Err(e.into()),
    }
}

pub async fn reset_offsets(
    s: &Session,
    row: &str,
    to: ResetTo,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let id = QueueId::new(row);
    if !dry_run {
        s.gate.require(Mutation::ResetOffsets, &id)?;
    }
    let planned = ops::plan_offset_reset(&s.gate, &id, to).await;
    let planned = planned_or_refused(s, Mutation::ResetOffsets, &id, dry_run, planned)?;
    run_planned(s, planned, dry_run, yes, f, "nothing to reset").await
}

pub async fn delete_group(
    s: &Session,
    group: &str,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    // A group row names its group: the group id is what precedes the last `@`.
    let group = match group.rsplit_once('@') {
        Some((g, t)) if !g.is_empty() && !t.is_empty() => g,
        _ => group,
    };
    let id = QueueId::new(group);
    if !dry_run {
        s.gate.require(Mutation::DeleteGroup, &id)?;
    }
    let planned = ops::plan_group_delete(&s.gate, group).await;
    let planned = planned_or_refused(s, Mutation::DeleteGroup, &id, dry_run, planned)?;
    run_planned(s, planned, dry_run, yes, f, "nothing to delete").await
}
