//! A stand-in for Azure Service Bus, in-process, following Microsoft's documented REST and ATOM
//! formats: send (POST {q}/messages), peek-lock (POST {q}/messages/head → 201 + Location +
//! BrokerProperties, 204 when empty), receive-and-delete (DELETE …/head), unlock (PUT),
//! complete (DELETE), renew (POST) on {q}/messages/{seq|id}/{lockToken}, `$DeadLetterQueue`
//! subqueues, DeliveryCount and dead-lettering at MaxDeliveryCount (reason
//! MaxDeliveryCountExceeded), lock expiry, the `$Resources/Queues` feed and queue entries with
//! `CountDetails` in their real namespaces, and SAS checking (401 on a bad signature, an unknown
//! key name, an expired token, or missing rights). It does not wait out `timeout` on an empty
//! receive (answers 204 at once) and has no sessions, partitions or duplicate detection.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Map, Value};
use sha2::Sha256;

#[derive(Clone, Copy, PartialEq)]
pub enum Rights {
    Manage,
    Listen,
    Send,
    /// Listen and Send, no Manage (a custom policy).
    ListenSend,
}

#[derive(Clone)]
pub struct Msg {
    pub seq: i64,
    pub message_id: String,
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    /// Settable broker properties as sent (CorrelationId, Label, SessionId, …).
    pub props: Map<String, Value>,
    /// Custom properties: lower-case header name → raw header value.
    pub custom: Vec<(String, String)>,
    pub delivery_count: u32,
    pub enqueued: DateTime<Utc>,
    pub visible_at: Option<DateTime<Utc>>,
    pub lock: Option<(String, Instant)>,
}

pub struct Queue {
    pub name: String,
    pub lock_duration: Duration,
    pub max_delivery: u32,
    pub active: Vec<Msg>,
    pub dlq: Vec<Msg>,
    pub requires_session: bool,
    /// Duplicate detection window, when RequiresDuplicateDetection is on.
    pub dup_window: Option<Duration>,
    /// MessageIds accepted, with when (for duplicate detection).
    pub seen_ids: Vec<(String, Instant)>,
    /// Sends accepted and dropped as duplicates.
    pub dropped_duplicates: u64,
    pub forward_to: Option<String>,
    pub forward_dlq_to: Option<String>,
    /// Test hook: every message that arrives is dead-lettered at once, as by a consumer that
    /// rejects everything (reason "Poison").
    pub poison: bool,
}

impl Queue {
    pub fn new(name: &str, max_delivery: u32, lock_secs: u64) -> Queue {
        Queue {
            name: name.to_string(),
            lock_duration: Duration::from_secs(lock_secs),
            max_delivery,
            active: Vec::new(),
            dlq: Vec::new(),
            requires_session: false,
            dup_window: None,
            seen_ids: Vec::new(),
            dropped_duplicates: 0,
            forward_to: None,
            forward_dlq_to: None,
            poison: false,
        }
    }

    /// Accept a sent message: dropped when its MessageId is a duplicate inside the window,
    /// dead-lettered at once when the queue is poisoned.
    fn accept(&mut self, m: Msg) {
        if let Some(win) = self.dup_window {
            let now = Instant::now();
            self.seen_ids
                .retain(|(_, at)| now.duration_since(*at) < win);
            if self.seen_ids.iter().any(|(id, _)| *id == m.message_id) {
                self.dropped_duplicates += 1;
                return;
            }
            self.seen_ids.push((m.message_id.clone(), now));
        }
        if self.poison {
            let mut dead = m;
            dead.custom
                .push(("deadletterreason".into(), "\"Poison\"".into()));
            self.dlq.push(dead);
        } else {
            self.active.push(m);
        }
    }
}

pub struct Topic {
    pub name: String,
    /// Messages scheduled on the topic, fanned out to the subscriptions when due.
    pub scheduled: Vec<Msg>,
    /// Lower-case subscription name → subscription (its `name` is `{topic}/Subscriptions/{sub}`).
    pub subs: BTreeMap<String, Queue>,
}

#[derive(Default)]
pub struct World {
    pub topics: BTreeMap<String, Topic>,
    pub keys: Vec<(String, String, Rights)>,
    pub queues: BTreeMap<String, Queue>,
    pub next_seq: i64,
    /// The next N requests answer 503 (odd) or 429 (even) with Retry-After: 0.
    pub throttle_next: u32,
    /// Leave everything but LockToken and SequenceNumber out of BrokerProperties.
    pub sparse_broker_properties: bool,
    /// Requests served, per kind ("send", "peek-lock", "feed", …).
    pub requests: BTreeMap<String, u64>,
}

pub struct StandIn {
    pub addr: SocketAddr,
    pub world: Arc<Mutex<World>>,
}

pub const MANAGE_KEY: &str = "bWFuYWdlLWtleS1zZWNyZXQtdmFsdWU=";
pub const LISTEN_KEY: &str = "bGlzdGVuLWtleS1zZWNyZXQtdmFsdWU=";
pub const LISTEN_SEND_KEY: &str = "bGlzdGVuLXNlbmQta2V5LXNlY3JldA==";

fn rfc1123(t: DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

impl StandIn {
    pub async fn start() -> StandIn {
        let world = Arc::new(Mutex::new(World {
            keys: vec![
                (
                    "RootManageSharedAccessKey".into(),
                    MANAGE_KEY.into(),
                    Rights::Manage,
                ),
                ("ListenOnly".into(), LISTEN_KEY.into(), Rights::Listen),
                (
                    "ListenSend".into(),
                    LISTEN_SEND_KEY.into(),
                    Rights::ListenSend,
                ),
            ],
            // Sequence numbers beyond 32 bits, as partitioned entities have.
            next_seq: (1i64 << 33) + 1,
            ..Default::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let w = world.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let w = w.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let w = w.clone();
                        async move { Ok::<_, Infallible>(handle(w, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        StandIn { addr, world }
    }

    pub fn conn_str(&self, key_name: &str, key: &str) -> String {
        format!(
            "Endpoint=sb://{}/;SharedAccessKeyName={key_name};SharedAccessKey={key};UseDevelopmentEmulator=true",
            self.addr
        )
    }

    pub fn manage_conn_str(&self) -> String {
        self.conn_str("RootManageSharedAccessKey", MANAGE_KEY)
    }

    pub fn create_queue(&self, name: &str, max_delivery: u32, lock_secs: u64) {
        let mut w = self.world.lock().unwrap();
        w.queues.insert(
            name.to_ascii_lowercase(),
            Queue::new(name, max_delivery, lock_secs),
        );
    }

    /// Change a queue's settings (sessions, duplicate detection, forwarding, poison).
    pub fn configure(&self, name: &str, f: impl FnOnce(&mut Queue)) {
        let mut w = self.world.lock().unwrap();
        if let Some(q) = w.queues.get_mut(&name.to_ascii_lowercase()) {
            f(q);
        }
    }

    /// A queue's dropped-duplicate count.
    pub fn dropped_duplicates(&self, name: &str) -> u64 {
        let w = self.world.lock().unwrap();
        w.queues
            .get(&name.to_ascii_lowercase())
            .map_or(0, |q| q.dropped_duplicates)
    }

    pub fn create_topic(&self, name: &str, subs: &[&str], max_delivery: u32, lock_secs: u64) {
        let mut w = self.world.lock().unwrap();
        let subs = subs
            .iter()
            .map(|s| {
                (
                    s.to_ascii_lowercase(),
                    Queue::new(
                        &format!("{name}/Subscriptions/{s}"),
                        max_delivery,
                        lock_secs,
                    ),
                )
            })
            .collect();
        w.topics.insert(
            name.to_ascii_lowercase(),
            Topic {
                name: name.to_string(),
                scheduled: Vec::new(),
                subs,
            },
        );
    }

    /// (active, dead-letter) counts of a subscription.
    pub fn sub_counts(&self, topic: &str, sub: &str) -> (usize, usize) {
        let w = self.world.lock().unwrap();
        w.topics
            .get(&topic.to_ascii_lowercase())
            .and_then(|t| t.subs.get(&sub.to_ascii_lowercase()))
            .map_or((0, 0), |q| (q.active.len(), q.dlq.len()))
    }

    /// Put a message straight into a queue's DLQ, as if dead-lettered by a consumer.
    pub fn seed_dlq(&self, queue: &str, mut msg: Msg, reason: &str) {
        let mut w = self.world.lock().unwrap();
        msg.seq = w.next_seq;
        w.next_seq += 1;
        msg.custom.push((
            "deadletterreason".into(),
            Value::String(reason.into()).to_string(),
        ));
        msg.custom.push((
            "deadlettererrordescription".into(),
            Value::String(format!("{reason} (seeded)")).to_string(),
        ));
        let lower = queue.to_ascii_lowercase();
        let forward = w.queues.get(&lower).and_then(|q| q.forward_dlq_to.clone());
        if let Some(f) = forward {
            // Dead letters of this queue go to the forward target's active messages.
            if let Some(t) = w.queues.get_mut(&f.to_ascii_lowercase()) {
                t.active.push(msg);
            }
            return;
        }
        let target = match lower.split_once("/subscriptions/") {
            Some((t, sub)) => w.topics.get_mut(t).and_then(|t| t.subs.get_mut(sub)),
            None => w.queues.get_mut(&lower),
        };
        if let Some(q) = target {
            q.dlq.push(msg);
        }
    }

    /// (active, dead-letter) counts, locked messages included.
    pub fn counts(&self, queue: &str) -> (usize, usize) {
        let w = self.world.lock().unwrap();
        w.queues
            .get(&queue.to_ascii_lowercase())
            .map_or((0, 0), |q| (q.active.len(), q.dlq.len()))
    }

    pub fn messages(&self, queue: &str, dlq: bool) -> Vec<Msg> {
        let w = self.world.lock().unwrap();
        w.queues
            .get(&queue.to_ascii_lowercase())
            .map(|q| if dlq { q.dlq.clone() } else { q.active.clone() })
            .unwrap_or_default()
    }

    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.world.lock().unwrap().requests.clone()
    }
}

pub fn new_msg(body: &[u8]) -> Msg {
    Msg {
        seq: 0,
        message_id: uuid::Uuid::new_v4().simple().to_string(),
        body: body.to_vec(),
        content_type: None,
        props: Map::new(),
        custom: Vec::new(),
        delivery_count: 0,
        enqueued: Utc::now(),
        visible_at: None,
        lock: None,
    }
}

fn reply(status: u16, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

fn error(status: u16, detail: &str) -> Response<Full<Bytes>> {
    let mut r = reply(
        status,
        format!("<Error><Code>{status}</Code><Detail>{detail} TrackingId:standin</Detail></Error>"),
    );
    r.headers_mut().insert(
        "content-type",
        "application/xml; charset=utf-8".parse().unwrap(),
    );
    r
}

/// Check `Authorization: SharedAccessSignature sr=…&sig=…&se=…&skn=…`.
fn check_sas(w: &World, auth: Option<&str>, url: &str, need: Rights) -> Result<(), String> {
    check_sas_inner(w, auth, url, need).map_err(std::string::ToString::to_string)?;
    Ok(())
}

/// A valid token without the right `need` (checked after `check_token`).
fn missing_claim(rights: Rights, need: Rights, url: &str, management: bool) -> Option<String> {
    let ok = match (rights, need) {
        (Rights::Manage, _) => true,
        (Rights::ListenSend, Rights::Listen | Rights::Send) => true,
        (r, n) => r == n,
    };
    if ok {
        return None;
    }
    Some(if management {
        "Manage,EntityRead claims required for this operation.".to_string()
    } else {
        let claim = match need {
            Rights::Manage => "Manage",
            Rights::Listen => "Listen",
            Rights::Send | Rights::ListenSend => "Send",
        };
        format!("Unauthorized access. '{claim}' claim(s) are required to perform this operation. Resource: '{url}'.")
    })
}

fn check_sas_inner(
    w: &World,
    auth: Option<&str>,
    url: &str,
    need: Rights,
) -> Result<(), &'static str> {
    let tok = auth
        .and_then(|a| a.strip_prefix("SharedAccessSignature "))
        .ok_or("MissingToken: no SharedAccessSignature in Authorization.")?;
    let mut f: BTreeMap<&str, &str> = BTreeMap::new();
    for kv in tok.split('&') {
        if let Some((k, v)) = kv.split_once('=') {
            f.insert(k, v);
        }
    }
    let (Some(sr), Some(sig), Some(se), Some(skn)) =
        (f.get("sr"), f.get("sig"), f.get("se"), f.get("skn"))
    else {
        return Err("MalformedToken: the token lacks sr, sig, se or skn.");
    };
    // Azure answers an unknown key name and a wrong key alike.
    let Some((_, key, _)) = w.keys.iter().find(|(n, _, _)| n == skn) else {
        return Err("claim is empty or token is invalid.");
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(format!("{sr}\n{se}").as_bytes());
    let expect = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let got = urlencoding::decode(sig).map_err(|_| "MalformedToken: bad sig encoding.")?;
    if got != expect {
        return Err("claim is empty or token is invalid.");
    }
    let se: i64 = se.parse().map_err(|_| "MalformedToken: bad se.")?;
    if se < Utc::now().timestamp() {
        return Err("ExpiredToken: The token is expired.");
    }
    let sr = urlencoding::decode(sr)
        .map_err(|_| "MalformedToken: bad sr.")?
        .to_ascii_lowercase();
    let strip = |s: &str| {
        s.split_once("://")
            .map(|x| x.1.to_string())
            .unwrap_or(s.to_string())
    };
    if !strip(&url.to_ascii_lowercase()).starts_with(&strip(&sr)) {
        return Err("InvalidAudience: the token's sr does not cover this resource.");
    }
    let _ = need;
    Ok(())
}

fn rights_of(w: &World, auth: Option<&str>) -> Option<Rights> {
    let tok = auth?.strip_prefix("SharedAccessSignature ")?;
    let skn = tok.split('&').find_map(|kv| kv.strip_prefix("skn="))?;
    w.keys.iter().find(|(n, _, _)| n == skn).map(|(_, _, r)| *r)
}

fn query(q: Option<&str>, k: &str) -> Option<String> {
    q?.split('&').find_map(|kv| {
        let (a, b) = kv.split_once('=')?;
        (urlencoding::decode(a).ok()? == k).then(|| {
            urlencoding::decode(b)
                .ok()
                .map(std::borrow::Cow::into_owned)
        })?
    })
}

/// Internal marker: an empty receive that may still wait.
const WAIT_MARK: &str = "x-standin-may-wait";
/// Longest long poll the stand-in serves (Azure's default receive timeout is 60 s).
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Serve one request. An empty receive long-polls: it is retried, without holding the world,
/// until a message arrives or its `timeout` (seconds) has passed, then answers 204.
async fn handle(world: Arc<Mutex<World>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let wait = query(parts.uri.query(), "timeout")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(MAX_WAIT, |t| Duration::from_secs(t).min(MAX_WAIT));
    let deadline = Instant::now() + wait;
    loop {
        let may_wait = Instant::now() < deadline;
        let r = serve(&world, &parts, &body, may_wait);
        if !r.headers().contains_key(WAIT_MARK) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn serve(
    world: &Arc<Mutex<World>>,
    parts: &hyper::http::request::Parts,
    body: &Bytes,
    may_wait: bool,
) -> Response<Full<Bytes>> {
    let host = parts
        .headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost")
        .to_string();
    let path = parts.uri.path().to_string();
    let q = parts.uri.query().map(str::to_string);
    let url = format!("http://{host}{path}");
    let segs: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| {
            urlencoding::decode(s)
                .map(std::borrow::Cow::into_owned)
                .unwrap_or_default()
        })
        .collect();
    let mut w = world.lock().unwrap();
    if w.throttle_next > 0 {
        w.throttle_next -= 1;
        let code = if w.throttle_next.is_multiple_of(2) {
            503
        } else {
            429
        };
        *w.requests.entry("throttled".into()).or_default() += 1;
        let mut r = error(code, "ServerBusy: the request was throttled.");
        r.headers_mut().insert("retry-after", "0".parse().unwrap());
        return r;
    }
    let auth = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let method = parts.method.as_str().to_string();
    let msgs_at = segs.iter().position(|s| s == "messages");
    let need = match (&msgs_at, method.as_str()) {
        (None, _) => Rights::Manage,
        (Some(_), "POST") if segs.len() == msgs_at.unwrap() + 1 => Rights::Send,
        _ => Rights::Listen,
    };
    if let Err(detail) = check_sas(&w, auth, &url, need) {
        *w.requests.entry("rejected".into()).or_default() += 1;
        return error(401, &detail);
    }
    if let Some(detail) = rights_of(&w, auth)
        .and_then(|r| missing_claim(r, need, &format!("sb://{host}{path}"), msgs_at.is_none()))
    {
        *w.requests.entry("rejected".into()).or_default() += 1;
        return error(401, &detail);
    }
    release_due_topic_messages(&mut w);
    let Some(mi) = msgs_at else {
        // Management.
        if method != "GET" {
            return error(405, "only GET is served by the stand-in's management API");
        }
        if segs.len() == 2 && segs[0] == "$Resources" && segs[1] == "Queues" {
            *w.requests.entry("feed".into()).or_default() += 1;
            let skip: usize = query(q.as_deref(), "$skip")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let top: usize = query(q.as_deref(), "$top")
                .and_then(|s| s.parse().ok())
                .unwrap_or(100)
                .min(100);
            let entries = w
                .queues
                .values()
                .map(|q| entry_xml(q, &host, false))
                .collect();
            return feed(&host, "$Resources/Queues", "Queues", entries, skip, top);
        }
        let skip: usize = query(q.as_deref(), "$skip")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let top: usize = query(q.as_deref(), "$top")
            .and_then(|s| s.parse().ok())
            .unwrap_or(100)
            .min(100);
        if segs.len() == 2 && segs[0] == "$Resources" && segs[1] == "Topics" {
            *w.requests.entry("feed".into()).or_default() += 1;
            let entries = w.topics.values().map(|t| topic_xml(t, &host)).collect();
            return feed(&host, "$Resources/Topics", "Topics", entries, skip, top);
        }
        if segs.len() == 2 && segs[1].eq_ignore_ascii_case("Subscriptions") {
            *w.requests.entry("feed".into()).or_default() += 1;
            let Some(t) = w.topics.get(&segs[0].to_ascii_lowercase()) else {
                return error(404, "MessagingEntityNotFound: no such topic.");
            };
            let entries = t
                .subs
                .values()
                .map(|q| entry_xml(q, &host, false))
                .collect();
            let base = format!("{}/Subscriptions", t.name);
            return feed(&host, &base, "Subscriptions", entries, skip, top);
        }
        *w.requests.entry("entry".into()).or_default() += 1;
        if let [name] = segs.as_slice() {
            if let Some(t) = w.topics.get(&name.to_ascii_lowercase()) {
                return xml(topic_xml(t, &host).replacen(
                    "<entry ",
                    r#"<entry xmlns="http://www.w3.org/2005/Atom" "#,
                    1,
                ));
            }
        }
        let found = match segs.as_slice() {
            [name] => w.queues.get(&name.to_ascii_lowercase()),
            [t, s, sub] if s.eq_ignore_ascii_case("Subscriptions") => w
                .topics
                .get(&t.to_ascii_lowercase())
                .and_then(|t| t.subs.get(&sub.to_ascii_lowercase())),
            _ => None,
        };
        return match found {
            Some(qu) => xml(entry_xml(qu, &host, true)),
            // Azure answers a missing entity with an empty feed.
            None => xml(format!(
                r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Publicly Listed Services</title><subtitle type="text">This is the list of publicly-listed services currently available.</subtitle><id>uuid:{}</id><updated>{}</updated><generator>Service Bus 1.1</generator></feed>"#,
                uuid::Uuid::new_v4(),
                Utc::now().to_rfc3339()
            )),
        };
    };
    // Runtime: entity = segments before "messages".
    let entity: Vec<&String> = segs[..mi].iter().collect();
    let rest: Vec<String> = segs[mi + 1..].to_vec();
    let sparse = w.sparse_broker_properties;
    let mut next_seq = w.next_seq;
    let w2 = &mut *w;
    let is_dlq = |d: &str| d.eq_ignore_ascii_case("$DeadLetterQueue");
    let is_subs = |d: &str| d.eq_ignore_ascii_case("Subscriptions");
    // A send to a topic: every subscription gets a copy.
    if let ([t], "POST", true) = (entity.as_slice(), method.as_str(), rest.is_empty()) {
        if let Some(topic) = w2.topics.get_mut(&t.to_ascii_lowercase()) {
            let m = match build_msg(&parts.headers, body, 0) {
                Ok(m) => m,
                Err(e) => return error(400, e),
            };
            if m.visible_at.is_some_and(|v| v > Utc::now()) {
                let mut m = m;
                m.seq = next_seq;
                topic.scheduled.push(m);
                w.next_seq = next_seq + 1;
                *w.requests.entry("send".into()).or_default() += 1;
                return reply(201, Bytes::new());
            }
            for sub in topic.subs.values_mut() {
                let mut c = m.clone();
                c.seq = next_seq;
                next_seq += 1;
                sub.active.push(c);
            }
            w.next_seq = next_seq;
            *w.requests.entry("send".into()).or_default() += 1;
            return reply(201, Bytes::new());
        }
    }
    let (queue, dlq) = match entity.as_slice() {
        [q] => (w2.queues.get_mut(&q.to_ascii_lowercase()), false),
        [q, d] if is_dlq(d) => (w2.queues.get_mut(&q.to_ascii_lowercase()), true),
        [t, s, sub] | [t, s, sub, _] if is_subs(s) => (
            w2.topics
                .get_mut(&t.to_ascii_lowercase())
                .and_then(|t| t.subs.get_mut(&sub.to_ascii_lowercase())),
            entity.len() == 4 && is_dlq(entity[3]),
        ),
        _ => (None, false),
    };
    if entity.len() == 4 && !dlq {
        return error(404, "MessagingEntityNotFound: no such entity.");
    }
    let Some(queue) = queue else {
        return error(404, "MessagingEntityNotFound: no such entity.");
    };
    let (kind, resp) = match (method.as_str(), rest.as_slice()) {
        ("POST", []) => {
            if dlq {
                return error(400, "cannot send to a dead-letter queue");
            }
            if entity.len() == 3 {
                return error(400, "cannot send to a subscription; send to its topic");
            }
            let m = match build_msg(&parts.headers, body, next_seq) {
                Ok(m) => m,
                Err(e) => return error(400, e),
            };
            if queue.requires_session && !m.props.contains_key("SessionId") {
                return error(400, "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value.");
            }
            next_seq += 1;
            queue.accept(m);
            ("send", reply(201, Bytes::new()))
        }
        (_, [head]) if head == "head" && queue.requires_session && !dlq => {
            return error(400, "It is not possible for an entity that requires sessions to create a non-sessionful message receiver.");
        }
        (m @ ("POST" | "DELETE"), [head]) if head == "head" => {
            let lock = m == "POST";
            let now = Instant::now();
            let utc = Utc::now();
            let (lock_d, max_d) = (queue.lock_duration, queue.max_delivery);
            // Expired locks are released (the message becomes available again).
            for list in [&mut queue.active, &mut queue.dlq] {
                for msg in list.iter_mut() {
                    if msg.lock.as_ref().is_some_and(|(_, until)| *until <= now) {
                        msg.lock = None;
                    }
                }
            }
            let mut found = None;
            loop {
                let list = if dlq {
                    &mut queue.dlq
                } else {
                    &mut queue.active
                };
                let Some(i) = list
                    .iter()
                    .position(|x| x.lock.is_none() && x.visible_at.is_none_or(|v| v <= utc))
                else {
                    break;
                };
                if !dlq && lock && list[i].delivery_count >= max_d {
                    let mut dead = list.remove(i);
                    dead.custom.push((
                        "deadletterreason".into(),
                        "\"MaxDeliveryCountExceeded\"".into(),
                    ));
                    dead.custom.push((
                        "deadlettererrordescription".into(),
                        format!(
                            "\"Message could not be consumed after {max_d} delivery attempts.\""
                        ),
                    ));
                    queue.dlq.push(dead);
                    continue;
                }
                found = Some(i);
                break;
            }
            let kind = if lock { "peek-lock" } else { "receive-delete" };
            match found {
                // Nothing now: the caller long-polls until `timeout` (see `handle`).
                None if may_wait => {
                    let mut r = reply(204, Bytes::new());
                    r.headers_mut().insert(WAIT_MARK, "1".parse().unwrap());
                    return r;
                }
                None => (kind, reply(204, Bytes::new())),
                Some(i) => {
                    let entity_path = if dlq {
                        format!("{}/$DeadLetterQueue", queue.name)
                    } else {
                        queue.name.clone()
                    };
                    let list = if dlq {
                        &mut queue.dlq
                    } else {
                        &mut queue.active
                    };
                    let msg = if lock {
                        let token = uuid::Uuid::new_v4().to_string();
                        list[i].delivery_count += 1;
                        list[i].lock = Some((token, now + lock_d));
                        list[i].clone()
                    } else {
                        let mut m = list.remove(i);
                        m.delivery_count += 1;
                        m
                    };
                    let mut bp = msg.props.clone();
                    bp.remove("ScheduledEnqueueTimeUtc");
                    bp.insert("SequenceNumber".into(), msg.seq.into());
                    if let Some((token, _)) = &msg.lock {
                        bp.insert("LockToken".into(), token.clone().into());
                    }
                    if !sparse {
                        bp.insert("DeliveryCount".into(), msg.delivery_count.into());
                        bp.insert("EnqueuedSequenceNumber".into(), msg.seq.into());
                        bp.insert("EnqueuedTimeUtc".into(), rfc1123(msg.enqueued).into());
                        if lock {
                            bp.insert(
                                "LockedUntilUtc".into(),
                                rfc1123(utc + chrono::Duration::from_std(lock_d).unwrap()).into(),
                            );
                        }
                        bp.insert("MessageId".into(), msg.message_id.clone().into());
                        bp.insert("State".into(), "Active".into());
                        if !bp.contains_key("TimeToLive") {
                            // No TTL of its own: the entity's default, here TimeSpan.MaxValue.
                            bp.insert("TimeToLive".into(), 922337203685.4775f64.into());
                        }
                    } else {
                        bp.remove("MessageId");
                    }
                    let mut r = reply(if lock { 201 } else { 200 }, msg.body.clone());
                    let h = r.headers_mut();
                    h.insert(
                        "brokerproperties",
                        Value::Object(bp).to_string().parse().unwrap(),
                    );
                    if let Some(ct) = &msg.content_type {
                        h.insert("content-type", ct.parse().unwrap());
                    }
                    if let Some((token, _)) = &msg.lock {
                        h.insert(
                            "location",
                            format!(
                                "http://{host}/{}/messages/{}/{}",
                                entity_path, msg.seq, token
                            )
                            .parse()
                            .unwrap(),
                        );
                    }
                    for (k, v) in &msg.custom {
                        if let (Ok(k), Ok(v)) = (
                            hyper::header::HeaderName::from_bytes(k.as_bytes()),
                            v.parse(),
                        ) {
                            h.append(k, v);
                        }
                    }
                    (kind, r)
                }
            }
        }
        (m @ ("PUT" | "DELETE" | "POST"), [id, token]) => {
            let now = Instant::now();
            let lock_d = queue.lock_duration;
            let list = if dlq {
                &mut queue.dlq
            } else {
                &mut queue.active
            };
            let pos = list.iter().position(|x| {
                (x.seq.to_string() == *id || x.message_id == *id)
                    && x.lock
                        .as_ref()
                        .is_some_and(|(t, until)| t == token && *until > now)
            });
            let kind = match m {
                "PUT" => "unlock",
                "DELETE" => "complete",
                _ => "renew",
            };
            match pos {
                None => (
                    kind,
                    error(
                        404,
                        "MessageLockLost: the lock is lost or the message is gone.",
                    ),
                ),
                Some(i) => {
                    match m {
                        "PUT" => list[i].lock = None,
                        "DELETE" => {
                            list.remove(i);
                        }
                        _ => {
                            if let Some(l) = list[i].lock.as_mut() {
                                l.1 = now + lock_d;
                            }
                        }
                    }
                    (kind, reply(200, Bytes::new()))
                }
            }
        }
        _ => ("bad", error(400, "unsupported request")),
    };
    w.next_seq = next_seq;
    *w.requests.entry(kind.into()).or_default() += 1;
    resp
}

/// `TimeSpan.MaxValue.TotalSeconds` as a double reads it; a TTL from there up is none.
const TTL_NOT_SET_SECS: f64 = 922_337_203_685.0;

/// A TimeSpan's `TotalSeconds` as Azure writes it in JSON: whole seconds bare, else a float.
fn ttl_json(ticks: i64) -> Value {
    if ticks.rem_euclid(10_000_000) == 0 {
        Value::from(ticks / 10_000_000)
    } else {
        Value::from(ticks as f64 / 1e7)
    }
}

fn build_msg(headers: &hyper::HeaderMap, body: &Bytes, seq: i64) -> Result<Msg, &'static str> {
    let mut props: Map<String, Value> = match headers.get("brokerproperties") {
        Some(v) => match serde_json::from_slice(v.as_bytes()) {
            Ok(Value::Object(m)) => m,
            _ => return Err("BrokerProperties is not a JSON object"),
        },
        None => Map::new(),
    };
    // Azure keeps TimeToLive as a TimeSpan: seconds in, 100 ns ticks kept, seconds out; a TTL
    // that is not a positive number is refused (as .NET's ServiceBusMessage refuses it).
    if let Some(v) = props.remove("TimeToLive") {
        let secs = v.as_f64().ok_or("TimeToLive is not a number of seconds")?;
        if secs.is_nan() || secs <= 0.0 {
            return Err("TimeToLive must be positive");
        }
        if secs < TTL_NOT_SET_SECS {
            props.insert("TimeToLive".into(), ttl_json((secs * 1e7).round() as i64));
        }
    }
    let custom = headers
        .iter()
        .filter(|(k, _)| {
            ![
                "authorization",
                "brokerproperties",
                "content-type",
                "content-length",
                "host",
                "accept",
                "connection",
                "user-agent",
                "accept-encoding",
                "transfer-encoding",
            ]
            .contains(&k.as_str())
        })
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let visible_at = props
        .get("ScheduledEnqueueTimeUtc")
        .and_then(|v| v.as_str())
        .and_then(|s| DateTime::parse_from_rfc2822(s).ok())
        .map(|d| d.with_timezone(&Utc));
    Ok(Msg {
        seq,
        message_id: props
            .get("MessageId")
            .and_then(|v| v.as_str())
            .map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_string),
        body: body.to_vec(),
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        props,
        custom,
        delivery_count: 0,
        enqueued: Utc::now(),
        visible_at,
        lock: None,
    })
}

fn xml(s: String) -> Response<Full<Bytes>> {
    let mut r = reply(200, s);
    r.headers_mut().insert(
        "content-type",
        "application/atom+xml;type=entry;charset=utf-8"
            .parse()
            .unwrap(),
    );
    r
}

fn entry_xml(q: &Queue, host: &str, root: bool) -> String {
    let utc = Utc::now();
    let scheduled = q
        .active
        .iter()
        .filter(|m| m.visible_at.is_some_and(|v| v > utc))
        .count();
    let active = q.active.len() - scheduled;
    let size: usize = q
        .active
        .iter()
        .chain(q.dlq.iter())
        .map(|m| m.body.len())
        .sum();
    let ns = if root {
        r#" xmlns="http://www.w3.org/2005/Atom""#
    } else {
        ""
    };
    let title = q.name.rsplit('/').next().unwrap_or(&q.name);
    let desc = if q.name.contains("/Subscriptions/") {
        "SubscriptionDescription"
    } else {
        "QueueDescription"
    };
    format!(
        r#"<entry{ns} xml:base="http://{host}/{name}?api-version=2021-05"><id>http://{host}/{name}?api-version=2021-05</id><title type="text">{title}</title><published>2026-01-01T00:00:00Z</published><updated>2026-01-01T00:00:00Z</updated><author><name>standin</name></author><link rel="self" href="../{name}?api-version=2021-05"/><content type="application/xml"><{desc} xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT{lock}S</LockDuration><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>{dup}</RequiresDuplicateDetection><RequiresSession>{session}</RequiresSession><DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive><DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration><DuplicateDetectionHistoryTimeWindow>PT{window}S</DuplicateDetectionHistoryTimeWindow><MaxDeliveryCount>{maxd}</MaxDeliveryCount><EnableBatchedOperations>true</EnableBatchedOperations><SizeInBytes>{size}</SizeInBytes><MessageCount>{total}</MessageCount><IsAnonymousAccessible>false</IsAnonymousAccessible><Status>Active</Status><CreatedAt>2026-01-01T00:00:00Z</CreatedAt><UpdatedAt>2026-01-01T00:00:00Z</UpdatedAt><AccessedAt>0001-01-01T00:00:00Z</AccessedAt><SupportOrdering>true</SupportOrdering><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>{active}</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>{dl}</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>{scheduled}</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount><d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount></CountDetails><AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle><EnablePartitioning>false</EnablePartitioning>{forward}<EntityAvailabilityStatus>Available</EntityAvailabilityStatus><EnableExpress>false</EnableExpress></{desc}></content></entry>"#,
        name = q.name,
        dup = q.dup_window.is_some(),
        session = q.requires_session,
        window = q.dup_window.map_or(600, |d| d.as_secs()),
        forward = forward_xml(q, host),
        lock = q.lock_duration.as_secs(),
        maxd = q.max_delivery,
        total = q.active.len() + q.dlq.len(),
        dl = q.dlq.len(),
    )
}

/// Forwarding settings, as full entity URIs.
fn forward_xml(q: &Queue, host: &str) -> String {
    let mut s = String::new();
    if let Some(f) = &q.forward_to {
        s.push_str(&format!("<ForwardTo>sb://{host}/{f}</ForwardTo>"));
    }
    if let Some(f) = &q.forward_dlq_to {
        s.push_str(&format!(
            "<ForwardDeadLetteredMessagesTo>sb://{host}/{f}</ForwardDeadLetteredMessagesTo>"
        ));
    }
    s
}

fn topic_xml(t: &Topic, host: &str) -> String {
    format!(
        r#"<entry xml:base="http://{host}/{name}?api-version=2021-05"><id>http://{host}/{name}?api-version=2021-05</id><title type="text">{name}</title><content type="application/xml"><TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive><MaxSizeInMegabytes>1024</MaxSizeInMegabytes><RequiresDuplicateDetection>false</RequiresDuplicateDetection><DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow><EnableBatchedOperations>true</EnableBatchedOperations><SizeInBytes>0</SizeInBytes><Status>Active</Status><SupportOrdering>true</SupportOrdering><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>0</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>0</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>{scheduled}</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount><d2p1:TransferDeadLetterMessageCount>0</d2p1:TransferDeadLetterMessageCount></CountDetails><SubscriptionCount>{n}</SubscriptionCount><EnablePartitioning>false</EnablePartitioning></TopicDescription></content></entry>"#,
        name = t.name,
        n = t.subs.len(),
        scheduled = t.scheduled.len(),
    )
}

/// Scheduled topic messages that are due go to every subscription.
fn release_due_topic_messages(w: &mut World) {
    let now = Utc::now();
    let mut next_seq = w.next_seq;
    for t in w.topics.values_mut() {
        let (due, later): (Vec<Msg>, Vec<Msg>) = std::mem::take(&mut t.scheduled)
            .into_iter()
            .partition(|m| m.visible_at.is_none_or(|v| v <= now));
        t.scheduled = later;
        for m in due {
            for sub in t.subs.values_mut() {
                let mut c = m.clone();
                c.seq = next_seq;
                c.visible_at = None;
                next_seq += 1;
                sub.active.push(c);
            }
        }
    }
    w.next_seq = next_seq;
}

fn feed(
    host: &str,
    base: &str,
    title: &str,
    entries: Vec<String>,
    skip: usize,
    top: usize,
) -> Response<Full<Bytes>> {
    let total = entries.len();
    let mut s = format!(
        r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">{title}</title><id>http://{host}/{base}?$skip={skip}&amp;$top={top}&amp;api-version=2021-05</id><updated>{}</updated><link rel="self" href="http://{host}/{base}?$skip={skip}&amp;$top={top}&amp;api-version=2021-05"/>"#,
        Utc::now().to_rfc3339()
    );
    if skip + top < total {
        s.push_str(&format!(
            r#"<link rel="next" href="http://{host}/{base}?%24skip={}&amp;%24top={top}&amp;api-version=2021-05"/>"#,
            skip + top
        ));
    }
    for e in entries.into_iter().skip(skip).take(top) {
        s.push_str(&e);
    }
    s.push_str("</feed>");
    let mut r = reply(200, s);
    r.headers_mut().insert(
        "content-type",
        "application/atom+xml;type=feed;charset=utf-8"
            .parse()
            .unwrap(),
    );
    r
}
