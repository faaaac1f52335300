//! Amazon SQS backend.
//!
//! Figures come from one `GetQueueAttributes` per queue (SQS has no batch form; bounded
//! concurrency), queue lists from `ListQueues` pages of 1000, DLQ links from each queue's
//! `RedrivePolicy` inverted locally (no extra calls), and the age of the oldest message from
//! CloudWatch `GetMetricData` (≤500 queues a call) on its own slower cadence, labelled as a
//! metric. Every request is counted in `ApiCalls`; `cost::estimated_cost_per_hour` turns the
//! counts into dollars at list prices.
//!
//! Files: `client` (SDK setup, error mapping), `figures` (list + stats), `age` (CloudWatch),
//! `browse`, `redrive` (native or client-side; the client-side copy loops in `redrive_loops`,
//! one batch's copy → delete in `redrive_batch`), `movetask` (native StartMessageMoveTask),
//! `purge`, `cost`.

mod age;
pub(crate) mod attributes;
mod browse;
mod client;
pub mod cost;
mod cwjson;
mod delete;
mod figures;
mod movetask;
mod purge;
mod redrive;
mod redrive_batch;
mod redrive_loops;
mod send;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, DeleteById, OpProgress, Result, Sender};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, SqsSettings};
use qdeck_model::domain::*;

pub use cost::{estimated_cost_per_hour, estimated_cost_usd};

use client::RegionClients;

/// Operation names counted in `ApiCalls`.
pub mod ops {
    pub const LIST_QUEUES: &str = "sqs:ListQueues";
    pub const GET_QUEUE_URL: &str = "sqs:GetQueueUrl";
    pub const GET_ATTRS: &str = "sqs:GetQueueAttributes";
    pub const RECEIVE: &str = "sqs:ReceiveMessage";
    pub const SEND: &str = "sqs:SendMessage";
    pub const SEND_BATCH: &str = "sqs:SendMessageBatch";
    pub const DELETE_BATCH: &str = "sqs:DeleteMessageBatch";
    pub const CHANGE_VIS_BATCH: &str = "sqs:ChangeMessageVisibilityBatch";
    pub const PURGE: &str = "sqs:PurgeQueue";
    pub const START_MOVE: &str = "sqs:StartMessageMoveTask";
    pub const LIST_MOVES: &str = "sqs:ListMessageMoveTasks";
    pub const CANCEL_MOVE: &str = "sqs:CancelMessageMoveTask";
    pub const LIST_DLQ_SOURCES: &str = "sqs:ListDeadLetterSourceQueues";
    pub const GET_METRIC_DATA: &str = "cloudwatch:GetMetricData";
    /// Not a call: the number of metrics requested, which is what GetMetricData bills.
    pub const CW_METRICS_BILLED: &str = "billing:cloudwatch-metrics";
}

/// Parsed `RedrivePolicy` of a source queue.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RedrivePolicy {
    pub dlq_arn: String,
    pub max_receives: u32,
}

/// What we know about one queue between calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueMeta {
    pub region: usize,
    pub name: String,
    pub url: String,
    pub arn: Option<String>,
    pub fifo: bool,
    pub redrive: Option<RedrivePolicy>,
    /// Set when the RedrivePolicy could not be parsed.
    pub redrive_error: Option<String>,
    /// Queues that dead-letter into this one (from the last list).
    pub sources: Vec<QueueId>,
    /// `sources` is known (from a full list or ListDeadLetterSourceQueues).
    pub sources_known: bool,
}

/// Last attributes read for a queue (lets `stats` right after `list_queues` reuse them).
#[derive(Debug, Clone)]
pub(crate) struct Recent {
    pub at: Instant,
    pub at_ms: i64,
    pub attrs: std::collections::BTreeMap<String, String>,
    /// Read by `list_queues` (only those are reused by the `stats` that follows).
    pub from_list: bool,
}

pub struct SqsBackend {
    regions: Vec<RegionClients>,
    http: reqwest::Client,
    settings: SqsSettings,
    calls: Arc<ApiCalls>,
    meta: Mutex<HashMap<QueueId, QueueMeta>>,
    recent: Mutex<HashMap<QueueId, Recent>>,
    age: age::AgeCache,
    purges: Mutex<HashMap<QueueId, Instant>>,
    /// Why this endpoint cannot run move tasks, once a call has shown it (moto, some
    /// stand-ins): redrive is then declared client-side, as it will run.
    no_move_task: Mutex<Option<String>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub async fn connect(
    _profile: &Profile,
    settings: &SqsSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(SqsBackend::new(settings, secrets).await?))
}

impl SqsBackend {
    /// Credentials: static keys where `secrets` gives them (`SecretSource::aws_keys`), else
    /// the AWS SDK's chain.
    pub async fn new(settings: &SqsSettings, secrets: &dyn SecretSource) -> Result<Self> {
        crate::tls::install_provider();
        let calls = Arc::new(ApiCalls::default());
        let regions = client::build_clients(settings, secrets.aws_keys(), calls.clone()).await?;
        Ok(SqsBackend {
            regions,
            http: reqwest::Client::new(),
            settings: settings.clone(),
            calls,
            meta: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
            age: age::AgeCache::default(),
            purges: Mutex::new(HashMap::new()),
            no_move_task: Mutex::new(None),
        })
    }

    pub(crate) fn multi_region(&self) -> bool {
        self.regions.len() > 1
    }

    /// Queue id for a name in a region: the bare name with one region, `region/name` with
    /// several (SQS names cannot contain `/`).
    pub(crate) fn id_for(&self, region: usize, name: &str) -> QueueId {
        if self.multi_region() {
            let r = self.regions.get(region).map(|r| r.region.as_str());
            QueueId(format!("{}/{name}", r.unwrap_or("?")))
        } else {
            QueueId::new(name)
        }
    }

    /// Queue id for an ARN `arn:aws:sqs:REGION:ACCOUNT:NAME`.
    pub(crate) fn id_for_arn(&self, arn: &str) -> Option<QueueId> {
        let parts: Vec<&str> = arn.split(':').collect();
        if parts.len() < 6 || parts[2] != "sqs" || parts[5].is_empty() {
            return None;
        }
        let name = parts[5];
        if self.multi_region() {
            Some(QueueId(format!("{}/{name}", parts[3])))
        } else {
            Some(QueueId::new(name))
        }
    }

    /// Region index and queue name of an id.
    fn split_id(&self, id: &QueueId) -> Result<(usize, String)> {
        if !self.multi_region() {
            return Ok((0, id.0.clone()));
        }
        let (r, n) = id.0.split_once('/').ok_or_else(|| {
            BackendError::Invalid(format!(
                "queue {id}: with several regions, name queues as REGION/NAME"
            ))
        })?;
        let idx = self
            .regions
            .iter()
            .position(|c| c.region == r)
            .ok_or_else(|| BackendError::Invalid(format!("region {r} is not in this profile")))?;
        Ok((idx, n.to_string()))
    }

    pub(crate) fn clients(&self, region: usize) -> &RegionClients {
        // `region` always comes from `split_id` or a list over `self.regions`.
        &self.regions[region.min(self.regions.len().saturating_sub(1))]
    }

    pub(crate) fn profile_name(&self) -> Option<&str> {
        self.settings.aws_profile.as_deref()
    }

    pub(crate) fn calls(&self) -> &ApiCalls {
        &self.calls
    }

    /// Meta for a queue: from the cache, else `GetQueueUrl` (one call) then cached.
    pub(crate) async fn resolve(&self, id: &QueueId) -> Result<QueueMeta> {
        if let Some(m) = lock(&self.meta).get(id) {
            return Ok(m.clone());
        }
        let (region, name) = self.split_id(id)?;
        let out = self
            .clients(region)
            .sqs
            .get_queue_url()
            .queue_name(&name)
            .send()
            .await
            .map_err(|e| client::map_sdk(ops::GET_QUEUE_URL, &name, &e, self.profile_name()).err)?;
        let url = out
            .queue_url()
            .ok_or_else(|| BackendError::NotFound(format!("queue {id} not found")))?
            .to_string();
        let meta = QueueMeta {
            region,
            fifo: name.ends_with(".fifo"),
            name,
            url,
            ..QueueMeta::default()
        };
        lock(&self.meta).insert(id.clone(), meta.clone());
        Ok(meta)
    }

    /// Meta with ARN and redrive policy filled (reads attributes when the cache lacks them).
    pub(crate) async fn resolve_full(&self, id: &QueueId) -> Result<QueueMeta> {
        let m = self.resolve(id).await?;
        if m.arn.is_some() {
            return Ok(m);
        }
        self.fetch_attrs(id, &m).await?;
        self.resolve(id).await
    }

    /// Drop cached figures after a change (so `stats` reads fresh ones).
    pub(crate) fn invalidate(&self, id: &QueueId) {
        lock(&self.recent).remove(id);
    }

    /// Queues that dead-letter into `id`: from the last list, else one paginated
    /// ListDeadLetterSourceQueues (cached).
    pub(crate) async fn dlq_sources(&self, id: &QueueId) -> Result<Vec<QueueId>> {
        let meta = self.resolve(id).await?;
        if meta.sources_known {
            return Ok(meta.sources);
        }
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .clients(meta.region)
                .sqs
                .list_dead_letter_source_queues()
                .queue_url(&meta.url)
                .max_results(1000)
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| {
                    client::map_sdk(ops::LIST_DLQ_SOURCES, id.as_str(), &e, self.profile_name()).err
                })?;
            for url in page.queue_urls() {
                let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or(url);
                out.push(self.id_for(meta.region, name));
            }
            match page.next_token() {
                Some(t) if !t.is_empty() && Some(t) != token.as_deref() => {
                    token = Some(t.to_string());
                }
                _ => break,
            }
        }
        out.sort();
        if let Some(m) = lock(&self.meta).get_mut(id) {
            m.sources = out.clone();
            m.sources_known = true;
        }
        Ok(out)
    }

    /// Remember that the endpoint lacks move tasks.
    pub(crate) fn note_no_move_task(&self, why: &str) {
        *lock(&self.no_move_task) = Some(why.to_string());
    }

    pub(crate) fn move_task_known_missing(&self) -> Option<String> {
        lock(&self.no_move_task).clone()
    }

    pub(crate) fn forget(&self, id: &QueueId) {
        lock(&self.meta).remove(id);
        lock(&self.recent).remove(id);
    }
}

pub(crate) fn capabilities(cloudwatch: bool) -> Capabilities {
    Capabilities {
        browse: BrowseEffect::SideEffect(
            "SQS has no peek: browsing receives each message (its receive count goes up by one) \
             with a short visibility timeout, then makes it visible again; messages received \
             three or more times move to the back and drop out of the age metric; on a FIFO \
             queue the message group is held until then; on a queue with a redrive policy a \
             receive can dead-letter a message, so browsing there needs --force"
                .to_string(),
        ),
        redrive: RedriveMode::Native(
            "StartMessageMoveTask (server-side, back to each message's source queue); falls back \
             to client-side copy → confirm → delete where the endpoint lacks it, or for a \
             count limit or selected messages"
                .to_string(),
        ),
        age: if cloudwatch {
            AgeSource::Metric(
                "CloudWatch ApproximateAgeOfOldestMessage (1-min Maximum); lags by minutes, \
                 excludes messages received 3+ times; read on a slower cadence"
                    .to_string(),
            )
        } else {
            AgeSource::Unknown("CloudWatch age is disabled in this profile".to_string())
        },
        consumers: ConsumerListing::Unsupported(
            "SQS does not expose its consumers; in flight counts messages being processed"
                .to_string(),
        ),
        purge_cooldown_secs: Some(purge::COOLDOWN_SECS),
        purge_note: Some(
            "SQS deletes visible and in-flight messages within up to 60 s; one purge per queue \
             per 60 s"
                .to_string(),
        ),
        broker_rates: false,
        notes: vec![
            "counts are approximate (SQS: may lag about a minute after producers stop)".to_string(),
            "every call is billed: see API calls and estimated cost".to_string(),
            "deleting chosen messages (purge --where, edit) receives the queue and makes the others visible again at once (receive count +1); refused on a queue with a RedrivePolicy".to_string(),
        ],
    }
}

#[async_trait]
impl Backend for SqsBackend {
    fn sender(&self) -> Option<&dyn Sender> {
        Some(self)
    }

    fn kind(&self) -> BrokerKind {
        BrokerKind::Sqs
    }

    fn capabilities(&self) -> Capabilities {
        let mut c = capabilities(self.settings.cloudwatch.unwrap_or(true));
        if let Some(why) = self.move_task_known_missing() {
            c.redrive = RedriveMode::ClientSide;
            c.notes.push(format!(
                "redrive runs client-side (copy → confirm → delete): {why}"
            ));
        }
        c
    }

    /// What browse and redrive really do with this queue: FIFO keeps group ids; a queue with
    /// a RedrivePolicy refuses browsing unless forced (a receive can dead-letter).
    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut c = self.capabilities();
        let redrive_policy = queue.dlq.is_some()
            || queue.settings.max_receives.is_some()
            || queue.settings.extra.contains_key("redrive_policy_error");
        if redrive_policy {
            c.browse = BrowseEffect::SideEffect(format!(
                "refused unless forced: this queue dead-letters after {} receive(s) and \
                 browsing receives each message once (receive count +1), which can move a \
                 message to its DLQ",
                queue
                    .settings
                    .max_receives
                    .map_or_else(|| "some".to_string(), |m| m.to_string())
            ));
        }
        if queue.kind == QueueKind::Fifo {
            c.notes.push(
                "FIFO: redrive keeps each message's MessageGroupId and uses the source message \
                 id as deduplication id (a retried copy within 5 minutes is dropped by SQS); \
                 order within a group is kept among the messages moved, after those already \
                 queued in the target"
                    .to_string(),
            );
            c.notes.push(
                "FIFO: browsing holds each message group until the short visibility ends"
                    .to_string(),
            );
        }
        c
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        figures::list_queues(self).await
    }

    async fn list_queues_matching(&self, filter: &crate::QueueFilter) -> Result<Vec<QueueInfo>> {
        figures::list_queues_filtered(self, Some(filter)).await
    }

    /// GetQueueUrl + GetQueueAttributes + ListDeadLetterSourceQueues: three calls whatever
    /// the number of queues in the account. The attributes are kept for the `stats` that
    /// usually follows (within 2 s), so `stats Q` costs no fourth call.
    async fn describe(&self, queue: &QueueId) -> Result<QueueInfo> {
        figures::describe(self, queue).await
    }

    /// The move task moves everything to each message's source or one target; a count limit
    /// or a selection runs client-side, and so does an endpoint without move tasks (asked
    /// once with a read-only ListMessageMoveTasks).
    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        let mut plan = crate::plan_redrive_checked(self, req).await?;
        if !matches!(plan.mode, RedriveMode::Native(_)) {
            return Ok(plan);
        }
        let why = if req.only_ids.is_some() {
            Some("selected messages are copied client-side".to_string())
        } else if req.max.is_some() {
            Some("a count limit runs client-side (the move task moves everything)".to_string())
        } else {
            let src = self.resolve_full(&req.source).await?;
            movetask::probe(self, &src, &req.source).await?;
            self.move_task_known_missing()
        };
        if let Some(why) = why {
            plan.mode = RedriveMode::ClientSide;
            plan.notes.push(why);
        }
        Ok(plan)
    }

    /// A fresh GetQueueAttributes (never the polled figures). SQS counts are approximate.
    async fn count(&self, queue: &QueueId) -> Result<MessageCount> {
        let meta = self.resolve(queue).await?;
        let attrs = self.fetch_attrs(queue, &meta).await?;
        let n = |k: &str| attrs.get(k).and_then(|v| v.trim().parse::<u64>().ok());
        Ok(MessageCount {
            ready: n("ApproximateNumberOfMessages").unwrap_or(0),
            in_flight: n("ApproximateNumberOfMessagesNotVisible"),
            exact: false,
        })
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        figures::stats(self, queues).await
    }

    async fn consumers(&self, _queue: &QueueId) -> Result<Vec<Consumer>> {
        Err(BackendError::Unsupported(
            "SQS does not list its consumers; in flight shows messages being processed".to_string(),
        ))
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        redrive::redrive(self, req, progress).await
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
}

#[async_trait]
impl Sender for SqsBackend {
    async fn send(&self, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
        send::send(self, queue, msg).await
    }

    /// SendMessageBatch: ten messages a call.
    async fn send_many(
        &self,
        queue: &QueueId,
        msgs: Vec<OutgoingMessage>,
    ) -> Vec<Result<Option<String>>> {
        send::send_many(self, queue, msgs).await
    }
}

#[async_trait]
impl DeleteById for SqsBackend {
    fn delete_note(&self, _queue: &QueueInfo) -> Option<String> {
        Some(
            "deleting receives the queue until the chosen messages are found; every other \
             message received gets its receive count raised by one and is visible again at once"
                .into(),
        )
    }

    fn delete_refusal(&self, queue: &QueueInfo) -> Option<String> {
        queue.settings.max_receives.map(|n| {
            format!(
                "{} dead-letters after {n} receives and deleting chosen messages receives every \
                 message it passes: refused",
                queue.id
            )
        })
    }

    /// Receive → match MessageId → DeleteMessageBatch; the others are made visible again at
    /// once (receive count +1). Refused on a queue with a RedrivePolicy.
    async fn delete_ids(
        &self,
        queue: &QueueId,
        ids: &[String],
        progress: &OpProgress,
    ) -> Result<DeleteReport> {
        delete::delete_ids(self, queue, ids, progress).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::Environment;

    #[tokio::test]
    async fn several_regions_name_queues_region_slash_name() {
        let settings = SqsSettings {
            regions: vec!["us-east-1".into(), "eu-west-1".into()],
            endpoint_url: Some("http://127.0.0.1:9".into()),
            ..SqsSettings::default()
        };
        let b = SqsBackend::new(&settings, &Environment)
            .await
            .expect("no network needed");
        assert_eq!(b.id_for(1, "orders"), QueueId::new("eu-west-1/orders"));
        assert_eq!(
            b.id_for_arn("arn:aws:sqs:eu-west-1:123456789012:orders-dlq"),
            Some(QueueId::new("eu-west-1/orders-dlq"))
        );
        assert_eq!(b.id_for_arn("not-an-arn"), None);
        assert_eq!(
            b.split_id(&QueueId::new("eu-west-1/orders")).ok(),
            Some((1, "orders".to_string()))
        );
        assert!(matches!(
            b.split_id(&QueueId::new("orders")),
            Err(BackendError::Invalid(_))
        ));
        assert!(matches!(
            b.split_id(&QueueId::new("ap-south-1/orders")),
            Err(BackendError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn one_region_uses_bare_names() {
        let settings = SqsSettings {
            regions: vec!["us-east-1".into()],
            endpoint_url: Some("http://127.0.0.1:9".into()),
            ..SqsSettings::default()
        };
        let b = SqsBackend::new(&settings, &Environment)
            .await
            .expect("no network needed");
        assert_eq!(b.id_for(0, "orders"), QueueId::new("orders"));
        assert_eq!(
            b.id_for_arn("arn:aws:sqs:us-east-1:1:orders"),
            Some(QueueId::new("orders"))
        );
        assert!(matches!(b.capabilities().age, AgeSource::Metric(_)));
        assert_eq!(b.capabilities().purge_cooldown_secs, Some(60));
    }
}
