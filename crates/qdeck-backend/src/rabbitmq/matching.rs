//! `ls PATTERN` on RabbitMQ: the management API filters `/api/queues` by name
//! (`name=…&use_regex=true`), so a big vhost is never fetched whole for a few queues.
//!
//! The broker sees queue names, qdeck's pattern matches queue ids (`vhost/name` outside the
//! default vhost), so the filter is pushed down only where the two are the same: a profile
//! pinned to one vhost, or a broker whose only visible vhost is the default one. The pattern
//! is applied again here either way (RabbitMQ matches case-insensitively).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use serde::Deserialize;

use super::figures::{self, QueueRow};
use super::mgmt::enc;
use super::RabbitBackend;
use crate::filter::{escape, QueueFilter};
use crate::{BackendError, Result};
use qdeck_model::domain::QueueInfo;

/// DLQ names asked for in one request (`^(a|b|…)$`); keeps the URL short.
const NAMES_PER_REQUEST: usize = 50;

#[derive(Deserialize)]
struct VhostRow {
    name: String,
}

impl RabbitBackend {
    /// The regex the broker gets, or None when only a client-side filter is correct.
    async fn pushdown(&self, filter: &QueueFilter) -> Option<String> {
        let expr = filter
            .portable_regex()
            .map(str::to_string)
            .or_else(|| filter.literal_prefix().map(|p| format!("^{}", escape(&p))))?;
        if self.vhost_filter.is_some() {
            return Some(expr);
        }
        let vhosts: Vec<VhostRow> = self.mgmt.get("/api/vhosts?columns=name").await.ok()?;
        vhosts
            .iter()
            .all(|v| v.name == self.creds.default_vhost)
            .then_some(expr)
    }

    async fn rows_named(&self, query: &str) -> Result<Vec<QueueRow>> {
        let q = format!(
            "columns={}&use_regex=true&name={}",
            figures::QUEUE_COLUMNS,
            enc(query)
        );
        match self.mgmt.get_all_pages(&self.queues_path(), &q).await {
            Err(BackendError::NotFound(_)) => Err(BackendError::NotFound(format!(
                "vhost '{}' does not exist",
                self.vhost_filter.as_deref().unwrap_or("/")
            ))),
            other => other,
        }
    }

    /// Matching queues with DLQ links and figures; the rows (matched queues and the DLQs they
    /// name) stay cached for the `stats` call that follows.
    pub(super) async fn list_matching(&self, filter: &QueueFilter) -> Result<Vec<QueueInfo>> {
        let Some(expr) = self.pushdown(filter).await else {
            return Ok(crate::filter_client_side(
                crate::Backend::list_queues(self).await?,
                filter,
            ));
        };
        let (rows, topo, _, v) = tokio::join!(
            self.rows_named(&expr),
            self.topology(),
            self.probe_shovel(),
            self.broker_version(true)
        );
        let mut rows = rows?;
        let topo = topo.unwrap_or_default();
        rows.retain(|r| filter.matches(self.id_of(&r.vhost, &r.name).as_str()));
        // The DLQs of matched queues: their depth is a column of the source's row.
        let have: HashSet<(String, String)> = rows
            .iter()
            .map(|r| (r.vhost.clone(), r.name.clone()))
            .collect();
        let have_names: HashSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let missing: BTreeSet<String> = rows
            .iter()
            .flat_map(|r| figures::resolve_dlq(r, &topo))
            .filter(|d| !have_names.contains(d.as_str()))
            .collect();
        let missing: Vec<String> = missing.into_iter().collect();
        let queries: Vec<String> = missing
            .chunks(NAMES_PER_REQUEST)
            .map(|chunk| {
                let names: Vec<String> = chunk.iter().map(|n| escape(n)).collect();
                format!("^({})$", names.join("|"))
            })
            .collect();
        let extra: Vec<Result<Vec<QueueRow>>> = futures::stream::iter(queries)
            .map(|q| async move { self.rows_named(&q).await })
            .buffered(4)
            .collect()
            .await;
        for e in extra {
            // A DLQ that cannot be read leaves its source without a DLQ depth, nothing worse.
            rows.extend(e.unwrap_or_default().into_iter().filter(|r| {
                !have.contains(&(r.vhost.clone(), r.name.clone())) && missing.contains(&r.name)
            }));
        }
        let infos: Vec<QueueInfo> = self
            .linked(&rows, &topo, v)
            .into_iter()
            .filter(|i| filter.matches(i.id.as_str()))
            .collect();
        let rows = Arc::new(rows);
        let mut c = self.cache();
        for r in rows.iter() {
            let id = self.id_of(&r.vhost, &r.name);
            c.ids.insert(id, (r.vhost.clone(), r.name.clone()));
        }
        c.matched = Some((Instant::now(), rows));
        c.topo = topo;
        Ok(infos)
    }
}
