//! The backend contract suite on the embedded local broker (always runs).

mod contract;

use std::time::Duration;

use qdeck::backend::local::{LocalHandle, QueueOptions};
use qdeck::backend::Backend;
use qdeck::domain::{OutgoingMessage, QueueId};

struct LocalFixture {
    handle: LocalHandle,
}

impl contract::Fixture for LocalFixture {
    async fn scene(
        &self,
        b: &dyn Backend,
        tag: &str,
        ready: usize,
        dead: usize,
    ) -> (QueueId, QueueId) {
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
            .unwrap();
        let id = QueueId::new(&src);
        for i in 0..dead {
            b.send(
                &id,
                OutgoingMessage {
                    body: format!("dead {i}").into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        // One failed receive each sends them to the DLQ (max_receives = 1).
        let got = local.receive(&src, "fixture", dead, None).unwrap();
        let receipts: Vec<String> = got.iter().map(|l| l.receipt.clone()).collect();
        local
            .nack(&src, "fixture", &receipts, Duration::ZERO)
            .unwrap();
        for i in 0..ready {
            b.send(
                &id,
                OutgoingMessage {
                    body: format!("ready {i}").into_bytes(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        (id, QueueId::new(dlq))
    }
}

#[tokio::test]
async fn local_broker_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let handle = LocalHandle::open(&dir.path().join("q.db")).unwrap();
    let backend = LocalHandle(handle.0.clone());
    contract::run(&backend, &LocalFixture { handle }, "contract").await;
}
