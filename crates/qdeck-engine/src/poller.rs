//! The poller: one tokio task per backend that keeps the store fed without the UI ever
//! awaiting the network.
//!
//! - `list_queues` every `list_every` (the queue list changes rarely);
//! - stats for the visible queues every `refresh`;
//! - on a slower sweep (`sweep_every`): DLQs, the worst queues by their last figures, then the
//!   rest in chunks, round-robin (see `schedule`);
//! - with a call budget (`max_calls_per_minute`) every poll spends only what the budget has
//!   left, measured from the backend's counters, cutting the sweep before the screen;
//! - one request at a time: a tick that comes while a poll runs is skipped;
//! - errors back off exponentially (up to `max_backoff`), and never less than a throttled
//!   broker's `retry_after`; every poll has a timeout, so a hung broker makes rows stale
//!   instead of freezing anything;
//! - API calls per minute are measured from the backend's counters and sent along.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

use super::budget::{self, Budget, CallCost, Pacer};
use super::schedule::{plan_tick, LastFigures, TickShape};
use qdeck_backend::{Backend, BackendError};
use qdeck_model::domain::{BrokerKind, QueueId, QueueInfo, StatsBatch};

#[derive(Debug, Clone)]
pub struct PollConfig {
    pub refresh: Duration,
    pub list_every: Duration,
    pub sweep_every: Duration,
    /// Queues per stats call in the sweep.
    pub sweep_chunk: usize,
    pub max_backoff: Duration,
    /// A poll that takes longer is abandoned and reported as an error; the next one waits
    /// twice as long, up to [`MAX_POLL_TIMEOUT`] (a broker with 100,000 queues may need
    /// longer than any fixed figure to list them, and must still get listed).
    pub timeout: Duration,
    /// API calls a minute this poller may make; `None` for no limit.
    pub max_calls_per_minute: Option<u32>,
    /// Ordinary queues ranked worst by their last figures, polled on every sweep.
    pub worst_n: usize,
}

impl PollConfig {
    pub fn with_refresh(refresh_secs: f64) -> PollConfig {
        let refresh = Duration::from_secs_f64(refresh_secs.clamp(0.1, 3600.0));
        PollConfig {
            refresh,
            list_every: (refresh * 15).max(Duration::from_secs(30)),
            sweep_every: (refresh * 5).max(Duration::from_secs(5)),
            sweep_chunk: 100,
            max_backoff: Duration::from_secs(60),
            timeout: (refresh * 4).max(Duration::from_secs(10)),
            max_calls_per_minute: None,
            worst_n: 50,
        }
    }

    pub fn with_budget(mut self, calls_per_minute: Option<u32>) -> PollConfig {
        self.max_calls_per_minute = calls_per_minute;
        self
    }
}

/// The longest a poll may take once earlier ones timed out.
pub const MAX_POLL_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a poll failed, kept typed so a throttled broker's `retry_after` reaches the wait.
#[derive(Debug, Clone)]
pub enum PollError {
    Backend(BackendError),
    /// No answer within the first duration; the next poll waits the second.
    Timeout(Duration, Duration),
}

impl PollError {
    /// One line, redacted, for the status line. It says once that the broker failed: errors
    /// whose text already names their kind ("broker unreachable: …", "refused: …") are shown as
    /// they are; the few whose text is the broker's words alone get a `broker error:` head.
    pub fn line(&self) -> String {
        match self {
            PollError::Backend(
                e @ (BackendError::NotFound(_)
                | BackendError::Forbidden { .. }
                | BackendError::Other(_)),
            ) => format!(
                "broker error: {}",
                qdeck_model::sanitize::one_line(&e.to_string())
            ),
            PollError::Backend(e) => qdeck_model::sanitize::one_line(&e.to_string()),
            PollError::Timeout(t, next) if next > t => format!(
                "no answer from the broker within {} s (the next poll waits up to {} s)",
                t.as_secs(),
                next.as_secs()
            ),
            PollError::Timeout(t, _) => {
                format!("no answer from the broker within {} s", t.as_secs())
            }
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            PollError::Backend(e) => e.retry_after(),
            PollError::Timeout(..) => None,
        }
    }
}

/// How long to wait after `failures` failures in a row, the last one `err`: the backoff, and
/// never less than the broker asked for.
pub fn wait_after_error(cfg: &PollConfig, failures: u32, err: &PollError) -> Duration {
    let b = backoff(cfg.refresh, failures, cfg.max_backoff);
    match err.retry_after() {
        Some(r) => b.max(r),
        None => b,
    }
}

#[derive(Debug, Clone)]
pub enum PollEvent {
    Queues(Vec<QueueInfo>),
    Stats(StatsBatch),
    /// The whole poll failed: the broker's error or a timeout (`PollError::line` is the
    /// status line's text).
    Error(PollError),
    /// A poll started / finished: the status line shows a spinner.
    Busy(bool),
    /// API calls per minute over the last minute, and the SQS cost per hour at that pace.
    ApiRate(Budget),
}

/// Control side of a running poller. Dropping it stops the task.
pub struct PollerHandle {
    visible: watch::Sender<Vec<QueueId>>,
    wake: Arc<Notify>,
    cancel: CancellationToken,
}

impl PollerHandle {
    /// The queues on screen now (polled first and often).
    pub fn set_visible(&self, ids: Vec<QueueId>) {
        self.visible.send_if_modified(|v| {
            if *v != ids {
                *v = ids;
                true
            } else {
                false
            }
        });
    }

    /// Poll now (list and visible stats), skipping any backoff.
    pub fn refresh_now(&self) {
        self.wake.notify_one();
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

impl Drop for PollerHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

struct Poller {
    backend: Arc<dyn Backend>,
    cfg: PollConfig,
    tx: mpsc::Sender<PollEvent>,
    visible: watch::Receiver<Vec<QueueId>>,
    all: Vec<QueueId>,
    known: HashSet<QueueId>,
    dlqs: Vec<QueueId>,
    last: HashMap<QueueId, LastFigures>,
    sweep_pos: usize,
    calls: VecDeque<(Instant, BTreeMap<String, u64>)>,
    pacer: Option<Pacer>,
    cost: CallCost,
    /// Calls the last listing took.
    list_cost: u64,
    /// The poll timeout now, in ms: doubled after each timeout (see `PollConfig::timeout`).
    timeout_ms: std::sync::atomic::AtomicU64,
}

/// RabbitMQ's stats call reads the management API's listing of every queue, whatever it is
/// asked for: one call can carry the figures of them all. Asking a hundred at a time made each
/// sweep chunk a full listing and left a 20,000-queue broker hours from its last figure.
fn one_call_covers_all(kind: BrokerKind) -> bool {
    // BrokerKind here, not a backend declaration: this is the poller's chunking policy, read
    // from the broker's known API cost; a declared "cost per stats call" would move it.
    kind == BrokerKind::Rabbitmq
}

pub fn spawn(
    backend: Arc<dyn Backend>,
    mut cfg: PollConfig,
    tx: mpsc::Sender<PollEvent>,
) -> PollerHandle {
    if one_call_covers_all(backend.kind()) {
        cfg.sweep_chunk = usize::MAX;
    }
    let (vtx, vrx) = watch::channel(Vec::new());
    let wake = Arc::new(Notify::new());
    let cancel = CancellationToken::new();
    // One sweep's worth of calls may go at once; the minute's total stays within budget.
    let pacer = cfg.max_calls_per_minute.map(|per_min| {
        let burst = per_min as f64 * cfg.sweep_every.as_secs_f64() / 60.0;
        Pacer::new(per_min, burst, Instant::now())
    });
    let cost = CallCost::new(backend.kind(), cfg.sweep_chunk);
    let timeout_ms = std::sync::atomic::AtomicU64::new(cfg.timeout.as_millis() as u64);
    let p = Poller {
        backend,
        cfg,
        tx,
        visible: vrx,
        all: Vec::new(),
        known: HashSet::new(),
        dlqs: Vec::new(),
        last: HashMap::new(),
        sweep_pos: 0,
        calls: VecDeque::new(),
        pacer,
        cost,
        list_cost: 0,
        timeout_ms,
    };
    let (w, c) = (wake.clone(), cancel.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = c.cancelled() => {}
            _ = p.run(w) => {}
        }
    });
    PollerHandle {
        visible: vtx,
        wake,
        cancel,
    }
}

impl Poller {
    async fn send(&self, ev: PollEvent) -> bool {
        self.tx.send(ev).await.is_ok()
    }

    async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = qdeck_backend::Result<T>>,
    ) -> Result<T, PollError> {
        use std::sync::atomic::Ordering::Relaxed;
        let limit = Duration::from_millis(self.timeout_ms.load(Relaxed));
        match tokio::time::timeout(limit, f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(PollError::Backend(e)),
            Err(_) => {
                // It stays raised: a broker that once needed longer will again.
                let next = (limit * 2).min(MAX_POLL_TIMEOUT.max(limit));
                self.timeout_ms.store(next.as_millis() as u64, Relaxed);
                Err(PollError::Timeout(limit, next))
            }
        }
    }

    /// Calls the budget allows now (`None`: no budget).
    fn allowance(&mut self) -> Option<f64> {
        let now = Instant::now();
        self.pacer.as_mut().map(|p| p.available(now))
    }

    /// Pay the calls made since `before` (a reading of the backend's counter).
    fn pay(&mut self, before: u64) -> u64 {
        let spent = self.backend.api_calls().total().saturating_sub(before);
        if let Some(p) = self.pacer.as_mut() {
            p.spend(spent, Instant::now());
        }
        spent
    }

    fn remember(&mut self, batch: &StatsBatch) {
        for s in &batch.stats {
            self.last.insert(
                s.id.clone(),
                LastFigures {
                    depth: s.depth,
                    age_secs: s.oldest_age_secs,
                    dlq_depth: s.dlq_depth,
                },
            );
        }
    }

    fn set_listing(&mut self, qs: &[QueueInfo]) {
        self.all = qs.iter().map(|q| q.id.clone()).collect();
        self.known = self.all.iter().cloned().collect();
        self.dlqs = qs
            .iter()
            .filter(|q| q.is_dlq)
            .map(|q| q.id.clone())
            .collect();
        let known = &self.known;
        self.last.retain(|id, _| known.contains(id));
    }

    /// List the queues when due and the budget has a call left (the first listing always).
    async fn list_if_due(
        &mut self,
        last_list: &mut Option<Instant>,
        now: Instant,
    ) -> Result<bool, PollError> {
        let every = match &self.pacer {
            Some(p) => relist_every(self.cfg.list_every, self.list_cost, p.per_min()),
            None => self.cfg.list_every,
        };
        let due = last_list.is_none_or(|t| now.duration_since(t) >= every);
        let first = last_list.is_none() && self.all.is_empty();
        // A listing waits for a full bucket (or its own cost, when smaller).
        let need = self
            .pacer
            .as_ref()
            .map(|p| (self.list_cost.max(1) as f64).min(p.burst()));
        let short = need.is_some_and(|n| self.allowance().is_some_and(|a| a < n));
        if !due || (!first && short) {
            return Ok(true);
        }
        let before = self.backend.api_calls().total();
        let r = self.timed(self.backend.list_queues()).await;
        self.list_cost = self.pay(before);
        let qs = r?;
        self.set_listing(&qs);
        *last_list = Some(now);
        Ok(self.send(PollEvent::Queues(qs)).await)
    }

    /// Stats for this tick's queues, within the budget. `Ok(false)`: the console is gone.
    /// Returns also how long the budget asks to wait before the next poll.
    async fn poll_stats(
        &mut self,
        last_sweep: &mut Option<Instant>,
        now: Instant,
    ) -> Result<(bool, Duration), PollError> {
        let visible: Vec<QueueId> = self
            .visible
            .borrow_and_update()
            .iter()
            .filter(|id| self.all.is_empty() || self.known.contains(*id))
            .cloned()
            .collect();
        let per_queue = self.cost.per_queue();
        let chunk = self.cfg.sweep_chunk.max(1);
        let affordable = self
            .allowance()
            .map(|a| (a.max(0.0) / per_queue).floor() as usize);
        // The screen is refreshed whole or not at all: when the budget cannot pay for every
        // visible row yet (and one sweep's worth could), wait for it instead of showing a
        // mix of fresh and old rows.
        let need = self.cost.estimate(visible.len(), chunk);
        if let (Some(p), Some(a)) = (self.pacer.as_mut(), affordable) {
            if a < visible.len() && need <= p.burst() {
                return Ok((true, p.wait_for(need, Instant::now())));
            }
        }
        let sweep_due = !self.all.is_empty()
            && last_sweep.is_none_or(|t| now.duration_since(t) >= self.cfg.sweep_every);
        let shape = TickShape {
            sweep: sweep_due,
            worst_n: self.cfg.worst_n,
            rest_n: chunk,
            affordable,
        };
        let (ids, next) = plan_tick(
            shape,
            &visible,
            &self.dlqs,
            &self.all,
            &self.last,
            self.sweep_pos,
        );
        if sweep_due && (affordable.is_none() || ids.len() > visible.len()) {
            *last_sweep = Some(now);
            self.sweep_pos = next;
        }
        for part in ids.chunks(chunk) {
            if self.allowance().is_some_and(|a| a < 1.0) {
                break;
            }
            let before = self.backend.api_calls().total();
            let r = self.timed(self.backend.stats(part)).await;
            let spent = self.pay(before);
            self.cost.observe(spent, part.len());
            let batch = r?;
            self.remember(&batch);
            if !self.send(PollEvent::Stats(batch)).await {
                return Ok((false, Duration::ZERO));
            }
        }
        let wait = match self.pacer.as_mut() {
            Some(p) => p.wait_for(1.0, Instant::now()),
            None => Duration::ZERO,
        };
        Ok((true, wait))
    }

    async fn run(mut self, wake: Arc<Notify>) {
        let mut failures: u32 = 0;
        let mut last_list: Option<Instant> = None;
        let mut last_sweep: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if !self.send(PollEvent::Busy(true)).await {
                return;
            }
            let mut result = self.list_if_due(&mut last_list, now).await;
            let mut budget_wait = Duration::ZERO;
            if let Ok(true) = result {
                result = match self.poll_stats(&mut last_sweep, now).await {
                    Ok((open, w)) => {
                        budget_wait = w;
                        Ok(open)
                    }
                    Err(e) => Err(e),
                };
            }
            let (wait, hold) = match result {
                Ok(false) => return,
                Ok(true) => {
                    failures = 0;
                    (self.cfg.refresh.max(budget_wait), budget_wait)
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    if !self.send(PollEvent::Error(e.clone())).await {
                        return;
                    }
                    // A throttled broker said how long to stay away: nothing shortens that.
                    let hold = e.retry_after().unwrap_or(Duration::ZERO);
                    (wait_after_error(&self.cfg, failures, &e), hold)
                }
            };
            if let Some(rate) = self.api_rate() {
                if !self.send(PollEvent::ApiRate(rate)).await {
                    return;
                }
            }
            if !self.send(PollEvent::Busy(false)).await {
                return;
            }
            if !hold.is_zero() {
                tokio::time::sleep(hold).await;
            }
            // Sleep until the next poll, or until the visible set changes or a refresh is
            // asked for (a request made while a poll ran is kept by Notify and served now).
            tokio::select! {
                _ = tokio::time::sleep(wait.saturating_sub(hold)) => {}
                _ = wake.notified() => { last_list = None; }
                r = self.visible.changed() => {
                    if r.is_err() { return; }
                    // Give fast scrolling a moment to settle.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
            }
        }
    }

    fn api_rate(&mut self) -> Option<Budget> {
        let now = Instant::now();
        self.calls
            .push_back((now, self.backend.api_calls().snapshot()));
        while self
            .calls
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > Duration::from_secs(60))
        {
            self.calls.pop_front();
        }
        let (t0, c0) = self.calls.front()?;
        let (t1, c1) = self.calls.back()?;
        let dt = t1.duration_since(*t0);
        if dt < Duration::from_secs(1) {
            return None;
        }
        budget::between(self.backend.kind(), c0, c1, dt)
    }
}

/// How often to list again under a budget of `per_min`: at least `list_every`, and rarely
/// enough that listing (`cost` calls the last time; SQS reads each queue's attributes) takes
/// no more than a quarter of the budget, leaving the rest to the figures.
pub fn relist_every(list_every: Duration, cost: u64, per_min: f64) -> Duration {
    if per_min <= 0.0 {
        return list_every;
    }
    list_every.max(Duration::from_secs_f64(cost as f64 * 4.0 * 60.0 / per_min))
}

pub fn backoff(base: Duration, failures: u32, max: Duration) -> Duration {
    let f = 2u32.saturating_pow(failures.min(16));
    base.saturating_mul(f).min(max).max(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_backend::{ApiCalls, OpProgress};
    use qdeck_model::domain::*;
    use std::sync::Mutex;

    /// The status line names the failure once: no `broker error: broker unreachable:`.
    #[test]
    fn a_poll_error_line_says_broker_once() {
        let e = PollError::Backend(BackendError::Unreachable("connection refused".into()));
        assert_eq!(e.line(), "broker unreachable: connection refused");
        let e = PollError::Backend(BackendError::NotFound("no such vhost".into()));
        assert_eq!(e.line(), "broker error: no such vhost");
        let e = PollError::Backend(BackendError::Refused("read-only".into()));
        assert_eq!(e.line(), "refused: read-only");
    }

    /// Answers the listing; throttles the first `throttle` stats calls (saying `retry_after`)
    /// and records when every stats call came.
    struct Throttling {
        throttle: usize,
        retry_after: Option<Duration>,
        at: Mutex<Vec<Instant>>,
        calls: ApiCalls,
        kind: BrokerKind,
        /// Queues listed besides `q`, and how many queues each stats call asked for.
        others: usize,
        asked: Mutex<Vec<usize>>,
        /// How long each listing takes.
        list_delay: Duration,
    }

    fn fake(
        kind: BrokerKind,
        others: usize,
        throttle: usize,
        retry_after: Option<Duration>,
    ) -> Throttling {
        Throttling {
            throttle,
            retry_after,
            at: Mutex::new(Vec::new()),
            calls: ApiCalls::default(),
            kind,
            others,
            asked: Mutex::new(Vec::new()),
            list_delay: Duration::ZERO,
        }
    }

    fn refused<T>() -> qdeck_backend::Result<T> {
        Err(BackendError::Unsupported("not in this fake".into()))
    }

    #[async_trait::async_trait]
    impl Backend for Throttling {
        fn kind(&self) -> BrokerKind {
            self.kind
        }
        fn capabilities(&self) -> Capabilities {
            qdeck_backend::local::capabilities()
        }
        async fn list_queues(&self) -> qdeck_backend::Result<Vec<QueueInfo>> {
            self.calls.bump("fake:list");
            tokio::time::sleep(self.list_delay).await;
            let names = std::iter::once("q".to_string())
                .chain((0..self.others).map(|i| format!("other-{i:05}")));
            Ok(names
                .map(|n| QueueInfo {
                    id: QueueId::new(n),
                    ..Default::default()
                })
                .collect())
        }
        async fn stats(&self, ids: &[QueueId]) -> qdeck_backend::Result<StatsBatch> {
            self.calls.bump("fake:stats");
            self.asked.lock().unwrap().push(ids.len());
            let n = {
                let mut at = self.at.lock().unwrap();
                at.push(Instant::now());
                at.len()
            };
            if n <= self.throttle {
                return Err(BackendError::Throttled {
                    msg: "slow down".into(),
                    retry_after: self.retry_after,
                });
            }
            Ok(StatsBatch {
                stats: ids
                    .iter()
                    .map(|id| QueueStats {
                        id: id.clone(),
                        depth: Some(1),
                        ..Default::default()
                    })
                    .collect(),
                errors: vec![],
            })
        }
        async fn consumers(&self, _: &QueueId) -> qdeck_backend::Result<Vec<Consumer>> {
            refused()
        }
        async fn browse(&self, _: &QueueId, _: &BrowseRequest) -> qdeck_backend::Result<Page> {
            refused()
        }
        async fn redrive(
            &self,
            _: &RedriveRequest,
            _: &OpProgress,
        ) -> qdeck_backend::Result<RedriveReport> {
            refused()
        }
        async fn purge(&self, _: &QueueId, _: &OpProgress) -> qdeck_backend::Result<PurgeReport> {
            refused()
        }
        fn api_calls(&self) -> &ApiCalls {
            &self.calls
        }
    }

    /// Runs a poller on `b` (visible: `q`) until `stats_calls` stats calls were made; the
    /// errors it reported.
    async fn run_until(b: Arc<Throttling>, stats_calls: usize) -> Vec<PollError> {
        let (tx, mut rx) = mpsc::channel(64);
        let mut cfg = PollConfig::with_refresh(0.1);
        cfg.sweep_every = Duration::from_secs(3600);
        let h = spawn(b.clone(), cfg, tx);
        h.set_visible(vec![QueueId::new("q")]);
        let mut errors = Vec::new();
        while b.at.lock().unwrap().len() < stats_calls {
            match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                Ok(Some(PollEvent::Error(e))) => errors.push(e),
                Ok(Some(_)) => {}
                _ => panic!("the poller stopped polling"),
            }
        }
        h.stop();
        errors
    }

    #[tokio::test]
    async fn throttled_poll_waits_at_least_retry_after() {
        let b = Arc::new(fake(
            BrokerKind::Local,
            0,
            1,
            Some(Duration::from_millis(1500)),
        ));
        let errors = run_until(b.clone(), 2).await;
        assert!(
            errors
                .iter()
                .any(|e| matches!(e, PollError::Backend(BackendError::Throttled { .. }))),
            "{errors:?}"
        );
        let at = b.at.lock().unwrap().clone();
        let gap = at[1].duration_since(at[0]);
        // Backoff alone would be 0.2 s at a 0.1 s refresh.
        assert!(gap >= Duration::from_millis(1500), "retried after {gap:?}");
    }

    #[tokio::test]
    async fn refresh_requests_do_not_cut_a_throttle_short() {
        let b = Arc::new(fake(
            BrokerKind::Local,
            0,
            1,
            Some(Duration::from_millis(1200)),
        ));
        let (tx, mut rx) = mpsc::channel(64);
        let h = spawn(b.clone(), PollConfig::with_refresh(0.1), tx);
        h.set_visible(vec![QueueId::new("q")]);
        while b.at.lock().unwrap().is_empty() {
            rx.recv().await.expect("open");
        }
        // Every refresh request and scroll would otherwise start a poll at once.
        for i in 0..6 {
            h.refresh_now();
            h.set_visible(vec![QueueId::new("q"); 1 + i % 2]);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        while b.at.lock().unwrap().len() < 2 {
            let _ = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
        }
        h.stop();
        let at = b.at.lock().unwrap().clone();
        assert!(at[1].duration_since(at[0]) >= Duration::from_millis(1200));
    }

    /// The first poll is a sweep: on RabbitMQ it asks for every listed queue in one stats call
    /// (one listing either way); elsewhere the rows on screen and a chunk of the rest.
    #[tokio::test]
    async fn a_rabbitmq_sweep_covers_every_queue_in_one_call() {
        for (kind, want_all) in [(BrokerKind::Rabbitmq, true), (BrokerKind::Local, false)] {
            let b = Arc::new(fake(kind, 5000, 0, None));
            run_until(b.clone(), 1).await;
            let asked = b.asked.lock().unwrap().clone();
            if want_all {
                assert_eq!(asked[0], 5001, "{kind:?}: {asked:?}");
            } else {
                assert!(asked.iter().all(|n| *n <= 100), "{kind:?}: {asked:?}");
                assert!(asked.iter().sum::<usize>() < 5001, "{kind:?}: {asked:?}");
            }
        }
    }

    /// A listing slower than the timeout is not abandoned for ever: the next poll waits twice
    /// as long, so the list arrives and the status said why it was late.
    #[tokio::test]
    async fn a_slow_listing_gets_a_longer_timeout_next_time() {
        let mut b = fake(BrokerKind::Rabbitmq, 0, 0, None);
        b.list_delay = Duration::from_millis(300);
        let b = Arc::new(b);
        let (tx, mut rx) = mpsc::channel(64);
        let mut cfg = PollConfig::with_refresh(0.1);
        cfg.timeout = Duration::from_millis(200);
        let h = spawn(b.clone(), cfg, tx);
        let mut errors = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
                Ok(Some(PollEvent::Error(e))) => {
                    errors.push(e);
                    assert!(errors.len() < 4, "the list never arrived: {errors:?}");
                }
                Ok(Some(PollEvent::Queues(qs))) => {
                    assert_eq!(qs.len(), 1);
                    break;
                }
                Ok(Some(_)) => {}
                _ => panic!("the list never arrived; errors: {errors:?}"),
            }
        }
        h.stop();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(matches!(errors[0], PollError::Timeout(..)), "{errors:?}");
    }

    #[test]
    fn a_timeout_says_how_long_the_next_poll_waits() {
        let t = PollError::Timeout(Duration::from_secs(10), Duration::from_secs(20));
        assert_eq!(
            t.line(),
            "no answer from the broker within 10 s (the next poll waits up to 20 s)"
        );
        let capped = PollError::Timeout(MAX_POLL_TIMEOUT, MAX_POLL_TIMEOUT);
        assert_eq!(capped.line(), "no answer from the broker within 120 s");
    }

    #[test]
    fn wait_after_error_is_the_backoff_or_retry_after_whichever_is_longer() {
        let cfg = PollConfig::with_refresh(2.0);
        let throttled = |r| {
            PollError::Backend(BackendError::Throttled {
                msg: "x".into(),
                retry_after: r,
            })
        };
        assert_eq!(
            wait_after_error(&cfg, 1, &throttled(Some(Duration::from_secs(30)))),
            Duration::from_secs(30)
        );
        assert_eq!(
            wait_after_error(&cfg, 1, &throttled(Some(Duration::from_millis(10)))),
            Duration::from_secs(4)
        );
        assert_eq!(
            wait_after_error(&cfg, 2, &throttled(None)),
            Duration::from_secs(8)
        );
        let t = PollError::Timeout(Duration::from_secs(10), Duration::from_secs(20));
        assert_eq!(wait_after_error(&cfg, 1, &t), Duration::from_secs(4));
        assert!(t.line().contains("10 s"));
    }

    #[test]
    fn listing_takes_at_most_a_quarter_of_the_budget() {
        let every = Duration::from_secs(30);
        assert_eq!(
            relist_every(every, 1, 600.0),
            every,
            "a cheap listing keeps its period"
        );
        // 1,000 SQS queues: 1,000 calls at 600 a minute → once every 400 s.
        assert_eq!(relist_every(every, 1_000, 600.0), Duration::from_secs(400));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_secs(2);
        let m = Duration::from_secs(60);
        assert_eq!(backoff(b, 1, m), Duration::from_secs(4));
        assert_eq!(backoff(b, 3, m), Duration::from_secs(16));
        assert_eq!(backoff(b, 30, m), m);
    }
}
