//! Native redrive: StartMessageMoveTask (server-side; to each message's source queue when no
//! target is given), ListMessageMoveTasks for progress, CancelMessageMoveTask on cancel.
//! Endpoints without it (moto answers 500) make the caller fall back to client-side.

use std::time::Duration;

use aws_config::retry::RetryConfig;

use super::client::map_sdk;
use super::{ops, QueueMeta, SqsBackend};
use crate::backend::{BackendError, OpProgress, Result};
use crate::domain::*;

/// Seconds between ListMessageMoveTasks polls.
const POLL: Duration = Duration::from_secs(1);
/// Give up following a task after this many failed polls in a row (the task keeps running).
const MAX_POLL_ERRORS: u32 = 5;

pub(crate) enum MoveOutcome {
    Done(RedriveReport),
    /// The endpoint or the queue cannot do a move task; the text says why.
    NotSupported(String),
}

fn no_retry() -> aws_sdk_sqs::config::Builder {
    aws_sdk_sqs::config::Builder::default().retry_config(RetryConfig::disabled())
}

/// Ask once whether the endpoint has move tasks, with a read-only ListMessageMoveTasks; an
/// endpoint that answers 5xx is remembered as lacking them. Other errors (permissions, a
/// queue that is no DLQ) leave the question to the real run.
pub(crate) async fn probe(b: &SqsBackend, src: &QueueMeta, queue: &QueueId) -> Result<()> {
    if b.move_task_known_missing().is_some() {
        return Ok(());
    }
    let Some(arn) = src.arn.clone() else {
        return Ok(());
    };
    let asked = b
        .clients(src.region)
        .sqs
        .list_message_move_tasks()
        .source_arn(&arn)
        .max_results(1)
        .customize()
        .config_override(no_retry())
        .send()
        .await;
    if let Err(e) = asked {
        let ce = map_sdk(ops::LIST_MOVES, queue.as_str(), &e, b.profile_name());
        match ce.err {
            BackendError::Unreachable(_) => return Err(ce.err),
            _ if ce.status.is_some_and(|s| s >= 500) => b.note_no_move_task(&format!(
                "the endpoint does not implement message move tasks (HTTP {})",
                ce.status.unwrap_or(500)
            )),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) async fn run(
    b: &SqsBackend,
    src: &QueueMeta,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<MoveOutcome> {
    let Some(src_arn) = src.arn.clone() else {
        return Ok(MoveOutcome::NotSupported(
            "the source queue's ARN is unknown".to_string(),
        ));
    };
    let dest_arn = match &req.target {
        RedriveTarget::Origin => None,
        RedriveTarget::Queue(q) => match b.resolve_full(q).await?.arn {
            Some(a) => Some(a),
            None => {
                return Ok(MoveOutcome::NotSupported(format!(
                    "the ARN of {q} is unknown"
                )))
            }
        },
    };
    let rate = req.rate.map(|r| (r.per_sec().floor() as i32).clamp(1, 500));
    progress.phase("starting move task");
    // Tasks started before this (allowing for clock skew) are not ours.
    let not_before_ms = now_ms() - 120_000;
    let started = b
        .clients(src.region)
        .sqs
        .start_message_move_task()
        .source_arn(&src_arn)
        .set_destination_arn(dest_arn.clone())
        .set_max_number_of_messages_per_second(rate)
        .customize()
        .config_override(no_retry())
        .send()
        .await;
    let handle = match started {
        Ok(o) => o.task_handle().unwrap_or_default().to_string(),
        Err(e) => {
            let ce = map_sdk(ops::START_MOVE, req.source.as_str(), &e, b.profile_name());
            return match ce.err {
                BackendError::Unreachable(_) => Err(ce.err),
                _ if ce.status.is_some_and(|s| s >= 500) => {
                    let why = format!(
                        "the endpoint does not implement StartMessageMoveTask (HTTP {})",
                        ce.status.unwrap_or(500)
                    );
                    b.note_no_move_task(&why);
                    Ok(MoveOutcome::NotSupported(why))
                }
                other => Ok(MoveOutcome::NotSupported(format!(
                    "StartMessageMoveTask refused: {other}"
                ))),
            };
        }
    };
    progress.phase("move task running");
    b.invalidate(&req.source);
    let mut report = RedriveReport {
        mode: "move task (StartMessageMoveTask)".to_string(),
        ..RedriveReport::default()
    };
    let mut poll_errors = 0u32;
    let mut not_listed = 0u32;
    let mut cancel_sent = false;
    loop {
        if progress.cancelled() && !cancel_sent && !handle.is_empty() {
            cancel_sent = true;
            progress.phase("cancelling move task");
            if let Err(e) = b
                .clients(src.region)
                .sqs
                .cancel_message_move_task()
                .task_handle(&handle)
                .send()
                .await
            {
                report.errors.push(
                    map_sdk(ops::CANCEL_MOVE, req.source.as_str(), &e, b.profile_name())
                        .err
                        .to_string(),
                );
            }
        }
        let listed = b
            .clients(src.region)
            .sqs
            .list_message_move_tasks()
            .source_arn(&src_arn)
            .max_results(10)
            .send()
            .await;
        let out = match listed {
            Ok(o) => {
                poll_errors = 0;
                o
            }
            Err(e) => {
                poll_errors += 1;
                if poll_errors >= MAX_POLL_ERRORS {
                    report.errors.push(format!(
                        "lost track of move task {handle}: {}; it may still be running",
                        map_sdk(ops::LIST_MOVES, req.source.as_str(), &e, b.profile_name()).err
                    ));
                    return Ok(MoveOutcome::Done(report));
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        // Our task by handle (only running tasks carry one), else the most recent task that
        // started after we asked (an older finished task must not be mistaken for ours).
        let entries = out.results();
        let entry = entries
            .iter()
            .find(|e| !handle.is_empty() && e.task_handle() == Some(handle.as_str()))
            .or_else(|| {
                entries
                    .iter()
                    .filter(|e| e.started_timestamp() >= not_before_ms)
                    .max_by_key(|e| e.started_timestamp())
            });
        let Some(entry) = entry else {
            not_listed += 1;
            if not_listed >= MAX_POLL_ERRORS {
                report.errors.push(format!(
                    "move task {handle} not found in ListMessageMoveTasks; it may still be running"
                ));
                return Ok(MoveOutcome::Done(report));
            }
            tokio::time::sleep(POLL).await;
            continue;
        };
        let moved = u64::try_from(entry.approximate_number_of_messages_moved()).unwrap_or(0);
        let to_move = entry
            .approximate_number_of_messages_to_move()
            .and_then(|n| u64::try_from(n).ok());
        progress.update(|s| {
            s.done = moved;
            s.total = to_move;
        });
        report.moved = moved;
        match entry.status().unwrap_or("") {
            "RUNNING" | "CANCELLING" => {}
            "COMPLETED" => {
                progress.phase("done");
                return Ok(MoveOutcome::Done(report));
            }
            "CANCELLED" => {
                report.cancelled = true;
                progress.phase("cancelled");
                return Ok(MoveOutcome::Done(report));
            }
            "FAILED" => {
                // What was not moved is still in the source queue.
                report.failed = to_move.map(|t| t.saturating_sub(moved)).unwrap_or(0);
                report.errors.push(format!(
                    "move task failed: {}",
                    entry.failure_reason().unwrap_or("no reason given")
                ));
                progress.phase("failed");
                return Ok(MoveOutcome::Done(report));
            }
            other => {
                report
                    .errors
                    .push(format!("move task in unknown state {other:?}"));
                return Ok(MoveOutcome::Done(report));
            }
        }
        let token = progress.cancel_token();
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = token.cancelled(), if !cancel_sent => {}
        }
    }
}
