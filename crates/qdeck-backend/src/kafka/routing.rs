//! Who to ask: the cluster's brokers and each partition's leader (Metadata), and each group's
//! coordinator (FindCoordinator, many groups per request). Connections are kept per broker
//! address and reused; the bootstrap list is only used to find the brokers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Mutex;

use super::connection::Conn;
use super::security::Security;
use crate::{ApiCalls, BackendError, Result};

pub const METADATA_V: i16 = 12;
pub const FIND_COORDINATOR_V: i16 = 4;

/// One topic as Metadata describes it.
#[derive(Debug, Clone, Default)]
pub struct TopicMeta {
    pub name: String,
    pub internal: bool,
    /// partition → leader broker id (-1: no leader now).
    pub leaders: BTreeMap<i32, i32>,
}

#[derive(Debug, Clone, Default)]
pub struct ClusterMeta {
    pub brokers: BTreeMap<i32, String>,
    pub topics: BTreeMap<String, TopicMeta>,
}

pub struct Cluster {
    bootstrap: Vec<String>,
    client_id: String,
    pub timeout: Duration,
    pub calls: Arc<ApiCalls>,
    security: Arc<Security>,
    conns: Mutex<HashMap<String, Arc<Conn>>>,
    brokers: Mutex<BTreeMap<i32, String>>,
    /// Each address's last outcome: answered or not, and when. A broker that did not answer
    /// is not waited on again for one timeout, so one stopped broker costs a poll one timeout,
    /// not one per request; the rows name who answered and who did not.
    seen: std::sync::Mutex<HashMap<String, (bool, Instant)>>,
}

impl Cluster {
    pub fn new(
        bootstrap: Vec<String>,
        client_id: &str,
        timeout: Duration,
        calls: Arc<ApiCalls>,
        security: Security,
    ) -> Cluster {
        Cluster {
            bootstrap,
            client_id: client_id.to_string(),
            timeout,
            calls,
            security: Arc::new(security),
            conns: Mutex::new(HashMap::new()),
            brokers: Mutex::new(BTreeMap::new()),
            seen: std::sync::Mutex::new(HashMap::new()),
        }
    }

    fn mark(&self, addr: &str, answered: bool) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(addr.to_string(), (answered, Instant::now()));
    }

    /// Whether `addr` failed to answer within the last timeout.
    fn silent(&self, addr: &str) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(addr)
            .is_some_and(|(ok, at)| !ok && at.elapsed() < self.timeout)
    }

    /// Send on `c`, unless its broker just failed to answer; remember the outcome.
    async fn send_on<R: super::connection::Api>(
        &self,
        c: &Conn,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        if self.silent(c.addr()) {
            return Err(BackendError::Unreachable(format!(
                "Kafka broker {} did not answer a request less than {}s ago; not waited on again yet",
                c.addr(),
                self.timeout.as_secs_f64()
            )));
        }
        let r = c.send(req, version).await;
        match &r {
            Ok(_) => self.mark(c.addr(), true),
            Err(BackendError::Unreachable(_)) => self.mark(c.addr(), false),
            Err(_) => {}
        }
        r
    }

    /// Which brokers answered and which did not, by their last outcome, for a row's error.
    pub async fn who_answered(&self) -> String {
        let brokers = self.brokers.lock().await.clone();
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let (mut ok, mut not) = (Vec::new(), Vec::new());
        for (id, addr) in &brokers {
            match seen.get(addr) {
                Some((true, _)) => ok.push(format!("{id} ({addr})")),
                Some((false, _)) => not.push(format!("{id} ({addr})")),
                None => {}
            }
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "brokers that answered: {}; did not: {}",
            list(&ok),
            list(&not)
        )
    }

    async fn conn(&self, addr: &str) -> Arc<Conn> {
        let mut conns = self.conns.lock().await;
        conns
            .entry(addr.to_string())
            .or_insert_with(|| {
                Arc::new(Conn::new(
                    addr,
                    &self.client_id,
                    self.timeout,
                    self.security.clone(),
                ))
            })
            .clone()
    }

    /// The connection to broker `id`, learning the brokers first when it is not known.
    pub async fn node(&self, id: i32) -> Result<Arc<Conn>> {
        let known = self.brokers.lock().await.get(&id).cloned();
        let addr = match known {
            Some(a) => a,
            None => {
                self.metadata(Some(&[])).await?;
                self.brokers.lock().await.get(&id).cloned().ok_or_else(|| {
                    BackendError::Unreachable(format!(
                        "Kafka broker {id} is not in the cluster's metadata"
                    ))
                })?
            }
        };
        Ok(self.conn(&addr).await)
    }

    /// Send a request to any broker: the known ones first, then the bootstrap list; the
    /// first that answers.
    pub async fn any<R: super::connection::Api>(
        &self,
        op: &str,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        let mut addrs: Vec<String> = self.brokers.lock().await.values().cloned().collect();
        for b in &self.bootstrap {
            if !addrs.contains(b) {
                addrs.push(b.clone());
            }
        }
        // Those that just failed to answer go last (and fail at once).
        addrs.sort_by_key(|a| self.silent(a));
        let mut last = None;
        for a in addrs {
            self.calls.bump(op);
            match self.send_on(&*self.conn(&a).await, req, version).await {
                Ok(r) => return Ok(r),
                Err(e @ BackendError::Unreachable(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            BackendError::Invalid("no Kafka bootstrap server is configured".into())
        }))
    }

    /// Send a request to broker `id`.
    pub async fn to<R: super::connection::Api>(
        &self,
        id: i32,
        op: &str,
        req: &R,
        version: i16,
    ) -> Result<R::Response> {
        let c = self.node(id).await?;
        self.calls.bump(op);
        self.send_on(&c, req, version).await
    }

    /// Metadata for `topics` (`None`: every topic; `Some(&[])`: only the brokers).
    pub async fn metadata(&self, topics: Option<&[String]>) -> Result<ClusterMeta> {
        let req = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let resp = self.any("Metadata", &req, METADATA_V).await?;
        let mut meta = ClusterMeta::default();
        for b in &resp.brokers {
            meta.brokers
                .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
        }
        *self.brokers.lock().await = meta.brokers.clone();
        for t in resp.topics {
            let Some(name) = t.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if let Some(e) = t.error_code.err() {
                // A topic asked for by name that does not exist is left out; callers say so.
                tracing::debug!(topic = %name, error = %e, "Kafka metadata error");
                if matches!(e, kafka_protocol::ResponseError::TopicAuthorizationFailed) {
                    return Err(BackendError::Forbidden {
                        msg: format!("not allowed to describe Kafka topic {name:?}"),
                        right: Some("Describe on the topic".into()),
                    });
                }
                continue;
            }
            let leaders = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect();
            meta.topics.insert(
                name.clone(),
                TopicMeta {
                    name,
                    internal: t.is_internal,
                    leaders,
                },
            );
        }
        Ok(meta)
    }

    /// The coordinator of each group (key type 0) or share group (also 0: share groups
    /// live on the group coordinator), many groups per request.
    pub async fn coordinators(&self, groups: &[String]) -> Result<HashMap<String, i32>> {
        let mut out = HashMap::new();
        for chunk in groups.chunks(100) {
            let req = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(
                    chunk
                        .iter()
                        .map(|g| StrBytes::from_string(g.clone()))
                        .collect(),
                );
            let resp = self
                .any("FindCoordinator", &req, FIND_COORDINATOR_V)
                .await?;
            for c in resp.coordinators {
                match c.error_code.err() {
                    None => {
                        self.brokers
                            .lock()
                            .await
                            .insert(c.node_id.0, format!("{}:{}", c.host.as_str(), c.port));
                        out.insert(c.key.to_string(), c.node_id.0);
                    }
                    Some(e) => {
                        tracing::debug!(group = %c.key.as_str(), error = %e, "no coordinator");
                    }
                }
            }
        }
        Ok(out)
    }
}
