//! Redrive from a capture stream (a consumer's DLQ): for each dead letter, publish the
//! original again to its subject with its headers and the `x-qdeck-*` stamps, wait for the
//! stream's PubAck, then delete the original sequence (`MSG.DELETE`), then the advisory.
//! Copy → confirm → delete: a crash between the steps leaves at most the messages in flight
//! (the window) delivered twice, never one lost. An advisory whose original is already gone
//! (a crash after the delete, or a purge) is removed as stale, nothing is published for it.

use std::sync::Mutex;

use async_nats::{HeaderMap, HeaderName};
use futures::stream::{self, StreamExt};
use serde_json::Value as Json;

use super::model::{Advisory, StoredMsg};
use super::{browse, figures, msg, NatsBackend, Target};
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;
use qdeck_model::rate::Limiter;

/// Publishes awaiting their PubAck at once when the request does not say (`window`): what a
/// crash may duplicate, and what keeps the round trips overlapped.
pub const DEFAULT_WINDOW: u32 = 64;
/// Advisories read per page of the capture stream.
const PAGE: usize = 256;

pub const MODE: &str =
    "client-side: republish to the original subject, PubAck, then MSG.DELETE of the original and of its advisory";

/// Headers the server acts on at publish time: a kept dedup id would make the copy a
/// "duplicate" that is never stored, a kept expectation would fail the publish.
fn server_acted(name: &str) -> bool {
    name.eq_ignore_ascii_case("Nats-Msg-Id")
        || name.to_ascii_lowercase().starts_with("nats-expected-")
}

const COUNT: &str = "x-qdeck-redriven";
const AT: &str = "x-qdeck-redriven-at";
const FROM: &str = "x-qdeck-redriven-from";

/// The original's dedup id, kept for consumers that key on it.
const MSG_ID: &str = "x-qdeck-nats-msg-id";

/// The copy's headers: the original's (less those the server acts on; its dedup id kept as
/// `x-qdeck-nats-msg-id`), then the stamps. A name the client cannot send (non-ASCII, a
/// control character) fails this one message, with the name said.
pub fn copy_headers(
    original: &[(String, String)],
    from: &str,
    now_ms: i64,
) -> std::result::Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    let mut before = 0u64;
    for (k, v) in original {
        if k.eq_ignore_ascii_case(COUNT) {
            before = v.trim().parse().unwrap_or(0);
            continue;
        }
        if k.eq_ignore_ascii_case("Nats-Msg-Id") {
            h.insert(MSG_ID, v.as_str());
            continue;
        }
        if server_acted(k) || k.eq_ignore_ascii_case(AT) || k.eq_ignore_ascii_case(FROM) {
            continue;
        }
        let name: HeaderName = k.parse().map_err(|_| {
            format!(
                "header {:?} cannot be sent again by this client (not a valid NATS header name)",
                qdeck_model::sanitize::clean_short(k, 60)
            )
        })?;
        h.append(name, v.as_str());
    }
    h.insert(COUNT, (before + 1).to_string());
    h.insert(AT, now_ms.to_string());
    h.insert(FROM, from);
    Ok(h)
}

enum One {
    Moved,
    /// Not published (or the copy was not stored): the dead letter stays.
    Failed(String),
    /// Published and confirmed, but the original could not be confirmed deleted.
    Duplicated(String),
    /// The original was no longer in its stream: its stale advisory was removed.
    Gone,
}

fn check_target(req: &RedriveRequest, adv: &Advisory) -> Option<String> {
    match &req.target {
        RedriveTarget::Origin => None,
        RedriveTarget::Queue(t) => {
            let origin = figures::consumer_id(&adv.stream, &adv.consumer);
            (t != &origin && t.as_str() != adv.stream).then(|| {
                format!(
                    "a JetStream dead letter goes back to its own subject in stream {} (target origin or {origin}), not to {t}",
                    adv.stream
                )
            })
        }
    }
}

async fn move_one(
    b: &NatsBackend,
    capture: &str,
    req: &RedriveRequest,
    a: &StoredMsg,
) -> Result<One> {
    let adv: Advisory = serde_json::from_slice(&a.body()).map_err(|e| {
        BackendError::Protocol(format!(
            "capture stream message {} is no advisory: {e}",
            a.seq
        ))
    })?;
    if !adv.is_dead_letter() {
        return Ok(One::Failed(format!(
            "capture stream message {} is a {} advisory, not a dead letter: left alone",
            a.seq,
            qdeck_model::sanitize::clean_short(&adv.kind, 80)
        )));
    }
    if let Some(why) = check_target(req, &adv) {
        return Ok(One::Failed(why));
    }
    let Some(original) = msg::get(b, &adv.stream, adv.stream_seq, None).await? else {
        msg::delete(b, capture, a.seq).await?;
        return Ok(One::Gone);
    };
    let from = format!("{}/{}#{}", adv.stream, adv.consumer, adv.stream_seq);
    let headers = match copy_headers(
        &msg::parse_headers(&original.header_block()),
        &from,
        now_ms(),
    ) {
        Ok(h) => h,
        Err(e) => return Ok(One::Failed(format!("seq {}: {e}", adv.stream_seq))),
    };
    let ack = match b
        .conn
        .publish_acked(original.subject.clone(), headers, original.body())
        .await
    {
        Ok(ack) => ack,
        Err(e) => return Ok(One::Failed(format!("seq {}: {e}", adv.stream_seq))),
    };
    if ack.get("duplicate").and_then(Json::as_bool) == Some(true) {
        return Ok(One::Failed(format!(
            "seq {}: the stream took the copy for a duplicate and did not store it",
            adv.stream_seq
        )));
    }
    match msg::delete(b, &adv.stream, adv.stream_seq).await {
        Ok(true) => {}
        Ok(false) => {
            return Ok(One::Duplicated(format!(
                "seq {}: gone from {} before qdeck deleted it (a worker may have taken it too)",
                adv.stream_seq, adv.stream
            )))
        }
        Err(e) => {
            return Ok(One::Duplicated(format!(
                "seq {}: copy stored, original not deleted: {e}",
                adv.stream_seq
            )))
        }
    }
    // A stale advisory only shows as "gone" in a browse and is removed by the next redrive.
    let _ = msg::delete(b, capture, a.seq).await;
    Ok(One::Moved)
}

pub async fn redrive(
    b: &NatsBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let Target::Stream(capture) = Target::parse(&req.source) else {
        return Err(not_a_dlq(&req.source));
    };
    let info = b.stream(&capture).await?;
    if !super::dlq::is_capture(&info) {
        return Err(not_a_dlq(&req.source));
    }
    let only: Option<std::collections::HashSet<&str>> = req
        .only_ids
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());
    let limit = req.max.unwrap_or(u64::MAX);
    let dead = match super::dlq::dead_counts(b, &info).await? {
        Some(c) => c.total,
        None => info.state.messages,
    };
    let total = dead.min(limit);
    progress.set_total(Some(match &only {
        Some(ids) => total.min(ids.len() as u64),
        None => total,
    }));
    progress.phase("republishing");
    let limiter = Limiter::new(req.rate);
    let cancel = progress.cancel_token();
    let window = req.window.unwrap_or(DEFAULT_WINDOW).max(1) as usize;
    let report = Mutex::new(RedriveReport {
        mode: MODE.into(),
        ..Default::default()
    });
    let mut taken = 0u64;
    let mut from = info.state.first_seq.max(1);
    'pages: loop {
        if progress.cancelled() || taken >= limit {
            break;
        }
        let (page, next) = browse::walk_dead(b, &info, from, PAGE).await?;
        let mut batch = Vec::new();
        for a in page {
            if only
                .as_ref()
                .is_some_and(|ids| !ids.contains(a.seq.to_string().as_str()))
            {
                continue;
            }
            if taken >= limit {
                break;
            }
            taken += 1;
            batch.push(a);
        }
        stream::iter(batch)
            .map(|a| {
                let limiter = &limiter;
                let cancel = &cancel;
                let capture = &capture;
                async move {
                    limiter.take(1, cancel).await;
                    if cancel.is_cancelled() {
                        return None;
                    }
                    Some(move_one(b, capture, req, &a).await)
                }
            })
            .buffer_unordered(window)
            .for_each(|r| {
                let mut rep = report
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match r {
                    None => {}
                    Some(Ok(One::Moved)) => {
                        rep.moved += 1;
                        progress.add_done(1);
                    }
                    Some(Ok(One::Gone)) => {
                        push_err(
                            &mut rep,
                            "a dead letter whose original was already gone: its advisory removed"
                                .into(),
                        );
                    }
                    Some(Ok(One::Failed(e)) | Err(BackendError::Protocol(e))) => {
                        rep.failed += 1;
                        progress.add_failed(1);
                        push_err(&mut rep, e);
                    }
                    Some(Ok(One::Duplicated(e))) => {
                        rep.moved += 1;
                        rep.possibly_duplicated += 1;
                        progress.add_done(1);
                        push_err(&mut rep, e);
                    }
                    Some(Err(e)) => {
                        rep.failed += 1;
                        progress.add_failed(1);
                        push_err(&mut rep, e.to_string());
                    }
                }
                futures::future::ready(())
            })
            .await;
        match next.and_then(|n| n.parse::<u64>().ok()) {
            Some(n) => from = n,
            None => break 'pages,
        }
    }
    let mut rep = report
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    rep.cancelled = progress.cancelled();
    Ok(rep)
}

fn push_err(rep: &mut RedriveReport, e: String) {
    // The first few say what went wrong; thousands of the same line say nothing more.
    if rep.errors.len() < 20 {
        rep.errors.push(e);
    }
}

pub fn not_a_dlq(q: &QueueId) -> BackendError {
    BackendError::Unsupported(format!(
        "{q} holds no dead-letter advisories: redrive starts from a consumer's DLQ (`qdeck create-dlq STREAM/CONSUMER` makes one)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_keeps_headers_but_not_the_dedup_id_and_counts_redrives() {
        let orig = vec![
            ("X-Tenant".to_string(), "acme".to_string()),
            ("Nats-Msg-Id".to_string(), "m1".to_string()),
            ("Nats-Expected-Last-Sequence".to_string(), "4".to_string()),
            (COUNT.to_string(), "2".to_string()),
        ];
        let h = copy_headers(&orig, "S/C#9", 77).expect("valid names");
        assert_eq!(
            h.get("X-Tenant").map(async_nats::HeaderValue::as_str),
            Some("acme")
        );
        assert!(h.get("Nats-Msg-Id").is_none());
        assert_eq!(
            h.get(MSG_ID).map(async_nats::HeaderValue::as_str),
            Some("m1")
        );
        assert!(h.get("Nats-Expected-Last-Sequence").is_none());
        assert_eq!(h.get(COUNT).map(async_nats::HeaderValue::as_str), Some("3"));
        assert_eq!(
            h.get(FROM).map(async_nats::HeaderValue::as_str),
            Some("S/C#9")
        );
        let bad = vec![("X-Zoë".to_string(), "1".to_string())];
        let e = copy_headers(&bad, "S/C#9", 77).unwrap_err();
        assert!(e.contains("X-Zo"), "{e}");
    }
}
