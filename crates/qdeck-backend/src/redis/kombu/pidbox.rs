//! Celery's remote control over kombu's Redis transport, as `celery inspect` does it:
//! - a worker's mailbox is a fanout queue: it PSUBSCRIBEs `/{db}.celery.pidbox`, and its
//!   binding `\x06\x16\x06\x16<hostname>.celery.pidbox` sits in `_kombu.binding.celery.pidbox`;
//! - a request is a kombu envelope PUBLISHed there; PUBLISH answers how many subscribers got
//!   it, so the caller knows how many answers to wait for;
//! - answers go to the direct exchange `reply.celery.pidbox`: the worker looks the caller's
//!   routing key up in `_kombu.binding.reply.celery.pidbox` and LPUSHes to the list named
//!   there, which the caller BRPOPs.
//!
//! qdeck binds its own reply list the way kombu 5.7 does (the binding plus its deadline in
//! `_kombu.binding_deadlines`, so kombu's sweep keeps the table) and removes the binding and
//! the list when done.

use base64::Engine;
use serde_json::json;

use crate::celery::workers::{self as cw, Reply, Request};
use crate::redis::conn::map_err;
use crate::redis::RedisBackend;
use crate::Result;

/// kombu's separator inside a binding member: routing key, pattern, queue.
const SEP: &str = "\x06\x16";
/// kombu's priority steps: a list per step, the base list for priority 0.
const PRIORITY_SUFFIXES: [&str; 4] = ["", "\x06\x163", "\x06\x166", "\x06\x169"];

/// kombu 5.7's binding refresh: the member, and the table's deadline an hour on (kombu's
/// minimum binding TTL), only ever moved later.
const REFRESH_BINDING: &str = r"
redis.call('SADD', KEYS[1], ARGV[1])
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[2], 'GT', ms + tonumber(ARGV[3]), ARGV[2])
";

fn envelope(body: &[u8], timeout: std::time::Duration) -> String {
    json!({
        "body": base64::engine::general_purpose::STANDARD.encode(body),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"clock": 1, "expires": cw::request_expires(timeout)},
        "properties": {
            "delivery_mode": 2,
            "delivery_info": {"exchange": cw::EXCHANGE, "routing_key": ""},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": uuid::Uuid::new_v4().to_string(),
        },
    })
    .to_string()
}

/// Send `requests` to every worker at once and gather the answers until each subscriber has
/// answered each request, or `timeout` passes. Also the hostnames of the mailboxes bound in
/// the database (a worker that died without unbinding stays there: it shows as silent).
pub async fn broadcast(
    b: &RedisBackend,
    requests: &[Request],
    timeout: std::time::Duration,
) -> Result<(Vec<Reply>, Vec<String>, Vec<String>)> {
    let oid = uuid::Uuid::new_v4().to_string();
    let reply_list = format!("{oid}.{}", cw::REPLY_EXCHANGE);
    let member = format!("{oid}{SEP}{SEP}{reply_list}");
    let reply_table = format!("_kombu.binding.{}", cw::REPLY_EXCHANGE);
    let topic = format!("/{}.{}", b.conn.db(), cw::EXCHANGE);
    let mut cm = b.conn.get().await?;
    let mut pipe = ::redis::pipe();
    pipe.cmd("EVAL")
        .arg(REFRESH_BINDING)
        .arg(2)
        .arg(&reply_table)
        .arg("_kombu.binding_deadlines")
        .arg(&member)
        .arg(cw::REPLY_EXCHANGE)
        .arg(3_600_000)
        .ignore();
    pipe.cmd("SMEMBERS")
        .arg(format!("_kombu.binding.{}", cw::EXCHANGE));
    for r in requests {
        pipe.cmd("PUBLISH")
            .arg(&topic)
            .arg(envelope(&r.body(&oid), timeout));
    }
    let started = std::time::Instant::now();
    let answer: std::result::Result<(Vec<String>, Vec<u64>), _> = {
        let res: std::result::Result<Vec<::redis::Value>, _> = pipe.query_async(&mut cm).await;
        res.map(|vals| split_answer(&vals))
    };
    b.calls.bump("pipeline");
    let (bound, receivers) = match answer {
        Ok(a) => a,
        Err(e) => {
            unbind(b, &reply_table, &member, &reply_list).await;
            return Err(map_err(e));
        }
    };
    let known: Vec<String> = bound
        .iter()
        .filter_map(|m| m.split(SEP).nth(2))
        .filter_map(cw::host_of_mailbox)
        .map(str::to_string)
        .collect();
    let listeners = receivers.iter().copied().max().unwrap_or(0) as usize;
    let expected = requests.iter().map(|r| r.expected(listeners)).sum();
    let gathered = gather(b, &reply_list, expected, started + timeout).await;
    unbind(b, &reply_table, &member, &reply_list).await;
    let (replies, mut notes) = gathered?;
    if listeners == 0 {
        notes.push(format!(
            "no Celery worker listens on {topic} (PUBLISH reached no subscriber)"
        ));
    }
    Ok((replies, known, notes))
}

fn split_answer(vals: &[::redis::Value]) -> (Vec<String>, Vec<u64>) {
    let mut it = vals.iter();
    let bound = it
        .next()
        .map(|v| {
            crate::redis::figures::as_array(v)
                .iter()
                .filter_map(crate::redis::figures::as_string)
                .collect()
        })
        .unwrap_or_default();
    let counts = it
        .filter_map(|v| crate::redis::figures::as_i64(v).map(|n| n.max(0) as u64))
        .collect();
    (bound, counts)
}

/// BRPOP answers from the reply list until `expected` came (0: wait out the deadline).
async fn gather(
    b: &RedisBackend,
    list: &str,
    expected: usize,
    deadline: std::time::Instant,
) -> Result<(Vec<Reply>, Vec<String>)> {
    let mut replies = Vec::new();
    let mut notes = Vec::new();
    let mut got = 0usize;
    if expected == 0 {
        return Ok((replies, notes));
    }
    let wait = deadline.saturating_duration_since(std::time::Instant::now());
    let mut conn = b.conn.dedicated(wait).await?;
    let keys: Vec<String> = PRIORITY_SUFFIXES
        .iter()
        .map(|s| format!("{list}{s}"))
        .collect();
    while got < expected {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let popped: Option<(String, Vec<u8>)> = ::redis::cmd("BRPOP")
            .arg(&keys)
            .arg(left.as_secs_f64().max(0.01))
            .query_async(&mut conn)
            .await
            .map_err(map_err)?;
        b.calls.bump("BRPOP");
        let Some((_, raw)) = popped else { break };
        got += 1;
        let m = super::envelope::message(&raw, list, 0);
        let ticket = m
            .headers
            .iter()
            .find(|(k, _)| k == "ticket")
            .and_then(|(_, v)| v.as_str().map(str::to_string))
            .unwrap_or_default();
        match cw::parse_reply(&ticket, &m.body) {
            Some(r) => replies.extend(r),
            None => notes.push(format!(
                "an answer in {} was not Celery's {{hostname: result}} ({} bytes): skipped",
                qdeck_model::sanitize::clean_short(list, 80),
                raw.len()
            )),
        }
    }
    Ok((replies, notes))
}

async fn unbind(b: &RedisBackend, table: &str, member: &str, list: &str) {
    let Ok(mut cm) = b.conn.get().await else {
        return;
    };
    let mut pipe = ::redis::pipe();
    pipe.cmd("SREM").arg(table).arg(member).ignore();
    for s in PRIORITY_SUFFIXES {
        pipe.cmd("DEL").arg(format!("{list}{s}")).ignore();
    }
    let _: std::result::Result<(), _> = pipe.query_async(&mut cm).await;
    b.calls.bump("pipeline");
}

/// One discovery: stats, active, reserved, scheduled and active_queues in one broadcast.
pub async fn discover(b: &RedisBackend) -> Result<cw::WorkerReport> {
    let started = std::time::Instant::now();
    let requests: Vec<Request> = cw::DISCOVERY
        .iter()
        .map(|m| Request::read_only(m))
        .collect::<Result<_>>()?;
    let (replies, known, notes) = broadcast(b, &requests, cw::TIMEOUT).await?;
    let mut report = cw::assemble(&requests, replies, &known, cw::TIMEOUT);
    report.notes.extend(notes);
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Send one command that changes workers (the caller has passed the gate); the answers.
pub async fn control(b: &RedisBackend, req: &Request) -> Result<cw::WorkerReport> {
    let started = std::time::Instant::now();
    let (replies, _, notes) = broadcast(b, std::slice::from_ref(req), cw::TIMEOUT).await?;
    Ok(cw::control_report(req, replies, notes, started))
}
