//! The backend contract suite on Pub/Sub: scenes made by Google's Python client on Google's
//! fake server (pstest), the fake itself dead-lettering (a worker nacks poison messages until
//! the subscription's dead-letter policy forwards them), qdeck's backend judged by the shared
//! behaviours.
//!
//! The source of a scene is the subscription `PROJECT/TAG-sub`, its DLQ `PROJECT/TAG-dlq-sub`
//! (the subscription of the dead-letter topic `TAG-dlq`). A named target is the subscription of
//! a topic of its own: redrive publishes to that subscription's topic.
//!
//! Counts: Pub/Sub counts only through Cloud Monitoring, minutes late, and pstest has none;
//! the stand-in serves what the fixture scripts. So the figures cases read the scene as
//! scripted (depth = ready, DLQ depth = dead), and outcomes (what a redrive, a purge or a browse
//! left where) are judged by what Google's client pulls from the fake (`Fixture::held`), never
//! by a stale series. Each fixture works in a project of its own and drops it afterwards.

use std::sync::{Arc, Mutex};

use qdeck_backend::Backend;
use qdeck_model::domain::QueueId;
use serde_json::{json, Value as Json};

use crate::contract;

/// Delivery attempts before the fake dead-letters a scene's message. Above the default 5 so
/// that the counts taken by pulling (each one delivery) never push a ready message over.
const MAX_ATTEMPTS: &str = "20";

pub struct PubsubFixture {
    b: Arc<dyn Backend>,
    project: String,
    /// Every series scripted for the project so far: the stand-in replaces them as a whole.
    series: Mutex<Vec<Json>>,
}

impl PubsubFixture {
    pub async fn setup() -> PubsubFixture {
        let project = crate::project();
        PubsubFixture {
            b: crate::backend(&project).await,
            project,
            series: Mutex::new(Vec::new()),
        }
    }

    /// Script depth `n` (and an age) for subscription `sub` on the Monitoring stand-in.
    async fn script_depth(&self, sub: &str, n: usize) {
        let all = {
            let mut s = self.series.lock().unwrap();
            s.push(json!({"metric": crate::UNDELIVERED, "subscription_id": sub, "values": [n]}));
            s.push(json!({"metric": crate::OLDEST, "subscription_id": sub, "values": [if n > 0 { 30 } else { 0 }]}));
            Json::Array(s.clone())
        };
        crate::set_series(&self.project, 100, all).await;
    }
}

impl contract::Fixture for PubsubFixture {
    fn backend(&self) -> &dyn Backend {
        self.b.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let p = &self.project;
        crate::scene(&[
            "dead-letters",
            p,
            tag,
            "--good",
            "0",
            "--poison",
            &dead.to_string(),
            "--max-attempts",
            MAX_ATTEMPTS,
        ]);
        if ready > 0 {
            crate::scene(&[
                "publish",
                p,
                &format!("{tag}-topic"),
                "--count",
                &ready.to_string(),
            ]);
        }
        let scene = contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(format!("{p}/{tag}-sub")),
            dlq: QueueId::new(format!("{p}/{tag}-dlq-sub")),
            ready,
            dead,
        };
        assert_eq!(
            self.held(&scene.dlq).await,
            Some(dead),
            "the fake dead-lettered every poison message"
        );
        self.script_depth(&format!("{tag}-sub"), ready).await;
        self.script_depth(&format!("{tag}-dlq-sub"), dead).await;
        scene
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        crate::scene(&["backlog", &self.project, tag, "--grow", "0"]);
        QueueId::new(format!("{}/{tag}-sub", self.project))
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        let topic = format!("{}-dlq", scene.tag);
        crate::scene(&["publish", &self.project, &topic, "--count", &n.to_string()]);
    }

    /// What Google's client pulls from the subscription now (then gives back with a nack, so it
    /// stays deliverable; each count is one delivery attempt, hence `MAX_ATTEMPTS`).
    async fn held(&self, q: &QueueId) -> Option<usize> {
        let (project, sub) = q.as_str().split_once('/')?;
        if sub.contains('/') {
            return None; // a topic holds nothing of its own
        }
        let read = crate::scene(&["read-back", project, sub, "--nack"]);
        Some(read["messages"].as_array().map_or(0, Vec::len))
    }

    async fn cleanup(&self) {
        crate::scene(&["drop", &self.project]);
    }
}
