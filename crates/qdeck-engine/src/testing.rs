//! A local broker with scripted answers, for the outcomes a real broker gives only under
//! faults (a redrive that moved nothing, a deletion that failed or found every message leased),
//! so the verdict of each can be checked end to end through the gate.

use std::sync::Arc;

use async_trait::async_trait;

use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_backend::{
    ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result, ScheduledListing, Sender,
};
use qdeck_model::domain::*;

pub(crate) struct Scripted {
    pub inner: Arc<LocalHandle>,
    /// What `redrive` answers; `None`: the local broker's own redrive.
    pub redrive: Option<RedriveReport>,
    /// What `delete_ids` answers; `None`: it fails, as a broker gone mid-way would.
    pub delete: Option<DeleteReport>,
    /// `redrive` moves this many, then loses the broker (before `redrive` is consulted).
    pub redrive_fails_after: Option<u64>,
}

impl Scripted {
    /// A local broker in `dir` with queues `src` and `dst`.
    pub fn open(dir: &std::path::Path) -> Scripted {
        let inner = Arc::new(LocalHandle::open(&dir.join("q.db")).unwrap());
        for q in ["src", "dst"] {
            inner.0.create_queue(q, &QueueOptions::default()).unwrap();
        }
        Scripted {
            inner,
            redrive: None,
            delete: None,
            redrive_fails_after: None,
        }
    }
}

#[async_trait]
impl Backend for Scripted {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Local
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        self.inner.list_queues().await
    }
    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        self.inner.stats(queues).await
    }
    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        self.inner.consumers(queue).await
    }
    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        self.inner.browse(queue, req).await
    }
    fn scheduled(&self) -> Option<&dyn ScheduledListing> {
        Some(self)
    }
    fn sender(&self) -> Option<&dyn Sender> {
        self.inner.sender()
    }
    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        if let Some(n) = self.redrive_fails_after {
            progress.add_done(n);
            return Err(BackendError::Unreachable(
                "connection lost (scripted)".into(),
            ));
        }
        match &self.redrive {
            Some(r) => Ok(r.clone()),
            None => self.inner.redrive(req, progress).await,
        }
    }
    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        self.inner.purge(queue, progress).await
    }
    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }
    fn api_calls(&self) -> &ApiCalls {
        self.inner.api_calls()
    }
}

#[async_trait]
impl DeleteById for Scripted {
    async fn delete_ids(
        &self,
        _queue: &QueueId,
        _ids: &[String],
        _progress: &OpProgress,
    ) -> Result<DeleteReport> {
        self.delete
            .clone()
            .ok_or_else(|| BackendError::Unreachable("connection lost (scripted)".into()))
    }
}

/// The local broker's listing; a cancel is the scripted deletion, as a delete by id is.
#[async_trait]
impl ScheduledListing for Scripted {
    async fn browse_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        match self.inner.scheduled() {
            Some(s) => s.browse_scheduled(queue, req).await,
            None => Err(BackendError::Unsupported("no scheduled listing".into())),
        }
    }

    async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        qdeck_backend::cancel_by_delete(self, queue, id, progress).await
    }
}
