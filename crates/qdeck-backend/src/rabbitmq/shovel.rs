//! Server-side move with a dynamic shovel, as the management UI's "Move messages" does:
//! `ack-mode: on-confirm` (the broker acks the source only after the destination confirmed),
//! but with an exact `src-delete-after` and no restarts (see `move_with_shovel`). Used for redrive to a chosen queue when the
//! profile sets `use_shovel` and no rate limit or id filter is asked for.

use std::time::{Duration, Instant};

use super::mgmt::enc;
use super::RabbitBackend;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::*;

/// A shovel that is not running (starting, restarting, gone from the status list) for this
/// long has stalled: it cannot reach one end.
const NOT_RUNNING: Duration = Duration::from_secs(5);
/// A running shovel whose source stayed empty this long will not reach its count (another
/// consumer took the messages).
const DRAINED: Duration = Duration::from_secs(10);
/// A running shovel while neither the source nor the target count moves for this long has
/// stalled (a blocked target, flow control).
const FROZEN: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(250);

async fn ready(b: &RabbitBackend, vhost: &str, queue: &str) -> Result<u64> {
    let ch = b.pool.channel(vhost).await?;
    b.calls.bump("amqp:queue.declare");
    let n = super::redrive::count(&ch, queue, &QueueId::new(queue)).await;
    let _ = ch.close(200, "ok".into()).await;
    n
}

/// What `/api/shovels/{vhost}` says about one shovel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShovelState {
    Running,
    /// "starting", or not listed yet: connecting, or restarting after a failure.
    Starting,
    /// "terminated": it stopped with an error (the reason, sanitized).
    Terminated(String),
}

/// The state of shovel `name` from a `/api/shovels/{vhost}` answer.
pub fn shovel_state(status: &serde_json::Value, name: &str) -> ShovelState {
    let row = status.as_array().and_then(|a| {
        a.iter()
            .find(|s| s.get("name").and_then(|n| n.as_str()) == Some(name))
    });
    let Some(row) = row else {
        return ShovelState::Starting;
    };
    match row.get("state").and_then(|s| s.as_str()) {
        Some("running") => ShovelState::Running,
        Some("terminated") => ShovelState::Terminated(super::conn::one_line(
            &row.get("reason")
                .map(|r| match r {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default(),
        )),
        _ => ShovelState::Starting,
    }
}

/// `Ok(None)`: the shovel plugin is not there, the caller moves client-side.
///
/// The shovel moves exactly `min(max, ready now)` messages (`src-delete-after` as a
/// number, never `queue-length`, which the shovel would measure again when it starts, new
/// dead letters included) and is never restarted (`reconnect-delay: 0`): a restarted
/// shovel would start counting again and move more than was confirmed. A shovel that stops
/// running is reported as an error with what moved, within a few seconds.
pub async fn move_with_shovel(
    b: &RabbitBackend,
    vhost: &str,
    src: &str,
    dest: &str,
    max: Option<u64>,
    progress: &OpProgress,
) -> Result<Option<RedriveReport>> {
    let before = ready(b, vhost, src).await?;
    // The target must exist: a shovel would create it.
    let dest_before = ready(b, vhost, dest).await?;
    let total = max.map_or(before, |m| m.min(before));
    progress.set_total(Some(total));
    let mut report = RedriveReport {
        mode: "shovel".into(),
        ..Default::default()
    };
    if total == 0 {
        progress.phase("done");
        return Ok(Some(report));
    }
    let shovel = Shovel::new(vhost, src, dest);
    if !shovel.create(b, total).await? {
        return Ok(None);
    }
    progress.phase("shovel moving");
    let mut counts = Counts::new(before, dest_before, total);
    let end = shovel.watch(b, &mut counts, progress).await;
    report.cancelled = matches!(end, End::Cancelled);
    let finished = matches!(end, End::Finished);
    if !finished {
        // What the stopped shovel held unacknowledged returns to the source asynchronously.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (s, d) = tokio::join!(ready(b, vhost, src), ready(b, vhost, dest));
    let counted = counts.estimate(s.unwrap_or(before), d.unwrap_or(dest_before));
    report.moved = if finished { total } else { counted };
    if finished && counted < total {
        // The shovel counts what it forwarded; a target that refuses copies (overflow
        // reject-publish) sends them back to the source. Dead letters returning to the
        // source and other clients also move these counts, so this is a note, not a verdict.
        report.errors.push(format!(
            "the shovel finished, but the queue counts show only {counted} of {total} moved (messages dead-lettered back, other clients, or a target that refused copies)"
        ));
    }
    if report.moved > counts.last_done {
        progress.add_done(report.moved - counts.last_done);
    }
    if let End::Stalled(why) = end {
        progress.phase("stalled");
        let msg = format!(
            "{why}; it was stopped after moving about {} of {total} (from the queue counts); the rest stay in '{src}'",
            report.moved
        );
        if report.moved == 0 {
            return Err(BackendError::Unreachable(msg));
        }
        report.failed = total - report.moved;
        report.errors.push(msg);
        return Ok(Some(report));
    }
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(Some(report))
}

/// How a shovel's move ended.
enum End {
    /// The shovel moved its count and deleted itself.
    Finished,
    /// The user cancelled: the shovel was deleted.
    Cancelled,
    /// It stopped moving (the reason): the shovel was deleted.
    Stalled(String),
}

/// One dynamic shovel of ours and where the management API knows it.
struct Shovel<'a> {
    vhost: &'a str,
    src: &'a str,
    dest: &'a str,
    name: String,
    /// Its parameter, which the shovel deletes once it moved its count.
    path: String,
    /// The vhost's shovel status list.
    status_path: String,
}

impl<'a> Shovel<'a> {
    fn new(vhost: &'a str, src: &'a str, dest: &'a str) -> Self {
        let name = format!("qdeck-move-{}", uuid::Uuid::new_v4().simple());
        Shovel {
            vhost,
            src,
            dest,
            path: format!("/api/parameters/shovel/{}/{}", enc(vhost), enc(&name)),
            status_path: format!("/api/shovels/{}", enc(vhost)),
            name,
        }
    }

    /// Create the shovel, moving `total` messages; `false` when the broker will not have it
    /// (no plugin, no policymaker tag, …: the caller moves client-side instead).
    async fn create(&self, b: &RabbitBackend, total: u64) -> Result<bool> {
        let (vhost, name) = (self.vhost, &self.name);
        let uri = format!("amqp:///{}", enc(vhost));
        let body = serde_json::json!({
            "component": "shovel", "vhost": vhost, "name": name,
            "value": {
                "src-uri": uri, "src-queue": self.src, "src-protocol": "amqp091",
                "src-prefetch-count": 1000, "src-delete-after": total,
                "dest-uri": uri, "dest-queue": self.dest, "dest-protocol": "amqp091",
                "dest-add-forward-headers": false, "ack-mode": "on-confirm",
                "reconnect-delay": 0
            }
        });
        match b
            .mgmt
            .send(reqwest::Method::PUT, &self.path, Some(&body))
            .await
        {
            Ok(_) => Ok(true),
            Err(e @ BackendError::Unreachable(_)) => Err(e),
            Err(_) => Ok(false),
        }
    }

    async fn delete(&self, b: &RabbitBackend) {
        let _ = b.mgmt.send(reqwest::Method::DELETE, &self.path, None).await;
    }

    /// Poll the shovel and both counts until it finished, the user cancelled or it stalled;
    /// a cancelled or stalled shovel is deleted before it restarts and counts again.
    async fn watch(&self, b: &RabbitBackend, counts: &mut Counts, progress: &OpProgress) -> End {
        let cancel = progress.cancel_token();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    self.delete(b).await;
                    return End::Cancelled;
                }
                _ = tokio::time::sleep(POLL) => {}
            }
            // The shovel deletes its parameter once it moved `src-delete-after` messages.
            let (param, status, src_now, dest_now) = tokio::join!(
                b.mgmt.send(reqwest::Method::GET, &self.path, None),
                b.mgmt.get::<serde_json::Value>(&self.status_path),
                ready(b, self.vhost, self.src),
                ready(b, self.vhost, self.dest)
            );
            if matches!(param, Err(BackendError::NotFound(_))) {
                return End::Finished;
            }
            let state = status.map(|s| shovel_state(&s, &self.name));
            if let Some(why) = counts.stall(state, src_now, dest_now, progress) {
                self.delete(b).await;
                return End::Stalled(why);
            }
        }
    }
}

/// What the two queue counts say of a running shovel (it reports no count on 3.x).
struct Counts {
    before: u64,
    dest_before: u64,
    total: u64,
    /// Moved so far, as reported to the progress.
    last_done: u64,
    last_progress: Instant,
    not_running_since: Instant,
    /// Any movement of either count means the shovel works (dead letters returning to the
    /// source keep its count level while the shovel moves).
    last_counts: (Option<u64>, Option<u64>),
    last_change: Instant,
}

impl Counts {
    fn new(before: u64, dest_before: u64, total: u64) -> Self {
        Counts {
            before,
            dest_before,
            total,
            last_done: 0,
            last_progress: Instant::now(),
            not_running_since: Instant::now(),
            last_counts: (Some(before), Some(dest_before)),
            last_change: Instant::now(),
        }
    }

    /// Messages moved, estimated from the two queues.
    fn estimate(&self, src_now: u64, dest_now: u64) -> u64 {
        self.before
            .saturating_sub(src_now)
            .max(dest_now.saturating_sub(self.dest_before))
            .min(self.total)
    }

    /// Take one poll's state and counts; why the shovel stalled, if it did.
    fn stall(
        &mut self,
        state: Result<ShovelState>,
        src_now: Result<u64>,
        dest_now: Result<u64>,
        progress: &OpProgress,
    ) -> Option<String> {
        let src_empty = matches!(src_now, Ok(0));
        let now = (
            src_now.as_ref().ok().copied(),
            dest_now.as_ref().ok().copied(),
        );
        if now != self.last_counts {
            self.last_counts = now;
            self.last_change = Instant::now();
        }
        let done = self.estimate(
            src_now.unwrap_or(self.before),
            dest_now.unwrap_or(self.dest_before),
        );
        if done > self.last_done {
            progress.add_done(done - self.last_done);
            self.last_done = done;
            self.last_progress = Instant::now();
        }
        match state {
            Ok(ShovelState::Running) => self.not_running_since = Instant::now(),
            Ok(ShovelState::Terminated(reason)) => {
                return Some(format!("the shovel stopped: {reason}"));
            }
            Ok(ShovelState::Starting) | Err(_) => {
                if self.not_running_since.elapsed() > NOT_RUNNING {
                    return Some(format!(
                        "the shovel has not been running for {} s (it cannot reach the source or the target)",
                        NOT_RUNNING.as_secs()
                    ));
                }
            }
        }
        // Dead letters looping back keep the source from emptying, so only an empty source
        // that stays empty says the shovel has nothing left to take.
        if !src_empty && self.last_change.elapsed() > FROZEN {
            return Some(format!(
                "neither queue count moved for {} s while the shovel ran",
                FROZEN.as_secs()
            ));
        }
        if src_empty && self.last_progress.elapsed() > DRAINED {
            return Some(format!(
                "the source stayed empty for {} s before the shovel reached its count (another consumer took the messages?)",
                DRAINED.as_secs()
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shovel_states_from_the_status_list() {
        let status: serde_json::Value = serde_json::from_str(
            r#"[{"node":"rabbit@h","timestamp":"2026-12-02 20:00:00","name":"a","vhost":"/","type":"dynamic","state":"running","src_uri":"amqp://","dest_uri":"amqp://"},
                {"node":"rabbit@h","timestamp":"2026-12-02 20:00:01","name":"b","vhost":"/","type":"dynamic","state":"terminated","reason":"{{badmatch,{error,{{shutdown,{server_initiated_close,406,<<\"PRECONDITION_FAILED\">>}}}}}}"},
                {"node":"rabbit@h","name":"c","vhost":"/","type":"dynamic","state":"starting"}]"#,
        )
        .expect("status json");
        assert_eq!(shovel_state(&status, "a"), ShovelState::Running);
        assert!(
            matches!(shovel_state(&status, "b"), ShovelState::Terminated(r) if r.contains("406"))
        );
        assert_eq!(shovel_state(&status, "c"), ShovelState::Starting);
        assert_eq!(shovel_state(&status, "missing"), ShovelState::Starting);
    }
}
