//! Planning an edit-and-resend: the edited copy goes to the resolved target, and only once
//! the target confirmed it is the original deleted. The checks that send nothing (delete by
//! id, a refusal, the target exists) run again in `engine::edit::resend`, which audits them.

use super::{Outcome, Planned};
use crate::edit::{resend, resolve_target, Edited};
use crate::gate::Gate;
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{Message, QueueId, QueueInfo, RedriveTarget};
use qdeck_model::sanitize::clean;

/// Plan resending `edited` in place of `original` (a message of `source`) to `target`:
/// refused before anything is sent where the backend cannot delete the original by id.
pub fn plan_edit(
    gate: &Gate,
    source: QueueInfo,
    original: Message,
    edited: Edited,
    target: RedriveTarget,
) -> Result<Planned, BackendError> {
    let b = gate.backend();
    if b.deleter().is_none() {
        return Err(BackendError::Unsupported(format!(
            "edit deletes the original by id, which the {} backend cannot do; nothing was sent",
            b.kind()
        )));
    }
    let dest = resolve_target(&source.id, &original, &target);
    Ok(Planned::Edit {
        source,
        original: Box::new(original),
        edited: Box::new(edited),
        target,
        dest,
    })
}

/// The plan's sentence: which copy goes where, and which original is deleted after.
pub(super) fn describe(source: &QueueInfo, original: &Message, dest: &QueueId) -> String {
    format!(
        "send the edited copy of {} to {} and then delete the original from {}",
        clean(&original.id),
        clean(dest.as_str()),
        clean(source.id.as_str())
    )
}

pub(super) async fn run(
    gate: &Gate,
    source: &QueueId,
    original: &Message,
    edited: Edited,
    target: &RedriveTarget,
    p: &OpProgress,
) -> Outcome {
    p.set_total(Some(1));
    match resend(gate, source, original, edited, target).await {
        Ok(r) => {
            p.add_done(1);
            Outcome::Edit(r)
        }
        Err(error) => Outcome::Failed {
            error,
            progress: p.snapshot(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{run as run_planned, Verdict};
    use super::*;
    use crate::audit::AuditLog;
    use crate::gate::Mutation;
    use qdeck_backend::local::{LocalHandle, QueueOptions};
    use qdeck_backend::Backend;
    use qdeck_model::config::Profile;
    use qdeck_model::domain::{BrowseRequest, OutgoingMessage};

    /// An edit is planned like every mutation: one message, the sentence both front-ends
    /// confirm on, then `ops::run` sends the copy and deletes the original, verdict ok.
    #[tokio::test]
    async fn edit_is_planned_then_run_through_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        for q in ["dlq", "q"] {
            b.0.create_queue(q, &QueueOptions::default()).unwrap();
        }
        b.0.send_sync("dlq", &OutgoingMessage::text("broken", &[]))
            .unwrap();
        let g = Gate::new(
            b.clone(),
            &Profile::default_local(),
            AuditLog::new(dir.path().join("audit.log")),
        );
        let (dlq, q) = (QueueId::new("dlq"), QueueId::new("q"));
        let req = BrowseRequest {
            cursor: None,
            max: 10,
            force: false,
        };
        let original = g.browse(&dlq, &req).await.unwrap().messages.remove(0);
        let id = original.id.clone();
        let edited = Edited {
            key: None,
            properties: vec![],
            headers: vec![],
            body: b"fixed".to_vec(),
        };
        let info = b.describe(&dlq).await.unwrap();
        let target = RedriveTarget::Queue(q.clone());
        let planned = plan_edit(&g, info, original, edited, target).unwrap();
        assert_eq!(
            (planned.mutation(), planned.count().ready),
            (Mutation::Edit, 1)
        );
        assert_eq!(
            planned.describe(),
            format!("send the edited copy of {id} to q and then delete the original from dlq")
        );
        let outcome = run_planned(&g, planned, &OpProgress::detached()).await;
        assert!(
            matches!(&outcome, Outcome::Edit(r) if r.deleted),
            "{outcome:?}"
        );
        assert_eq!(outcome.verdict(), Verdict::Ok);
        assert_eq!(b.count(&q).await.unwrap().ready, 1);
        assert_eq!(b.count(&dlq).await.unwrap().ready, 0);
    }
}
