//! The two narrow purges of NATS JetStream: `purge STREAM --subject FILTER` (the server's
//! `STREAM.PURGE` with a filter) and `purge QUEUE --seq 4,9` (delete by stream sequence).
//! Both need access = "full", ask for confirmation with the count and are audited, through
//! the same plan → confirm → run as every purge.

use serde_json::json;

use super::args::Format;
use super::cmd_mutate::run_planned;
use super::exit::{CliError, CliResult};
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops;
use qdeck_engine::session::Session;
use qdeck_model::domain::{BrokerKind, QueueId};

pub async fn purge_subject(
    s: &Session,
    queue: &str,
    subject: &str,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let id = QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Purge, &id)?;
    }
    let planned = ops::plan_purge_subject(&s.gate, &id, subject).await?;
    run_planned(s, planned, dry_run, yes, f, "nothing on those subjects").await
}

pub async fn delete_seqs(
    s: &Session,
    queue: &str,
    seqs: &[u64],
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    // `--seq` is a JetStream stream sequence, a NATS notion with no equivalent elsewhere; the
    // check names the flag's broker rather than a facet because the flag is NATS's own.
    if s.backend.kind() != BrokerKind::Nats {
        return Err(CliError::usage(
            "--seq deletes by stream sequence on NATS JetStream; elsewhere use purge --where 'id = \"…\"'",
        ));
    }
    let id = QueueId::new(queue);
    if !dry_run {
        s.gate.require(Mutation::Delete, &id)?;
    }
    let ids: Vec<String> = seqs.iter().map(u64::to_string).collect();
    let planned = ops::plan_delete(&s.gate, &id, ids, json!({"seqs": seqs})).await?;
    run_planned(s, planned, dry_run, yes, f, "nothing to delete").await
}
