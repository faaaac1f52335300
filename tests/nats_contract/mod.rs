//! The backend contract suite on NATS JetStream: scenes made by nats-py (the independent
//! client), the server itself dead-lettering (a consumer's MAX_DELIVERIES advisories captured
//! in the stream `qdeck create-dlq` makes), qdeck's backend judged by the shared behaviours.
//!
//! The source of a scene is the consumer `P_WQ/worker`, its DLQ the capture `DLQ_P_WQ_worker`.
//! What JetStream cannot do is declared by the backend (no sender facet; a dead letter goes
//! back only to its own subject, so a named target is unsupported in the plan), and the
//! cases that need it say so and check the refusal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use qdeck_backend::Backend;
use qdeck_model::domain::QueueId;

use crate::common::nats::{backend, peer, unique_prefix};
use crate::contract;

pub struct NatsFixture {
    b: Arc<dyn Backend>,
    /// Every stream of this fixture starts with it (and its captures with `DLQ_` + it).
    p: String,
    next: AtomicUsize,
}

impl NatsFixture {
    pub async fn setup() -> NatsFixture {
        NatsFixture {
            b: backend().await,
            p: unique_prefix(),
            next: AtomicUsize::new(0),
        }
    }

    /// A prefix for one scene, inside the fixture's.
    fn scene_prefix(&self) -> String {
        format!("{}-{}", self.p, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

impl contract::Fixture for NatsFixture {
    fn backend(&self) -> &dyn Backend {
        self.b.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let sp = self.scene_prefix();
        let made = peer(&["contract_scene", &sp, &ready.to_string(), &dead.to_string()]);
        assert_eq!(
            made["dead"].as_u64(),
            Some(dead as u64),
            "the server dead-lettered every poison message: {made}"
        );
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(format!("{sp}_WQ/worker")),
            dlq: QueueId::new(format!("DLQ_{sp}_WQ_worker")),
            ready,
            dead,
        }
    }

    /// A stream of its own: what a redrive to a named queue would target.
    async fn plain_queue(&self, _tag: &str) -> QueueId {
        let name = format!("{}_PLAIN", self.scene_prefix());
        peer(&["capture", &name, &format!("{name}.in")]);
        QueueId::new(name)
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        let sp = scene
            .src
            .as_str()
            .strip_suffix("_WQ/worker")
            .expect("a scene's source");
        peer(&["late_dead", sp, &n.to_string()]);
    }

    async fn cleanup(&self) {
        peer(&["cleanup", &self.p]);
    }
}
