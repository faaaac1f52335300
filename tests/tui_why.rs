//! Why it died, first (issue 41 item 11): at 80×24 the message view opens on a `why` line with
//! the failure's own words (the exception, not the broker's `rejected`), its fields sit under
//! labelled sections, and each REASON cell of the DLQ list shows the most specific text the
//! message records. Broker text stays escaped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::console::*;

use crossterm::event::KeyCode;

use qdeck::tui::state::{State, View};
use qdeck::tui::{update, Action};
use qdeck_model::domain::*;

const EXCEPTION: &str = "customer 42 not found in billing-eu";

/// A RabbitMQ dead letter as its backend reads it: `x-death` and friends as broker fields,
/// AMQP properties, a dozen application headers with `x-exception-message` last (past the
/// first screen when fields are listed in order), and the exception as `why`.
fn rabbit_dead_letter() -> Message {
    let mut headers: Vec<(String, Value)> = (1..=12)
        .map(|i| (format!("x-app-{i:02}"), Value::str(format!("value {i}"))))
        .collect();
    headers.push(("x-exception-message".into(), Value::str(EXCEPTION)));
    Message {
        id: "r1".into(),
        seq: Some(1),
        enqueued_ms: Some(T0),
        receive_count: Some(1),
        key: None,
        meta: vec![
            ("x-first-death-reason".into(), Value::str("rejected")),
            ("x-first-death-queue".into(), Value::str("orders")),
            ("exchange".into(), Value::str("")),
            ("routing_key".into(), Value::str("orders")),
            ("redelivered".into(), Value::Bool(false)),
        ],
        properties: vec![
            ("content_type".into(), Value::str("application/json")),
            ("delivery_mode".into(), Value::I32(2)),
        ],
        headers,
        body: br#"{"customer":42}"#.to_vec(),
        body_null: false,
        dead_letter: Some(DeadLetterInfo {
            reason: Some("rejected".into()),
            description: Some("last died in 'orders' via exchange \"\"; 1 death record(s)".into()),
            why: Some(EXCEPTION.into()),
            origin: Some(QueueId::new("orders")),
            count: Some(3),
            ..Default::default()
        }),
    }
}

/// A Service Bus dead letter whose description carries an escape sequence, and an SQS one
/// that records nothing more specific than the broker's own reason.
fn others() -> Vec<Message> {
    vec![
        Message {
            id: "s2".into(),
            seq: Some(2),
            enqueued_ms: Some(T0 + 1000),
            dead_letter: Some(DeadLetterInfo {
                reason: Some("MaxDeliveryCountExceeded".into()),
                why: Some("lock lost \x1b[2J while charging".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        Message {
            id: "q3".into(),
            seq: Some(3),
            enqueued_ms: Some(T0 + 2000),
            dead_letter: Some(DeadLetterInfo {
                reason: Some("maxReceiveCount exceeded".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    ]
}

fn browsed() -> State {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('b'));
    let mut messages = vec![rabbit_dead_letter()];
    messages.extend(others());
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages,
                next: None,
                effect_note: None,
            }),
        },
    );
    st
}

fn row_of<'a>(screen: &'a str, id: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(&format!(" {id} ")))
        .unwrap_or_else(|| panic!("no row {id}:\n{screen}"))
}

#[test]
fn each_reason_cell_shows_the_most_specific_text_recorded() {
    let st = browsed();
    let t = draw(&st, 80, 24);
    assert_no_controls(&t);
    let screen = text(&t);
    let r1 = row_of(&screen, "r1");
    assert!(r1.contains("customer 42"), "{r1}\n{screen}");
    assert!(!r1.contains("rejected"), "{r1}\n{screen}");
    assert!(row_of(&screen, "s2").contains("lock lost ␛[2J"), "{screen}");
    // Nothing more specific recorded: the broker's word it is.
    assert!(
        row_of(&screen, "q3").contains("maxReceiveCount"),
        "{screen}"
    );
}

#[test]
fn the_message_view_opens_on_why_it_died_with_labelled_sections() {
    let mut st = browsed();
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    let t = draw(&st, 80, 24);
    assert_no_controls(&t);
    let screen = text(&t);
    let rows: Vec<&str> = screen.lines().collect();
    // The first row inside the message's frame is the why line.
    let first = rows
        .iter()
        .position(|l| l.starts_with("┌ message "))
        .map(|i| rows[i + 1])
        .unwrap();
    assert!(first.contains(&format!("why {EXCEPTION}")), "{screen}");
    assert!(!screen.contains("reason rejected"), "{screen}");
    // The broker's account follows: its word, where from, how often.
    assert!(
        screen.contains("dead-lettered: rejected") && screen.contains("from orders"),
        "{screen}"
    );
    assert!(screen.contains("3 time(s)"), "{screen}");

    // Every section is labelled, in order: broker fields, properties, headers, body. The
    // view is read page by page, as a user would.
    let mut seen = String::new();
    for _ in 0..6 {
        seen.push_str(&text(&draw(&st, 80, 24)));
        update(&mut st, code(KeyCode::PageDown));
    }
    let at = |label: &str| {
        seen.find(label)
            .unwrap_or_else(|| panic!("no {label:?} in\n{seen}"))
    };
    assert!(at("── broker fields") < at("── properties"));
    assert!(at("── properties") < at("── headers"));
    assert!(at("── headers") < at("── body"));
    assert!(seen.contains("x-first-death-reason: rejected"), "{seen}");
}

#[test]
fn a_why_with_escapes_stays_escaped_in_the_message_view() {
    let mut st = browsed();
    update(&mut st, key('j'));
    update(&mut st, code(KeyCode::Enter));
    let t = draw(&st, 80, 24);
    assert_no_controls(&t);
    let screen = text(&t);
    assert!(
        screen.contains("why lock lost ␛[2J while charging"),
        "{screen}"
    );
    // The broker's own reason is on the line below, not lost.
    assert!(
        screen.contains("dead-lettered: MaxDeliveryCountExceeded"),
        "{screen}"
    );
}

/// A Kafka record with a null value (a tombstone) and a null header beside one with an empty
/// value: the list and the message view say null where the broker said null, and (empty) only
/// where the bytes are empty.
#[test]
fn a_null_value_reads_null_and_an_empty_one_empty() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('b'));
    let record = |id: &str, seq: i64, null: bool| Message {
        id: id.into(),
        seq: Some(seq),
        enqueued_ms: Some(T0),
        key: Some(format!("order-{seq}")),
        meta: [
            ("partition".to_string(), Value::I32(0)),
            ("offset".to_string(), Value::I64(seq)),
        ]
        .into_iter()
        .chain(null.then(|| ("value".to_string(), Value::Null)))
        .collect(),
        headers: vec![("trace".into(), Value::Null)],
        body_null: null,
        ..Default::default()
    };
    page(
        &mut st,
        "orders-dlq",
        vec![record("0:1", 1, true), record("0:2", 2, false)],
    );
    let screen = text(&draw(&st, 80, 24));
    assert!(row_of(&screen, "0:1").contains("(null)"), "{screen}");
    assert!(row_of(&screen, "0:2").contains("(empty)"), "{screen}");
    update(&mut st, code(KeyCode::Enter));
    let screen = text(&draw(&st, 80, 24));
    assert!(screen.contains("value: null"), "{screen}");
    assert!(screen.contains("trace: null"), "{screen}");
    assert!(
        screen.contains("── body (null)") && screen.contains("null body"),
        "{screen}"
    );
}
