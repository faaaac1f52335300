//! Celery workers as Celery's own remote control shows them (the pidbox protocol `celery
//! inspect` and Flower use): a request `{"method", "arguments", "destination", "ticket",
//! "reply_to"}` broadcast on the `celery.pidbox` fanout exchange; each worker answers
//! `{hostname: result}` into the caller's reply queue with the request's `ticket` header.
//! This file is broker-neutral: the request body, the answers read into `CeleryWorker`, and
//! the workers as `Consumer`s of one queue. The RabbitMQ and Redis backends carry the bytes.
//!
//! Only commands that read are ever sent (`READ_ONLY`); a worker's answer is broker text and
//! is cleaned before it is shown.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value as Json};

use qdeck_model::domain::*;
use qdeck_model::sanitize::clean_short;

/// Celery's default control exchange (`control_exchange = "celery"`).
pub const EXCHANGE: &str = "celery.pidbox";
/// Where workers send their answers (a direct exchange, routing key = the caller's oid).
pub const REPLY_EXCHANGE: &str = "reply.celery.pidbox";

/// The remote-control commands qdeck sends: each only reads the worker's state.
pub const READ_ONLY: [&str; 6] = [
    "ping",
    "stats",
    "active",
    "reserved",
    "scheduled",
    "active_queues",
];

/// The remote-control commands that change a worker qdeck sends, only at tier `full`,
/// through the gate and audited: forget a task (`revoke`) and resize a pool.
pub const CHANGING: [&str; 3] = ["revoke", "pool_grow", "pool_shrink"];

/// The commands one discovery sends, all at once.
pub const DISCOVERY: [&str; 5] = ["stats", "active", "reserved", "scheduled", "active_queues"];

/// How long a broadcast waits for workers that have not answered (as `celery inspect`'s
/// default of 1 s, plus room for a loaded broker). Known workers that all answered end it
/// sooner.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1500);

/// How long a discovery's answers count toward a queue's in-flight figure.
pub const HELD_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// One request: its method and the ticket its answers carry.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub ticket: String,
    pub arguments: Json,
    /// The workers that run it (all when `None`).
    pub destination: Option<Vec<String>>,
}

impl Request {
    /// A read-only request; anything else is refused here, before a byte is sent.
    pub fn read_only(method: &str) -> crate::Result<Request> {
        if !READ_ONLY.contains(&method) {
            return Err(crate::BackendError::Refused(format!(
                "Celery remote control: only {} are sent (read-only)",
                READ_ONLY.join(", ")
            )));
        }
        let arguments = match method {
            "active" => json!({"safe": null}),
            _ => json!({}),
        };
        Ok(Request {
            method: method.to_string(),
            ticket: uuid::Uuid::new_v4().to_string(),
            arguments,
            destination: None,
        })
    }

    /// A command that changes workers (`CHANGING` only). The caller has passed the gate.
    pub fn changing(
        method: &str,
        arguments: Json,
        destination: Option<Vec<String>>,
    ) -> crate::Result<Request> {
        if !CHANGING.contains(&method) {
            return Err(crate::BackendError::Refused(format!(
                "Celery remote control: of the commands that change workers only {} are sent",
                CHANGING.join(", ")
            )));
        }
        Ok(Request {
            method: method.to_string(),
            ticket: uuid::Uuid::new_v4().to_string(),
            arguments,
            destination,
        })
    }

    /// How many answers to wait for when `listeners` workers got it.
    pub fn expected(&self, listeners: usize) -> usize {
        self.destination
            .as_ref()
            .map_or(listeners, |d| d.len().min(listeners))
    }

    /// The JSON body kombu's Mailbox publishes: every worker runs it (no destination), and
    /// answers to `reply.celery.pidbox` with routing key `oid`.
    pub fn body(&self, oid: &str) -> Vec<u8> {
        json!({
            "method": self.method,
            "arguments": self.arguments,
            "destination": self.destination,
            "pattern": null,
            "matcher": null,
            "ticket": self.ticket,
            "reply_to": {"exchange": REPLY_EXCHANGE, "routing_key": oid},
        })
        .to_string()
        .into_bytes()
    }
}

/// The headers kombu sends with a request: a Lamport clock and the time (Unix seconds) after
/// which a worker drops it, so a late worker does not run a request nobody waits for.
pub fn request_expires(timeout: std::time::Duration) -> f64 {
    now_ms() as f64 / 1000.0 + timeout.as_secs_f64()
}

/// One worker's answer to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub ticket: String,
    pub hostname: String,
    pub value: Json,
}

/// The answers in one reply body (`{hostname: result}`), tagged with the ticket header.
/// A body that is not such an object gives none (and the caller notes it).
pub fn parse_reply(ticket: &str, body: &[u8]) -> Option<Vec<Reply>> {
    let Ok(Json::Object(o)) = serde_json::from_slice::<Json>(body) else {
        return None;
    };
    Some(
        o.into_iter()
            .map(|(hostname, value)| Reply {
                ticket: ticket.to_string(),
                hostname,
                value,
            })
            .collect(),
    )
}

/// A task a worker holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerTask {
    pub id: String,
    pub name: String,
    /// Preview of the arguments as the worker shows them.
    pub args: Option<String>,
    /// Seconds since it started (active tasks).
    pub runtime_secs: Option<f64>,
    /// When it is due (scheduled tasks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta: Option<String>,
    /// The routing key it came with (the queue's name in Celery's default routing).
    pub routing_key: Option<String>,
    /// Acknowledged to the broker (acks early: when it started), so the broker no longer
    /// counts it as unacknowledged.
    pub acknowledged: bool,
}

/// One Celery worker as the remote control shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CeleryWorker {
    pub hostname: String,
    /// Answered this discovery's `stats` (a known worker that did not is listed with a note).
    pub answered: bool,
    pub pid: Option<u64>,
    /// prefork, threads, solo, eventlet, gevent, or the pool class Celery names.
    pub pool: Option<String>,
    pub concurrency: Option<u64>,
    pub prefetch_count: Option<u64>,
    /// Tasks it has received since it started, by task name (Celery's `total`).
    pub processed: BTreeMap<String, u64>,
    pub processed_total: Option<u64>,
    pub uptime_secs: Option<u64>,
    pub active: Vec<WorkerTask>,
    pub reserved: Vec<WorkerTask>,
    pub scheduled: Vec<WorkerTask>,
    /// The queues it consumes.
    pub queues: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// It answered a control command with Celery's `{"error": …}`: the failure as a value, so
    /// callers never judge it from the note's wording.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub answered_error: bool,
}

/// What one discovery found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerReport {
    pub workers: Vec<CeleryWorker>,
    /// What went missing: workers that did not answer in time, answers that did not parse.
    pub notes: Vec<String>,
    pub elapsed_ms: u64,
    /// Unix ms it was taken.
    pub at_ms: i64,
}

fn pool_name(implementation: &str) -> String {
    let module = implementation
        .strip_prefix("celery.concurrency.")
        .and_then(|s| s.split(':').next());
    match module {
        Some("thread") => "threads".into(),
        Some(m) => clean_short(m, 30),
        None => clean_short(implementation, 60),
    }
}

fn task_of(v: &Json, now_s: f64) -> Option<WorkerTask> {
    let o = v.as_object()?;
    let s = |k: &str| o.get(k).and_then(Json::as_str).map(|x| clean_short(x, 200));
    let args = o.get("args").filter(|a| !a.is_null()).map(|a| match a {
        Json::String(x) => clean_short(x, 120),
        other => clean_short(&other.to_string(), 120),
    });
    Some(WorkerTask {
        id: s("id")?,
        name: s("name").or_else(|| s("type")).unwrap_or_default(),
        args,
        runtime_secs: o
            .get("time_start")
            .and_then(Json::as_f64)
            .map(|t| (now_s - t).max(0.0)),
        eta: None,
        routing_key: o
            .get("delivery_info")
            .and_then(|d| d.get("routing_key"))
            .and_then(Json::as_str)
            .map(|x| clean_short(x, 200)),
        acknowledged: o
            .get("acknowledged")
            .and_then(Json::as_bool)
            .unwrap_or(false),
    })
}

fn tasks(v: &Json, now_s: f64, scheduled: bool) -> Vec<WorkerTask> {
    let Some(list) = v.as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|t| {
            if !scheduled {
                return task_of(t, now_s);
            }
            // `scheduled` answers {"eta", "priority", "request": {...}}.
            let mut w = task_of(t.get("request")?, now_s)?;
            w.eta = t
                .get("eta")
                .and_then(Json::as_str)
                .map(|e| clean_short(e, 40));
            w.runtime_secs = None;
            Some(w)
        })
        .collect()
}

fn apply_stats(w: &mut CeleryWorker, v: &Json) {
    let u = |k: &str| v.get(k).and_then(Json::as_u64);
    w.pid = u("pid");
    w.prefetch_count = u("prefetch_count");
    w.uptime_secs = u("uptime");
    if let Some(p) = v.get("pool") {
        w.pool = p
            .get("implementation")
            .and_then(Json::as_str)
            .map(pool_name);
        w.concurrency = p.get("max-concurrency").and_then(Json::as_u64);
    }
    if let Some(Json::Object(t)) = v.get("total") {
        w.processed = t
            .iter()
            .filter_map(|(k, n)| Some((clean_short(k, 200), n.as_u64()?)))
            .collect();
        w.processed_total = Some(w.processed.values().sum());
    }
}

/// The workers from the answers to `requests`. `known` names the workers the broker says
/// listen on the mailbox (their pidbox queues), so one that stayed silent is listed too.
pub fn assemble(
    requests: &[Request],
    replies: Vec<Reply>,
    known: &[String],
    timeout: std::time::Duration,
) -> WorkerReport {
    let now_s = now_ms() as f64 / 1000.0;
    let method_of: BTreeMap<&str, &str> = requests
        .iter()
        .map(|r| (r.ticket.as_str(), r.method.as_str()))
        .collect();
    let mut by_host: BTreeMap<String, CeleryWorker> = BTreeMap::new();
    let mut notes = Vec::new();
    for r in replies {
        let Some(method) = method_of.get(r.ticket.as_str()) else {
            continue;
        };
        let host = clean_short(&r.hostname, 200);
        let w = by_host.entry(host.clone()).or_insert_with(|| CeleryWorker {
            hostname: host.clone(),
            ..Default::default()
        });
        if let Some(e) = r.value.get("error").and_then(Json::as_str) {
            w.notes.push(format!(
                "{method}: the worker answered an error: {}",
                clean_short(e, 200)
            ));
            continue;
        }
        match *method {
            "stats" => {
                w.answered = true;
                apply_stats(w, &r.value);
            }
            "active" => w.active = tasks(&r.value, now_s, false),
            "reserved" => w.reserved = tasks(&r.value, now_s, false),
            "scheduled" => w.scheduled = tasks(&r.value, now_s, true),
            "active_queues" => {
                w.queues = r
                    .value
                    .as_array()
                    .map(|qs| {
                        qs.iter()
                            .filter_map(|q| q.get("name").and_then(Json::as_str))
                            .map(|n| clean_short(n, 200))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            "ping" => w.answered = true,
            _ => {}
        }
    }
    for host in known {
        let host = clean_short(host, 200);
        if !by_host.contains_key(&host) {
            by_host.insert(
                host.clone(),
                CeleryWorker {
                    hostname: host.clone(),
                    ..Default::default()
                },
            );
        }
    }
    let wants_stats = requests.iter().any(|r| r.method == "stats");
    for w in by_host.values_mut() {
        if wants_stats && !w.answered {
            w.notes.push(format!(
                "did not answer within {:.1} s: busy (a solo pool answers only between tasks), \
                 overloaded, or gone without removing its mailbox",
                timeout.as_secs_f64()
            ));
        }
    }
    let silent: Vec<&str> = by_host
        .values()
        .filter(|w| wants_stats && !w.answered)
        .map(|w| w.hostname.as_str())
        .collect();
    if !silent.is_empty() {
        notes.push(format!(
            "{} worker(s) did not answer the broadcast within {:.1} s: {}",
            silent.len(),
            timeout.as_secs_f64(),
            silent.join(", ")
        ));
    }
    WorkerReport {
        workers: by_host.into_values().collect(),
        notes,
        elapsed_ms: 0,
        at_ms: now_ms(),
    }
}

/// The answers to a command that changes workers: each answering worker with its answer
/// (Celery's `{"ok": …}` or `{"error": …}`) as a note.
pub fn control_report(
    req: &Request,
    replies: Vec<Reply>,
    notes: Vec<String>,
    started: std::time::Instant,
) -> WorkerReport {
    let workers = replies
        .into_iter()
        .filter(|r| r.ticket == req.ticket)
        .map(|r| {
            let answered_error = r.value.get("error").is_some();
            let said = match (r.value.get("ok"), r.value.get("error")) {
                (_, Some(e)) => format!(
                    "error: {}",
                    e.as_str().map_or_else(|| e.to_string(), str::to_string)
                ),
                (Some(ok), _) => format!(
                    "ok: {}",
                    ok.as_str().map_or_else(|| ok.to_string(), str::to_string)
                ),
                _ => r.value.to_string(),
            };
            CeleryWorker {
                hostname: clean_short(&r.hostname, 200),
                answered: true,
                notes: vec![clean_short(&said, 300)],
                answered_error,
                ..Default::default()
            }
        })
        .collect();
    WorkerReport {
        workers,
        notes,
        elapsed_ms: started.elapsed().as_millis() as u64,
        at_ms: now_ms(),
    }
}

/// The hostname in a worker's pidbox queue name (`w1@host.celery.pidbox`).
pub fn host_of_mailbox(queue: &str) -> Option<&str> {
    queue
        .strip_suffix(".celery.pidbox")
        .filter(|h| !h.is_empty())
}

impl CeleryWorker {
    /// Whether it consumes `queue` (by name).
    pub fn consumes(&self, queue: &str) -> bool {
        self.queues.iter().any(|q| q == queue)
    }

    /// The tasks it holds that came from `queue`: by routing key, or all of them when it
    /// consumes that queue alone (a routing key then names the exchange's binding, not
    /// necessarily the queue).
    fn held_from<'a>(&'a self, queue: &'a str) -> impl Iterator<Item = &'a WorkerTask> + 'a {
        let only = self.queues.len() == 1 && self.consumes(queue);
        self.active
            .iter()
            .chain(self.reserved.iter())
            .chain(self.scheduled.iter())
            .filter(move |t| only || t.routing_key.as_deref() == Some(queue))
    }

    /// The short state the workers view's STATE column holds.
    fn state_word(&self) -> String {
        match (self.answered, self.active.len()) {
            (false, _) => "no answer".into(),
            (true, 0) => "idle".into(),
            (true, n) => format!("busy ×{n}"),
        }
    }

    /// Who it is and what it does, for the wide WORKER column: host and pid, pool, the tasks
    /// it runs with their run times, what it holds and its queues; for a silent worker, why.
    fn detail(&self) -> String {
        if !self.answered {
            return self
                .notes
                .first()
                .cloned()
                .unwrap_or_else(|| "did not answer".into());
        }
        // The hostname is the row's tag. The views cut a long text in its middle: what runs
        // comes last, so it stays in sight with the pid.
        let mut parts = Vec::new();
        if let Some(p) = self.pid {
            parts.push(format!("pid {p}"));
        }
        if let Some(p) = &self.pool {
            match self.concurrency {
                Some(c) => parts.push(format!("{p} ×{c}")),
                None => parts.push(p.clone()),
            }
        }
        if !self.queues.is_empty() {
            parts.push(format!("queues {}", self.queues.join(",")));
        }
        for (what, n) in [
            ("reserved", self.reserved.len()),
            ("scheduled", self.scheduled.len()),
        ] {
            if n > 0 {
                parts.push(format!("{what} {n}"));
            }
        }
        if !self.active.is_empty() {
            let running: Vec<String> = self
                .active
                .iter()
                .take(3)
                .map(|t| match t.runtime_secs {
                    Some(s) => format!("{} {} {s:.1}s", t.name, short_id(&t.id)),
                    None => format!("{} {}", t.name, short_id(&t.id)),
                })
                .collect();
            let more = self.active.len().saturating_sub(3);
            let more = if more > 0 {
                format!(" +{more}")
            } else {
                String::new()
            };
            parts.push(format!("running {}{more}", running.join(", ")));
        }
        clean_short(&parts.join(" · "), 300)
    }

    /// This worker as a consumer of queue `id` (named `queue` at the broker).
    pub fn consumer(&self, id: &QueueId, queue: &str, at_ms: i64) -> Consumer {
        let held = self.held_from(queue).count() as u64;
        let status = if !self.answered {
            WorkerState::Unknown
        } else if self.active.is_empty() {
            WorkerState::Idle
        } else {
            WorkerState::Busy
        };
        Consumer {
            queue: id.clone(),
            tag: self.hostname.clone(),
            peer: Some(self.detail()),
            prefetch: self
                .prefetch_count
                .map(|p| p.min(u64::from(u32::MAX)) as u32),
            ack_mode: AckMode::Manual,
            state: self.state_word(),
            status,
            status_since_ms: None,
            holding: self.answered.then_some(held),
            processed: self.processed_total,
            failed: None,
            rate: None,
            last_seen_ms: self.answered.then_some(at_ms),
        }
    }
}

fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

impl WorkerReport {
    /// The workers that consume `queue`, as consumers of `id`; workers that did not answer
    /// (their queues are unknown) are listed on every queue, flagged.
    pub fn consumers(&self, id: &QueueId, queue: &str) -> Vec<Consumer> {
        self.workers
            .iter()
            .filter(|w| !w.answered || w.consumes(queue))
            .map(|w| w.consumer(id, queue, self.at_ms))
            .collect()
    }

    /// Tasks the workers hold from `queue` that the broker no longer counts as
    /// unacknowledged (started and acknowledged early): added to the broker's in-flight
    /// figure so it counts every task the workers hold.
    pub fn acked_held(&self, queue: &str) -> u64 {
        self.workers
            .iter()
            .filter(|w| w.answered)
            .map(|w| w.held_from(queue).filter(|t| t.acknowledged).count() as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str) -> Request {
        Request::read_only(method).unwrap()
    }

    #[test]
    fn only_read_only_commands_are_built_and_the_body_is_kombus() {
        assert!(Request::read_only("revoke").is_err());
        assert!(Request::read_only("pool_grow").is_err());
        let r = req("stats");
        let b: Json = serde_json::from_slice(&r.body("oid-1")).unwrap();
        assert_eq!(b["method"], "stats");
        assert_eq!(b["ticket"], r.ticket.as_str());
        assert_eq!(b["reply_to"]["exchange"], REPLY_EXCHANGE);
        assert_eq!(b["reply_to"]["routing_key"], "oid-1");
        assert!(b["destination"].is_null());
    }

    /// A worker's `{"error": …}` answer is a value (`answered_error`), whatever its text;
    /// an `ok` answer that happens to start with "error" is not one.
    #[test]
    fn a_control_error_is_typed_not_read_from_the_note() {
        let r = req("stats");
        let reply = |host: &str, value: Json| Reply {
            ticket: r.ticket.clone(),
            hostname: host.into(),
            value,
        };
        let report = control_report(
            &r,
            vec![
                reply("w1", serde_json::json!({"error": "no such task"})),
                reply("w2", serde_json::json!({"ok": "errors cleared"})),
            ],
            Vec::new(),
            std::time::Instant::now(),
        );
        let flags: Vec<(String, bool)> = report
            .workers
            .iter()
            .map(|w| (w.hostname.clone(), w.answered_error))
            .collect();
        assert_eq!(flags, vec![("w1".into(), true), ("w2".into(), false)]);
    }

    #[test]
    fn answers_become_workers_and_silent_ones_get_a_note() {
        let reqs = [req("stats"), req("active"), req("active_queues")];
        let now = now_ms() as f64 / 1000.0;
        let stats = br#"{"w1@h": {"pid": 42, "prefetch_count": 8, "total": {"a.b": 3, "c.d": 2},
            "pool": {"implementation": "celery.concurrency.thread:TaskPool", "max-concurrency": 2}}}"#;
        let active = format!(
            r#"{{"w1@h": [{{"id": "t-1", "name": "a.b", "args": [1], "time_start": {}, "acknowledged": true,
            "delivery_info": {{"routing_key": "q1"}}}}]}}"#,
            now - 2.0
        );
        let queues = br#"{"w1@h": [{"name": "q1"}, {"name": "q2"}]}"#;
        let mut replies = parse_reply(&reqs[0].ticket, stats).unwrap();
        replies.extend(parse_reply(&reqs[1].ticket, active.as_bytes()).unwrap());
        replies.extend(parse_reply(&reqs[2].ticket, queues).unwrap());
        replies.extend(parse_reply("someone-else", stats).unwrap());
        assert!(parse_reply("t", b"[1]").is_none());
        let rep = assemble(&reqs, replies, &["w2@h".into()], TIMEOUT);
        assert_eq!(rep.workers.len(), 2);
        let w = &rep.workers[0];
        assert_eq!(
            (w.pid, w.pool.as_deref(), w.concurrency),
            (Some(42), Some("threads"), Some(2))
        );
        assert_eq!(w.processed_total, Some(5));
        assert!(w.active[0].runtime_secs.unwrap() >= 1.5);
        assert!(!rep.workers[1].answered);
        assert!(rep.notes[0].contains("w2@h"), "{:?}", rep.notes);
        let c = rep.consumers(&QueueId::new("q1"), "q1");
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].holding, Some(1));
        assert_eq!(c[0].status, WorkerState::Busy);
        assert_eq!(c[0].state, "busy ×1");
        assert!(
            c[0].peer
                .as_deref()
                .unwrap_or("")
                .contains("threads ×2 · queues q1,q2 · running a.b t-1"),
            "{:?}",
            c[0].peer
        );
        assert_eq!(c[1].status, WorkerState::Unknown);
        assert_eq!(rep.acked_held("q1"), 1);
        assert_eq!(rep.acked_held("q2"), 0);
    }
}
