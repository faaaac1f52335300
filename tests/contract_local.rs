//! The backend contract suite on the embedded local broker: needs nothing, always runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod contract;

use std::time::Duration;

use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_backend::Backend;
use qdeck_model::domain::{OutgoingMessage, QueueId};

/// Each test gets its own database in its own temporary directory.
struct LocalFixture {
    handle: LocalHandle,
    _dir: tempfile::TempDir,
}

impl LocalFixture {
    async fn setup() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let handle = LocalHandle::open(&dir.path().join("q.db")).expect("local broker opens");
        LocalFixture { handle, _dir: dir }
    }

    async fn send(&self, q: &QueueId, body: String) {
        self.handle
            .sender()
            .expect("this backend publishes")
            .send(
                q,
                OutgoingMessage {
                    body: body.into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .expect("send");
    }
}

impl contract::Fixture for LocalFixture {
    fn backend(&self) -> &dyn Backend {
        &self.handle
    }

    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> contract::Scene {
        let (src, dlq) = (format!("{tag}-src"), format!("{tag}-dlq"));
        let local = &self.handle.0;
        local
            .create_queue(
                &src,
                &QueueOptions {
                    max_receives: Some(1),
                    dlq: Some(dlq.clone()),
                    ..Default::default()
                },
            )
            .expect("create source");
        let id = QueueId::new(&src);
        for i in 0..dead {
            self.send(&id, format!("{tag} dead {i}")).await;
        }
        // One failed receive each sends them to the DLQ (max_receives = 1).
        let got = local.receive(&src, "fixture", dead, None).expect("receive");
        assert_eq!(got.len(), dead, "fixture received every message to fail");
        let receipts: Vec<String> = got.iter().map(|l| l.receipt.clone()).collect();
        local
            .nack(&src, "fixture", &receipts, Duration::ZERO)
            .expect("nack");
        for i in 0..ready {
            self.send(&id, format!("{tag} ready {i}")).await;
        }
        contract::Scene {
            tag: tag.to_string(),
            src: id,
            dlq: QueueId::new(dlq),
            ready,
            dead,
        }
    }

    async fn plain_queue(&self, tag: &str) -> QueueId {
        self.handle
            .0
            .create_queue(tag, &QueueOptions::default())
            .expect("create queue");
        QueueId::new(tag)
    }

    async fn add_dead(&self, scene: &contract::Scene, n: usize) {
        for i in 0..n {
            self.send(&scene.dlq, format!("{} late {i}", scene.tag))
                .await;
        }
    }

    /// The temporary directory goes with the fixture.
    async fn cleanup(&self) {}
}

contract_tests!(setup = LocalFixture::setup());
