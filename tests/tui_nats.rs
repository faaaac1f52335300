//! The console on NATS JetStream: consumer rows `STREAM/CONSUMER` with the depth of their
//! dead letters, and the DLQ browse joining each advisory with its original, drawn from what
//! the real server answered (the scene made and failed by nats-py, as in tests/nats.rs).
//!
//! Needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON (nats-py).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::sync::Arc;

use common::console::{clock_at_last_poll, code, draw, key, listed_state, select, text};
use common::nats::{nats_url, peer, profile, Scene};
use crossterm::event::KeyCode;
use qdeck::tui::state::{Setup, State};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::{build, Backend};
use qdeck_engine::poller::PollEvent;
use qdeck_model::config::NatsSettings;
use qdeck_model::domain::*;

/// A console state holding what `b` lists and its figures now.
async fn polled(b: &Arc<dyn Backend>) -> State {
    let queues = b.list_queues().await.unwrap();
    let ids: Vec<QueueId> = queues.iter().map(|q| q.id.clone()).collect();
    let mut st = listed_state(Setup::new("nats-test", "nats"), b.capabilities(), queues);
    let batch = b.stats(&ids).await.unwrap();
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);
    update(&mut st, Action::Poll(PollEvent::Stats(batch)));
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(160, 30));
    st
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_NATS_URL and QDECK_TEST_PYTHON with nats-py"]
async fn consumer_rows_show_their_dead_letters_and_the_dlq_browses_them() {
    let scene = Scene::new();
    let b = build(&profile(NatsSettings {
        url: Some(nats_url()),
        stream_prefix: Some(scene.p.clone()),
        ..Default::default()
    }))
    .await
    .unwrap();
    let worker = format!("{}/worker", scene.wq());
    let wq = QueueId::new(worker.clone());
    let (dlq, _) = qdeck_backend::dlq_creation_of(b.as_ref(), &wq)
        .unwrap()
        .create_dlq(&wq)
        .await
        .unwrap();
    peer(&["fail", &scene.p]);
    let mut st = polled(&b).await;

    let screen = text(&draw(&st, 160, 30));
    let row = |name: &str| {
        screen
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{screen}"))
            .to_string()
    };
    // The consumer's row carries its DLQ's depth: 4 dead letters (3 max_deliver, 1 terminated).
    let w = row(&worker);
    assert!(
        w.split_whitespace().any(|c| c == "4"),
        "DLQ column of {worker}: {w}\n{screen}"
    );
    for c in ["reader", "pusher"] {
        row(&format!("{}/{c}", scene.lim()));
    }
    // The limits stream keeps what its consumers read: its 5 messages are retention, in
    // parentheses, not a depth (issue 41 item 12).
    let own = format!("{}/", scene.lim());
    let lim = screen
        .lines()
        .find(|l| l.contains(&scene.lim()) && !l.contains(&own))
        .unwrap_or_else(|| panic!("no row {}:\n{screen}", scene.lim()));
    assert!(lim.contains("(5)"), "{lim}\n{screen}");

    // Browsing the DLQ asks the backend for a page; the real answer is drawn.
    select(&mut st, dlq.as_str());
    let fx = update(&mut st, key('b'));
    let (queue, cursor) = fx
        .iter()
        .find_map(|e| match e {
            Effect::Browse { queue, cursor, .. } => Some((queue.clone(), cursor.clone())),
            _ => None,
        })
        .expect("a browse");
    assert_eq!(queue, dlq);
    let page = b
        .browse(
            &queue,
            &BrowseRequest {
                cursor,
                max: 50,
                force: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 4);
    update(
        &mut st,
        Action::Page {
            queue: queue.clone(),
            append: false,
            result: Ok(page),
        },
    );
    let screen = text(&draw(&st, 160, 30));
    let reasons: Vec<&str> = ["terminated", "max_deliveries"]
        .into_iter()
        .filter(|r| screen.contains(r))
        .collect();
    assert_eq!(reasons.len(), 2, "{screen}");

    // The terminated one: a work queue dropped its original, and 2.9 gave no reason.
    update(&mut st, code(KeyCode::Enter));
    let detail = text(&draw(&st, 160, 40));
    assert!(detail.contains("gone: stream"), "{detail}");
    assert!(
        detail.contains("nats-server 2.9 sends no AckTerm reason"),
        "{detail}"
    );
    update(&mut st, code(KeyCode::Esc));
    // A max_deliver one: its original's subject, headers and body, fetched by sequence.
    update(&mut st, key('j'));
    update(&mut st, code(KeyCode::Enter));
    let detail = text(&draw(&st, 160, 40));
    for want in [
        format!("{}.wq.orders.1", scene.p),
        "X-Kind".to_string(),
        "poison".to_string(),
        "max_deliveries".to_string(),
    ] {
        assert!(detail.contains(&want), "{want} in:\n{detail}");
    }
}
