//! Celery's remote control over AMQP, as kombu's Mailbox does it: each worker's mailbox is
//! an exclusive queue `<hostname>.celery.pidbox` bound to the fanout exchange
//! `celery.pidbox`; a request published there reaches them all, and each answers to the
//! direct exchange `reply.celery.pidbox` with the caller's routing key and the request's
//! `ticket` header. qdeck declares its own reply queue (exclusive, auto-delete, expiring
//! like kombu's), asks, and counts the mailboxes bound to the exchange (management API) to
//! know when everyone has answered.

use futures::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, ExchangeKind};
use serde::Deserialize;

use super::conn::amqp_error;
use super::headers::{header, to_value};
use super::mgmt::enc;
use super::RabbitBackend;
use crate::celery::workers::{self as cw, Reply, Request};
use crate::{BackendError, Result};

#[derive(Debug, Deserialize)]
struct Binding {
    #[serde(default)]
    destination: String,
}

/// The hostnames whose mailboxes are bound to `celery.pidbox` in `vhost`; `None` when the
/// management API does not say (then the broadcast waits out its timeout).
async fn mailboxes(b: &RabbitBackend, vhost: &str) -> Option<Vec<String>> {
    let path = format!(
        "/api/exchanges/{}/{}/bindings/source?columns=destination",
        enc(vhost),
        enc(cw::EXCHANGE)
    );
    let rows: Vec<Binding> = b.mgmt.get(&path).await.ok()?;
    Some(
        rows.iter()
            .filter_map(|r| cw::host_of_mailbox(&r.destination))
            .map(str::to_string)
            .collect(),
    )
}

/// Whether `celery.pidbox` exists in `vhost` (a Celery worker has started there). A passive
/// declare that fails closes its channel: it has one of its own.
async fn mailbox_exchange(b: &RabbitBackend, vhost: &str) -> Result<bool> {
    let ch = b.pool.channel(vhost).await?;
    b.calls.bump("amqp:exchange.declare");
    let r = ch
        .exchange_declare(
            cw::EXCHANGE.into(),
            ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await;
    match r {
        Ok(()) => {
            let _ = ch.close(200, "ok".into()).await;
            Ok(true)
        }
        Err(e) => match amqp_error(&e, cw::EXCHANGE) {
            BackendError::NotFound(_) => Ok(false),
            other => Err(other),
        },
    }
}

/// Send `requests` to every worker of `vhost` at once; the answers, the mailboxes known to
/// the broker, and notes.
pub async fn broadcast(
    b: &RabbitBackend,
    vhost: &str,
    requests: &[Request],
    timeout: std::time::Duration,
) -> Result<(Vec<Reply>, Vec<String>, Vec<String>)> {
    let (exists, known) = tokio::join!(mailbox_exchange(b, vhost), mailboxes(b, vhost));
    if !exists? {
        return Ok((
            Vec::new(),
            Vec::new(),
            vec![format!(
                "no Celery worker has started in vhost '{}' (no {} exchange)",
                qdeck_model::sanitize::clean_short(vhost, 60),
                cw::EXCHANGE
            )],
        ));
    }
    let oid = uuid::Uuid::new_v4().to_string();
    let ch = b.pool.channel(vhost).await?;
    let started = std::time::Instant::now();
    let out = ask(b, &ch, &oid, requests, known.as_ref(), timeout, started).await;
    let _ = ch.close(200, "ok".into()).await;
    let (replies, mut notes) = out?;
    if known.is_none() {
        notes.push(
            "the management API did not list the workers' mailboxes: the broadcast waited its whole timeout".into(),
        );
    }
    Ok((replies, known.unwrap_or_default(), notes))
}

async fn ask(
    b: &RabbitBackend,
    ch: &lapin::Channel,
    oid: &str,
    requests: &[Request],
    known: Option<&Vec<String>>,
    timeout: std::time::Duration,
    started: std::time::Instant,
) -> Result<(Vec<Reply>, Vec<String>)> {
    let err = |e: lapin::Error| amqp_error(&e, "Celery remote control");
    let reply_queue = format!("{oid}.{}", cw::REPLY_EXCHANGE);
    // As kombu declares it: a transient direct exchange.
    ch.exchange_declare(
        cw::REPLY_EXCHANGE.into(),
        ExchangeKind::Direct,
        ExchangeDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(err)?;
    let mut args = FieldTable::default();
    args.insert("x-expires".into(), AMQPValue::LongInt(10_000));
    ch.queue_declare(
        reply_queue.as_str().into(),
        QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        },
        args,
    )
    .await
    .map_err(err)?;
    ch.queue_bind(
        reply_queue.as_str().into(),
        cw::REPLY_EXCHANGE.into(),
        oid.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(err)?;
    let mut consumer = ch
        .basic_consume(
            reply_queue.as_str().into(),
            format!("qdeck-inspect-{oid}").as_str().into(),
            BasicConsumeOptions {
                no_ack: true,
                exclusive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(err)?;
    b.calls.bump("amqp:basic.consume");
    for r in requests {
        let mut headers = FieldTable::default();
        headers.insert("clock".into(), AMQPValue::LongLongInt(1));
        headers.insert(
            "expires".into(),
            AMQPValue::Double(cw::request_expires(timeout)),
        );
        let props = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into())
            .with_delivery_mode(1)
            .with_headers(headers);
        b.calls.bump("amqp:basic.publish");
        ch.basic_publish(
            cw::EXCHANGE.into(),
            "".into(),
            BasicPublishOptions::default(),
            &r.body(oid),
            props,
        )
        .await
        .map_err(err)?;
    }
    let expected = known.map(|k| requests.iter().map(|r| r.expected(k.len())).sum::<usize>());
    let deadline = tokio::time::Instant::from_std(started + timeout);
    let mut replies = Vec::new();
    let mut notes = Vec::new();
    let mut got = 0usize;
    while expected.is_none_or(|n| got < n) {
        let next = match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(Ok(d))) => d,
            Ok(Some(Err(e))) => return Err(err(e)),
            Ok(None) | Err(_) => break,
        };
        got += 1;
        let ticket = header(&next.properties, "ticket")
            .and_then(|v| to_value(v).as_str().map(str::to_string))
            .unwrap_or_default();
        match cw::parse_reply(&ticket, &next.data) {
            Some(r) => replies.extend(r),
            None => notes.push(format!(
                "an answer was not Celery's {{hostname: result}} ({} bytes): skipped",
                next.data.len()
            )),
        }
    }
    Ok((replies, notes))
}

/// One discovery in `vhost`: stats, active, reserved, scheduled and active_queues at once.
pub async fn discover(b: &RabbitBackend, vhost: &str) -> Result<cw::WorkerReport> {
    let started = std::time::Instant::now();
    let requests: Vec<Request> = cw::DISCOVERY
        .iter()
        .map(|m| Request::read_only(m))
        .collect::<Result<_>>()?;
    let (replies, known, notes) = broadcast(b, vhost, &requests, cw::TIMEOUT).await?;
    let mut report = cw::assemble(&requests, replies, &known, cw::TIMEOUT);
    report.notes.extend(notes);
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Send one command that changes workers in `vhost` (the caller has passed the gate).
pub async fn control(b: &RabbitBackend, vhost: &str, req: &Request) -> Result<cw::WorkerReport> {
    let started = std::time::Instant::now();
    let (replies, _, notes) = broadcast(b, vhost, std::slice::from_ref(req), cw::TIMEOUT).await?;
    Ok(cw::control_report(req, replies, notes, started))
}
