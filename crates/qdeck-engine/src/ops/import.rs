//! Planning an import: the whole export file is read and checked for the target broker before
//! anything is sent, so a bad line stops the run with nothing sent.

use std::io::BufRead;
use std::path::Path;

use super::Planned;
use crate::gate::Gate;
use crate::triage::transfer::Record;
use qdeck_backend::headers::{map_outgoing, rules_of, HeaderChange, HeaderLedger, HeaderRules};
use qdeck_backend::BackendError;
use qdeck_model::domain::{OutgoingMessage, QueueInfo};
use qdeck_model::rate::Rate;
use qdeck_model::sanitize::clean;

/// The messages of an export file with their line numbers, the field names the source broker
/// set itself (left out), and for a file from another kind of broker every field renamed or
/// converted on the way.
#[derive(Debug, Clone)]
pub struct ImportFile {
    /// The path as given, for the audit line and `--dry-run -o json`.
    pub path: String,
    pub msgs: Vec<(usize, OutgoingMessage)>,
    pub dropped: Vec<String>,
    pub changes: Vec<HeaderChange>,
}

impl ImportFile {
    /// The path escaped for a terminal.
    pub fn shown(&self) -> String {
        clean(&self.path).into_owned()
    }
}

/// Every line of `file` parsed for a `target` broker. A line that does not parse is
/// `Invalid`, naming the file and the line, and nothing is sent.
pub fn read_import_file(file: &Path, target: &HeaderRules) -> Result<ImportFile, BackendError> {
    let path = file.display().to_string();
    let shown = clean(&path).into_owned();
    let f = std::fs::File::open(file)
        .map_err(|e| BackendError::Invalid(format!("cannot read {shown}: {e}")))?;
    let mut msgs = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    let mut ledger = HeaderLedger::default();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| BackendError::Invalid(format!("{shown} line {n}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec = Record::parse_line(&line).map_err(|e| {
            BackendError::Invalid(format!("{shown} line {n}: {}; nothing was sent", clean(&e)))
        })?;
        let (mut msg, mut left_out) = rec.to_outgoing();
        if let Some(from) = rec.broker.filter(|k| *k != target.kind) {
            // Across kinds the metadata travels as x-qdeck-* headers (listed), not left out.
            left_out.clear();
            let dead = rec.dead_letter.as_ref();
            let from = rules_of(from);
            msg = map_outgoing(msg, &rec.meta, dead, from, target, &mut ledger);
        }
        left_out.extend(target.drop_identity(&mut msg));
        for d in left_out {
            if !dropped.contains(&d) {
                dropped.push(d);
            }
        }
        msgs.push((n, msg));
    }
    Ok(ImportFile {
        path,
        msgs,
        dropped,
        changes: ledger.changes(),
    })
}

/// Plan sending a read file into `queue` (found by the caller): refused before anything is
/// sent when a body cannot travel to this broker (its header rules: SQS bodies are text).
pub fn plan_import(
    gate: &Gate,
    queue: QueueInfo,
    file: ImportFile,
    rate: Option<Rate>,
) -> Result<Planned, BackendError> {
    let rules = gate.backend().header_rules();
    if let Some((n, why)) = file
        .msgs
        .iter()
        .find_map(|(n, m)| rules.body_refusal(&m.body).map(|why| (n, why)))
    {
        return Err(BackendError::Invalid(format!(
            "{} line {n}: the body is binary and {why}; nothing was sent",
            file.shown()
        )));
    }
    Ok(Planned::Import { queue, file, rate })
}

/// The plan's sentence: the count, the file, the queue, then what does not travel as it was.
pub(super) fn describe(queue: &QueueInfo, file: &ImportFile) -> String {
    let mut s = format!(
        "send {} message(s) from {} to {}",
        file.msgs.len(),
        file.shown(),
        clean(queue.id.as_str())
    );
    if !file.dropped.is_empty() {
        s.push_str(&format!(
            "; fields the source broker set are left out: {}",
            clean(&file.dropped.join(", "))
        ));
    }
    for c in &file.changes {
        s.push_str(&format!("; {}", clean(&c.line())));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::{run, Verdict};
    use super::*;
    use crate::audit::AuditLog;
    use qdeck_backend::local::{LocalHandle, QueueOptions};
    use qdeck_backend::{Backend, OpProgress};
    use qdeck_model::config::Profile;
    use qdeck_model::domain::BrokerKind;
    use qdeck_model::domain::QueueId;
    use std::sync::Arc;

    /// An import is planned like every mutation: a bad line anywhere refuses the whole file
    /// before one message is sent; a good one plans its exact count with the fields that do
    /// not travel as they were in its notes, and runs through `ops::run` to one verdict.
    #[tokio::test]
    async fn import_is_checked_whole_then_planned_then_run() {
        let dir = tempfile::tempdir().unwrap();
        let b = Arc::new(LocalHandle::open(&dir.path().join("q.db")).unwrap());
        b.0.create_queue("dst", &QueueOptions::default()).unwrap();
        let g = Gate::new(
            b.clone(),
            &Profile::default_local(),
            AuditLog::new(dir.path().join("audit.log")),
        );
        let q = QueueId::new("dst");
        let f = dir.path().join("in.jsonl");
        std::fs::write(&f, "{\"body\":\"one\"}\n{\"body\": oops}\n").unwrap();
        let err =
            read_import_file(&f, qdeck_backend::headers::rules_of(BrokerKind::Local)).unwrap_err();
        let BackendError::Invalid(m) = &err else {
            panic!("{err:?}")
        };
        assert!(
            m.contains("in.jsonl line 2:") && m.ends_with("nothing was sent"),
            "{m}"
        );
        assert_eq!(b.count(&q).await.unwrap().ready, 0);

        let line = "{\"body\":\"two\",\"broker\":\"rabbitmq\",\"properties\":[[\"content_type\",\"text/plain\"]],\"meta\":[[\"redelivered\",true]]}";
        std::fs::write(&f, format!("{{\"body\":\"one\"}}\n\n{line}\n")).unwrap();
        let read =
            read_import_file(&f, qdeck_backend::headers::rules_of(BrokerKind::Local)).unwrap();
        let planned = plan_import(&g, b.describe(&q).await.unwrap(), read, None).unwrap();
        assert_eq!(planned.mutation(), crate::gate::Mutation::Import);
        assert_eq!((planned.count().ready, planned.count().exact), (2, true));
        let text = planned.describe();
        assert!(text.starts_with("send 2 message(s) from "), "{text}");
        assert!(
            text.contains(" to dst; header content_type → x-qdeck-content_type (1 message(s)")
                && text.contains("header redelivered → x-qdeck-redelivered"),
            "{text}"
        );
        let outcome = run(&g, planned, &OpProgress::detached()).await;
        assert_eq!(outcome.verdict(), Verdict::Ok, "{outcome:?}");
        assert_eq!(b.count(&q).await.unwrap().ready, 2);
    }
}
