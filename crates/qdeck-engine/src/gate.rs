//! The single gate every action on messages goes through, from the console and the CLI alike:
//! it enforces the profile's permission tier (`access`) and writes the audit log.

use std::sync::Arc;

use serde_json::json;

use super::audit::{os_user, AuditEntry, AuditLog};
use super::ops::{Outcome, Verdict};
use qdeck_backend::{Backend, BackendError, OpProgress, ProgressState};
use qdeck_model::config::Access;
use qdeck_model::domain::{
    DeleteReport, OutgoingMessage, PurgeReport, QueueId, RedriveReport, RedriveRequest,
    RedriveTarget,
};

/// Everything the gate decides. Most are mutations; `Browse` and `Export` only read message
/// bodies, which the `stats` tier forbids too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Peek / the console's message browser / a reasons scan: reads bodies.
    Browse,
    /// Write messages to a file (a browse).
    Export,
    Redrive,
    /// Move messages to another queue (or profile): copy, then delete the originals.
    Move,
    /// Copy messages to another queue (or profile); the originals stay.
    Copy,
    Send,
    /// `qdeck import`: publishes the messages of an export file.
    Import,
    /// Edit a message and resend it (copy, then delete the original).
    Edit,
    Purge,
    /// Delete selected messages.
    Delete,
    /// `qdeck create` (local broker).
    Create,
    /// The demo workload: it publishes and consumes.
    Demo,
    /// A Celery remote-control command that changes workers (revoke, pool grow or shrink).
    WorkerControl,
    /// Move a consumer group's committed offsets (Kafka `reset-offsets`).
    ResetOffsets,
    /// Delete a consumer group and its committed offsets (Kafka).
    DeleteGroup,
    /// Seek a subscription back to a time (Pub/Sub replay).
    Replay,
}

impl Mutation {
    pub fn name(self) -> &'static str {
        match self {
            Mutation::Browse => "browse",
            Mutation::Export => "export",
            Mutation::Redrive => "redrive",
            Mutation::Move => "move",
            Mutation::Copy => "copy",
            Mutation::Send => "send",
            Mutation::Import => "import",
            Mutation::Edit => "edit",
            Mutation::Purge => "purge",
            Mutation::Delete => "delete",
            Mutation::Create => "create",
            Mutation::Demo => "demo",
            Mutation::WorkerControl => "worker-control",
            Mutation::ResetOffsets => "reset-offsets",
            Mutation::DeleteGroup => "delete-group",
            Mutation::Replay => "replay",
        }
    }

    /// The lowest tier that allows this. Actions that only add or move messages (a copy is
    /// confirmed before the original goes) sit at `redrive`; those that can destroy messages
    /// for good, or consume them (the demo), at `full`.
    pub fn required(self) -> Access {
        match self {
            Mutation::Browse | Mutation::Export => Access::Browse,
            Mutation::Redrive
            | Mutation::Move
            | Mutation::Copy
            | Mutation::Send
            | Mutation::Import
            | Mutation::Edit => Access::Redrive,
            Mutation::Purge
            | Mutation::Delete
            | Mutation::Create
            | Mutation::Demo
            | Mutation::WorkerControl
            // Moving a group forward skips records for good; deleting one drops its offsets.
            | Mutation::ResetOffsets
            | Mutation::DeleteGroup
            // What was published before the time is acknowledged for good.
            | Mutation::Replay => Access::Full,
        }
    }
}

#[derive(Clone)]
pub struct Gate {
    backend: Arc<dyn Backend>,
    profile: String,
    access: Access,
    protected: bool,
    audit: AuditLog,
}

/// Named by its profile: a plan that carries a gate prints as the profile it acts on.
impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("profile", &self.profile)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Gate {
    pub fn new(
        backend: Arc<dyn Backend>,
        profile: &qdeck_model::config::Profile,
        audit: AuditLog,
    ) -> Gate {
        Gate {
            backend,
            profile: profile.name.clone(),
            access: profile.effective_access(),
            protected: profile.protected,
            audit,
        }
    }

    /// The profile this gate guards (audit lines and cross-profile confirmations name it).
    pub fn profile_name(&self) -> &str {
        &self.profile
    }

    /// The profile's tier after `read_only` and `--read-only` capped it.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Nothing that changes the broker is allowed (tier `stats` or `browse`).
    pub fn read_only(&self) -> bool {
        self.access < Access::Redrive
    }

    /// Destructive actions need the queue name typed.
    pub fn protected(&self) -> bool {
        self.protected
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn audit_log(&self) -> &AuditLog {
        &self.audit
    }

    /// Whether `m` is allowed at all on this profile.
    pub fn allows(&self, m: Mutation) -> bool {
        self.access >= m.required()
    }

    /// Refuse `m` when the profile's tier is below what it needs, recording the refusal in
    /// the audit log.
    pub fn require(&self, m: Mutation, queue: &QueueId) -> Result<(), BackendError> {
        if !self.allows(m) {
            return Err(self.refuse(m, queue, &refusal(&self.profile, self.access, m)));
        }
        Ok(())
    }

    /// Record a refusal decided elsewhere (no confirmation, `--yes` missing without a
    /// terminal, an unsafe plan) and return the error to report. Every refusal of a mutation
    /// goes through here, so every one leaves an audit line.
    pub fn refuse(&self, m: Mutation, queue: &QueueId, why: &str) -> BackendError {
        let err = BackendError::Refused(why.to_string());
        self.write(m, queue, None, json!({}), "refused", Some(err.to_string()));
        err
    }

    /// Record a mutation done outside the backend trait (`create`, the demo).
    pub fn record_ok(&self, m: Mutation, queue: &QueueId, counts: serde_json::Value) {
        self.record(m, queue, None, counts, Verdict::Ok, None);
    }

    /// Record a mutation done outside the backend trait that failed.
    pub fn record_failed(
        &self,
        m: Mutation,
        queue: &QueueId,
        counts: serde_json::Value,
        error: &str,
    ) {
        self.record(
            m,
            queue,
            None,
            counts,
            Verdict::Failed,
            Some(error.to_string()),
        );
    }

    /// Record the end of a mutation: its counts, its `Outcome::verdict` (an error that ended
    /// it included) and the first error. Taking a `Verdict` rather than a
    /// string keeps the audit `result` from ever being decided apart from the exit code.
    pub(crate) fn record(
        &self,
        m: Mutation,
        queue: &QueueId,
        target: Option<String>,
        counts: serde_json::Value,
        verdict: Verdict,
        error: Option<String>,
    ) {
        self.write(m, queue, target, counts, verdict.audit_result(), error);
    }

    fn write(
        &self,
        m: Mutation,
        queue: &QueueId,
        target: Option<String>,
        counts: serde_json::Value,
        result: &str,
        error: Option<String>,
    ) {
        let entry = AuditEntry {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            user: os_user(),
            profile: self.profile.clone(),
            broker: self.backend.kind().as_str().to_string(),
            queue: queue.to_string(),
            action: m.name().to_string(),
            target,
            counts,
            result: result.to_string(),
            error,
        };
        if let Err(e) = self.audit.append(entry) {
            tracing::error!(
                "cannot write audit log {}: {e}",
                self.audit.path().display()
            );
        }
    }

    /// Read a page of messages: the `stats` tier sees figures only. Not audited when allowed
    /// (browsing changes nothing); a refusal is.
    pub async fn browse(
        &self,
        queue: &QueueId,
        req: &qdeck_model::domain::BrowseRequest,
    ) -> Result<qdeck_model::domain::Page, BackendError> {
        self.require(Mutation::Browse, queue)?;
        self.backend.browse(queue, req).await
    }

    /// Read a page of delayed / scheduled messages: the same tier as `browse`.
    pub async fn browse_scheduled(
        &self,
        queue: &QueueId,
        req: &qdeck_model::domain::BrowseRequest,
    ) -> Result<qdeck_model::domain::Page, BackendError> {
        self.require(Mutation::Browse, queue)?;
        qdeck_backend::scheduled_of(self.backend.as_ref(), queue)
            .await?
            .browse_scheduled(queue, req)
            .await
    }

    /// The sessions of an entity (their state may hold application data): the `browse` tier.
    pub async fn sessions(
        &self,
        queue: &QueueId,
    ) -> Result<Vec<qdeck_model::domain::SessionInfo>, BackendError> {
        self.require(Mutation::Browse, queue)?;
        qdeck_backend::sessions_of(self.backend.as_ref())?
            .sessions(queue)
            .await
    }

    /// Read a page of one session's messages: the same tier as `browse`.
    pub async fn browse_session(
        &self,
        queue: &QueueId,
        session: &str,
        req: &qdeck_model::domain::BrowseRequest,
    ) -> Result<qdeck_model::domain::Page, BackendError> {
        self.require(Mutation::Browse, queue)?;
        qdeck_backend::sessions_of(self.backend.as_ref())?
            .browse_session(queue, session, req)
            .await
    }

    pub async fn redrive(
        &self,
        req: &RedriveRequest,
        progress: &OpProgress,
    ) -> Result<RedriveReport, BackendError> {
        self.redrive_noted(req, None, progress).await
    }

    /// A redrive whose audit line also carries `note` (a filtered redrive: the predicate, how
    /// many messages were scanned and how many matched), merged into its counts.
    pub async fn redrive_noted(
        &self,
        req: &RedriveRequest,
        note: Option<&serde_json::Value>,
        progress: &OpProgress,
    ) -> Result<RedriveReport, BackendError> {
        self.redrive_audited(req, None, note, progress).await
    }

    /// A one-pass filtered redrive (`Backend::filtered_redrive`): the same tier check and
    /// audit line as any redrive, with the examined and matched counts of the pass.
    pub async fn redrive_matching(
        &self,
        req: &RedriveRequest,
        filter: &qdeck_backend::MessageFilter,
        note: Option<&serde_json::Value>,
        progress: &OpProgress,
    ) -> Result<RedriveReport, BackendError> {
        self.redrive_audited(req, Some(filter), note, progress)
            .await
    }

    async fn redrive_audited(
        &self,
        req: &RedriveRequest,
        filter: Option<&qdeck_backend::MessageFilter>,
        note: Option<&serde_json::Value>,
        progress: &OpProgress,
    ) -> Result<RedriveReport, BackendError> {
        self.require(Mutation::Redrive, &req.source)?;
        let with_note = |mut counts: serde_json::Value| {
            if let Some(c) = counts.as_object_mut() {
                if let Some(f) = filter {
                    c.insert("predicate".into(), f.source.clone().into());
                }
                if let Some(serde_json::Value::Object(n)) = note {
                    c.extend(n.clone());
                }
            }
            counts
        };
        let target = Some(match &req.target {
            RedriveTarget::Origin => "origin".to_string(),
            RedriveTarget::Queue(q) => q.to_string(),
        });
        let run = match filter {
            Some(f) => match qdeck_backend::filtered_redrive_of(self.backend.as_ref()) {
                Ok(one_pass) => one_pass.redrive_matching(req, f, progress).await,
                Err(e) => Err(e),
            },
            None => self.backend.redrive(req, progress).await,
        };
        match run {
            Ok(mut r) => {
                // Also in `ops::run` (with the uncapped selection): here so the audit agrees.
                if let Some(ids) = &req.only_ids {
                    let n = ids.len() as u64;
                    super::ops::account_for_selection(&mut r, req.max.map_or(n, |m| m.min(n)));
                }
                let verdict = Outcome::Redrive(r.clone()).verdict();
                self.record(
                    Mutation::Redrive,
                    &req.source,
                    target,
                    with_note(pass_counts(&r, json!({"moved": r.moved, "failed": r.failed, "possibly_duplicated": r.possibly_duplicated, "mode": r.mode}))),
                    verdict,
                    r.errors.first().cloned(),
                );
                Ok(r)
            }
            Err(e) => {
                let p = progress.snapshot();
                self.record(
                    Mutation::Redrive,
                    &req.source,
                    target,
                    with_note(json!({"moved": p.done, "failed": p.failed})),
                    failed(&e, p),
                    Some(e.to_string()),
                );
                Err(e)
            }
        }
    }

    pub async fn purge(
        &self,
        queue: &QueueId,
        progress: &OpProgress,
    ) -> Result<PurgeReport, BackendError> {
        self.require(Mutation::Purge, queue)?;
        match self.backend.purge(queue, progress).await {
            Ok(r) => {
                self.record(
                    Mutation::Purge,
                    queue,
                    None,
                    json!({"purged": r.purged}),
                    Outcome::Purge(r.clone()).verdict(),
                    None,
                );
                Ok(r)
            }
            Err(e) => {
                self.record(
                    Mutation::Purge,
                    queue,
                    None,
                    json!({}),
                    failed(&e, progress.snapshot()),
                    Some(e.to_string()),
                );
                Err(e)
            }
        }
    }

    /// Purge the messages on subjects `subject` matches (NATS): audited as a purge with the
    /// filter in its counts.
    pub async fn purge_subject(
        &self,
        queue: &QueueId,
        subject: &str,
        progress: &OpProgress,
    ) -> Result<PurgeReport, BackendError> {
        self.require(Mutation::Purge, queue)?;
        let purged = match qdeck_backend::subject_purge_of(self.backend.as_ref(), queue) {
            Ok(p) => p.purge_subject(queue, subject, progress).await,
            Err(e) => Err(e),
        };
        match purged {
            Ok(r) => {
                self.record(
                    Mutation::Purge,
                    queue,
                    None,
                    json!({"purged": r.purged, "subject": subject}),
                    Outcome::Purge(r.clone()).verdict(),
                    None,
                );
                Ok(r)
            }
            Err(e) => {
                self.record(
                    Mutation::Purge,
                    queue,
                    None,
                    json!({"subject": subject}),
                    failed(&e, progress.snapshot()),
                    Some(e.to_string()),
                );
                Err(e)
            }
        }
    }

    /// Delete the chosen messages; the audit line carries `note` (predicate, scan counts).
    pub async fn delete_selected(
        &self,
        queue: &QueueId,
        ids: &[String],
        note: serde_json::Value,
        progress: &OpProgress,
    ) -> Result<DeleteReport, BackendError> {
        self.delete_audited(queue, ids, note, progress, Outcome::Delete)
            .await
    }

    /// Cancel one delayed message (delete it by id). Audited with the verdict of a cancel,
    /// in which a message already gone was not cancelled: it became due and was delivered.
    pub async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        progress: &OpProgress,
    ) -> Result<DeleteReport, BackendError> {
        let note = json!({"cancel_scheduled": id});
        let ids = [id.to_string()];
        self.delete_audited(queue, &ids, note, progress, Outcome::CancelScheduled)
            .await
    }

    async fn delete_audited(
        &self,
        queue: &QueueId,
        ids: &[String],
        note: serde_json::Value,
        progress: &OpProgress,
        outcome: fn(DeleteReport) -> Outcome,
    ) -> Result<DeleteReport, BackendError> {
        self.require(Mutation::Delete, queue)?;
        let with_note = |mut counts: serde_json::Value| {
            if let (serde_json::Value::Object(n), Some(c)) = (&note, counts.as_object_mut()) {
                c.extend(n.clone());
            }
            counts
        };
        let cancelling = note.get("cancel_scheduled").is_some();
        let deleted = match (self.backend.deleter(), ids) {
            // A cancel is the scheduled listing's own operation (Service Bus cancels by
            // sequence number).
            (_, [id]) if cancelling => {
                match qdeck_backend::scheduled_of(self.backend.as_ref(), queue).await {
                    Ok(s) => s.cancel_scheduled(queue, id, progress).await,
                    Err(e) => Err(e),
                }
            }
            (Some(d), _) => d.delete_ids(queue, ids, progress).await,
            (None, _) => Err(BackendError::Unsupported(format!(
                "deleting chosen messages needs delete by id, which the {} backend cannot do",
                self.backend.kind()
            ))),
        };
        match deleted {
            Ok(r) => {
                let verdict = outcome(r.clone()).verdict();
                self.record(
                    Mutation::Delete,
                    queue,
                    None,
                    with_note(
                        json!({"deleted": r.deleted, "missing": r.missing, "leased": r.leased}),
                    ),
                    verdict,
                    None,
                );
                Ok(r)
            }
            Err(e) => {
                let p = progress.snapshot();
                self.record(
                    Mutation::Delete,
                    queue,
                    None,
                    with_note(json!({"deleted": p.done})),
                    failed(&e, p),
                    Some(e.to_string()),
                );
                Err(e)
            }
        }
    }

    pub async fn send(
        &self,
        queue: &QueueId,
        msg: OutgoingMessage,
    ) -> Result<Option<String>, BackendError> {
        self.require(Mutation::Send, queue)?;
        let bytes = msg.body.len();
        let sent = match qdeck_backend::sender_of(self.backend.as_ref()) {
            Ok(sender) => sender.send(queue, msg).await,
            Err(e) => Err(e),
        };
        match sent {
            Ok(id) => {
                self.record(
                    Mutation::Send,
                    queue,
                    None,
                    json!({"messages": 1, "bytes": bytes}),
                    Verdict::Ok,
                    None,
                );
                Ok(id)
            }
            Err(e) => {
                self.record(
                    Mutation::Send,
                    queue,
                    None,
                    json!({}),
                    Verdict::Failed,
                    Some(e.to_string()),
                );
                Err(e)
            }
        }
    }
}

/// The verdict of an operation its error ended, as `ops::run` reports it to the front-ends.
fn failed(e: &BackendError, progress: ProgressState) -> Verdict {
    Outcome::Failed {
        error: e.clone(),
        progress,
    }
    .verdict()
}

/// The audit counts of a redrive, with how far a one-pass filtered redrive read.
fn pass_counts(r: &RedriveReport, mut counts: serde_json::Value) -> serde_json::Value {
    if let Some(c) = counts.as_object_mut() {
        if let Some(n) = r.examined {
            c.insert("examined".into(), n.into());
        }
        if let Some(n) = r.matched {
            c.insert("matched".into(), n.into());
        }
    }
    counts
}

/// One line saying why: the tier, what the action needs, and the read-only wording users and
/// scripts already know for the `browse` cap.
fn refusal(profile: &str, access: Access, m: Mutation) -> String {
    let need = m.required().as_str();
    if access == Access::Browse {
        format!(
            "profile {profile:?} is read-only (access = \"browse\"): {} needs access = \"{need}\"",
            m.name()
        )
    } else {
        format!(
            "profile {profile:?} has access = \"{}\": {} needs access = \"{need}\"",
            access.as_str(),
            m.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_backend::local::{LocalHandle, QueueOptions};
    use qdeck_model::config::Profile;

    fn gate(dir: &std::path::Path, read_only: bool) -> (Gate, Arc<LocalHandle>) {
        let h = Arc::new(LocalHandle::open(&dir.join("q.db")).unwrap());
        h.0.create_queue("q", &QueueOptions::default()).unwrap();
        let mut p = Profile::default_local();
        p.read_only = read_only;
        let g = Gate::new(h.clone(), &p, AuditLog::new(dir.join("audit.log")));
        (g, h)
    }

    fn audit_lines(dir: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(dir.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn read_only_gate_refuses_every_mutation_and_records_it() {
        let dir = tempfile::tempdir().unwrap();
        let (g, h) = gate(dir.path(), true);
        let q = QueueId::new("q");
        let p = OpProgress::detached();
        let sent = g.send(&q, OutgoingMessage::default()).await;
        assert!(matches!(sent, Err(BackendError::Refused(_))));
        let req = RedriveRequest {
            source: q.clone(),
            target: RedriveTarget::Origin,
            max: None,
            rate: None,
            only_ids: None,
            window: None,
        };
        assert!(matches!(
            g.redrive(&req, &p).await,
            Err(BackendError::Refused(_))
        ));
        assert!(matches!(
            g.purge(&q, &p).await,
            Err(BackendError::Refused(_))
        ));
        let stats = h.stats(std::slice::from_ref(&q)).await.unwrap();
        assert_eq!(
            stats.stats[0].enqueued_total,
            Some(0),
            "nothing reached the broker"
        );
        let lines = audit_lines(dir.path());
        let actions: Vec<&str> = lines
            .iter()
            .map(|l| l["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, vec!["send", "redrive", "purge"]);
        assert!(lines.iter().all(|l| l["result"] == "refused"));
    }

    #[tokio::test]
    async fn writable_gate_passes_through_and_audits_counts() {
        let dir = tempfile::tempdir().unwrap();
        let (g, _h) = gate(dir.path(), false);
        let q = QueueId::new("q");
        for _ in 0..3 {
            g.send(
                &q,
                OutgoingMessage {
                    body: b"x".to_vec(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        let r = g.purge(&q, &OpProgress::detached()).await.unwrap();
        assert_eq!(r.purged, Some(3));
        let lines = audit_lines(dir.path());
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3]["action"], "purge");
        assert_eq!(lines[3]["counts"]["purged"], 3);
        assert_eq!(lines[3]["result"], "ok");
    }

    /// The audit `result` is the verdict the exit code and the console take. A redrive that
    /// moved nothing and failed some was audited "partial" while the CLI exited 1; a deletion
    /// that found every chosen message leased likewise.
    #[tokio::test]
    async fn audit_result_is_the_outcome_verdict() {
        use crate::testing::Scripted;
        let dir = tempfile::tempdir().unwrap();
        let mut b = Scripted::open(dir.path());
        b.redrive = Some(RedriveReport {
            failed: 3,
            errors: vec!["nack".into()],
            ..Default::default()
        });
        b.delete = Some(DeleteReport {
            leased: 2,
            ..Default::default()
        });
        let log = AuditLog::new(dir.path().join("audit.log"));
        let g = Gate::new(Arc::new(b), &Profile::default_local(), log);
        let src = QueueId::new("src");
        let req = RedriveRequest {
            source: src.clone(),
            target: RedriveTarget::Queue(QueueId::new("dst")),
            max: None,
            rate: None,
            only_ids: None,
            window: None,
        };
        let p = OpProgress::detached();
        let r = Outcome::Redrive(g.redrive(&req, &p).await.unwrap());
        let ids = ["1".to_string(), "2".to_string()];
        let d = g.delete_selected(&src, &ids, json!({}), &p).await.unwrap();
        let d = Outcome::Delete(d);
        let lines = audit_lines(dir.path());
        assert_eq!(r.verdict(), Verdict::Failed);
        assert_eq!(lines[0]["result"], r.verdict().audit_result());
        assert_eq!(d.verdict(), Verdict::Failed);
        assert_eq!(lines[1]["result"], d.verdict().audit_result());
        assert_eq!(lines[1]["result"], "error");
    }

    /// A delayed message that was delivered before its cancel reached it: not cancelled, so
    /// "error" in the audit as in the exit code (the audit said "ok", a delete of an id
    /// already gone, while `cancel-scheduled` exited 1).
    #[tokio::test]
    async fn a_cancel_that_finds_the_message_gone_is_failed_in_the_audit() {
        use crate::testing::Scripted;
        let dir = tempfile::tempdir().unwrap();
        let mut b = Scripted::open(dir.path());
        b.delete = Some(DeleteReport {
            missing: 1,
            ..Default::default()
        });
        let log = AuditLog::new(dir.path().join("audit.log"));
        let g = Gate::new(Arc::new(b), &Profile::default_local(), log);
        let p = OpProgress::detached();
        let r = g
            .cancel_scheduled(&QueueId::new("src"), "7", &p)
            .await
            .unwrap();
        assert_eq!(Outcome::Delete(r.clone()).verdict(), Verdict::Ok);
        let cancel = Outcome::CancelScheduled(r);
        assert_eq!(cancel.verdict(), Verdict::Failed);
        let lines = audit_lines(dir.path());
        assert_eq!(lines[0]["result"], cancel.verdict().audit_result());
        assert_eq!(lines[0]["counts"]["cancel_scheduled"], "7");
    }

    /// A redrive its error stopped after moving some, run as both front-ends run it: partial
    /// in the outcome (the CLI's exit 3, the console's line) and in the audit, which said
    /// "error" while the CLI exited 3.
    #[tokio::test]
    async fn an_error_after_some_work_is_partial_in_the_outcome_and_the_audit() {
        use crate::ops;
        use crate::testing::Scripted;
        let dir = tempfile::tempdir().unwrap();
        let mut b = Scripted::open(dir.path());
        b.redrive_fails_after = Some(4);
        let log = AuditLog::new(dir.path().join("audit.log"));
        let g = Gate::new(Arc::new(b), &Profile::default_local(), log);
        let req = RedriveRequest {
            source: QueueId::new("src"),
            target: RedriveTarget::Queue(QueueId::new("dst")),
            max: None,
            rate: None,
            only_ids: None,
            window: None,
        };
        let planned = ops::plan_redrive(&g, req).await.unwrap();
        let outcome = ops::run(&g, planned, &OpProgress::detached()).await;
        assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
        assert_eq!(outcome.verdict(), Verdict::Partial);
        let lines = audit_lines(dir.path());
        assert_eq!(lines[0]["result"], "partial");
        assert_eq!(lines[0]["counts"]["moved"], 4);
    }

    /// Each tier allows exactly the actions at or below it, and says which tier is needed.
    #[tokio::test]
    async fn tiers_allow_what_they_include_and_name_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let h = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        let all = [
            Mutation::Browse,
            Mutation::Export,
            Mutation::Redrive,
            Mutation::Move,
            Mutation::Copy,
            Mutation::Send,
            Mutation::Import,
            Mutation::Edit,
            Mutation::Purge,
            Mutation::Delete,
            Mutation::Create,
            Mutation::Demo,
            Mutation::ResetOffsets,
            Mutation::DeleteGroup,
        ];
        for tier in Access::ALL {
            let mut p = Profile::default_local();
            p.access = Some(tier.as_str().to_string());
            let g = Gate::new(h.clone(), &p, AuditLog::new(dir.path().join("audit.log")));
            assert_eq!(g.access(), tier);
            assert_eq!(g.read_only(), tier < Access::Redrive);
            for m in all {
                assert_eq!(g.allows(m), tier >= m.required(), "{tier:?} {m:?}");
                if !g.allows(m) {
                    let e = g.require(m, &QueueId::new("q")).unwrap_err().to_string();
                    assert!(e.contains(m.required().as_str()), "{e}");
                }
            }
        }
        assert_eq!(Mutation::Purge.required(), Access::Full);
        assert_eq!(Mutation::Edit.required(), Access::Redrive);
        assert_eq!(Mutation::Export.required(), Access::Browse);
    }
}
