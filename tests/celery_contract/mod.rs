//! The backend contract suite on Celery: task queues Celery itself declares on RabbitMQ, with
//! the dead-letter arguments Celery's documentation gives, and tasks Celery sends
//! (tests/fixtures/celery/celery_scene.py); RabbitMQ itself dead-letters the rejected ones.
//! qdeck reads them with the backend a Celery-on-RabbitMQ profile builds.
//!
//! Celery on Redis (kombu's lists) keeps no dead letters: no queue there has a DLQ for a
//! scene to fill, so the suite runs where Celery's tasks can be dead-lettered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use qdeck_backend::{build_with, Backend};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::{Profile, ProfileKind, RabbitmqSettings};
use qdeck_model::domain::QueueId;

use crate::common::celery::{run_script, Rmq};
use crate::contract;

const PASSWORD_VAR: &str = "QDECK_TEST_CELERY_RMQ_PASSWORD";

pub struct CeleryFixture {
    b: Arc<dyn Backend>,
    rmq: Rmq,
    created: Mutex<Vec<String>>,
}

impl CeleryFixture {
    pub async fn setup() -> CeleryFixture {
        let rmq = Rmq::from_env();
        let profile = Profile {
            name: "celery-contract".into(),
            kind: ProfileKind::Rabbitmq(RabbitmqSettings {
                amqp_url: Some(rmq.bare.clone()),
                management_url: Some(rmq.mgmt.clone()),
                username: Some(rmq.user.clone()),
                password_env: Some(PASSWORD_VAR.into()),
                ..Default::default()
            }),
            access: None,
            read_only: false,
            protected: false,
            refresh_secs: None,
            max_calls_per_minute: None,
            reason_headers: Vec::new(),
            notify: None,
        };
        let secrets = SecretMap::new().with(PASSWORD_VAR, rmq.password.clone());
        let b = build_with(&profile, &secrets)
            .await
            .expect("backend builds");
        CeleryFixture {
            b,
            rmq,
            created: Mutex::new(Vec::new()),
        }
    }

    fn name(&self, tag: &str) -> String {
        let name = format!(
            "qdeck-test-celery-{tag}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        );
        self.created.lock().unwrap().push(name.clone());
        name
    }

    fn script(&self, args: &[&str]) -> serde_json::Value {
        run_script("celery_scene.py", args)
    }
}

impl contract::Fixture for CeleryFixture {
    fn backend(&self) -> &dyn Backend {
        self.b.as_ref()
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let q = self.name(tag);
        let made = self.script(&[
            "contract",
            &self.rmq.kombu_url,
            &q,
            &ready.to_string(),
            &dead.to_string(),
        ]);
        let dlq = made["dlq"].as_str().expect("the scene's DLQ").to_string();
        self.created.lock().unwrap().push(dlq.clone());
        contract::Scene {
            tag: tag.to_string(),
            src: QueueId::new(q),
            dlq: QueueId::new(dlq),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        let q = self.name(tag);
        // Celery declares a task queue as it sends to it; none sent here.
        self.script(&["tasks", &self.rmq.kombu_url, &q, "0", "plain"]);
        QueueId::new(q)
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        self.script(&[
            "tasks",
            &self.rmq.kombu_url,
            scene.dlq.as_str(),
            &n.to_string(),
            "late",
        ]);
    }

    async fn cleanup(&self) {
        let names = std::mem::take(&mut *self.created.lock().unwrap());
        for q in names {
            self.script(&["delete", &self.rmq.kombu_url, &q]);
        }
    }

    /// The management API refreshes its message counts every 5 s.
    fn settle(&self) -> Duration {
        Duration::from_secs(6)
    }
}
