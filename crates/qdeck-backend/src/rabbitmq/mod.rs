//! RabbitMQ: figures, queue list and consumers from the HTTP management API; browse, send,
//! redrive and purge over AMQP 0-9-1 (lapin).
//!
//! Queue ids: a queue in the profile's vhost (the `vhost` setting, else the AMQP URL's) is
//! its bare name; a queue in another vhost is `vhost/name`.

mod browse;
mod celery_consumers;
mod conn;
mod connection_names;
mod consumers;
mod delete;
mod fallback;
mod figures;
mod headers;
mod matching;
mod mgmt;
mod one_pass;
mod own_gets;
mod pidbox;
mod publish;
mod purge;
mod redrive;
mod shovel;
mod version;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{
    ApiCalls, Backend, BackendError, DeleteById, MessageFilter, OpProgress, Result, Sender,
};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, RabbitmqSettings};
use qdeck_model::domain::*;

use conn::{Creds, Pool};
use figures::{QueueRow, Topology};
use mgmt::{enc, Mgmt};
use version::Version;

pub use headers::parse_dead_letter;

pub async fn connect(
    profile: &Profile,
    settings: &RabbitmqSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RabbitBackend::new(
        &profile.name,
        settings,
        secrets,
    )?))
}

/// Rows older than this are fetched again; younger ones answer `stats` right after
/// `list_queues` without a second round of requests.
const ROWS_FRESH: Duration = Duration::from_millis(1000);

#[derive(Default)]
struct Cache {
    /// id → (vhost, name)
    ids: HashMap<QueueId, (String, String)>,
    topo: Topology,
    rows: Option<(Instant, Arc<Vec<QueueRow>>)>,
    /// Rows of the last filtered listing (matched queues and their DLQs).
    matched: Option<(Instant, Arc<Vec<QueueRow>>)>,
}

pub struct RabbitBackend {
    creds: Creds,
    mgmt: Mgmt,
    pool: Pool,
    calls: Arc<ApiCalls>,
    vhost_filter: Option<String>,
    use_shovel: bool,
    /// Shovel plugin (with its management part): 0 not probed yet, 1 there, 2 missing.
    shovel: AtomicU8,
    cache: Mutex<Cache>,
    /// From `/api/overview`, re-read with every queue listing (brokers get upgraded).
    version: Mutex<Option<Version>>,
    /// The last discovery of Celery workers per vhost (remote control), reused while fresh.
    celery: tokio::sync::Mutex<HashMap<String, (Instant, crate::celery::workers::WorkerReport)>>,
    /// The names clients gave their connections, read once per connection.
    connection_names: connection_names::ConnectionNames,
    /// qdeck's own browses, taken out of OUT/s.
    own_gets: own_gets::OwnGets,
}

/// A discovery of Celery workers younger than this answers again (figures, consumers and the
/// detail of one refresh share one broadcast).
const WORKERS_FRESH: Duration = Duration::from_secs(3);

impl RabbitBackend {
    /// The user qdeck connects as.
    pub(crate) fn user(&self) -> &str {
        &self.creds.username
    }

    pub fn new(
        profile_name: &str,
        settings: &RabbitmqSettings,
        secrets: &dyn SecretSource,
    ) -> Result<RabbitBackend> {
        let creds = Creds::from_settings(profile_name, settings, secrets)?;
        let calls = Arc::new(ApiCalls::default());
        Ok(RabbitBackend {
            mgmt: Mgmt::new(&creds, calls.clone())?,
            pool: Pool::new(creds.clone(), format!("qdeck {profile_name}")),
            vhost_filter: settings.vhost.clone(),
            use_shovel: settings.use_shovel.unwrap_or(true),
            shovel: AtomicU8::new(0),
            creds,
            calls,
            cache: Mutex::new(Cache::default()),
            version: Mutex::new(None),
            celery: tokio::sync::Mutex::new(HashMap::new()),
            connection_names: connection_names::ConnectionNames::default(),
            own_gets: own_gets::OwnGets::default(),
        })
    }

    /// Celery's workers in `vhost`, from a discovery at most `WORKERS_FRESH` old; one
    /// discovery at a time.
    pub async fn celery_report(&self, vhost: &str) -> Result<crate::celery::workers::WorkerReport> {
        let mut cache = self.celery.lock().await;
        if let Some((at, r)) = cache.get(vhost) {
            if at.elapsed() < WORKERS_FRESH {
                return Ok(r.clone());
            }
        }
        let r = pidbox::discover(self, vhost).await?;
        cache.insert(vhost.to_string(), (Instant::now(), r.clone()));
        Ok(r)
    }

    /// The last discovery in `vhost`, when it is at most `HELD_FRESH` old (figures never
    /// broadcast by themselves).
    async fn celery_report_cached(
        &self,
        vhost: &str,
    ) -> Option<crate::celery::workers::WorkerReport> {
        let cache = self.celery.lock().await;
        cache
            .get(vhost)
            .filter(|(at, _)| at.elapsed() < crate::celery::workers::HELD_FRESH)
            .map(|(_, r)| r.clone())
    }

    /// Whether redrive to a chosen queue goes through a shovel: the profile wants it and the
    /// plugin answers. Probed on first use and again with every queue listing.
    pub async fn shovel_in_use(&self) -> bool {
        if !self.use_shovel {
            return false;
        }
        if self.shovel.load(Ordering::Relaxed) == 0 {
            self.probe_shovel().await;
        }
        self.shovel.load(Ordering::Relaxed) == 1
    }

    /// Ask the broker whether the shovel plugin (and its management part) is there now; an
    /// inconclusive answer keeps what was known.
    async fn probe_shovel(&self) {
        if !self.use_shovel {
            return;
        }
        let path = format!("/api/shovels/{}", enc(&self.creds.default_vhost));
        match self.mgmt.send(reqwest::Method::GET, &path, None).await {
            Ok(_) => self.shovel.store(1, Ordering::Relaxed),
            Err(BackendError::NotFound(_)) => self.shovel.store(2, Ordering::Relaxed),
            Err(_) => {}
        }
    }

    /// The broker version: read once, then refreshed by `list_queues`.
    pub async fn broker_version(&self, refresh: bool) -> Option<Version> {
        let known = *self
            .version
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if known.is_some() && !refresh {
            return known;
        }
        let v: Option<serde_json::Value> = self
            .mgmt
            .get("/api/overview?columns=rabbitmq_version,product_version")
            .await
            .ok();
        let read = v.as_ref().and_then(Version::from_overview);
        let mut slot = self
            .version
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if read.is_some() {
            *slot = read;
        }
        *slot
    }

    fn known_version(&self) -> Option<Version> {
        *self
            .version
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Settings as the detail panel shows them, with the delivery limit the broker really
    /// applies (4.x quorum default included).
    fn settings(&self, row: &QueueRow, v: Option<Version>) -> QueueSettings {
        let mut s = figures::settings_of(row);
        if let Some(d) = version::effective_delivery_limit(row, v) {
            s.max_receives = Some(d.limit);
            s.extra.insert("delivery limit".into(), d.describe(v));
        }
        if let Some(v) = v {
            s.extra.insert("broker version".into(), v.to_string());
        }
        s
    }

    /// Queue infos for rows of one listing, with DLQ links in both directions.
    fn linked(&self, rows: &[QueueRow], topo: &Topology, v: Option<Version>) -> Vec<QueueInfo> {
        let mut infos: Vec<QueueInfo> = Vec::with_capacity(rows.len());
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for r in rows {
            index.insert((r.vhost.clone(), r.name.clone()), infos.len());
            infos.push(QueueInfo {
                id: self.id_of(&r.vhost, &r.name),
                kind: r.kind(),
                is_dlq: false,
                dlq: None,
                dlq_sources: Vec::new(),
                settings: self.settings(r, v),
            });
        }
        for (i, r) in rows.iter().enumerate() {
            let targets = figures::resolve_dlq(r, topo);
            let mut first = true;
            for t in &targets {
                let Some(&j) = index.get(&(r.vhost.clone(), t.clone())) else {
                    continue;
                };
                let tid = infos[j].id.clone();
                let src = infos[i].id.clone();
                if first {
                    infos[i].dlq = Some(tid);
                    first = false;
                }
                infos[j].is_dlq = true;
                if !infos[j].dlq_sources.contains(&src) {
                    infos[j].dlq_sources.push(src);
                }
            }
            if targets.len() > 1 {
                infos[i]
                    .settings
                    .extra
                    .insert("dead-letter targets".into(), targets.join(", "));
            }
        }
        infos
    }

    /// Exchanges and bindings of one vhost (for one queue's DLQ links).
    async fn vhost_topology(&self, vhost: &str) -> Topology {
        let ve = enc(vhost);
        let ep = format!("/api/exchanges/{ve}?columns=name,vhost,type");
        let bp = format!(
            "/api/bindings/{ve}?columns=source,vhost,destination,destination_type,routing_key"
        );
        let (ex, b) = tokio::join!(
            self.mgmt.get::<Vec<figures::ExchangeRow>>(&ep),
            self.mgmt.get::<Vec<figures::BindingRow>>(&bp)
        );
        // Without the bindings (permissions), default-exchange links still resolve.
        Topology::new(ex.unwrap_or_default(), b.unwrap_or_default())
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn id_of(&self, vhost: &str, name: &str) -> QueueId {
        if vhost == self.creds.default_vhost {
            QueueId::new(name)
        } else {
            QueueId::new(format!("{vhost}/{name}"))
        }
    }

    /// (vhost, name) of a queue id: from the last listing, else a name in the default vhost.
    pub fn resolve(&self, id: &QueueId) -> (String, String) {
        if let Some(v) = self.cache().ids.get(id) {
            return v.clone();
        }
        (self.creds.default_vhost.clone(), id.0.clone())
    }

    fn queues_path(&self) -> String {
        match &self.vhost_filter {
            Some(v) => format!("/api/queues/{}", enc(v)),
            None => "/api/queues".to_string(),
        }
    }

    /// All queue rows, one request per page of 500.
    async fn rows(&self, allow_cached: bool) -> Result<Arc<Vec<QueueRow>>> {
        if allow_cached {
            if let Some((at, rows)) = &self.cache().rows {
                if at.elapsed() < ROWS_FRESH {
                    return Ok(rows.clone());
                }
            }
        }
        let q = format!("columns={}", figures::QUEUE_COLUMNS);
        let rows: Vec<QueueRow> = match self.mgmt.get_all_pages(&self.queues_path(), &q).await {
            Err(BackendError::NotFound(_)) => {
                return Err(BackendError::NotFound(format!(
                    "vhost '{}' does not exist",
                    self.vhost_filter.as_deref().unwrap_or("/")
                )))
            }
            other => other?,
        };
        let rows = Arc::new(rows);
        let mut c = self.cache();
        for r in rows.iter() {
            let id = self.id_of(&r.vhost, &r.name);
            c.ids.insert(id, (r.vhost.clone(), r.name.clone()));
        }
        c.rows = Some((Instant::now(), rows.clone()));
        Ok(rows)
    }

    /// The rows of a filtered listing made just now, when they hold every queue asked for
    /// (`ls PATTERN` then asks only for those).
    fn matched_rows_for(&self, queues: &[QueueId]) -> Option<Arc<Vec<QueueRow>>> {
        let rows = {
            let c = self.cache();
            match &c.matched {
                Some((at, rows)) if at.elapsed() < ROWS_FRESH => rows.clone(),
                _ => return None,
            }
        };
        let keys: HashSet<(&str, &str)> = rows
            .iter()
            .map(|r| (r.vhost.as_str(), r.name.as_str()))
            .collect();
        queues
            .iter()
            .all(|id| {
                let (v, n) = self.resolve(id);
                keys.contains(&(v.as_str(), n.as_str()))
            })
            .then(|| rows.clone())
    }

    async fn topology(&self) -> Result<Topology> {
        let (ep, bp) = match &self.vhost_filter {
            Some(v) => (
                format!("/api/exchanges/{}", enc(v)),
                format!("/api/bindings/{}", enc(v)),
            ),
            None => ("/api/exchanges".to_string(), "/api/bindings".to_string()),
        };
        let ep = format!("{ep}?columns=name,vhost,type");
        let bp = format!("{bp}?columns=source,vhost,destination,destination_type,routing_key");
        let ex_fut = self.mgmt.get::<Vec<figures::ExchangeRow>>(&ep);
        let b_fut = self.mgmt.get::<Vec<figures::BindingRow>>(&bp);
        let (ex, b) = tokio::join!(ex_fut, b_fut);
        Ok(Topology::new(ex?, b?))
    }

    /// (message_bytes_ready, messages_ready) of one queue, when the management API says.
    pub async fn queue_bytes(&self, id: &QueueId) -> Option<(u64, u64)> {
        let (vhost, name) = self.resolve(id);
        let path = format!(
            "/api/queues/{}/{}?columns=message_bytes_ready,messages_ready",
            enc(&vhost),
            enc(&name)
        );
        let v: serde_json::Value = self.mgmt.get(&path).await.ok()?;
        Some((
            v.get("message_bytes_ready")?.as_u64()?,
            v.get("messages_ready")?.as_u64()?,
        ))
    }

    /// The queue's row from a fresh listing, or NotFound.
    async fn queue_row(&self, id: &QueueId) -> Result<QueueRow> {
        let (vhost, name) = self.resolve(id);
        let path = format!(
            "/api/queues/{}/{}?columns={}",
            enc(&vhost),
            enc(&name),
            figures::QUEUE_COLUMNS
        );
        match self.mgmt.get::<QueueRow>(&path).await {
            Err(BackendError::NotFound(_)) => Err(BackendError::NotFound(format!(
                "queue '{id}' not found in vhost '{vhost}'"
            ))),
            other => other,
        }
    }
}

#[async_trait]
impl Backend for RabbitBackend {
    fn sender(&self) -> Option<&dyn Sender> {
        Some(self)
    }

    fn kind(&self) -> BrokerKind {
        BrokerKind::Rabbitmq
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::SideEffect(
                "messages are fetched with basic.get and returned with nack+requeue: each browsed message gets the redelivered flag, and on quorum queues its delivery count goes up by one (browsing is refused on quorum queues with a delivery limit unless forced)".into(),
            ),
            redrive: if self.use_shovel && self.shovel.load(Ordering::Relaxed) == 1 {
                RedriveMode::Native(
                    "shovel (server-side move) to a chosen queue; to-origin redrive is client-side with publisher confirms".into(),
                )
            } else {
                RedriveMode::ClientSide
            },
            age: AgeSource::Metric(
                "from the head message's timestamp property (set by publishers, 1 s resolution; classic queues only), in management stats up to 5 s old".into(),
            ),
            consumers: ConsumerListing::Listed,
            purge_cooldown_secs: None,
            purge_note: Some(
                "unacknowledged messages (held by consumers) are not purged".into(),
            ),
            broker_rates: true,
            notes: vec![
                "figures come from the management API, which refreshes them every 5 s by default".into(),
                "age of oldest comes from the head message's timestamp property: only classic queues report it, and only when publishers set it".into(),
                "redrive to origin publishes each message to its x-first-death-queue through the default exchange, with publisher confirms; the DLQ copy is acknowledged only after the confirm".into(),
                "deleting chosen messages (purge --where, edit) reads the queue with basic.get and requeues the others after the pass: they get the redelivered flag and, on classic queues, go to the back; refused on quorum queues with a delivery limit".into(),
                "Celery's failed tasks on RabbitMQ: a task queue with a dead-letter exchange (an x-dead-letter-exchange argument or policy; Celery rejects into it with task_acks_late and task_reject_on_worker_lost) has its DLQ as the Celery DLQ, browsed and redriven as any RabbitMQ DLQ with each task decoded; results in a result backend are not read over AMQP".into(),
                "Celery workers (where their mailboxes `<hostname>.celery.pidbox` are consumed) are asked through Celery's own remote control, as `celery inspect` and Flower do: one broadcast of the read-only commands stats, active, reserved, scheduled and active_queues on the celery.pidbox exchange, answered within 1.5 s; each shows on its AMQP consumer with its pool, prefetch and tasks; in flight adds the tasks they run that were acknowledged when they started, when they were asked in the last 10 s".into(),
            ],
        }
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        // The shovel plugin may have been enabled or disabled since the last listing.
        let (rows, topo, _, v) = tokio::join!(
            self.rows(false),
            self.topology(),
            self.probe_shovel(),
            self.broker_version(true)
        );
        let rows = rows?;
        // A missing bindings listing (permissions) still leaves default-exchange links.
        let topo = topo.unwrap_or_default();
        let infos = self.linked(&rows, &topo, v);
        self.cache().topo = topo;
        Ok(infos)
    }

    /// One queue by `GET /api/queues/VHOST/NAME`; its DLQ links need the dead-letter settings
    /// of its vhost's queues (a light listing of one vhost: no figures) and the vhost's
    /// exchanges and bindings.
    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        let (vhost, name) = self.resolve(queue);
        let peers_path = format!("/api/queues/{}", enc(&vhost));
        let (row, peers, topo, v) = tokio::join!(
            self.queue_row(queue),
            self.mgmt.get_all_pages::<QueueRow>(
                &peers_path,
                "columns=name,vhost,type,arguments,effective_policy_definition"
            ),
            self.vhost_topology(&vhost),
            self.broker_version(false)
        );
        let row = row?;
        let mut rows: Vec<QueueRow> = peers
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.name != name)
            .collect();
        rows.push(row);
        {
            let mut c = self.cache();
            for r in &rows {
                c.ids.insert(
                    self.id_of(&r.vhost, &r.name),
                    (r.vhost.clone(), r.name.clone()),
                );
            }
        }
        self.linked(&rows, &topo, v)
            .into_iter()
            .find(|i| i.id == self.id_of(&vhost, &name))
            .ok_or_else(|| BackendError::NotFound(format!("queue '{queue}' not found")))
    }

    /// A passive declare: the broker's own count now (ready messages only; AMQP does not
    /// say how many are unacknowledged), not the management API's figures that lag ~5 s.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        let (vhost, name) = self.resolve(queue);
        let ch = self.pool.channel(&vhost).await?;
        self.calls.bump("amqp:queue.declare");
        let q = redrive::declare_passive(&ch, &name, queue).await;
        let _ = ch.close(200, "ok".into()).await;
        let q = q?;
        Ok(MessageCount {
            ready: q.message_count() as u64,
            in_flight: None,
            exact: true,
        })
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut c = self.capabilities();
        let v = self.known_version();
        c.browse = match queue.kind {
            QueueKind::Stream => BrowseEffect::Unsupported(
                "streams are read with a stream consumer and an offset, which qdeck does not do".into(),
            ),
            QueueKind::Quorum => match queue.settings.max_receives {
                Some(limit) if v.is_none_or(Version::nack_counts_delivery) => BrowseEffect::SideEffect(format!(
                    "each browsed message is returned with nack+requeue, which adds one to its delivery count on this broker; the queue dead-letters or drops a message at delivery limit {}: browsing is refused unless forced",
                    queue.settings.extra.get("delivery limit").cloned().unwrap_or_else(|| limit.to_string())
                )),
                Some(limit) => BrowseEffect::SideEffect(format!(
                    "each browsed message is returned with nack+requeue and gets the redelivered flag; on RabbitMQ 4.3+ this does not count toward the delivery limit ({limit})"
                )),
                None => BrowseEffect::SideEffect(
                    "each browsed message is returned with nack+requeue: it gets the redelivered flag and its delivery count goes up by one (no delivery limit on this queue)".into(),
                ),
            },
            _ => BrowseEffect::SideEffect(
                "each browsed message is returned with nack+requeue: it gets the redelivered flag".into(),
            ),
        };
        c
    }

    async fn list_queues_matching(&self, filter: &crate::QueueFilter) -> Result<Vec<QueueInfo>> {
        self.list_matching(filter).await
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let matched = self.matched_rows_for(queues);
        let rows = match matched {
            Some(r) => Ok(r),
            None => self.rows(true).await,
        };
        let rows = match rows {
            Ok(r) => r,
            // Management API down: ready count and consumers still come over AMQP.
            Err(e @ BackendError::Unreachable(_)) => {
                return fallback::amqp_stats(self, queues).await.map_err(|_| e);
            }
            Err(e) => return Err(e),
        };
        let at = now_ms();
        let topo = self.cache().topo.clone();
        let mut by_key: HashMap<(&str, &str), &QueueRow> = HashMap::with_capacity(rows.len());
        for r in rows.iter() {
            by_key.insert((r.vhost.as_str(), r.name.as_str()), r);
        }
        let mut batch = StatsBatch::default();
        let mut seen = HashSet::new();
        for id in queues {
            if !seen.insert(id) {
                continue;
            }
            let (vhost, name) = self.resolve(id);
            let Some(row) = by_key.get(&(vhost.as_str(), name.as_str())) else {
                batch.errors.push((
                    id.clone(),
                    QueueError::not_found(format!("queue '{id}' not found (deleted?)")),
                ));
                continue;
            };
            let mut s = figures::stats_of(id.clone(), row, at);
            let get_rate = row
                .message_stats
                .as_ref()
                .and_then(|m| m.get_details.as_ref())
                .and_then(|r| r.rate);
            self.own_gets.correct(&mut s, get_rate);
            if let Some(dlq) = figures::resolve_dlq(row, &topo).first() {
                if let Some(d) = by_key.get(&(vhost.as_str(), dlq.as_str())) {
                    s.dlq_depth = d.messages_ready;
                }
            }
            batch.stats.push(s);
        }
        self.add_held_by_workers(&mut batch).await;
        Ok(batch)
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        let (vhost, name) = self.resolve(queue);
        let cpath = format!("/api/consumers/{}", enc(&vhost));
        let chpath = format!(
            "/api/vhosts/{}/channels?columns=name,messages_unacknowledged,consumer_count",
            enc(&vhost)
        );
        let (rows, channels) = tokio::join!(
            self.mgmt.get::<Vec<consumers::ConsumerRow>>(&cpath),
            self.mgmt.get::<Vec<consumers::ChannelRow>>(&chpath)
        );
        // Without the channel listing, what each consumer holds stays unknown.
        let channels = channels.unwrap_or_default();
        let rows = rows?;
        if rows
            .iter()
            .any(|r| crate::celery::workers::host_of_mailbox(&r.queue.name).is_some())
        {
            // Celery workers run in this vhost: they describe themselves. Without their
            // answer the AMQP consumers are still listed.
            if let Ok(report) = self.celery_report(&vhost).await {
                return Ok(celery_consumers::merge(
                    queue, &name, &vhost, &rows, &channels, &report,
                ));
            }
        }
        let rows: Vec<consumers::ConsumerRow> = rows
            .into_iter()
            .filter(|r| {
                r.queue.name == name && (r.queue.vhost.is_empty() || r.queue.vhost == vhost)
            })
            .collect();
        let vhost_path = format!("/api/vhosts/{}", enc(&vhost));
        let names = self
            .connection_names
            .of(&self.mgmt, &vhost_path, &rows)
            .await;
        Ok(rows
            .iter()
            .map(|r| {
                let given = connection_names::connection_of(r).and_then(|c| names.get(&c));
                consumers::to_consumer(queue, r, &channels, given.map(String::as_str))
            })
            .collect())
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        redrive::plan(self, req).await
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        redrive::redrive(self, req, progress).await
    }

    fn filtered_redrive(&self) -> Option<&dyn crate::FilteredRedrive> {
        Some(self)
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        purge::purge(self, queue, progress).await
    }

    fn deleter(&self) -> Option<&dyn DeleteById> {
        Some(self)
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }

    fn celery_remote(&self) -> Option<&dyn crate::CeleryRemote> {
        Some(self)
    }
}

#[async_trait]
impl crate::CeleryRemote for RabbitBackend {
    async fn workers(&self) -> Result<crate::celery::workers::WorkerReport> {
        self.celery_report(&self.creds.default_vhost).await
    }

    async fn control(
        &self,
        req: &crate::celery::workers::Request,
    ) -> Result<crate::celery::workers::WorkerReport> {
        let r = pidbox::control(self, &self.creds.default_vhost, req).await;
        // What the workers hold may have changed: the next look asks again.
        self.celery.lock().await.clear();
        r
    }
}

impl RabbitBackend {
    /// Tasks Celery workers run that they acknowledged when they started are no longer
    /// unacknowledged at the broker: added to the in-flight figure from the workers' own
    /// answers to a recent discovery (consumers, the workers view).
    async fn add_held_by_workers(&self, batch: &mut StatsBatch) {
        let mut vhosts: Vec<String> = batch.stats.iter().map(|s| self.resolve(&s.id).0).collect();
        vhosts.sort();
        vhosts.dedup();
        for vhost in vhosts {
            let Some(report) = self.celery_report_cached(&vhost).await else {
                continue;
            };
            for st in &mut batch.stats {
                let (v, name) = self.resolve(&st.id);
                let held = report.acked_held(&name);
                if v == vhost && held > 0 {
                    st.in_flight = Some(st.in_flight.unwrap_or(0) + held);
                }
            }
        }
    }
}

#[async_trait]
impl Sender for RabbitBackend {
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        publish::send(self, queue, msg).await
    }

    /// One channel, every confirm in flight at once.
    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        publish::send_many(self, queue, msgs).await
    }
}

#[async_trait]
impl DeleteById for RabbitBackend {
    fn delete_note(&self, _queue: &QueueInfo) -> Option<String> {
        Some(
            "deleting reads the queue until the chosen messages are found; every other message \
             read is held and then returned with the redelivered flag (classic queues: at the \
             back of the queue)"
                .into(),
        )
    }

    fn delete_refusal(&self, queue: &QueueInfo) -> Option<String> {
        let counts = self
            .known_version()
            .is_none_or(Version::nack_counts_delivery);
        match (queue.kind, queue.settings.max_receives) {
            (QueueKind::Quorum, Some(limit)) if counts => Some(format!(
                "'{}' is a quorum queue with delivery limit {limit}: deleting chosen messages \
                 requeues every other message it passes (delivery count +1): refused",
                queue.id
            )),
            _ => None,
        }
    }

    /// basic.get → ack the chosen ids, hold the rest, nack(requeue) them after the pass:
    /// they come back redelivered (classic queues: at the back). Refused on quorum queues
    /// with a delivery limit.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        delete::delete_ids(self, queue, ids, progress).await
    }
}

#[async_trait]
impl crate::FilteredRedrive for RabbitBackend {
    /// A stream is read by offset, not consumed: it has no one-pass redrive.
    fn reading_effect(&self, queue: &QueueInfo) -> Option<String> {
        (queue.kind != QueueKind::Stream).then(|| one_pass::EFFECT.to_string())
    }

    async fn redrive_matching(
        &self,
        req: &RedriveRequest,
        filter: &MessageFilter,
        progress: &OpProgress,
    ) -> Result<RedriveReport> {
        redrive::redrive_matching(self, req, filter, progress).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::SecretMap;
    use qdeck_model::config::ProfileKind;

    /// The profile as users write it (config.example.toml).
    const EXAMPLE: &str = r#"
[[profiles]]
name = "rabbit-prod"
kind = "rabbitmq"
amqp_url = "amqps://ops@rabbit.internal:5671/orders"
management_url = "https://rabbit.internal:15671"
password_env = "QDECK_UNIT_RABBIT_PASSWORD"
vhost = "orders"
use_shovel = false
protected = true
"#;

    #[test]
    fn example_profile_parses_and_keeps_the_password_out_of_debug() {
        // Straight serde (config::parse_str would also layer QDECK_* variables from the
        // environment, and CI sets QDECK_TEST_* ones).
        #[derive(serde::Deserialize)]
        struct File {
            profiles: Vec<qdeck_model::config::Profile>,
        }
        let cfg: File = toml::from_str(EXAMPLE).expect("example parses");
        let ProfileKind::Rabbitmq(s) = &cfg.profiles[0].kind else {
            panic!("rabbitmq profile")
        };
        let secrets = SecretMap::new().with("QDECK_UNIT_RABBIT_PASSWORD", "s3cr3t-unit");
        let creds = Creds::from_settings("unit", s, &secrets).expect("creds");
        assert_eq!(creds.password.expose(), "s3cr3t-unit");
        assert_eq!(creds.uri.authority.userinfo.password, "", "only at connect");
        assert_eq!(creds.username, "ops");
        assert_eq!(creds.default_vhost, "orders");
        assert_eq!(creds.mgmt_base, "https://rabbit.internal:15671");
        assert!(!format!("{creds:?}").contains("s3cr3t"));
        let b = RabbitBackend::new("unit", s, &secrets).expect("backend");
        assert_eq!(b.id_of("orders", "q1"), QueueId::new("q1"));
        assert_eq!(b.id_of("other", "q1"), QueueId::new("other/q1"));
        assert_eq!(
            b.resolve(&QueueId::new("q1")),
            ("orders".into(), "q1".into())
        );
    }

    #[test]
    fn management_url_defaults_from_the_amqp_host() {
        let s = RabbitmqSettings {
            amqp_url: Some("amqp://guest@10.0.0.5:5672/%2f".into()),
            ..Default::default()
        };
        let none = SecretMap::new();
        let c = Creds::from_settings("unit", &s, &none).expect("creds");
        assert_eq!(c.mgmt_base, "http://10.0.0.5:15672");
        assert_eq!(c.default_vhost, "/");
        let bad = RabbitmqSettings {
            amqp_url: Some("amqp://u:pw-in-url@host:notaport/".into()),
            ..Default::default()
        };
        let err = Creds::from_settings("unit", &bad, &none)
            .expect_err("bad url")
            .to_string();
        assert!(!err.contains("pw-in-url"), "{err}");
        let from_env = RabbitmqSettings {
            amqp_url_env: Some("QDECK_UNIT_AMQP_URL".into()),
            ..Default::default()
        };
        let err = Creds::from_settings("unit", &from_env, &none)
            .expect_err("unset")
            .to_string();
        assert_eq!(
            err,
            "invalid input: profile 'unit': environment variable QDECK_UNIT_AMQP_URL \
             (named by amqp_url_env) is not set"
        );
        let bad_env = SecretMap::new().with("QDECK_UNIT_AMQP_URL", "amqp://u:pw-in-env@host:x/");
        let err = Creds::from_settings("unit", &from_env, &bad_env)
            .expect_err("bad url")
            .to_string();
        assert!(
            err.contains("QDECK_UNIT_AMQP_URL") && !err.contains("pw-in-env"),
            "{err}"
        );
        let c = Creds::from_settings(
            "unit",
            &from_env,
            &SecretMap::new().with("QDECK_UNIT_AMQP_URL", "amqp://u:pw-in-env@host:5672/vh"),
        )
        .expect("creds");
        assert_eq!(c.password.expose(), "pw-in-env");
        assert_eq!(c.uri.authority.userinfo.password, "");
    }
}
