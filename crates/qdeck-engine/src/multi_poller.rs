//! The multi-profile poller: the fleet view polls its profiles through it continuously, and
//! `ls`/`stats`/`check` over a profile list take one round of it. Each profile is opened and
//! polled on its own task under its own timeout, so a dead broker becomes that profile's error
//! and costs the others nothing. What a round does with the open session is the caller's
//! `work`; opening, timeouts, reconnection, pacing against the call budget, backoff and
//! staleness are the poller's, so both front-ends answer alike for the same profiles.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::budget::{self, Budget};
use crate::session::Session;
use qdeck_backend::BackendError;
use qdeck_model::config::{ConfigError, LoadOptions, Loaded};
use qdeck_model::domain::{now_ms, BrokerKind};

/// How long a profile's round (opening its session when needed, then the work) may take
/// before it is abandoned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timeout {
    /// The same for every profile (the CLI's `--profile-timeout`).
    Fixed(Duration),
    /// Four refresh periods of the profile, at least 10 s (the fleet view).
    FromRefresh,
}

impl Timeout {
    fn of(self, refresh_secs: f64) -> Duration {
        match self {
            Timeout::Fixed(d) => d,
            Timeout::FromRefresh => Duration::from_secs_f64((refresh_secs * 4.0).max(10.0)),
        }
    }
}

/// What a profile's configuration says about polling it, known once the configuration was read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSettings {
    /// The profile's broker.
    pub kind: BrokerKind,
    pub refresh_secs: f64,
    /// `max_calls_per_minute` after defaults; `None` for no limit.
    pub calls_budget: Option<u32>,
    /// `[fire] max_age_secs`.
    pub max_age_secs: f64,
}

impl ProfileSettings {
    fn of(loaded: &Loaded) -> Self {
        ProfileSettings {
            kind: loaded.profile.kind.broker_kind(),
            refresh_secs: loaded
                .profile
                .refresh_secs
                .unwrap_or(loaded.config.ui.refresh_secs),
            calls_budget: loaded.profile.calls_per_minute(),
            max_age_secs: loaded.config.fire.max_age_secs,
        }
    }
}

/// Why a profile gave no answer this round.
#[derive(Debug)]
pub enum PollError<E> {
    /// Its configuration could not be read.
    Config(ConfigError),
    /// Its session could not be opened.
    Open(BackendError),
    /// No answer within this long.
    Timeout(Duration),
    /// The caller's work failed.
    Work(E),
    /// The profile's task ended without answering.
    Lost(String),
}

impl<E: fmt::Display> fmt::Display for PollError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PollError::Config(e) => f.write_str(&e.0),
            PollError::Open(e) => write!(f, "{e}"),
            PollError::Timeout(d) => write!(f, "no answer within {}s", d.as_secs()),
            PollError::Work(e) => write!(f, "{e}"),
            PollError::Lost(e) => write!(f, "internal error: {e}"),
        }
    }
}

impl<E: fmt::Display> PollError<E> {
    /// The error as a profile's row shows it: one line, secrets redacted.
    pub fn message(&self) -> String {
        qdeck_model::sanitize::one_line(&self.to_string())
    }
}

/// One profile's answer to one round.
#[derive(Debug)]
pub struct Answer<T, E> {
    pub profile: String,
    /// `None` until the profile's configuration was read once.
    pub settings: Option<ProfileSettings>,
    pub result: Result<T, PollError<E>>,
    /// When a round last succeeded (unix ms): this one if `result` is `Ok`.
    pub updated_ms: Option<i64>,
    /// Calls per minute (and cost) since the previous successful round on the same session.
    pub budget: Option<Budget>,
    /// How long the round took.
    pub took: Duration,
    /// Calls the session has made since it was opened (a new session starts again at 0).
    pub calls: Option<u64>,
}

/// The refresh period a profile is polled at before its configuration is read.
pub const DEFAULT_REFRESH_SECS: f64 = 5.0;

/// No success for three refresh periods: the figures of the last success are old.
pub fn stale(updated_ms: Option<i64>, refresh_secs: f64, now_ms: i64) -> bool {
    match updated_ms {
        Some(t) => (now_ms - t) as f64 > refresh_secs * 3000.0,
        None => true,
    }
}

impl<T, E> Answer<T, E> {
    pub fn stale(&self, now_ms: i64) -> bool {
        let refresh = self
            .settings
            .as_ref()
            .map_or(DEFAULT_REFRESH_SECS, |s| s.refresh_secs);
        stale(self.updated_ms, refresh, now_ms)
    }
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One profile's poller: its session (kept between rounds, opened again after a failure),
/// its last success and what it spent.
pub struct ProfilePoller {
    profile: String,
    opts: LoadOptions,
    timeout: Timeout,
    session: Option<Session>,
    settings: Option<ProfileSettings>,
    updated_ms: Option<i64>,
    failures: u32,
    calls_at: Option<(Instant, BTreeMap<String, u64>)>,
    /// When the last round started, and how long its calls take out of the budget.
    last: Option<(Instant, Duration)>,
}

impl ProfilePoller {
    pub fn new(profile: &str, opts: LoadOptions, timeout: Timeout) -> Self {
        ProfilePoller {
            profile: profile.to_string(),
            opts,
            timeout,
            session: None,
            settings: None,
            updated_ms: None,
            failures: 0,
            calls_at: None,
            last: None,
        }
    }

    /// One round: open the session if there is none, then `work` on it, both within the
    /// timeout.
    pub async fn poll<T, E, W, Fut>(&mut self, work: &W) -> Answer<T, E>
    where
        W: Fn(Session) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let result = self.attempt(work).await;
        let mut paced = Duration::ZERO;
        let mut spent = None;
        let mut calls = None;
        match &result {
            Ok(_) => {
                self.failures = 0;
                self.updated_ms = Some(now_ms());
            }
            Err(_) => {
                self.failures += 1;
                // A broken session (e.g. a refused connection) is opened again next time.
                self.session = None;
            }
        }
        // A round costs what the broker counted; with a budget, the next one waits until
        // that many calls fit in it.
        if let Some(s) = &self.session {
            let counts = s.backend.api_calls().snapshot();
            calls = Some(counts.values().sum());
            if let Some((t, before)) = &self.calls_at {
                spent = budget::between(s.backend.kind(), before, &counts, t.elapsed());
                if let Some(max) = self.settings.as_ref().and_then(|s| s.calls_budget) {
                    paced = paced_wait(calls_between(before, &counts), max);
                }
            }
            self.calls_at = Some((Instant::now(), counts));
        }
        self.last = Some((started, paced));
        Answer {
            profile: self.profile.clone(),
            settings: self.settings.clone(),
            result,
            updated_ms: self.updated_ms,
            budget: spent,
            took: started.elapsed(),
            calls,
        }
    }

    async fn attempt<T, E, W, Fut>(&mut self, work: &W) -> Result<T, PollError<E>>
    where
        W: Fn(Session) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut fresh = None;
        if self.session.is_none() {
            let loaded = crate::config_check::load(&self.opts).map_err(PollError::Config)?;
            self.settings = Some(ProfileSettings::of(&loaded));
            fresh = Some(loaded);
        }
        let timeout = self.timeout.of(self.refresh_secs());
        let session = &mut self.session;
        let round = async move {
            if let Some(loaded) = fresh {
                *session = Some(Session::open(loaded).await.map_err(PollError::Open)?);
            }
            let s = session
                .clone()
                .ok_or(PollError::Lost("no session".into()))?;
            work(s).await.map_err(PollError::Work)
        };
        tokio::time::timeout(timeout, round)
            .await
            .unwrap_or(Err(PollError::Timeout(timeout)))
    }

    fn refresh_secs(&self) -> f64 {
        self.settings
            .as_ref()
            .map_or(DEFAULT_REFRESH_SECS, |s| s.refresh_secs)
    }

    /// How long to wait after the last round before the next: the refresh period (or the
    /// budget's pace, if longer) from the start of a successful round; after failures, the
    /// period doubled for each, up to a minute.
    pub fn wait(&self) -> Duration {
        let period = Duration::from_secs_f64(self.refresh_secs().clamp(0.1, 3600.0));
        let (started, paced) = self.last.unwrap_or((Instant::now(), Duration::ZERO));
        if self.failures == 0 {
            period.max(paced).saturating_sub(started.elapsed())
        } else {
            (period * 2u32.saturating_pow(self.failures.min(8))).min(MAX_BACKOFF)
        }
    }
}

/// One round over every profile in `names`, concurrently, each on its own task; the answers
/// come back in the order of `names`.
pub async fn round<T, E, W, Fut>(
    options: impl Fn(&str) -> LoadOptions,
    names: &[String],
    timeout: Timeout,
    work: W,
) -> Vec<Answer<T, E>>
where
    W: Fn(Session) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let tasks: Vec<_> = names
        .iter()
        .map(|n| {
            let mut p = ProfilePoller::new(n, options(n), timeout);
            let work = work.clone();
            (n.clone(), tokio::spawn(async move { p.poll(&work).await }))
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for (profile, task) in tasks {
        out.push(task.await.unwrap_or_else(|e| Answer {
            profile,
            settings: None,
            result: Err(PollError::Lost(e.to_string())),
            updated_ms: None,
            budget: None,
            took: Duration::ZERO,
            calls: None,
        }));
    }
    out
}

/// Stops every profile's task when dropped.
pub struct PollHandle {
    cancel: CancellationToken,
}

impl Drop for PollHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Poll every profile in `names` round after round, each on its own task at its own pace,
/// until the handle is dropped or `tx` closes; every answer arrives on `tx`.
pub fn spawn<T, E, W, Fut>(
    options: impl Fn(&str) -> LoadOptions,
    names: &[String],
    timeout: Timeout,
    work: W,
    tx: mpsc::Sender<Answer<T, E>>,
) -> PollHandle
where
    W: Fn(Session) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let cancel = CancellationToken::new();
    for n in names {
        let mut p = ProfilePoller::new(n, options(n), timeout);
        let (tx, c, work) = (tx.clone(), cancel.clone(), work.clone());
        tokio::spawn(async move {
            let rounds = async {
                loop {
                    let answer = p.poll(&work).await;
                    if tx.send(answer).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(p.wait()).await;
                }
            };
            tokio::select! {
                _ = c.cancelled() => {}
                _ = rounds => {}
            }
        });
    }
    PollHandle { cancel }
}

/// The time `spent` calls take out of a budget of `per_min` a minute: the poller waits at
/// least that long after a round, so its rate stays within the budget.
pub fn paced_wait(spent: u64, per_min: u32) -> Duration {
    Duration::from_secs_f64(spent as f64 * 60.0 / per_min.max(1) as f64)
}

/// Calls between two readings of the counters, billing units left out.
fn calls_between(before: &BTreeMap<String, u64>, now: &BTreeMap<String, u64>) -> u64 {
    now.iter()
        .filter(|(k, _)| !k.starts_with("billing:"))
        .map(|(k, v)| v.saturating_sub(*before.get(k).unwrap_or(&0)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_waits_out_its_calls_against_the_budget() {
        let before: BTreeMap<String, u64> = [("sqs:GetQueueAttributes".to_string(), 10)].into();
        let now: BTreeMap<String, u64> = [
            ("sqs:GetQueueAttributes".to_string(), 310),
            ("billing:cloudwatch-metrics".to_string(), 500),
        ]
        .into();
        let spent = calls_between(&before, &now);
        assert_eq!(spent, 300, "billing units are not calls");
        assert_eq!(paced_wait(spent, 600), Duration::from_secs(30));
        assert_eq!(paced_wait(0, 600), Duration::ZERO);
    }

    #[test]
    fn the_fleet_timeout_follows_the_refresh_period() {
        assert_eq!(Timeout::FromRefresh.of(0.5), Duration::from_secs(10));
        assert_eq!(Timeout::FromRefresh.of(5.0), Duration::from_secs(20));
        let fixed = Duration::from_millis(1500);
        assert_eq!(Timeout::Fixed(fixed).of(5.0), fixed);
    }

    #[test]
    fn staleness_is_three_missed_refreshes() {
        assert!(stale(None, 5.0, 0));
        assert!(!stale(Some(1_000), 5.0, 16_000));
        assert!(stale(Some(1_000), 5.0, 16_001));
    }

    /// A round answers in the order asked: a profile that cannot be read, one too slow for
    /// the timeout, and one that answers.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_round_answers_every_profile_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.toml");
        std::fs::write(
            &cfg,
            format!(
                "[[profiles]]\nname = \"here\"\nkind = \"local\"\npath = {:?}\n\
                 [[profiles]]\nname = \"slow\"\nkind = \"local\"\npath = {:?}\n",
                dir.path().join("here.db").display().to_string(),
                dir.path().join("slow.db").display().to_string(),
            ),
        )
        .unwrap();
        let options = |n: &str| LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        };
        let names: Vec<String> = ["nope", "slow", "here"].map(String::from).to_vec();
        let work = |s: Session| async move {
            if s.loaded.profile.name == "slow" {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            s.backend.list_queues().await.map(|q| q.len())
        };
        let timeout = Timeout::Fixed(Duration::from_millis(500));
        let answers = round(options, &names, timeout, work).await;
        let order: Vec<&str> = answers.iter().map(|a| a.profile.as_str()).collect();
        assert_eq!(order, names);
        assert!(matches!(answers[0].result, Err(PollError::Config(_))));
        assert!(answers[0].settings.is_none() && answers[0].stale(now_ms()));
        assert!(matches!(answers[1].result, Err(PollError::Timeout(_))));
        assert_eq!(
            answers[1].settings.as_ref().map(|s| s.kind),
            Some(BrokerKind::Local)
        );
        assert_eq!(answers[2].result.as_ref().ok(), Some(&0));
        assert!(!answers[2].stale(now_ms()));
    }
}
