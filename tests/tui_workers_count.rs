//! One worker count for every view (issue 41 item 9, "the detail summary says `workers —`
//! while the view lists one"): on a broker whose figures do not count consumers (Redis job
//! queues, a NATS pull consumer between pulls) the detail loads the same list the workers view
//! shows, and the detail, the queue table's summary and the workers view agree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::console::*;

use crossterm::event::KeyCode;

use qdeck::tui::state::{Setup, State, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_model::domain::*;

/// One queue, `jobs`, polled for 20 s by a broker whose figures have no consumer count.
fn uncounted() -> State {
    uncounted_on(caps())
}

/// `uncounted`, on a broker that can do `caps`.
fn uncounted_on(caps: Capabilities) -> State {
    let mut st = listed_state(
        Setup::new("redis", "redis"),
        caps,
        vec![qinfo("jobs", None)],
    );
    let epoch = st.store.epoch_ms();
    for t in 0..=20i64 {
        polled(
            &mut st,
            vec![QueueStats {
                id: QueueId::new("jobs"),
                at_ms: epoch + t * 1000,
                depth: Some(5),
                in_flight: Some(1),
                oldest_age_secs: Some(3.0),
                consumers: None,
                ..Default::default()
            }],
        );
    }
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(120, 40));
    st
}

fn worker(tag: &str, status: WorkerState, now: i64) -> Consumer {
    Consumer {
        queue: QueueId::new("jobs"),
        tag: tag.into(),
        peer: None,
        prefetch: None,
        ack_mode: AckMode::Manual,
        state: format!("{status:?}").to_lowercase(),
        status,
        status_since_ms: None,
        holding: None,
        processed: None,
        failed: None,
        rate: None,
        last_seen_ms: Some(now - 1000),
    }
}

/// The consumers the broker lists for `jobs`: one live worker and one gone an hour ago.
fn listed(now: i64) -> Action {
    Action::Consumers {
        queue: QueueId::new("jobs"),
        result: Ok(vec![
            worker("sidekiq-host-1", WorkerState::Busy, now),
            worker("sidekiq-host-0", WorkerState::Gone, now - 3_600_000),
        ]),
    }
}

#[test]
fn the_detail_the_summary_and_the_workers_view_count_the_same_workers() {
    let mut st = uncounted();
    // Before any list, the figures say nothing: `—`, not a guess.
    let screen = text(&draw(&st, 120, 40));
    assert!(screen.contains("workers —"), "{screen}");

    // The detail asks for the list the workers view shows, at the poll rhythm.
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    let now = st.now_ms;
    let fx = update(&mut st, Action::Tick(now + 1000));
    assert!(
        fx.contains(&Effect::Consumers(QueueId::new("jobs"))),
        "{fx:?}"
    );
    update(&mut st, listed(now));
    let screen = text(&draw(&st, 120, 40));
    assert!(
        screen.contains("workers 1") && !screen.contains("workers —"),
        "{screen}"
    );

    // The queue table's summary reads the same list.
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Queues);
    let screen = text(&draw(&st, 120, 40));
    assert!(
        screen.contains("workers 1") && !screen.contains("workers —"),
        "{screen}"
    );

    // And the workers view lists that one live worker first, the gone one after.
    let fx = update(&mut st, key('w'));
    assert!(fx.contains(&Effect::Consumers(QueueId::new("jobs"))));
    update(&mut st, listed(now));
    let screen = text(&draw(&st, 120, 40));
    let live = screen.find("sidekiq-host-1").expect("the live worker");
    let gone = screen.find("sidekiq-host-0").expect("the gone worker");
    assert!(live < gone, "{screen}");
}

#[test]
fn a_detail_on_a_broker_that_cannot_list_workers_asks_for_none() {
    let mut sqs = caps();
    sqs.consumers = ConsumerListing::Unsupported("SQS does not list consumers".into());
    let mut st = uncounted_on(sqs);
    update(&mut st, code(KeyCode::Enter));
    let now = st.now_ms;
    let fx = update(&mut st, Action::Tick(now + 1000));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Consumers(_))),
        "{fx:?}"
    );
}
