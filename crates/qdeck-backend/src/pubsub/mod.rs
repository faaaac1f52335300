//! Google Cloud Pub/Sub. Queue ids: a subscription is `PROJECT/SUB` (the queue-like row: depth
//! and age of oldest from Cloud Monitoring), a topic `PROJECT/topics/TOPIC` (a row of its own,
//! holding nothing). A subscription's DLQ is the subscription of its dead-letter topic.
//!
//! gRPC through tonic with the messages of `proto`; Application Default Credentials through
//! gcp_auth; none with an emulator (`emulator_host`, `PUBSUB_EMULATOR_HOST`).

mod browse;
mod calls;
mod conn;
mod external_account;
mod figures;
mod google_http;
mod listing;
mod monitoring;
mod msg;
mod names;
mod proto;
mod purge;
mod redrive;
mod seek;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{ApiCalls, Backend, BackendError, MessageFilter, OpProgress, Result};
use qdeck_model::config::secret::SecretSource;
use qdeck_model::config::{Profile, PubsubSettings};
use qdeck_model::domain::*;

pub use msg::{copy_attributes, source_subscription, DEAD_LETTER_ATTRS};
pub use names::Target;

/// Why depth and age are unknown with an emulator and no Monitoring endpoint.
pub const NO_MONITORING: &str = "no Cloud Monitoring with an emulator: depth and age come only from Monitoring (set monitoring_endpoint)";

pub async fn connect(
    profile: &Profile,
    settings: &PubsubSettings,
    secrets: &dyn SecretSource,
) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(PubsubBackend::new(
        &profile.name,
        settings,
        secrets,
    )?))
}

pub struct PubsubBackend {
    conn: conn::Conn,
    calls: Arc<ApiCalls>,
    projects: Vec<String>,
    monitoring: Option<monitoring::Monitoring>,
    no_monitoring: String,
    /// The last listing, for DLQ depths on the rows and origins on browsed dead letters.
    last: Mutex<Option<listing::Listing>>,
}

impl PubsubBackend {
    pub fn new(
        profile_name: &str,
        settings: &PubsubSettings,
        secrets: &dyn SecretSource,
    ) -> Result<PubsubBackend> {
        let projects: Vec<String> = settings
            .projects
            .iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        if projects.is_empty() {
            return Err(BackendError::Invalid(format!(
                "profile '{profile_name}': projects is empty; name at least one Google Cloud project id"
            )));
        }
        if let Some(bad) = projects.iter().find(|p| p.contains('/')) {
            return Err(BackendError::Invalid(format!(
                "profile '{profile_name}': projects holds {bad:?}; give project ids, not paths"
            )));
        }
        let emulator = settings
            .emulator_host
            .clone()
            // An address, not a secret: read through the one provider, then exposed.
            .or_else(|| {
                secrets
                    .get("PUBSUB_EMULATOR_HOST")
                    .map(|h| h.expose().to_string())
            })
            .filter(|h| !h.trim().is_empty());
        let calls = Arc::new(ApiCalls::default());
        // The profile's own file first, so that two profiles can use two identities in one
        // console; the variable is process-wide.
        let credentials = settings
            .credentials_file
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| (std::path::PathBuf::from(f), "credentials_file"))
            .or_else(|| {
                secrets
                    .get("GOOGLE_APPLICATION_CREDENTIALS")
                    .map(|p| p.expose().trim().to_string())
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        (
                            std::path::PathBuf::from(p),
                            "GOOGLE_APPLICATION_CREDENTIALS",
                        )
                    })
            });
        let endpoint = settings
            .endpoint
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty());
        let conn = conn::Conn::new(emulator.as_deref(), endpoint, credentials, calls.clone())?;
        let endpoint = settings
            .monitoring_endpoint
            .clone()
            .filter(|e| !e.trim().is_empty())
            .or_else(|| {
                emulator
                    .is_none()
                    .then(|| monitoring::GOOGLE_MONITORING.to_string())
            });
        let monitoring = endpoint
            .map(|e| monitoring::Monitoring::new(&e, conn.auth.clone(), calls.clone()))
            .transpose()?;
        Ok(PubsubBackend {
            conn,
            calls,
            projects,
            monitoring,
            no_monitoring: NO_MONITORING.into(),
            last: Mutex::new(None),
        })
    }

    fn remember(&self, l: &listing::Listing) {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(l.clone());
    }

    /// The last listing, or a new one.
    async fn listing_now(&self) -> Result<listing::Listing> {
        let cached = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match cached {
            Some(l) => Ok(l),
            None => listing::list_all(self).await,
        }
    }

    /// The last listing when it holds every subscription path in `paths`, else a new one (a
    /// subscription made since the last poll's listing would otherwise have no DLQ link and
    /// could not be told from one that does not exist). `None` when listing fails: figures
    /// then go without links rather than not at all.
    async fn listing_covering(&self, paths: &[String]) -> Option<listing::Listing> {
        let cached = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match cached {
            Some(l) if paths.iter().all(|p| l.subs.contains_key(p)) => Some(l),
            _ => listing::list_all(self).await.ok(),
        }
    }

    /// The one subscription whose dead-letter policy names `topic` (a DLQ's source), as the
    /// origin of browsed dead letters that carry no attributes saying it.
    async fn policy_origin(&self, topic: &str) -> Option<QueueId> {
        let l = self.listing_now().await.ok()?;
        match l.dead_lettering_into(topic).as_slice() {
            [one] => names::sub_id(&one.name),
            _ => None,
        }
    }
}

#[async_trait]
impl Backend for PubsubBackend {
    fn kind(&self) -> BrokerKind {
        BrokerKind::Pubsub
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            browse: BrowseEffect::SideEffect(browse::EFFECT.into()),
            redrive: RedriveMode::ClientSide,
            age: match &self.monitoring {
                Some(m) => AgeSource::Metric(format!(
                    "Cloud Monitoring ({}): oldest_unacked_message_age, sampled each minute and minutes late; the row says how old",
                    m.base()
                )),
                None => AgeSource::Unknown(self.no_monitoring.clone()),
            },
            consumers: ConsumerListing::Unsupported(
                "Pub/Sub does not list a subscription's subscribers".into(),
            ),
            purge_cooldown_secs: None,
            purge_note: Some(purge::NOTE.into()),
            broker_rates: false,
            notes: vec![
                "depth = num_undelivered_messages, age = oldest_unacked_message_age, from Cloud Monitoring: one timeSeries.list per metric per project per poll".into(),
                "browse on a subscription with a dead-letter policy is refused unless forced: each pull counts a delivery attempt".into(),
                "a subscription's DLQ is the subscription of its dead-letter topic; redrive publishes copies to the source subscription's topic".into(),
            ],
        }
    }

    fn capabilities_for(&self, queue: &QueueInfo) -> Capabilities {
        let mut caps = self.capabilities();
        if queue.kind == QueueKind::Topic {
            caps.browse = BrowseEffect::Unsupported(
                "a topic holds no messages: browse one of its subscriptions".into(),
            );
            caps.redrive =
                RedriveMode::Unsupported("redrive starts from a dead-letter subscription".into());
        } else if let Some(n) = queue.settings.max_receives {
            caps.browse = BrowseEffect::SideEffect(format!(
                "{}; this subscription dead-letters after {n} attempts, so browsing it is refused unless forced",
                browse::EFFECT
            ));
        }
        caps
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>> {
        let l = listing::list_all(self).await?;
        Ok(listing::rows(&l))
    }

    async fn stats(&self, queues: &[QueueId]) -> Result<StatsBatch> {
        figures::stats(self, queues).await
    }

    async fn consumers(&self, queue: &QueueId) -> Result<Vec<Consumer>> {
        Err(BackendError::Unsupported(format!(
            "{queue}: Pub/Sub does not list a subscription's subscribers"
        )))
    }

    async fn browse(&self, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
        browse::browse(self, queue, req).await
    }

    async fn plan_redrive(&self, req: &RedriveRequest) -> Result<RedrivePlan> {
        let notes = redrive::plan_notes(self, req).await?;
        let mut plan = crate::plan_redrive_checked(self, req).await?;
        plan.mode = RedriveMode::ClientSide;
        let counted = self
            .stats(std::slice::from_ref(&req.source))
            .await
            .ok()
            .and_then(|b| b.stats.into_iter().next())
            .and_then(|st| st.depth)
            .is_some();
        if !counted {
            plan.notes.push(
                "the count is unknown: Pub/Sub counts only through Cloud Monitoring, which has no figure for this subscription (or no monitoring_endpoint is set); the redrive moves what the subscription delivers".into(),
            );
        }
        plan.notes.extend(notes);
        Ok(plan)
    }

    async fn redrive(&self, req: &RedriveRequest, progress: &OpProgress) -> Result<RedriveReport> {
        redrive::redrive(self, req, None, progress).await
    }

    fn filtered_redrive(&self) -> Option<&dyn crate::FilteredRedrive> {
        Some(self)
    }

    async fn purge(&self, queue: &QueueId, _progress: &OpProgress) -> Result<PurgeReport> {
        purge::purge(self, queue).await
    }

    fn api_calls(&self) -> &ApiCalls {
        &self.calls
    }

    fn seeker(&self) -> Option<&dyn super::Seeker> {
        Some(self)
    }
}

#[async_trait]
impl crate::FilteredRedrive for PubsubBackend {
    /// Only a subscription delivers messages to test; a topic is read through one.
    fn reading_effect(&self, queue: &QueueInfo) -> Option<String> {
        (queue.kind == QueueKind::Subscription).then(|| {
            "messages that do not match are pulled and given back (modifyAckDeadline 0): each counts one more delivery".to_string()
        })
    }

    async fn redrive_matching(
        &self,
        req: &RedriveRequest,
        filter: &MessageFilter,
        progress: &OpProgress,
    ) -> Result<RedriveReport> {
        redrive::redrive(self, req, Some(filter), progress).await
    }
}

#[async_trait]
impl super::Seeker for PubsubBackend {
    async fn plan_seek(&self, queue: &QueueId, to_ms: i64) -> Result<SeekPlan> {
        seek::plan(self, queue, to_ms).await
    }

    async fn seek(&self, plan: &SeekPlan) -> Result<SeekReport> {
        seek::seek(self, plan).await
    }
}
