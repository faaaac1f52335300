//! RabbitMQ: figures, queue list and consumers from the HTTP management API; browse, send,
//! redrive and purge over AMQP 0-9-1 (lapin).
//!
//! Queue ids: a queue in the profile's vhost (the `vhost` setting, else the AMQP URL's) is
//! its bare name; a queue in another vhost is `vhost/name`.

mod browse;
mod conn;
mod consumers;
mod fallback;
mod figures;
mod headers;
mod mgmt;
mod purge;
mod redrive;
mod shovel;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, OpProgress, Result};
use crate::config::{Profile, RabbitmqSettings};
use crate::domain::*;

use conn::{Creds, Pool};
use figures::{QueueRow, Topology};
use mgmt::{enc, Mgmt};

pub use headers::parse_dead_letter;

pub async fn connect(profile: &Profile, settings: &RabbitmqSettings) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(RabbitBackend::new(&profile.name, settings)?))
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
}

impl RabbitBackend {
    pub fn new(profile_name: &str, settings: &RabbitmqSettings) -> Result<RabbitBackend> {
        let creds = Creds::from_settings(settings)?;
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
        })
    }

    /// Whether redrive to a chosen queue goes through a shovel: the profile wants it and the
    /// plugin answers. Probed once, on the first listing or redrive.
    pub async fn shovel_in_use(&self) -> bool {
        if !self.use_shovel {
            return false;
        }
        if self.shovel.load(Ordering::Relaxed) == 0 {
            let path = format!("/api/shovels/{}", enc(&self.creds.default_vhost));
            match self.mgmt.send(reqwest::Method::GET, &path, None).await {
                Ok(_) => self.shovel.store(1, Ordering::Relaxed),
                Err(BackendError::NotFound(_)) => self.shovel.store(2, Ordering::Relaxed),
                Err(_) => {}
            }
        }
        self.shovel.load(Ordering::Relaxed) == 1
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
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
            ],
        }
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let (rows, topo, _) = tokio::join!(self.rows(false), self.topology(), self.shovel_in_use());
        let rows = rows?;
        // A missing bindings listing (permissions) still leaves default-exchange links.
        let topo = topo.unwrap_or_default();
        let mut infos: Vec<QueueInfo> = Vec::with_capacity(rows.len());
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for r in rows.iter() {
            index.insert((r.vhost.clone(), r.name.clone()), infos.len());
            infos.push(QueueInfo {
                id: self.id_of(&r.vhost, &r.name),
                kind: r.kind(),
                is_dlq: false,
                dlq: None,
                dlq_sources: Vec::new(),
                settings: figures::settings_of(r),
            });
        }
        for (i, r) in rows.iter().enumerate() {
            let targets = figures::resolve_dlq(r, &topo);
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
        self.cache().topo = topo;
        Ok(infos)
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        let rows = match self.rows(true).await {
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
                batch
                    .errors
                    .push((id.clone(), format!("queue '{id}' not found (deleted?)")));
                continue;
            };
            let mut s = figures::stats_of(id.clone(), row, at);
            if let Some(dlq) = figures::resolve_dlq(row, &topo).first() {
                if let Some(d) = by_key.get(&(vhost.as_str(), dlq.as_str())) {
                    s.dlq_depth = d.messages_ready;
                }
            }
            batch.stats.push(s);
        }
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
        Ok(rows?
            .iter()
            .filter(|r| {
                r.queue.name == name && (r.queue.vhost.is_empty() || r.queue.vhost == vhost)
            })
            .map(|r| consumers::to_consumer(queue, r, &channels))
            .collect())
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        purge::send(self, queue, msg).await
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        redrive::redrive(self, req, progress).await
    }

    async fn purge(&self, queue: &QueueId, progress: &OpProgress) -> Result<PurgeReport> {
        purge::purge(self, queue, progress).await
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProfileKind;

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
            profiles: Vec<crate::config::Profile>,
        }
        let cfg: File = toml::from_str(EXAMPLE).expect("example parses");
        let ProfileKind::Rabbitmq(s) = &cfg.profiles[0].kind else {
            panic!("rabbitmq profile")
        };
        std::env::set_var("QDECK_UNIT_RABBIT_PASSWORD", "s3cr3t-unit");
        let creds = Creds::from_settings(s).expect("creds");
        assert_eq!(creds.password, "s3cr3t-unit");
        assert_eq!(creds.username, "ops");
        assert_eq!(creds.default_vhost, "orders");
        assert_eq!(creds.mgmt_base, "https://rabbit.internal:15671");
        assert!(!format!("{creds:?}").contains("s3cr3t"));
        let b = RabbitBackend::new("unit", s).expect("backend");
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
        let c = Creds::from_settings(&s).expect("creds");
        assert_eq!(c.mgmt_base, "http://10.0.0.5:15672");
        assert_eq!(c.default_vhost, "/");
        let bad = RabbitmqSettings {
            amqp_url: Some("amqp://u:pw-in-url@host:notaport/".into()),
            ..Default::default()
        };
        let err = Creds::from_settings(&bad).expect_err("bad url").to_string();
        assert!(!err.contains("pw-in-url"), "{err}");
    }
}
