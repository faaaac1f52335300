//! Operations that change a queue (redrive, purge, deleting chosen messages, cancelling a
//! delayed message), once for both front-ends. An operation is
//! planned first (the same code a dry run stops after), then started through the gate (read-only
//! check, audit line) and tracked through a handle: progress, cancel, final outcome.
//!
//! A redrive never moves more than its plan counted when the user confirmed it: messages that
//! dead-letter again during the run (a consumer still rejecting them) stay for the next one.

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::gate::{Gate, Mutation};
use crate::edit::EditReport;
use crate::ops::copy::TransferReport;
use crate::ops::import_run::ImportReport;
use qdeck_backend::{BackendError, MessageFilter, OpProgress, ProgressState};
use qdeck_model::domain::{
    BrowseRequest, DeleteReport, GroupDeletePlan, Message, MessageCount, OffsetResetPlan,
    OffsetResetReport, OutgoingMessage, PurgeReport, QueueId, QueueInfo, RedriveMode, RedrivePlan,
    RedriveReport, RedriveRequest, RedriveTarget,
};
use qdeck_model::sanitize::clean;

pub mod copy;
mod import;
pub mod import_run;
pub use import::{plan_import, read_import_file, ImportFile};
mod transfer;
pub use transfer::{plan_transfer, TransferPlan, TransferRequest};
mod edit;
pub use edit::plan_edit;
pub mod admin;
pub use admin::{
    plan_create_dlq, plan_create_queue, plan_demo_setup, plan_worker_control, ControlPlan,
    CreatePlan, CreatedDlq, CreatedQueues,
};
mod groups;
pub use groups::{plan_group_delete, plan_offset_reset};
mod seek;
pub use seek::plan_seek;

/// A planned operation: what will happen, computed without changing anything.
#[derive(Debug, Clone)]
pub enum Planned {
    Redrive {
        req: RedriveRequest,
        source: QueueInfo,
        plan: RedrivePlan,
        /// For a filtered redrive: the predicate and scan counts, for the audit line.
        selection: Option<serde_json::Value>,
        /// A one-pass filtered redrive: the backend tests each message as it reads the source
        /// (`Backend::filtered_redrive`); `plan.count` is then the messages it will examine.
        filter: Option<Box<MessageFilter>>,
    },
    Purge {
        queue: QueueInfo,
        count: MessageCount,
        note: Option<String>,
        /// Only the messages on subjects this NATS filter matches (`purge --subject`).
        subject: Option<String>,
    },
    /// Delete exactly these messages (ids from a browse or a scan) and no others.
    Delete {
        queue: QueueInfo,
        ids: Vec<String>,
        /// What the deletion does to the other messages (`Backend::delete_note`).
        note: Option<String>,
        /// How the ids were chosen (predicate and scan counts, or the console's selection),
        /// for the audit line.
        selection: serde_json::Value,
    },
    /// Cancel one delayed (scheduled) message: delete it by id before it is delivered.
    CancelScheduled {
        queue: QueueInfo,
        /// The message as the scheduled listing shows it (its id, and `due-at` when known).
        message: Message,
    },
    /// Send the messages of an export file, every line already read and checked.
    Import {
        queue: QueueInfo,
        file: ImportFile,
        rate: Option<qdeck_model::rate::Rate>,
    },
    /// Copy or move chosen messages, on one profile or from one to another.
    Transfer(Box<TransferPlan>),
    /// Send an edited copy of a message, then delete the original (`qdeck edit`, `e`).
    Edit {
        source: QueueInfo,
        original: Box<Message>,
        edited: Box<crate::edit::Edited>,
        target: RedriveTarget,
        /// `target` resolved: the queue the copy goes to.
        dest: QueueId,
    },
    /// Send one message (`qdeck send`).
    Send {
        queue: QueueInfo,
        msg: OutgoingMessage,
    },
    /// A Celery remote-control command that changes workers (`qdeck worker-control`).
    WorkerControl(Box<admin::ControlPlan>),
    /// Start capturing a consumer's dead letters where the broker keeps none (`create-dlq`).
    CreateDlq { queue: QueueId },
    /// Create queues where qdeck owns the broker (`qdeck create`, the demo's own queues).
    CreateQueues(Box<admin::CreatePlan>),
    /// Seek a subscription back to a time (`qdeck replay`, Pub/Sub).
    Seek {
        queue: QueueInfo,
        plan: qdeck_model::domain::SeekPlan,
    },
    /// Move a consumer group's committed offsets on one topic (`qdeck reset-offsets`).
    OffsetReset {
        queue: QueueInfo,
        plan: OffsetResetPlan,
    },
    /// Delete a consumer group and its committed offsets (`qdeck delete-group`).
    GroupDelete {
        queue: QueueId,
        plan: GroupDeletePlan,
    },
}

/// Plan a redrive: the source and target exist, the backend's own checks pass (a DLQ without
/// recorded origins refuses here exactly as the real run would), and the count comes from the
/// broker's most current source.
pub async fn plan_redrive(gate: &Gate, req: RedriveRequest) -> Result<Planned, BackendError> {
    if req.max == Some(0) {
        return Err(BackendError::Invalid("max must be at least 1".into()));
    }
    if req.window == Some(0) {
        return Err(BackendError::Invalid("window must be at least 1".into()));
    }
    let b = gate.backend();
    let source = b.describe(&req.source).await?;
    if let RedriveTarget::Queue(t) = &req.target {
        if t == &req.source {
            return Err(BackendError::Invalid(format!(
                "cannot redrive {} into itself",
                clean(t.as_str())
            )));
        }
    }
    let plan = b.plan_redrive(&req).await?;
    // A plan the backend cannot run is a refusal with its reason, never a question: neither
    // door asks to confirm a move that would only fail after the yes.
    if let RedriveMode::Unsupported(why) = &plan.mode {
        return Err(BackendError::Unsupported(format!(
            "{}: {}",
            clean(req.source.as_str()),
            clean(why)
        )));
    }
    Ok(Planned::Redrive {
        req,
        source,
        plan,
        selection: None,
        filter: None,
    })
}

/// Plan a one-pass filtered redrive where the backend offers one (`filtered_redrive`):
/// the count is the messages the pass will examine (those ready now, at most
/// `filter.max_examined`), `req.max` caps the matching ones moved, and the notes say what
/// reading the others does to them.
pub async fn plan_redrive_matching(
    gate: &Gate,
    mut req: RedriveRequest,
    filter: MessageFilter,
) -> Result<Planned, BackendError> {
    if req.max == Some(0) {
        return Err(BackendError::Invalid("max must be at least 1".into()));
    }
    let max = req.max.take();
    let mut planned = plan_redrive(gate, req).await?;
    if let Planned::Redrive {
        req,
        source,
        plan,
        filter: f,
        ..
    } = &mut planned
    {
        let Some((_, effect)) =
            qdeck_backend::filtered_redrive_for(gate.backend().as_ref(), source)
        else {
            return Err(BackendError::Unsupported(format!(
                "a one-pass filtered redrive is not available for {}",
                clean(source.id.as_str())
            )));
        };
        req.max = max;
        if let Some(l) = filter.max_examined {
            plan.count.ready = plan.count.ready.min(l);
        }
        plan.mode = RedriveMode::ClientSide;
        plan.notes.push(effect);
        *f = Some(Box::new(filter));
    }
    Ok(planned)
}

/// Plan sending one message: refused before anything is sent where the backend cannot send.
pub fn plan_send(
    gate: &Gate,
    queue: QueueInfo,
    msg: OutgoingMessage,
) -> Result<Planned, BackendError> {
    qdeck_backend::sender_of(gate.backend().as_ref())?;
    Ok(Planned::Send { queue, msg })
}

pub async fn plan_purge(gate: &Gate, queue: &QueueId) -> Result<Planned, BackendError> {
    let b = gate.backend();
    let info = b.describe(queue).await?;
    let count = b.count(queue).await?;
    let note = b.capabilities_for(&info).purge_note;
    Ok(Planned::Purge {
        queue: info,
        count,
        note,
        subject: None,
    })
}

/// Plan purging the messages of a NATS stream whose subject `subject` matches: the count is
/// the server's, per subject, now.
pub async fn plan_purge_subject(
    gate: &Gate,
    queue: &QueueId,
    subject: &str,
) -> Result<Planned, BackendError> {
    let b = gate.backend();
    let info = b.describe(queue).await?;
    let n = qdeck_backend::subject_purge_of(b.as_ref(), queue)?
        .count_subject(queue, subject)
        .await?;
    Ok(Planned::Purge {
        queue: info,
        count: MessageCount {
            ready: n,
            in_flight: None,
            exact: true,
        },
        note: Some("the other subjects' messages stay".into()),
        subject: Some(subject.to_string()),
    })
}

/// Plan deleting chosen messages: refused up front where the backend cannot delete by id or
/// where reading past the others could dead-letter one, before anything is read.
pub async fn plan_delete(
    gate: &Gate,
    queue: &QueueId,
    ids: Vec<String>,
    selection: serde_json::Value,
) -> Result<Planned, BackendError> {
    let b = gate.backend();
    let Some(d) = b.deleter() else {
        return Err(BackendError::Unsupported(format!(
            "deleting chosen messages needs delete by id, which the {} backend cannot do",
            b.kind()
        )));
    };
    let info = b.describe(queue).await?;
    if let Some(why) = d.delete_refusal(&info) {
        return Err(BackendError::Refused(why));
    }
    Ok(Planned::Delete {
        note: d.delete_note(&info),
        queue: info,
        ids,
        selection,
    })
}

/// Plan cancelling one delayed message: the backend lists scheduled messages, and `id` is one of
/// the scheduled listing now (one already due was delivered or is about to be: not cancelled).
/// Refusals come before anything changes; a missing id is `NotFound`.
pub async fn plan_cancel_scheduled(
    gate: &Gate,
    queue: &QueueId,
    id: &str,
) -> Result<Planned, BackendError> {
    find_scheduled(gate, queue, id, CANCEL_SCHEDULED_SCAN).await
}

/// The most scheduled messages `plan_cancel_scheduled` reads looking for one id: ten pages
/// of a thousand. A queue with more delayed messages than that is not read to its end for
/// one cancel; the message is reported as not found among them, with nothing changed.
pub const CANCEL_SCHEDULED_SCAN: usize = 10_000;

async fn find_scheduled(
    gate: &Gate,
    queue: &QueueId,
    id: &str,
    limit: usize,
) -> Result<Planned, BackendError> {
    let b = gate.backend();
    let info = b.describe(queue).await?;
    if let Err(e) = qdeck_backend::scheduled_of(b.as_ref(), &info.id).await {
        gate.refuse(Mutation::Delete, &info.id, &e.to_string());
        return Err(e);
    }
    let mut cursor = None;
    let mut read = 0usize;
    loop {
        let req = BrowseRequest {
            cursor: cursor.take(),
            max: (limit - read).min(1000),
            force: false,
        };
        let page = gate.browse_scheduled(&info.id, &req).await?;
        let got = page.messages.len();
        read += got;
        if let Some(message) = page.messages.into_iter().find(|m| m.id == id) {
            return Ok(Planned::CancelScheduled {
                queue: info,
                message,
            });
        }
        match page.next {
            Some(c) if got > 0 && read < limit => cursor = Some(c),
            Some(_) if got > 0 => {
                return Err(BackendError::NotFound(format!(
                    "no delayed message {} among the first {read} scheduled in {} (more are \
                 scheduled; only that many are read for one cancel); nothing was changed",
                    clean(id),
                    clean(queue.as_str())
                )))
            }
            _ => {
                return Err(BackendError::NotFound(format!(
                "no delayed message {} in {} (already due, leased or gone); nothing was changed",
                clean(id),
                clean(queue.as_str())
            )))
            }
        }
    }
}

impl Planned {
    pub fn mutation(&self) -> Mutation {
        match self {
            Planned::Redrive { .. } => Mutation::Redrive,
            Planned::Purge { .. } => Mutation::Purge,
            Planned::Delete { .. } | Planned::CancelScheduled { .. } => Mutation::Delete,
            Planned::Import { .. } => Mutation::Import,
            Planned::Send { .. } => Mutation::Send,
            Planned::Edit { .. } => Mutation::Edit,
            Planned::Transfer(t) if t.moving => Mutation::Move,
            Planned::Transfer(_) => Mutation::Copy,
            Planned::WorkerControl(_) => Mutation::WorkerControl,
            Planned::CreateDlq { .. } => Mutation::Create,
            Planned::CreateQueues(c) => c.mutation,
            Planned::OffsetReset { .. } => Mutation::ResetOffsets,
            Planned::Seek { .. } => Mutation::Replay,
            Planned::GroupDelete { .. } => Mutation::DeleteGroup,
        }
    }

    pub fn queue(&self) -> &QueueId {
        match self {
            Planned::Redrive { source, .. } => &source.id,
            Planned::Purge { queue, .. }
            | Planned::Delete { queue, .. }
            | Planned::CancelScheduled { queue, .. }
            | Planned::Import { queue, .. }
            | Planned::Send { queue, .. }
            | Planned::OffsetReset { queue, .. }
            | Planned::Seek { queue, .. } => &queue.id,
            Planned::GroupDelete { queue, .. } => queue,
            Planned::Edit { source, .. } => &source.id,
            Planned::Transfer(t) => &t.source,
            Planned::WorkerControl(c) => &c.target,
            Planned::CreateDlq { queue } => queue,
            Planned::CreateQueues(c) => &c.target,
        }
    }

    /// Messages the operation will touch, and whether that figure is exact.
    pub fn count(&self) -> MessageCount {
        match self {
            Planned::Redrive { plan, .. } => plan.count,
            Planned::Purge { count, .. } => *count,
            Planned::Delete { ids, .. } => MessageCount {
                ready: ids.len() as u64,
                in_flight: None,
                exact: true,
            },
            // One command, one capture: counted as one thing to do, never "empty".
            Planned::CancelScheduled { .. }
            | Planned::Send { .. }
            | Planned::Edit { .. }
            | Planned::WorkerControl(_)
            | Planned::CreateDlq { .. } => MessageCount {
                ready: 1,
                in_flight: None,
                exact: true,
            },
            Planned::CreateQueues(c) => MessageCount {
                ready: c.queues.len() as u64,
                in_flight: None,
                exact: true,
            },
            Planned::Transfer(t) => MessageCount {
                ready: t.messages.len() as u64,
                in_flight: None,
                exact: true,
            },
            Planned::Import { file, .. } => MessageCount {
                ready: file.msgs.len() as u64,
                in_flight: None,
                exact: true,
            },
            // No message is touched: the figure is the partitions whose offset moves.
            Planned::OffsetReset { plan, .. } => MessageCount {
                ready: plan.changed() as u64,
                in_flight: None,
                exact: true,
            },
            Planned::GroupDelete { .. } => MessageCount {
                ready: 1,
                in_flight: None,
                exact: true,
            },
            // Pub/Sub does not say how many a seek brings back: one seek, count unknown.
            Planned::Seek { .. } => MessageCount {
                ready: 1,
                in_flight: None,
                exact: false,
            },
        }
    }

    /// What an empty plan reports without running (the report a run that found nothing would
    /// give); `None` for operations that are never empty.
    pub fn empty_outcome(&self) -> Option<Outcome> {
        Some(match self {
            Planned::Redrive { .. } => Outcome::Redrive(RedriveReport {
                mode: "none (empty)".into(),
                ..Default::default()
            }),
            Planned::Purge { .. } => Outcome::Purge(PurgeReport {
                purged: Some(0),
                note: Some("empty".into()),
            }),
            Planned::Delete { .. } => Outcome::Delete(Default::default()),
            Planned::CancelScheduled { .. } => Outcome::CancelScheduled(Default::default()),
            Planned::Import { .. } => Outcome::Import(Default::default()),
            Planned::Transfer(_) => Outcome::Transfer(Default::default()),
            // One message, one command, one capture each: never empty.
            Planned::Send { .. }
            | Planned::Edit { .. }
            | Planned::WorkerControl(_)
            | Planned::CreateDlq { .. }
            | Planned::CreateQueues(_)
            | Planned::OffsetReset { .. }
            | Planned::Seek { .. }
            | Planned::GroupDelete { .. } => return None,
        })
    }

    /// The question both front doors ask before it runs: the CLI's prompt and the console's
    /// dialog put exactly this above their answer, so what is confirmed reads the same.
    pub fn question(&self) -> String {
        match self {
            Planned::Purge { .. } | Planned::Seek { .. } => {
                format!("About to {}. This cannot be undone.", self.describe())
            }
            _ => format!("About to {}.", self.describe()),
        }
    }

    /// The same plan at another rate (the console's rate choice in the redrive dialog): the
    /// count and the checks do not depend on it, so nothing is asked of the broker again.
    #[must_use]
    pub fn with_rate(mut self, rate: Option<qdeck_model::rate::Rate>) -> Self {
        match &mut self {
            Planned::Redrive { req, .. } => req.rate = rate,
            Planned::Import { rate: r, .. } => *r = rate,
            _ => {}
        }
        self
    }

    /// Nothing to do, known for certain (an estimate of zero never skips the work).
    pub fn is_empty(&self) -> bool {
        let c = self.count();
        match self {
            Planned::Redrive { .. }
            | Planned::Delete { .. }
            | Planned::CancelScheduled { .. }
            | Planned::Import { .. }
            | Planned::Send { .. }
            | Planned::Edit { .. }
            | Planned::WorkerControl(_)
            | Planned::CreateDlq { .. }
            | Planned::CreateQueues(_)
            | Planned::Transfer(_) => c.exact && c.ready == 0,
            Planned::Purge { .. } => c.exact && c.ready == 0 && c.in_flight.unwrap_or(0) == 0,
            // Committing the offsets a group already has is harmless, and deleting a group
            // with no offsets still removes it: neither is skipped.
            Planned::OffsetReset { .. } | Planned::GroupDelete { .. } | Planned::Seek { .. } => {
                false
            }
        }
    }

    /// One sentence for the confirm prompt, the dialog and `--dry-run`, escaped for a terminal.
    pub fn describe(&self) -> String {
        let c = self.count();
        let approx = if c.exact { "" } else { "≈" };
        match self {
            Planned::Redrive {
                req,
                source,
                plan,
                filter,
                ..
            } => describe_redrive(req, source, plan, filter.as_deref(), &c),
            Planned::Purge {
                queue,
                count,
                note,
                subject: Some(subject),
            } => format!(
                "purge {} message(s) on subjects {} from {}{}",
                count.ready,
                clean(subject),
                clean(queue.id.as_str()),
                note.as_deref()
                    .map(|n| format!("; note: {}", clean(n)))
                    .unwrap_or_default()
            ),
            Planned::Purge {
                queue, count, note, ..
            } => format!(
                "purge {} ({approx}{} ready, {} in flight){}",
                clean(queue.id.as_str()),
                count.ready,
                count
                    .in_flight
                    .map_or_else(|| "—".into(), |n| n.to_string()),
                note.as_deref()
                    .map(|n| format!("; note: {}", clean(n)))
                    .unwrap_or_default()
            ),
            Planned::Delete {
                queue, ids, note, ..
            } => format!(
                "delete {} chosen message(s) from {}; this cannot be undone{}",
                ids.len(),
                clean(queue.id.as_str()),
                note.as_deref()
                    .map(|n| format!("; note: {}", clean(n)))
                    .unwrap_or_default()
            ),
            Planned::CancelScheduled { queue, message } => format!(
                "cancel delayed message {} in {} (due {}); it will not be delivered, and this \
                 cannot be undone",
                clean(&message.id),
                clean(queue.id.as_str()),
                message.field_text("due-at").map_or_else(
                    || "at a time the broker does not say".into(),
                    |d| clean(&d).into_owned()
                )
            ),
            Planned::Import { queue, file, .. } => import::describe(queue, file),
            Planned::Transfer(t) => t.describe(),
            Planned::Edit {
                source,
                original,
                dest,
                ..
            } => edit::describe(source, original, dest),
            Planned::Send { queue, msg } => format!(
                "send 1 message ({} byte(s)) to {}",
                msg.body.len(),
                clean(queue.id.as_str())
            ),
            Planned::WorkerControl(c) => clean(&c.what).into_owned(),
            Planned::CreateDlq { queue } => format!(
                "create a stream capturing the dead letters of {} (or keep the one that does)",
                clean(queue.as_str())
            ),
            Planned::CreateQueues(c) => {
                let names: Vec<String> = c
                    .queues
                    .iter()
                    .map(|(n, _)| clean(n).into_owned())
                    .collect();
                format!("create {}", names.join(", "))
            }
            Planned::OffsetReset { plan, .. } => groups::describe_reset(plan),
            Planned::GroupDelete { plan, .. } => groups::describe_delete(plan),
            Planned::Seek { plan, .. } => seek::describe(plan),
        }
    }

    /// The dry run's machine-readable form.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Planned::Redrive { req, plan, .. } => serde_json::json!({
                "dry_run": true,
                "action": "redrive",
                "source": req.source,
                "target": req.target,
                "count": plan.count.ready,
                "exact": plan.count.exact,
                "mode": plan.mode,
                "rate": req.rate,
                "notes": plan.notes,
            }),
            Planned::Purge {
                queue,
                count,
                note,
                subject,
            } => serde_json::json!({
                "dry_run": true,
                "action": "purge",
                "queue": queue.id,
                "subject": subject,
                "depth": count.ready,
                "in_flight": count.in_flight,
                "exact": count.exact,
                "note": note,
            }),
            Planned::Delete {
                queue,
                ids,
                note,
                selection,
            } => serde_json::json!({
                "dry_run": true,
                "action": "delete",
                "queue": queue.id,
                "count": ids.len(),
                "selection": selection,
                "note": note,
            }),
            Planned::CancelScheduled { queue, message } => serde_json::json!({
                "dry_run": true,
                "action": "cancel_scheduled",
                "queue": queue.id,
                "id": message.id,
                "due": message.field_text("due-at"),
            }),
            Planned::Import { queue, file, .. } => serde_json::json!({
                "dry_run": true,
                "action": "import",
                "queue": queue.id,
                "file": file.path,
                "count": file.msgs.len(),
                "headers_left_out": file.dropped,
                "header_changes": file.changes,
            }),
            Planned::Transfer(t) => serde_json::json!({
                "dry_run": true,
                "action": t.verb(),
                "from": t.from_end().label(),
                "to": t.to_end().label(),
                "count": t.messages.len(),
                "selection": t.selection,
                "headers": t.check.headers,
            }),
            Planned::Edit {
                source,
                original,
                dest,
                ..
            } => serde_json::json!({
                "dry_run": true,
                "action": "edit",
                "queue": source.id,
                "id": original.id,
                "to": dest,
            }),
            Planned::Send { queue, msg } => serde_json::json!({
                "dry_run": true,
                "action": "send",
                "queue": queue.id,
                "count": 1,
                "bytes": msg.body.len(),
            }),
            Planned::WorkerControl(c) => serde_json::json!({
                "dry_run": true,
                "action": "worker-control",
                "command": c.request.method,
                "arguments": c.request.arguments,
                "destination": c.request.destination,
            }),
            Planned::CreateDlq { queue } => serde_json::json!({
                "dry_run": true,
                "action": "create-dlq",
                "queue": queue,
            }),
            Planned::CreateQueues(c) => serde_json::json!({
                "dry_run": true,
                "action": c.mutation.name(),
                "queues": c.queues.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            }),
            Planned::OffsetReset { plan, .. } => groups::reset_json(plan),
            Planned::GroupDelete { plan, .. } => groups::delete_json(plan),
            Planned::Seek { plan, .. } => seek::plan_json(plan),
        }
    }
}

/// How an operation ended, as both front-ends report it.
#[derive(Debug, Clone)]
pub enum Outcome {
    Redrive(RedriveReport),
    Purge(PurgeReport),
    Delete(DeleteReport),
    /// A copy or move of chosen messages (`qdeck copy|move`, `:copy` / `:move`).
    Transfer(TransferReport),
    /// An edited copy sent, and its original deleted or not.
    Edit(EditReport),
    Import(ImportReport),
    /// A delayed message cancelled (`qdeck cancel-scheduled`): a delete of one id whose
    /// message must not already be gone.
    CancelScheduled(DeleteReport),
    /// A consumer group's committed offsets moved.
    OffsetReset(OffsetResetReport),
    Seek(qdeck_model::domain::SeekReport),
    /// A consumer group deleted.
    GroupDeleted {
        group: String,
    },
    /// One message sent; `id` where the broker gives one.
    Sent {
        id: Option<String>,
    },
    /// The workers' answers to a remote-control command.
    Control(qdeck_backend::celery::workers::WorkerReport),
    /// A dead-letter capture made, or found already there.
    CreatedDlq(CreatedDlq),
    /// Queues created where qdeck owns the broker.
    CreatedQueues(CreatedQueues),
    Failed {
        error: BackendError,
        progress: ProgressState,
    },
}

/// The broad result. It is the only input of the CLI's exit code, the console's status line
/// and quit exit code, and the audit line's `result`, so no two of them can disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Partial,
    Failed,
    Cancelled,
}

impl Verdict {
    /// The audit log's `result` (its "error" predates the verdict; scripts read it).
    pub fn audit_result(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Partial => "partial",
            Verdict::Failed => "error",
            Verdict::Cancelled => "cancelled",
        }
    }
}

impl Outcome {
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::Redrive(r) if r.cancelled => Verdict::Cancelled,
            Outcome::Redrive(r) if r.failed == 0 && r.possibly_duplicated == 0 => Verdict::Ok,
            Outcome::Redrive(r) if r.moved > 0 => Verdict::Partial,
            Outcome::Redrive(_) => Verdict::Failed,
            Outcome::Purge(_) => Verdict::Ok,
            // A message a worker holds is left in place: the deletion did not do all it was
            // asked. Ids already gone are not a failure: nothing chosen is left.
            Outcome::Delete(r) if r.cancelled => Verdict::Cancelled,
            Outcome::Delete(r) if r.leased == 0 => Verdict::Ok,
            Outcome::Delete(r) if r.deleted > 0 => Verdict::Partial,
            Outcome::Delete(_) => Verdict::Failed,
            // An original left in place beside its copy (held by a worker, or its delete
            // failed) exists twice: never a success, whatever else happened. A failed send
            // outranks a cancel: the user must hear that something was not sent.
            Outcome::Transfer(r) if r.leased > 0 || r.delete_failed => Verdict::Partial,
            Outcome::Transfer(r) if r.failed > 0 && r.sent > 0 => Verdict::Partial,
            Outcome::Transfer(r) if r.failed > 0 => Verdict::Failed,
            Outcome::Transfer(r) if r.cancelled => Verdict::Cancelled,
            Outcome::Transfer(_) => Verdict::Ok,
            // The copy was sent: what is left undone is removing the original.
            Outcome::Edit(r) if r.deleted => Verdict::Ok,
            Outcome::Edit(_) => Verdict::Partial,
            Outcome::Import(r) if r.failed > 0 && r.sent > 0 => Verdict::Partial,
            Outcome::Import(r) if r.failed > 0 => Verdict::Failed,
            Outcome::Import(r) if r.cancelled => Verdict::Cancelled,
            Outcome::Import(_) => Verdict::Ok,
            // Gone before the delete reached it means it became due and was delivered.
            Outcome::CancelScheduled(r) if r.deleted > 0 => Verdict::Ok,
            Outcome::CancelScheduled(_) => Verdict::Failed,
            Outcome::Sent { .. } | Outcome::CreatedDlq(_) | Outcome::CreatedQueues(_) => {
                Verdict::Ok
            }
            // A worker that answered with an error did not do it: the command failed there.
            Outcome::Control(r) if r.workers.iter().any(|w| w.answered_error) => Verdict::Failed,
            Outcome::Control(_) => Verdict::Ok,
            Outcome::OffsetReset(_) | Outcome::GroupDeleted { .. } | Outcome::Seek(_) => {
                Verdict::Ok
            }
            // Messages moved or deleted before the error stay moved or deleted.
            Outcome::Failed { progress, .. } if progress.done > 0 => Verdict::Partial,
            Outcome::Failed { .. } => Verdict::Failed,
        }
    }

    /// One line for the status bar and the restored terminal, naming the queue.
    pub fn summary(&self, queue: &QueueId) -> String {
        let q = clean(queue.as_str());
        match self {
            Outcome::Redrive(_) => format!("redrive {q}: {}", self.line()),
            Outcome::Purge(_) => format!("purge {q}: {}", self.line()),
            Outcome::Delete(_) => format!("delete from {q}: {}", self.line()),
            Outcome::Transfer(r) => format!("{} → {}: {}", r.action, clean(&r.to), self.line()),
            Outcome::Edit(_) => self.line(),
            Outcome::Import(_) => format!("import into {q}: {}", self.line()),
            Outcome::CancelScheduled(_) => format!("cancel in {q}: {}", self.line()),
            Outcome::Sent { .. } => format!("send to {q}: {}", self.line()),
            Outcome::Control(_) => format!("worker-control: {}", self.line()),
            Outcome::CreatedDlq(_) | Outcome::CreatedQueues(_) => self.line(),
            Outcome::OffsetReset(_) => format!("reset-offsets {q}: {}", self.line()),
            Outcome::Seek(_) => format!("replay {q}: {}", self.line()),
            Outcome::GroupDeleted { .. } => self.line(),
            Outcome::Failed { .. } => format!("{q}: {}", self.line()),
        }
    }

    /// The result alone, for the command that named the queue itself.
    pub fn line(&self) -> String {
        match self {
            Outcome::Redrive(r) => {
                // The mode after a separator, not in parentheses: modes carry their own
                // ("client-side (copy and delete in one transaction)").
                let mut s = format!(
                    "moved {}, failed {}, possibly duplicated {}{}; {}",
                    r.moved,
                    r.failed,
                    r.possibly_duplicated,
                    if r.cancelled { ", cancelled" } else { "" },
                    clean(&r.mode)
                );
                if let (Some(m), Some(e)) = (r.matched, r.examined) {
                    s.push_str(&format!("; {m} of {e} examined matched"));
                }
                if let Some(e) = r.errors.first() {
                    s.push_str(" — ");
                    s.push_str(&clean(e));
                }
                s
            }
            Outcome::Purge(r) => format!(
                "purged {}{}",
                r.purged.map_or_else(
                    || "(the broker gives no count)".into(),
                    |n| format!("{n} message(s)")
                ),
                r.note
                    .as_deref()
                    .map(|n| format!("; {}", clean(n)))
                    .unwrap_or_default()
            ),
            Outcome::Delete(r) => format!(
                "deleted {}, already gone {}, leased by a worker (left) {}{}",
                r.deleted,
                r.missing,
                r.leased,
                if r.cancelled { ", cancelled" } else { "" }
            ),
            Outcome::Transfer(r) => {
                let mut s = format!("sent {}, failed {}", r.sent, r.failed);
                if r.action == "move" {
                    s.push_str(&format!(
                        ", originals deleted {}, already gone {}, leased (left, now twice) {}",
                        r.deleted, r.missing, r.leased
                    ));
                }
                if r.cancelled {
                    s.push_str(", cancelled");
                }
                if let Some(e) = &r.error {
                    s.push_str(" — ");
                    s.push_str(&clean(e));
                }
                s
            }
            Outcome::Edit(r) => r.line(),
            Outcome::Import(r) => format!(
                "sent {}, failed {}{}{}",
                r.sent,
                r.failed,
                if r.cancelled { ", cancelled" } else { "" },
                r.error
                    .as_deref()
                    .map(|e| format!(" — {}", clean(e)))
                    .unwrap_or_default()
            ),
            Outcome::CancelScheduled(r) if r.deleted > 0 => "cancelled".to_string(),
            Outcome::CancelScheduled(r) => format!(
                "not cancelled: it became due and was taken (leased {}, missing {})",
                r.leased, r.missing
            ),
            Outcome::Sent { id } => match id {
                Some(i) => format!("sent 1 message, id {}", clean(i)),
                None => "sent 1 message".to_string(),
            },
            Outcome::Control(r) => admin::control_line(r),
            Outcome::CreatedDlq(c) => c.line(),
            Outcome::CreatedQueues(c) => c.line(),
            Outcome::OffsetReset(r) => format!(
                "moved the committed offsets of consumer group {} on {} partition(s) of {}; lag now {}",
                clean(&r.group),
                r.partitions,
                clean(&r.topic),
                r.lag_after
            ),
            Outcome::GroupDeleted { group } => {
                format!("deleted consumer group {}", clean(group))
            }
            Outcome::Seek(r) => clean(r.note.as_deref().unwrap_or("sought")).into_owned(),
            Outcome::Failed { error, progress } => format!(
                "{} (done {}, failed {} before the error)",
                clean(&error.to_string()),
                progress.done,
                progress.failed
            ),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Outcome::Redrive(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Purge(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Delete(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Transfer(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Edit(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Import(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::CancelScheduled(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Sent { id } => serde_json::json!({"sent": 1, "id": id}),
            Outcome::Control(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::CreatedDlq(c) => serde_json::to_value(c).unwrap_or_default(),
            Outcome::CreatedQueues(c) => serde_json::to_value(c).unwrap_or_default(),
            Outcome::OffsetReset(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::GroupDeleted { group } => serde_json::json!({"deleted_group": group}),
            Outcome::Seek(r) => serde_json::to_value(r).unwrap_or_default(),
            Outcome::Failed { error, progress } => serde_json::json!({
                "error": clean(&error.to_string()),
                "done": progress.done,
                "failed": progress.failed,
            }),
        }
    }
}

/// A running operation.
pub struct OpHandle {
    pub queue: QueueId,
    pub mutation: Mutation,
    progress: OpProgress,
    rx: watch::Receiver<ProgressState>,
    task: JoinHandle<Outcome>,
}

impl OpHandle {
    pub fn watch(&self) -> watch::Receiver<ProgressState> {
        self.rx.clone()
    }

    /// What cancels the operation: it stops after its current batch, and the outcome says
    /// what was done.
    pub fn cancel_handle(&self) -> OpProgress {
        self.progress.clone()
    }

    pub async fn wait(self) -> Outcome {
        match self.task.await {
            Ok(o) => o,
            Err(e) => Outcome::Failed {
                error: BackendError::Other(format!("operation stopped: {e}")),
                progress: self.rx.borrow().clone(),
            },
        }
    }
}

/// Start a planned operation through the gate. A redrive is capped at the planned count when
/// that count is exact, so it ends even while its messages keep coming back to the DLQ.
pub fn start(gate: &Gate, planned: Planned) -> OpHandle {
    let (progress, rx) = OpProgress::new();
    let queue = planned.queue().clone();
    let mutation = planned.mutation();
    let (gate, p) = (gate.clone(), progress.clone());
    let task = tokio::spawn(async move { run(&gate, planned, &p).await });
    OpHandle {
        queue,
        mutation,
        progress,
        rx,
        task,
    }
}

/// A redrive of chosen messages must move every one of them: those neither moved nor
/// reported failed (gone from the DLQ, or the backend stopped early) count as failed, so
/// the outcome is partial, never a silent success.
pub fn account_for_selection(r: &mut RedriveReport, selected: u64) {
    let missing = selected.saturating_sub(r.moved + r.failed);
    if missing == 0 || r.cancelled {
        return;
    }
    r.failed += missing;
    r.errors.insert(
        0,
        format!(
            "{missing} of the {selected} selected message(s) were not moved: no longer in the source queue, or the redrive stopped before reaching them"
        ),
    );
}

/// A whole purge, or with `subject` only the messages on those subjects (NATS).
async fn run_purge(
    gate: &Gate,
    queue: &QueueId,
    subject: Option<String>,
    p: &OpProgress,
) -> Outcome {
    let purged = match subject {
        Some(subject) => gate.purge_subject(queue, &subject, p).await,
        None => gate.purge(queue, p).await,
    };
    match purged {
        Ok(r) => Outcome::Purge(r),
        Err(error) => Outcome::Failed {
            error,
            progress: p.snapshot(),
        },
    }
}

/// Run a planned operation to its end, reporting on `p` (for a front-end that owns the
/// progress handle itself). A redrive is capped at the planned count when that count is exact.
pub async fn run(gate: &Gate, planned: Planned, p: &OpProgress) -> Outcome {
    match planned {
        Planned::Redrive {
            req,
            selection,
            filter: Some(filter),
            ..
        } => {
            // The pass bounds itself by what is ready when it starts; `max` caps the matches.
            p.set_total(None);
            match gate
                .redrive_matching(&req, &filter, selection.as_ref(), p)
                .await
            {
                Ok(r) => Outcome::Redrive(r),
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
        Planned::Redrive {
            mut req,
            plan,
            selection,
            filter: None,
            ..
        } => {
            // The selection as the caller capped it, before the plan's count caps `max`.
            let selected = req.only_ids.as_ref().map(|ids| {
                req.max
                    .map_or(ids.len() as u64, |m| m.min(ids.len() as u64))
            });
            if plan.count.exact {
                req.max = Some(
                    req.max
                        .map_or(plan.count.ready, |m| m.min(plan.count.ready)),
                );
            }
            p.set_total(Some(req.max.unwrap_or(plan.count.ready)));
            match gate.redrive_noted(&req, selection.as_ref(), p).await {
                Ok(mut r) => {
                    if let Some(n) = selected {
                        account_for_selection(&mut r, n);
                    }
                    Outcome::Redrive(r)
                }
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
        Planned::Purge { queue, subject, .. } => run_purge(gate, &queue.id, subject, p).await,
        Planned::Delete {
            queue,
            ids,
            selection,
            ..
        } => {
            p.set_total(Some(ids.len() as u64));
            match gate.delete_selected(&queue.id, &ids, selection, p).await {
                Ok(r) => Outcome::Delete(r),
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
        Planned::CancelScheduled { queue, message } => {
            p.set_total(Some(1));
            match gate.cancel_scheduled(&queue.id, &message.id, p).await {
                Ok(r) => Outcome::CancelScheduled(r),
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
        Planned::Send { queue, msg } => {
            p.set_total(Some(1));
            match gate.send(&queue.id, msg).await {
                Ok(id) => {
                    p.add_done(1);
                    Outcome::Sent { id }
                }
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
        Planned::Transfer(t) => transfer::run(*t, p).await,
        Planned::WorkerControl(c) => admin::run_control(gate, *c, p).await,
        Planned::CreateDlq { queue } => admin::run_create_dlq(gate, &queue, p).await,
        Planned::CreateQueues(c) => admin::run_create_queues(gate, *c, p).await,
        Planned::OffsetReset { queue, plan } => groups::run_reset(gate, &queue.id, &plan, p).await,
        Planned::GroupDelete { queue, plan } => groups::run_delete(gate, &queue, &plan, p).await,
        Planned::Seek { queue, plan } => seek::run(gate, &queue.id, &plan, p).await,
        Planned::Edit {
            source,
            original,
            edited,
            target,
            ..
        } => edit::run(gate, &source.id, &original, *edited, &target, p).await,
        Planned::Import { queue, file, rate } => {
            let (id, path) = (&queue.id, &file.path);
            match crate::ops::import_run::import(gate, id, file.msgs, rate, path, p).await {
                Ok(r) => Outcome::Import(r),
                Err(error) => Outcome::Failed {
                    error,
                    progress: p.snapshot(),
                },
            }
        }
    }
}

/// The sentence of a redrive plan: what moves, from where to where, how fast and how.
fn describe_redrive(
    req: &RedriveRequest,
    source: &QueueInfo,
    plan: &RedrivePlan,
    filter: Option<&MessageFilter>,
    c: &MessageCount,
) -> String {
    let approx = if c.exact { "" } else { "≈" };
    let target = match &req.target {
        RedriveTarget::Origin => match source.dlq_sources.as_slice() {
            [one] => format!("their origin ({})", clean(one.as_str())),
            [] => "their recorded origin".to_string(),
            many => format!(
                "their origins ({})",
                clean(
                    &many
                        .iter()
                        .map(qdeck_model::domain::QueueId::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            ),
        },
        RedriveTarget::Queue(q) => clean(q.as_str()).into_owned(),
    };
    let how = match &plan.mode {
        RedriveMode::Native(m) => format!(" (server-side: {})", clean(m)),
        _ => " (copy, confirm, then delete)".to_string(),
    };
    let rate = req
        .rate
        .map(|r| format!(" at most {r}/s"))
        .unwrap_or_default();
    // One message chosen by id is named: the user confirms that message, not a count.
    let what = match req.only_ids.as_deref() {
        Some([id]) if c.ready == 1 => format!("message {}", clean(id)),
        Some(_) => format!("{approx}{} chosen message(s)", c.ready),
        None => format!("{approx}{} message(s)", c.ready),
    };
    let mut s = match filter {
            None => format!(
                "move {what} from {} to {target}{rate}{how}",
                clean(source.id.as_str()),
            ),
            Some(f) => format!(
                "move the message(s) matching {} among the {approx}{} ready in {} to {target}{}{rate}{how}, reading the queue once",
                clean(&format!("{:?}", f.source)),
                c.ready,
                clean(source.id.as_str()),
                req.max
                    .map(|m| format!(" (at most {m})"))
                    .unwrap_or_default(),
            ),
        };
    for n in &plan.notes {
        s.push_str("; ");
        s.push_str(&clean(n));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cancelling a delayed message is planned like every mutation: the plan names the
    /// message, its queue and its due time; a ready message is not in the scheduled listing
    /// (NotFound, nothing changed); the run deletes exactly the delayed one.
    #[tokio::test]
    async fn cancel_scheduled_is_planned_then_run_through_the_gate() {
        use crate::audit::AuditLog;
        use qdeck_backend::local::{LocalHandle, QueueOptions};
        use qdeck_backend::Backend;
        use qdeck_model::config::Profile;
        use qdeck_model::domain::OutgoingMessage;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        b.0.create_queue("src", &QueueOptions::default()).unwrap();
        let g = Gate::new(
            b.clone(),
            &Profile::default_local(),
            AuditLog::new(dir.path().join("audit.log")),
        );
        let q = QueueId::new("src");
        let later = OutgoingMessage {
            delay: Some(std::time::Duration::from_secs(3600)),
            ..OutgoingMessage::text("later", &[])
        };
        let sender = b.sender().unwrap();
        let delayed = sender.send(&q, later).await.unwrap().unwrap();
        let ready = sender
            .send(&q, OutgoingMessage::text("now", &[]))
            .await
            .unwrap()
            .unwrap();

        let err = plan_cancel_scheduled(&g, &q, &ready).await.unwrap_err();
        assert!(matches!(err, BackendError::NotFound(_)), "{err:?}");
        let planned = plan_cancel_scheduled(&g, &q, &delayed).await.unwrap();
        assert_eq!(planned.mutation(), Mutation::Delete);
        assert_eq!(planned.count().ready, 1);
        let text = planned.describe();
        assert!(
            text.contains(&format!("cancel delayed message {delayed} in src (due ")),
            "{text}"
        );
        let outcome = run(&g, planned, &OpProgress::detached()).await;
        assert_eq!(outcome.verdict(), Verdict::Ok, "{outcome:?}");
        assert_eq!(
            b.count(&q).await.unwrap().ready,
            1,
            "the ready message stays"
        );
        let err = plan_cancel_scheduled(&g, &q, &delayed).await.unwrap_err();
        assert!(
            matches!(err, BackendError::NotFound(_)),
            "cancelled once: {err:?}"
        );
    }

    /// Looking for one scheduled message reads at most `limit` of them, not the whole queue.
    #[tokio::test]
    async fn cancel_scheduled_reads_a_bounded_number_of_scheduled_messages() {
        use crate::audit::AuditLog;
        use qdeck_backend::local::{LocalHandle, QueueOptions};
        use qdeck_backend::Backend;
        use qdeck_model::config::Profile;
        use qdeck_model::domain::OutgoingMessage;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        b.0.create_queue("src", &QueueOptions::default()).unwrap();
        let g = Gate::new(
            b.clone(),
            &Profile::default_local(),
            AuditLog::new(dir.path().join("audit.log")),
        );
        let q = QueueId::new("src");
        let sender = b.sender().unwrap();
        let mut ids = Vec::new();
        for i in 0..3 {
            let later = OutgoingMessage {
                delay: Some(std::time::Duration::from_secs(3600 + i)),
                ..OutgoingMessage::text("later", &[])
            };
            ids.push(sender.send(&q, later).await.unwrap().unwrap());
        }
        for id in &ids {
            assert!(find_scheduled(&g, &q, id, 3).await.is_ok(), "{id} within 3");
        }
        let found = [
            find_scheduled(&g, &q, &ids[0], 1).await.is_ok(),
            find_scheduled(&g, &q, &ids[1], 1).await.is_ok(),
            find_scheduled(&g, &q, &ids[2], 1).await.is_ok(),
        ];
        assert_eq!(
            found.iter().filter(|f| **f).count(),
            1,
            "a limit of one reads one scheduled message: {found:?}"
        );
        let missed = ids
            .iter()
            .zip(found)
            .find(|(_, f)| !f)
            .map(|(id, _)| id.clone())
            .unwrap();
        let err = find_scheduled(&g, &q, &missed, 1).await.unwrap_err();
        assert!(matches!(err, BackendError::NotFound(_)), "{err:?}");
    }

    /// `qdeck send` is planned and run like every mutation: the plan's sentence counts one
    /// message and its bytes, the run goes through the gate (one audit line, result ok), and a
    /// read-only profile's refusal comes back as a failed outcome with nothing sent.
    #[tokio::test]
    async fn send_is_planned_then_run_through_the_gate() {
        use crate::audit::AuditLog;
        use qdeck_backend::local::{LocalHandle, QueueOptions};
        use qdeck_backend::Backend;
        use qdeck_model::config::Profile;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        b.0.create_queue("q", &QueueOptions::default()).unwrap();
        let audit = dir.path().join("audit.log");
        let g = Gate::new(
            b.clone(),
            &Profile::default_local(),
            AuditLog::new(audit.clone()),
        );
        let q = QueueId::new("q");
        let info = b.describe(&q).await.unwrap();
        let planned = plan_send(&g, info.clone(), OutgoingMessage::text("hey", &[])).unwrap();
        assert_eq!(
            (planned.mutation(), planned.count().ready),
            (Mutation::Send, 1)
        );
        assert_eq!(planned.describe(), "send 1 message (3 byte(s)) to q");
        let outcome = run(&g, planned, &OpProgress::detached()).await;
        assert!(
            matches!(outcome, Outcome::Sent { id: Some(_) }),
            "{outcome:?}"
        );
        assert_eq!(outcome.verdict(), Verdict::Ok);
        assert_eq!(b.count(&q).await.unwrap().ready, 1);
        let log = std::fs::read_to_string(&audit).unwrap();
        let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(
            (last["action"].as_str(), last["result"].as_str()),
            (Some("send"), Some("ok"))
        );

        let ro = Profile {
            read_only: true,
            ..Profile::default_local()
        };
        let g = Gate::new(b.clone(), &ro, AuditLog::new(audit));
        let planned = plan_send(&g, info, OutgoingMessage::text("no", &[])).unwrap();
        let outcome = run(&g, planned, &OpProgress::detached()).await;
        assert_eq!(outcome.verdict(), Verdict::Failed, "{outcome:?}");
        assert_eq!(b.count(&q).await.unwrap().ready, 1, "nothing sent");
    }

    /// One verdict per outcome, read the same by the audit line: the cases where the front-
    /// ends and the audit used to decide apart.
    #[test]
    fn verdicts_of_transfers_edits_and_imports() {
        let moved = TransferReport {
            action: "move",
            selected: 2,
            sent: 2,
            ..Default::default()
        };
        let v = |r: &TransferReport| Outcome::Transfer(r.clone()).verdict();
        assert_eq!(v(&moved), Verdict::Ok);
        // Copies confirmed, originals not deleted: both exist, so partial (the console said ok).
        let undeleted = TransferReport {
            delete_failed: true,
            ..moved.clone()
        };
        assert_eq!(v(&undeleted), Verdict::Partial);
        assert_eq!(Verdict::Partial.audit_result(), "partial");
        let leased = TransferReport {
            deleted: 1,
            leased: 1,
            ..moved.clone()
        };
        assert_eq!(v(&leased), Verdict::Partial);
        let none_sent = TransferReport {
            sent: 0,
            failed: 1,
            ..moved.clone()
        };
        assert_eq!(v(&none_sent), Verdict::Failed);
        assert_eq!(Verdict::Failed.audit_result(), "error");
        let stopped = TransferReport {
            sent: 1,
            cancelled: true,
            ..moved.clone()
        };
        assert_eq!(v(&stopped), Verdict::Cancelled);

        let edit = |deleted| {
            Outcome::Edit(EditReport {
                source: QueueId::new("dlq"),
                original_id: "1".into(),
                target: QueueId::new("q"),
                new_id: None,
                deleted,
                note: None,
            })
            .verdict()
        };
        assert_eq!((edit(true), edit(false)), (Verdict::Ok, Verdict::Partial));

        let import = |sent, failed| {
            Outcome::Import(ImportReport {
                sent,
                failed,
                ..Default::default()
            })
            .verdict()
        };
        assert_eq!(import(3, 0), Verdict::Ok);
        assert_eq!(import(2, 1), Verdict::Partial);
        assert_eq!(import(0, 1), Verdict::Failed);

        // The CLI exited 3 for an error after some work while the console said failed.
        let failed = |done| {
            Outcome::Failed {
                error: BackendError::Unreachable("connection lost".into()),
                progress: ProgressState {
                    done,
                    ..Default::default()
                },
            }
            .verdict()
        };
        assert_eq!((failed(0), failed(5)), (Verdict::Failed, Verdict::Partial));
    }

    #[test]
    fn selected_but_not_moved_makes_the_outcome_partial() {
        let mut r = RedriveReport {
            moved: 608,
            ..Default::default()
        };
        account_for_selection(&mut r, 1000);
        assert_eq!(r.failed, 392);
        assert!(r.errors[0].starts_with("392 of the 1000 selected"));
        assert_eq!(Outcome::Redrive(r).verdict(), Verdict::Partial);

        let mut none = RedriveReport::default();
        account_for_selection(&mut none, 3);
        assert_eq!(Outcome::Redrive(none).verdict(), Verdict::Failed);

        let mut all = RedriveReport {
            moved: 2,
            failed: 1,
            ..Default::default()
        };
        account_for_selection(&mut all, 3);
        assert_eq!((all.failed, all.errors.len()), (1, 0));
    }
}
