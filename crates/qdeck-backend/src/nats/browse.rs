//! Browsing by sequence with `STREAM.MSG.GET`: no consumer is created and nothing is acked.
//! A stream pages through its messages; a consumer through those past its ack floor that
//! match its filter; a capture stream (a DLQ) through its advisories, each joined with the
//! original message read from its stream by sequence ("gone" when the stream lost it).

use serde_json::Value as Json;

use super::model::{Advisory, StoredMsg, StreamInfo};
use super::{figures, msg, NatsBackend, Target};
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// The page size when the request gives none.
const DEFAULT_PAGE: usize = 50;

/// What `Message::meta` says about a dead letter whose original the stream no longer holds.
pub const GONE: &str = "gone";

/// What a terminated dead letter says when its advisory carries no reason.
pub const NO_TERM_REASON: &str = "none in the advisory: nats-server 2.9 sends no AckTerm reason (newer servers pass on the worker's)";

fn cursor(req: &BrowseRequest) -> Result<Option<u64>> {
    req.cursor
        .as_deref()
        .map(|c| {
            c.parse::<u64>()
                .map_err(|_| BackendError::Invalid(format!("bad cursor {c:?}")))
        })
        .transpose()
}

pub async fn browse(b: &NatsBackend, queue: &QueueId, req: &BrowseRequest) -> Result<Page> {
    let max = if req.max == 0 { DEFAULT_PAGE } else { req.max };
    match Target::parse(queue) {
        Target::Stream(s) => {
            let info = b.stream(&s).await?;
            let from = cursor(req)?.unwrap_or(info.state.first_seq.max(1));
            if super::dlq::is_capture(&info) {
                let (advisories, next) = walk_dead(b, &info, from, max).await?;
                let mut messages = Vec::with_capacity(advisories.len());
                for a in &advisories {
                    messages.push(dead_letter(b, a).await?);
                }
                return Ok(Page {
                    messages,
                    next,
                    effect_note: None,
                });
            }
            let (found, next) = walk(b, &s, from, ">", max).await?;
            Ok(page(&s, &found, next))
        }
        Target::Consumer(s, c) => {
            let ci = b.consumer(&s, &c).await?;
            let from = match cursor(req)? {
                Some(seq) => seq,
                None => first_seq(b, &ci).await?,
            };
            let (found, next) = walk(b, &s, from, ci.filter(), max).await?;
            Ok(page(&s, &found, next))
        }
    }
}

/// Where a consumer's browse starts. Without a DLQ, past its ack floor: the messages it gave up
/// on (past max_deliver) show there, the only place they can. With a DLQ capturing its
/// advisories, those are dead letters browsed in the DLQ, and the consumer shows what it
/// still holds (`ConsumerInfo::first_held_seq`), as its figures count it.
async fn first_seq(b: &NatsBackend, ci: &super::model::ConsumerInfo) -> Result<u64> {
    let streams = b.streams().await?;
    Ok(
        match super::dlq::capture_for(&streams, &ci.stream_name, &ci.name) {
            Some(_) => ci.first_held_seq(),
            None => ci.ack_floor.stream_seq + 1,
        },
    )
}

/// Up to `max` messages of `stream` from sequence `from` whose subject matches `filter`, and
/// the cursor after them (`None` at the end).
pub async fn walk(
    b: &NatsBackend,
    stream: &str,
    from: u64,
    filter: &str,
    max: usize,
) -> Result<(Vec<StoredMsg>, Option<String>)> {
    let mut out = Vec::new();
    let mut seq = from.max(1);
    while out.len() < max {
        match msg::get(b, stream, seq, Some(filter)).await? {
            Some(m) => {
                seq = m.seq + 1;
                out.push(m);
            }
            None => return Ok((out, None)),
        }
    }
    Ok((out, Some(seq.to_string())))
}

/// Up to `max` dead-letter advisories of capture stream `info` from sequence `from`, in
/// sequence order, and the cursor after them. A stream that takes other advisories too (one
/// on `$JS.EVENT.ADVISORY.>` holds every nak) is read along the two dead-letter subjects and
/// the two merged, so a nak is never listed, redriven or purged as a dead letter.
pub async fn walk_dead(
    b: &NatsBackend,
    info: &StreamInfo,
    from: u64,
    max: usize,
) -> Result<(Vec<StoredMsg>, Option<String>)> {
    let s = info.config.name.as_str();
    if super::dlq::only_dead_letters(info) {
        return walk(b, s, from, ">", max).await;
    }
    let filters = super::dlq::dead_letter_filters();
    let from = from.max(1);
    let mut heads = [
        msg::get(b, s, from, Some(&filters[0])).await?,
        msg::get(b, s, from, Some(&filters[1])).await?,
    ];
    let mut out = Vec::new();
    while out.len() < max {
        let pick = match (&heads[0], &heads[1]) {
            (None, None) => return Ok((out, None)),
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some(x), Some(y)) => usize::from(y.seq < x.seq),
        };
        let Some(m) = heads[pick].take() else { break };
        heads[pick] = msg::get(b, s, m.seq + 1, Some(&filters[pick])).await?;
        out.push(m);
    }
    let next = heads.iter().flatten().map(|m| m.seq).min();
    Ok((out, next.map(|n| n.to_string())))
}

fn page(stream: &str, found: &[StoredMsg], next: Option<String>) -> Page {
    Page {
        messages: found.iter().map(|m| message(stream, m)).collect(),
        next,
        effect_note: None,
    }
}

/// A stored message as qdeck shows it: the publisher's dedup id a property, the other
/// headers as text, and the stream, subject and sequence as broker metadata.
pub fn message(stream: &str, m: &StoredMsg) -> Message {
    let mut properties = Vec::new();
    let mut headers = Vec::new();
    for (k, v) in msg::parse_headers(&m.header_block()) {
        if k.eq_ignore_ascii_case("Nats-Msg-Id") {
            properties.push((k, Value::String(v)));
        } else {
            headers.push((k, Value::String(v)));
        }
    }
    Message {
        id: m.seq.to_string(),
        seq: i64::try_from(m.seq).ok(),
        enqueued_ms: m.time_ms(),
        properties,
        headers,
        meta: vec![
            ("stream".into(), Value::str(stream)),
            ("subject".into(), Value::str(m.subject.clone())),
            ("seq".into(), Value::str(m.seq.to_string())),
        ],
        body: m.body(),
        ..Default::default()
    }
}

/// An advisory read from a capture stream, joined with the message it names. The id is the
/// advisory's sequence in the capture stream (what delete and redrive act on); `seq` is the
/// original's sequence in its own stream.
pub async fn dead_letter(b: &NatsBackend, a: &StoredMsg) -> Result<Message> {
    let adv: Advisory = serde_json::from_slice(&a.body()).map_err(|e| {
        BackendError::Protocol(format!(
            "capture stream message {} is not a JetStream advisory: {e}",
            a.seq
        ))
    })?;
    let original = match msg::get(b, &adv.stream, adv.stream_seq, None).await {
        Ok(m) => m,
        // The whole stream is gone: every one of its dead letters is.
        Err(BackendError::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    let mut m = match &original {
        Some(o) => message(&adv.stream, o),
        None => Message {
            seq: i64::try_from(adv.stream_seq).ok(),
            meta: vec![
                ("stream".into(), Value::str(adv.stream.clone())),
                ("seq".into(), Value::str(adv.stream_seq.to_string())),
            ],
            ..Default::default()
        },
    };
    m.id = a.seq.to_string();
    m.receive_count = Some(adv.deliveries);
    m.meta
        .push(("consumer".into(), Value::str(adv.consumer.clone())));
    m.meta
        .push(("advisory_seq".into(), Value::str(a.seq.to_string())));
    m.meta.push(("advisory".into(), Value::str(adv.why())));
    m.meta
        .push(("deliveries".into(), Value::str(adv.deliveries.to_string())));
    match adv.reason.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => m.meta.push(("reason".into(), Value::str(r))),
        None if adv.why() == "terminated" => m
            .meta
            .push(("terminate reason".into(), Value::str(NO_TERM_REASON))),
        None => {}
    }
    if original.is_none() {
        m.meta.push((
            "original".into(),
            Value::str(format!(
                "{GONE}: stream {} no longer holds sequence {}",
                adv.stream, adv.stream_seq
            )),
        ));
    }
    m.dead_letter = Some(DeadLetterInfo {
        reason: Some(adv.why().to_string()),
        description: adv.reason.clone().filter(|r| !r.is_empty()),
        why: adv.reason.clone().filter(|r| !r.trim().is_empty()),
        origin: Some(figures::consumer_id(&adv.stream, &adv.consumer)),
        count: Some(adv.deliveries),
        at_ms: super::model::rfc3339_ms(&adv.timestamp).or_else(|| a.time_ms()),
    });
    Ok(m)
}

/// The advisory behind a dead letter's id (its sequence in the capture stream).
pub async fn advisory_at(b: &NatsBackend, capture: &str, seq: u64) -> Result<Option<Advisory>> {
    let Some(a) = msg::get(b, capture, seq, None).await? else {
        return Ok(None);
    };
    let adv: Json = serde_json::from_slice(&a.body()).unwrap_or(Json::Null);
    Ok(serde_json::from_value(adv).ok())
}
