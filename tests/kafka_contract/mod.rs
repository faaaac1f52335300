//! The backend contract suite on Kafka: scenes made by Kafka's own Java client
//! (tests/fixtures/kafka/src/Scenes.java), qdeck's backend judged by the shared behaviours.
//!
//! The source of a scene is a topic, its DLQ the Spring dead-letter topic `TOPIC-dlt` holding
//! records as Spring Kafka writes them (`kafka_dlt-original-topic` names the origin). Kafka
//! itself does not dead-letter for a classic or KIP-848 group; a Spring listener does, and
//! that is what qdeck's Kafka rows model. What Kafka cannot do is declared by the backend (no
//! sender facet; a chosen subset of a dead-letter topic cannot be marked as redriven, so the
//! plan declares it unsupported), and the cases that need it say so and check the refusal.
//!
//! Every topic of a fixture starts with its own prefix; `cleanup` deletes them and qdeck's
//! redrive progress groups on them.

use std::sync::Arc;

use qdeck_backend::Backend;
use qdeck_model::config::{KafkaSettings, Profile, ProfileKind};
use qdeck_model::domain::QueueId;

use crate::contract;

pub struct KafkaFixture {
    b: Arc<dyn Backend>,
    /// Every topic of this fixture starts with it.
    p: String,
}

/// qdeck's Kafka backend on the test broker.
pub async fn backend() -> Arc<dyn Backend> {
    backend_at(&crate::bootstrap(), None).await
}

/// qdeck's Kafka backend on the brokers at `bs`, with the profile's timeout when given.
pub async fn backend_at(bs: &str, timeout_secs: Option<f64>) -> Arc<dyn Backend> {
    qdeck_backend::build(&profile_at(bs, timeout_secs))
        .await
        .expect("build kafka backend")
}

/// The test profile on the brokers at `bs`.
pub fn profile_at(bs: &str, timeout_secs: Option<f64>) -> Profile {
    Profile {
        name: "kafka-test".into(),
        kind: ProfileKind::Kafka(KafkaSettings {
            bootstrap_servers: bs.to_string(),
            timeout_secs,
            ..Default::default()
        }),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    }
}

impl KafkaFixture {
    pub async fn setup() -> KafkaFixture {
        // The scenes' classpath is checked now, so a missing one is one clear message.
        crate::scenes();
        KafkaFixture {
            b: backend().await,
            p: crate::prefix("c"),
        }
    }

    fn topic(&self, tag: &str) -> String {
        format!("{}{tag}", self.p)
    }
}

impl contract::Fixture for KafkaFixture {
    fn backend(&self) -> &dyn Backend {
        self.b.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let t = self.topic(tag);
        // Creates TOPIC and TOPIC-dlt (one partition each), then the dead letters.
        let made = crate::scene(&["spring-dlt", &t, &dead.to_string()]);
        assert_eq!(
            made[0]["dead_letters"].as_u64(),
            Some(dead as u64),
            "{made:?}"
        );
        if ready > 0 {
            crate::scene(&["produce", &t, &ready.to_string()]);
        }
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(t.clone()),
            dlq: QueueId::new(format!("{t}-dlt")),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        let t = self.topic(tag);
        crate::scene(&["topic", &t, "1"]);
        QueueId::new(t)
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        crate::scene(&["spring-dlt", scene.src.as_str(), &n.to_string()]);
    }

    async fn cleanup(&self) {
        crate::scene(&["drop", &self.p]);
    }
}
