//! The embedded local broker: real queues in one SQLite file (WAL), safe for several OS
//! processes at once. Leases (visibility timeouts), acknowledgements, redelivery on lease
//! expiry, dead-lettering after `max_receives`, delayed messages, per-key policies
//! (`parallel | exclusive | ordered`), purge and redrive.
//!
//! The blocking API (`receive`, `ack`, …) is what workers and the demo use; the `Backend`
//! impl runs the same code on tokio's blocking pool.

mod admin;
mod browse;
mod busy;
mod delete;
mod redrive;
mod schema;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::Connection;

pub use worker::Leased;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result, Sender};
use qdeck_model::domain::*;

/// How messages sharing a key may run (see the ordering seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyPolicy {
    /// Same-key messages may overlap.
    #[default]
    Parallel,
    /// One message per key in flight at a time; order not kept.
    Exclusive,
    /// Same-key messages in id order, through retries, until each succeeds or goes dead.
    Ordered,
}

impl KeyPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyPolicy::Parallel => "parallel",
            KeyPolicy::Exclusive => "exclusive",
            KeyPolicy::Ordered => "ordered",
        }
    }
}

impl std::str::FromStr for KeyPolicy {
    type Err = BackendError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "parallel" => Ok(KeyPolicy::Parallel),
            "exclusive" => Ok(KeyPolicy::Exclusive),
            "ordered" => Ok(KeyPolicy::Ordered),
            other => Err(BackendError::Invalid(format!(
                "key policy {other:?}: expected parallel, exclusive or ordered"
            ))),
        }
    }
}

/// Settings of a local queue.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    pub lease: Duration,
    /// Receives after which a message goes to `dlq`. Needs `dlq`.
    pub max_receives: Option<u32>,
    pub dlq: Option<String>,
    pub key_policy: KeyPolicy,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            lease: Duration::from_secs(30),
            max_receives: None,
            dlq: None,
            key_policy: KeyPolicy::Parallel,
        }
    }
}

pub struct LocalBackend {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    calls: ApiCalls,
    /// How long to wait for another process's lock (see `busy`).
    busy_ms: std::sync::atomic::AtomicU64,
    /// Opened read-only: the note users see.
    read_only: Option<String>,
}

/// Why a read-write open failed.
enum OpenError {
    Sqlite(rusqlite::Error),
    /// The file is not ours to change (another application's, a newer schema).
    Refused(String),
}

impl From<rusqlite::Error> for OpenError {
    fn from(e: rusqlite::Error) -> Self {
        OpenError::Sqlite(e)
    }
}

pub(crate) fn storage_err(path: &Path, e: rusqlite::Error) -> BackendError {
    use rusqlite::ErrorCode;
    let code = e.sqlite_error_code();
    let what = match code {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "database is locked by another process; try again".to_string()
        }
        Some(ErrorCode::NotADatabase) => "file is not a qdeck database (or is corrupt)".to_string(),
        Some(ErrorCode::DatabaseCorrupt) => "database is corrupt".to_string(),
        Some(ErrorCode::ReadOnly) => "database is read-only".to_string(),
        Some(ErrorCode::CannotOpen) => "cannot open the database file".to_string(),
        _ => e.to_string(),
    };
    BackendError::Storage(format!("{}: {what}", path.display()))
}

pub(crate) fn now_ms() -> i64 {
    qdeck_model::domain::now_ms()
}

/// Percent-encode what a SQLite URI filename gives a meaning to.
fn uri_path(path: &Path) -> String {
    let mut out = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '?' | '#' | '%' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Errors after which a file that exists may still be read: qdeck may not write it or its
/// directory (read-only mount, permissions).
fn is_read_only_error(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode;
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied)
    )
}

impl LocalBackend {
    /// Open (creating if needed) the broker file at `path`. A file that already has the
    /// schema is opened without writing anything (no write lock is taken, so this works while
    /// another process holds one). A file qdeck cannot write (read-only directory or mount) is
    /// opened read-only: reads work, changes fail with `Storage`, and `read_only_note` says so.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    BackendError::Storage(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
        }
        match Self::open_writable(path) {
            Ok(conn) => Ok(Self::with(path, conn, None)),
            Err(OpenError::Sqlite(e)) if path.is_file() && is_read_only_error(&e) => {
                Self::open_read_only(path)
            }
            Err(e) => Err(Self::open_err(path, e)),
        }
    }

    /// Open an existing broker file for reading only (`SQLITE_OPEN_READ_ONLY`). When even
    /// that cannot work (WAL needs its `-shm` file and the directory refuses to hold one), the
    /// file is opened as immutable: the last checkpoint is read and later writes still in the
    /// WAL are not seen, so figures may be stale.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        use rusqlite::OpenFlags;
        let ro = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let plain = Connection::open_with_flags(path, ro).and_then(|c| {
            Self::check_readable(&c)?;
            Ok(c)
        });
        let (conn, note) = match plain {
            Ok(c) => (
                c,
                format!(
                    "{} is read-only for qdeck: showing figures, changes refused",
                    path.display()
                ),
            ),
            Err(e) if is_read_only_error(&e) => {
                let c = Connection::open_with_flags(
                    format!("{}?immutable=1", uri_path(path)),
                    ro | OpenFlags::SQLITE_OPEN_URI,
                )
                .map_err(|e| storage_err(path, e))?;
                Self::check_readable(&c).map_err(|e| storage_err(path, e))?;
                (
                    c,
                    format!(
                        "{} opened read-only from its last checkpoint (its directory is not                          writable): figures may be stale, changes refused",
                        path.display()
                    ),
                )
            }
            Err(e) => return Err(storage_err(path, e)),
        };
        if let Some(why) = schema::refuse_reason(&conn).map_err(|e| storage_err(path, e))? {
            return Err(BackendError::Storage(format!("{}: {why}", path.display())));
        }
        tracing::warn!("{note}");
        Ok(Self::with(path, conn, Some(note)))
    }

    /// A first read: in WAL mode this is where a missing `-shm` shows.
    fn check_readable(conn: &Connection) -> rusqlite::Result<()> {
        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|_| ())
    }

    /// Open read-write; write the schema only when the file lacks it.
    fn open_writable(path: &Path) -> std::result::Result<Connection, OpenError> {
        let mut conn = Connection::open(path)?;
        conn.busy_handler(Some(busy::wait))?;
        if let Some(why) = schema::refuse_reason(&conn)? {
            return Err(OpenError::Refused(why));
        }
        schema::configure(&conn)?;
        if !schema::is_current(&conn)? {
            schema::init(&conn)?;
        }
        Ok(conn)
    }

    fn open_err(path: &Path, e: OpenError) -> BackendError {
        match e {
            OpenError::Sqlite(e) => storage_err(path, e),
            OpenError::Refused(why) => BackendError::Storage(format!("{}: {why}", path.display())),
        }
    }

    fn with(path: &Path, conn: Connection, read_only: Option<String>) -> Self {
        LocalBackend {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
            calls: ApiCalls::default(),
            busy_ms: std::sync::atomic::AtomicU64::new(busy::DEFAULT_TIMEOUT_MS),
            read_only,
        }
    }

    /// Set when the file was opened read-only: why, and whether figures may be stale.
    pub fn read_only_note(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// How long a call waits for another process's write lock before it fails with
    /// `BackendError::Storage` ("database is locked"). Default 10 s.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        self.busy_ms.store(
            timeout.as_millis().min(u64::MAX as u128) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        let guard = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The busy handler runs on this thread while the guard is held.
        busy::set_timeout_ms(self.busy_ms.load(std::sync::atomic::Ordering::Relaxed));
        guard
    }

    fn err(&self, e: rusqlite::Error) -> BackendError {
        storage_err(&self.path, e)
    }

    /// Run blocking database work off the async runtime.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&LocalBackend) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || f(&me))
            .await
            .map_err(|e| BackendError::Other(format!("local broker task failed: {e}")))?
    }
}

/// `Backend` is implemented on `Arc<LocalBackend>` so blocking work can move to the pool.
pub struct LocalHandle(pub Arc<LocalBackend>);

impl LocalHandle {
    pub fn open(path: &Path) -> Result<Self> {
        Ok(LocalHandle(Arc::new(LocalBackend::open(path)?)))
    }
}

pub fn capabilities() -> Capabilities {
    Capabilities {
        browse: BrowseEffect::None,
        redrive: RedriveMode::ClientSide,
        age: AgeSource::Exact,
        consumers: ConsumerListing::Leases,
        purge_cooldown_secs: None,
        purge_note: Some("in-flight messages are purged too; their acks will fail".to_string()),
        broker_rates: false,
        notes: vec![
            "rates come from the broker's enqueued/completed counters".to_string(),
            "redrive copies and deletes in one transaction per batch: nothing lost or duplicated"
                .to_string(),
            "redrive moves only what the DLQ held when it started: messages that dead-letter \
             again during the run stay for the next one"
                .to_string(),
        ],
    }
}

#[async_trait]
impl Backend for LocalHandle {
    fn sender(&self) -> Option<&dyn Sender> {
        Some(self)
    }

    fn kind(&self) -> BrokerKind {
        BrokerKind::Local
    }

    fn capabilities(&self) -> Capabilities {
        let mut c = capabilities();
        if let Some(n) = self.0.read_only_note() {
            c.notes.insert(0, n.to_string());
        }
        c
    }

    /// The queue's key policy decides what "in flight" and ordering mean for it.
    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut c = self.capabilities();
        let policy = queue.settings.key_policy.as_deref().unwrap_or("parallel");
        c.notes.push(match policy {
            "exclusive" => "key policy exclusive: one message per key in flight; same-key \
                            order is not kept, so redriven messages may run out of order"
                .to_string(),
            "ordered" => "key policy ordered: same-key messages run in id order; redriven \
                          messages get new ids and run after those already queued for their key"
                .to_string(),
            _ => "key policy parallel: same-key messages may run at once".to_string(),
        });
        c
    }

    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        self.0.calls.bump("local:describe");
        let q = queue.clone();
        self.0.blocking(move |b| b.describe_sync(&q)).await
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        self.0.calls.bump("local:list_queues");
        self.0.blocking(LocalBackend::list_queues_sync).await
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        self.0.calls.bump("local:stats");
        let q = queues.to_vec();
        self.0.blocking(move |b| b.stats_sync(&q)).await
    }

    /// SQLite's figures are the queue itself: exact.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        let batch = self.stats(std::slice::from_ref(queue)).await?;
        if let Some((q, e)) = batch.errors.into_iter().next() {
            return Err(BackendError::from(e).context(q));
        }
        let st = batch.stats.into_iter().next();
        Ok(MessageCount {
            ready: st.as_ref().and_then(|s| s.depth).unwrap_or(0),
            in_flight: st.as_ref().and_then(|s| s.in_flight),
            exact: true,
        })
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        self.0.calls.bump("local:consumers");
        let q = queue.clone();
        self.0.blocking(move |b| b.consumers_sync(&q)).await
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        self.0.calls.bump("local:browse");
        let (q, r) = (queue.clone(), req.clone());
        let mut page = self.0.blocking(move |b| b.browse_sync(&q, &r)).await?;
        if let Some(n) = self.0.read_only_note() {
            page.effect_note.get_or_insert_with(|| n.to_string());
        }
        Ok(page)
    }

    fn scheduled(&self) -> Option<&dyn crate::ScheduledListing> {
        Some(self)
    }

    fn queue_creation(&self) -> Option<&dyn crate::QueueCreation> {
        Some(self)
    }

    /// The same checks the real run makes (`redrive_plan`), so a dry run cannot disagree.
    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        let r = req.clone();
        let total = self.0.blocking(move |b| b.redrive_plan(&r)).await?;
        let ready = match &req.only_ids {
            Some(ids) => total.min(ids.len() as u64),
            None => total,
        };
        Ok(RedrivePlan {
            count: MessageCount {
                ready: req.max.map_or(ready, |m| ready.min(m)),
                in_flight: None,
                exact: true,
            },
            mode: RedriveMode::ClientSide,
            notes: Vec::new(),
        })
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        self.0.calls.bump("local:redrive");
        redrive::run(self.0.clone(), req.clone(), progress.clone()).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        self.0.calls.bump("local:purge");
        let q = queue.clone();
        let n = self.0.blocking(move |b| b.purge_sync(q.as_str())).await?;
        progress.add_done(n);
        Ok(PurgeReport {
            purged: Some(n),
            note: None,
        })
    }

    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.0.calls
    }
}

#[async_trait]
impl crate::QueueCreation for LocalHandle {
    async fn create_queue(&self, name: &str, opts: &QueueOptions) -> Result<()> {
        self.0.calls.bump("local:create_queue");
        let (name, opts) = (name.to_string(), opts.clone());
        self.0.blocking(move |b| b.create_queue(&name, &opts)).await
    }
}

#[async_trait]
impl crate::ScheduledListing for LocalHandle {
    async fn browse_scheduled(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        self.0.calls.bump("local:browse_scheduled");
        let (q, r) = (queue.clone(), req.clone());
        self.0
            .blocking(move |b| b.browse_scheduled_sync(&q, &r))
            .await
    }

    async fn cancel_scheduled(
        &self,
        queue: &QueueId,
        id: &str,
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        crate::cancel_by_delete(self, queue, id, progress).await
    }
}

#[async_trait]
impl Sender for LocalHandle {
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        self.0.calls.bump("local:send");
        let q = queue.clone();
        self.0
            .blocking(move |b| b.send_sync(q.as_str(), &msg).map(|id| Some(id.to_string())))
            .await
    }

    /// One transaction: all are sent or none.
    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        self.0.calls.bump("local:send");
        let q = queue.clone();
        match self
            .0
            .blocking(move |b| b.send_ids(q.as_str(), &msgs))
            .await
        {
            Ok(ids) => ids.into_iter().map(|id| Ok(Some(id.to_string()))).collect(),
            Err(e) => vec![Err(e)],
        }
    }
}

#[async_trait]
impl DeleteById for LocalHandle {
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        self.0.calls.bump("local:delete_ids");
        delete::run(
            self.0.clone(),
            queue.clone(),
            ids.to_vec(),
            progress.clone(),
        )
        .await
    }
}
