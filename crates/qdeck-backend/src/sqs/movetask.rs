//! Native redrive: StartMessageMoveTask (server-side; to each message's source queue when no
//! target is given), ListMessageMoveTasks for progress, CancelMessageMoveTask on cancel.
//! Endpoints without it (moto answers 500) make the caller fall back to client-side.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_sdk_sqs::operation::list_message_move_tasks::ListMessageMoveTasksOutput;
use aws_sdk_sqs::types::ListMessageMoveTasksResultEntry;

use super::client::map_sdk;
use super::{ops, QueueMeta, SqsBackend};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

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
    let dest_arn = match destination_arn(b, &req.target).await? {
        Ok(a) => a,
        Err(why) => return Ok(MoveOutcome::NotSupported(why)),
    };
    progress.phase("starting move task");
    // Tasks started before this (allowing for clock skew) are not ours.
    let not_before_ms = now_ms() - 120_000;
    let handle = match start(b, src, &src_arn, dest_arn, req).await? {
        Ok(h) => h,
        Err(why) => return Ok(MoveOutcome::NotSupported(why)),
    };
    progress.phase("move task running");
    b.invalidate(&req.source);
    let task = Task {
        b,
        src,
        src_arn,
        source: &req.source,
        progress,
        handle,
        not_before_ms,
        report: RedriveReport {
            mode: "move task (StartMessageMoveTask)".to_string(),
            ..RedriveReport::default()
        },
        cancel_sent: false,
    };
    Ok(task.follow().await)
}

/// The ARN to move to: `None` sends each message back to its source queue. `Ok(Err(why))`
/// when the target's ARN is unknown.
async fn destination_arn(
    b: &SqsBackend,
    target: &RedriveTarget,
) -> Result<std::result::Result<Option<String>, String>> {
    Ok(match target {
        RedriveTarget::Origin => Ok(None),
        RedriveTarget::Queue(q) => match b.resolve_full(q).await?.arn {
            Some(a) => Ok(Some(a)),
            None => Err(format!("the ARN of {q} is unknown")),
        },
    })
}

/// StartMessageMoveTask, once. Its task handle, or `Ok(Err(why))` when the endpoint or the
/// queue cannot do a move task (an endpoint answering 5xx is remembered as lacking them).
async fn start(
    b: &SqsBackend,
    src: &QueueMeta,
    src_arn: &str,
    dest_arn: Option<String>,
    req: &RedriveRequest,
) -> Result<std::result::Result<String, String>> {
    let rate = req.rate.map(|r| (r.per_sec().floor() as i32).clamp(1, 500));
    let started = b
        .clients(src.region)
        .sqs
        .start_message_move_task()
        .source_arn(src_arn)
        .set_destination_arn(dest_arn)
        .set_max_number_of_messages_per_second(rate)
        .customize()
        .config_override(no_retry())
        .send()
        .await;
    let e = match started {
        Ok(o) => return Ok(Ok(o.task_handle().unwrap_or_default().to_string())),
        Err(e) => e,
    };
    let ce = map_sdk(ops::START_MOVE, req.source.as_str(), &e, b.profile_name());
    match ce.err {
        BackendError::Unreachable(_) => Err(ce.err),
        _ if ce.status.is_some_and(|s| s >= 500) => {
            let why = format!(
                "the endpoint does not implement StartMessageMoveTask (HTTP {})",
                ce.status.unwrap_or(500)
            );
            b.note_no_move_task(&why);
            Ok(Err(why))
        }
        other => Ok(Err(format!("StartMessageMoveTask refused: {other}"))),
    }
}

/// A started move task, followed by polling until it ends, is cancelled, or is lost track of.
struct Task<'a> {
    b: &'a SqsBackend,
    src: &'a QueueMeta,
    src_arn: String,
    source: &'a QueueId,
    progress: &'a OpProgress,
    /// Empty when StartMessageMoveTask answered without one.
    handle: String,
    /// Tasks started before this are not ours (Unix ms).
    not_before_ms: i64,
    report: RedriveReport,
    cancel_sent: bool,
}

impl Task<'_> {
    async fn follow(mut self) -> MoveOutcome {
        let mut poll_errors = 0u32;
        let mut not_listed = 0u32;
        loop {
            if self.progress.cancelled() && !self.cancel_sent && !self.handle.is_empty() {
                self.cancel().await;
            }
            let out = match self.list().await {
                Ok(o) => {
                    poll_errors = 0;
                    o
                }
                Err(e) => {
                    poll_errors += 1;
                    if poll_errors >= MAX_POLL_ERRORS {
                        self.report.errors.push(format!(
                            "lost track of move task {}: {e}; it may still be running",
                            self.handle
                        ));
                        return MoveOutcome::Done(self.report);
                    }
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            let Some(entry) = ours(out.results(), &self.handle, self.not_before_ms) else {
                not_listed += 1;
                if not_listed >= MAX_POLL_ERRORS {
                    self.report.errors.push(format!(
                        "move task {} not found in ListMessageMoveTasks; it may still be running",
                        self.handle
                    ));
                    return MoveOutcome::Done(self.report);
                }
                tokio::time::sleep(POLL).await;
                continue;
            };
            if self.settle(entry) {
                return MoveOutcome::Done(self.report);
            }
            let token = self.progress.cancel_token();
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = token.cancelled(), if !self.cancel_sent => {}
            }
        }
    }

    /// CancelMessageMoveTask, once; a refusal is reported and the task followed on.
    async fn cancel(&mut self) {
        self.cancel_sent = true;
        self.progress.phase("cancelling move task");
        if let Err(e) = self
            .b
            .clients(self.src.region)
            .sqs
            .cancel_message_move_task()
            .task_handle(&self.handle)
            .send()
            .await
        {
            self.report.errors.push(
                map_sdk(
                    ops::CANCEL_MOVE,
                    self.source.as_str(),
                    &e,
                    self.b.profile_name(),
                )
                .err
                .to_string(),
            );
        }
    }

    async fn list(&self) -> std::result::Result<ListMessageMoveTasksOutput, BackendError> {
        self.b
            .clients(self.src.region)
            .sqs
            .list_message_move_tasks()
            .source_arn(&self.src_arn)
            .max_results(10)
            .send()
            .await
            .map_err(|e| {
                map_sdk(
                    ops::LIST_MOVES,
                    self.source.as_str(),
                    &e,
                    self.b.profile_name(),
                )
                .err
            })
    }

    /// Take in one poll of the task: progress, and the report when it has ended (true).
    fn settle(&mut self, entry: &ListMessageMoveTasksResultEntry) -> bool {
        let moved = u64::try_from(entry.approximate_number_of_messages_moved()).unwrap_or(0);
        let to_move = entry
            .approximate_number_of_messages_to_move()
            .and_then(|n| u64::try_from(n).ok());
        self.progress.update(|s| {
            s.done = moved;
            s.total = to_move;
        });
        self.report.moved = moved;
        match entry.status().unwrap_or("") {
            "RUNNING" | "CANCELLING" => return false,
            "COMPLETED" => self.progress.phase("done"),
            "CANCELLED" => {
                self.report.cancelled = true;
                self.progress.phase("cancelled");
            }
            "FAILED" => {
                // What was not moved is still in the source queue.
                self.report.failed = to_move.map_or(0, |t| t.saturating_sub(moved));
                self.report.errors.push(format!(
                    "move task failed: {}",
                    entry.failure_reason().unwrap_or("no reason given")
                ));
                self.progress.phase("failed");
            }
            other => self
                .report
                .errors
                .push(format!("move task in unknown state {other:?}")),
        }
        true
    }
}

/// Our task by handle (only running tasks carry one), else the most recent task that started
/// after we asked (an older finished task must not be mistaken for ours).
fn ours<'e>(
    entries: &'e [ListMessageMoveTasksResultEntry],
    handle: &str,
    not_before_ms: i64,
) -> Option<&'e ListMessageMoveTasksResultEntry> {
    entries
        .iter()
        .find(|e| !handle.is_empty() && e.task_handle() == Some(handle))
        .or_else(|| {
            entries
                .iter()
                .filter(|e| e.started_timestamp() >= not_before_ms)
                .max_by_key(|e| e.started_timestamp())
        })
}
