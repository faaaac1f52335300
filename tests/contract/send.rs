//! Sending in batches (`send_many`): every message arrives once with its headers, and a batch
//! to a queue that is not there sends nothing and says why.

use std::collections::BTreeMap;

use qdeck_backend::BackendError;
use qdeck_model::domain::*;

use super::support::{browse_all, does_not_apply, expect_count};
use super::{tag, Fixture};

/// Five SendMessageBatch calls on SQS, one pipelined channel on RabbitMQ; within the one page
/// of 50 an SQS browse shows.
const BATCH: usize = 45;

fn outgoing(t: &str, n: usize) -> Vec<OutgoingMessage> {
    (0..n)
        .map(|i| OutgoingMessage {
            body: format!("{t} body {i}").into_bytes(),
            headers: vec![("x-seq".to_string(), i.to_string().into())],
            ..Default::default()
        })
        .collect()
}

/// Every message of a batch arrives once, with its header; the answers are one per message,
/// all sent, with distinct ids where the broker gives ids.
pub async fn send_many_delivers_every_message_once<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let t = tag("batch");
    let Some(sender) = b.sender() else {
        does_not_apply("send_many_delivers_every_message_once", "no sender facet");
        return;
    };
    let q = fx.plain_queue(&t).await;
    let answers = sender.send_many(&q, outgoing(&t, BATCH)).await;
    assert_eq!(answers.len(), BATCH, "one answer per message");
    let ids: Vec<String> = answers
        .into_iter()
        .enumerate()
        .filter_map(|(i, a)| a.unwrap_or_else(|e| panic!("message {i} not sent: {e}")))
        .collect();
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "ids repeat: {ids:?}");
    expect_count(fx, &q, BATCH, "every message of the batch").await;
    let seen: BTreeMap<String, String> = browse_all(b, &q, true)
        .await
        .into_iter()
        .map(|m| {
            // The header as it was sent: a text value under its own name, on every broker.
            let seq = m
                .headers
                .iter()
                .find(|(k, _)| k == "x-seq")
                .and_then(|(_, v)| v.as_str())
                .map_or_else(
                    || panic!("no x-seq header on {:?}", m.headers),
                    str::to_string,
                );
            (seq, String::from_utf8_lossy(&m.body).into_owned())
        })
        .collect();
    assert_eq!(seen.len(), BATCH, "each message once");
    for i in 0..BATCH {
        assert_eq!(seen.get(&i.to_string()), Some(&format!("{t} body {i}")));
    }
}

/// A batch for a queue that does not exist sends nothing: the first answer says the queue is
/// not there, and no answer claims a message was sent.
pub async fn send_many_to_a_missing_queue_sends_nothing<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let t = tag("nobatch");
    let q = QueueId::new(format!("{t}-missing"));
    let Some(sender) = b.sender() else {
        does_not_apply(
            "send_many_to_a_missing_queue_sends_nothing",
            "no sender facet",
        );
        return;
    };
    let answers = sender.send_many(&q, outgoing(&t, 15)).await;
    assert!(
        !answers.is_empty(),
        "an answer for the first message at least"
    );
    assert!(
        matches!(answers[0], Err(BackendError::NotFound(_))),
        "{:?}",
        answers[0]
    );
    assert!(answers.iter().all(Result::is_err), "{answers:?}");
}
