//! The executor's work with the broker, each on a task that reports back as an action: pages
//! and consumers to show, plans for the dialogs, the operations the user confirmed, and the
//! editor's round trip.

use super::exec::{EditJob, Exec};
use super::triage_scan::{group_page, scan_reasons, triage_settings};
use super::{one_line, summary, PAGE_SIZE};
use crate::tui::state::{HeldPlan, OpSummary, TransferAsk};
use crate::tui::update::Action;
use qdeck_backend::{BackendError, OpProgress};
use qdeck_engine::edit::{self, Edited};
use qdeck_engine::ops::{self, Outcome, Verdict};
use qdeck_model::domain::{BrowseRequest, Message, QueueId, RedriveRequest, RedriveTarget};

/// Reading: pages, reasons scans and consumers.
impl Exec {
    pub(super) fn browse(
        &self,
        queue: QueueId,
        cursor: Option<String>,
        force: bool,
        scheduled: bool,
    ) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let append = cursor.is_some();
            let req = BrowseRequest {
                cursor,
                max: PAGE_SIZE,
                force,
            };
            let action = if scheduled {
                let result = gate.browse_scheduled(&queue, &req).await;
                Action::ScheduledPage {
                    queue,
                    append,
                    result,
                }
            } else {
                let result = gate.browse(&queue, &req).await;
                Action::Page {
                    queue,
                    append,
                    result,
                }
            };
            let _ = tx.send(action).await;
        });
    }

    /// Scan `queue` for the reasons view; a scan already running is cancelled first.
    pub(super) fn reasons(&mut self, queue: QueueId) {
        if let Some(p) = self.reasons_op.take() {
            p.cancel();
        }
        let p = OpProgress::detached();
        self.reasons_op = Some(p.clone());
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        let (limits, cfg) = triage_settings(&self.session);
        tokio::spawn(async move {
            let result = scan_reasons(&gate, &queue, &limits, &cfg, &p, &tx).await;
            let _ = tx.send(Action::ReasonsDone { queue, result }).await;
        });
    }

    pub(super) fn browse_group(&self, queue: QueueId, signature: String, origin: Option<String>) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        let (limits, cfg) = triage_settings(&self.session);
        tokio::spawn(async move {
            let result =
                group_page(&gate, &queue, &limits, &cfg, &signature, origin.as_deref()).await;
            let _ = tx
                .send(Action::Page {
                    queue,
                    append: false,
                    result,
                })
                .await;
        });
    }

    pub(super) fn consumers(&self, queue: QueueId) {
        let backend = self.session.backend.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = backend.consumers(&queue).await;
            let _ = tx.send(Action::Consumers { queue, result }).await;
        });
    }

    pub(super) fn partitions(&self, queue: QueueId) {
        let backend = self.session.backend.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = match backend.group_admin() {
                Some(admin) => admin.partitions(&queue).await,
                None => Err(BackendError::Unsupported(
                    "this broker has no consumer groups".into(),
                )),
            };
            let _ = tx.send(Action::Partitions { queue, result }).await;
        });
    }
}

/// Editing: the draft for the editor (the event loop runs it), then the edited copy's send.
impl Exec {
    pub(super) fn edit(&mut self, queue: QueueId, message: Box<Message>) {
        let b = &self.session.backend;
        if b.deleter().is_none() {
            self.send_later(Action::Failed(BackendError::Unsupported(format!(
                "edit deletes the original by id, which the {} backend cannot do",
                b.kind().as_str()
            ))));
            return;
        }
        match edit::render(b.kind(), &queue, &message) {
            Ok(draft) => {
                self.pending_edit = Some(EditJob {
                    queue,
                    message,
                    draft,
                });
            }
            // The message cannot be edited as text (a binary body): invalid for this action.
            Err(e) => self.send_later(Action::Failed(BackendError::Invalid(e))),
        }
    }

    pub(super) fn resend(
        &self,
        source: QueueId,
        original: Box<Message>,
        edited: Box<Edited>,
        target: QueueId,
    ) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            // Planned and run like every mutation (`ops::plan_edit`, `ops::run`), as `qdeck
            // edit` does after its own editor.
            let to = RedriveTarget::Queue(target);
            let planned = match gate.backend().describe(&source).await {
                Ok(info) => ops::plan_edit(&gate, info, *original, *edited, to),
                Err(e) => Err(e),
            };
            let outcome = match planned {
                Ok(planned) => ops::run(&gate, planned, &OpProgress::detached()).await,
                Err(error) => Outcome::Failed {
                    error,
                    progress: Default::default(),
                },
            };
            let done = match &outcome {
                Outcome::Failed { error, .. } => OpSummary::new(
                    format!("nothing was sent: {}", one_line(&error.to_string())),
                    Verdict::Failed,
                ),
                o => OpSummary::of(o, one_line(&o.line())),
            };
            let _ = tx
                .send(Action::Resent {
                    queue: source,
                    done,
                })
                .await;
        });
    }
}

/// Planning for the dialogs: nothing changes on the broker. Each dialog holds the plan it
/// shows and runs it on confirm (`run_plan`), as the CLI runs the plan its prompt showed.
impl Exec {
    pub(super) fn plan_redrive(&self, req: RedriveRequest) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = ops::plan_redrive(&gate, req.clone())
                .await
                .map(HeldPlan::new);
            let _ = tx.send(Action::RedrivePlanned { req, result }).await;
        });
    }

    pub(super) fn plan_purge(&self, queue: QueueId) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = ops::plan_purge(&gate, &queue).await.map(HeldPlan::new);
            let _ = tx.send(Action::PurgePlanned { queue, result }).await;
        });
    }

    /// Plan moving a group row's offsets as `qdeck reset-offsets` does, for the dialog.
    pub(super) fn plan_reset(&self, queue: QueueId, to: qdeck_model::domain::ResetTo) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = ops::plan_offset_reset(&gate, &queue, to)
                .await
                .map(HeldPlan::new);
            let _ = tx.send(Action::ResetPlanned { queue, result }).await;
        });
    }

    /// Plan cancelling `id` as `qdeck cancel-scheduled` does, for the dialog's question.
    pub(super) fn plan_cancel(&self, queue: QueueId, id: String) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = ops::plan_cancel_scheduled(&gate, &queue, &id)
                .await
                .map(HeldPlan::new);
            let _ = tx.send(Action::CancelPlanned { queue, id, result }).await;
        });
    }

    pub(super) fn plan_delete(&self, queue: QueueId, ids: Vec<String>) {
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let selection = serde_json::json!({"selected": ids.len(), "chosen_in": "console"});
            let result = ops::plan_delete(&gate, &queue, ids.clone(), selection)
                .await
                .map(HeldPlan::new);
            let _ = tx.send(Action::DeletePlanned { queue, ids, result }).await;
        });
    }

    pub(super) fn plan_transfer(
        &self,
        source: QueueId,
        messages: Vec<Message>,
        to: QueueId,
        to_profile: Option<String>,
        moving: bool,
    ) {
        let own = self.session.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result =
                crate::tui::transfer::plan(&own, source, messages, to, to_profile, moving).await;
            let _ = tx.send(Action::TransferPlanned { moving, result }).await;
        });
    }
}

/// The operations the user confirmed: one at a time, with progress, ending in a summary.
impl Exec {
    /// Run the plan a dialog showed and the user confirmed, as it is: nothing is planned
    /// again between the question and the run. The result goes to the status line and `:ops`.
    pub(super) fn run_plan(&mut self, plan: HeldPlan) {
        let p = self.start_op();
        let gate = self.session.gate.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let planned = plan.into_planned();
            let queue = planned.queue().clone();
            let outcome = ops::run(&gate, planned, &p).await;
            let _ = tx.send(Action::OpDone(summary(&outcome, &queue))).await;
        });
    }

    pub(super) fn transfer(&mut self, ask: Box<TransferAsk>) {
        let p = self.start_op();
        let own = self.session.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let done = crate::tui::transfer::run(&own, *ask, &p).await;
            let _ = tx.send(Action::OpDone(done)).await;
        });
    }
}
