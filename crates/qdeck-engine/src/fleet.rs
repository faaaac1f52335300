//! The fleet view's rows: every profile polled by the multi-profile poller (its own session,
//! refresh period, timeout and backoff, so a dead broker slows nobody else), each answer
//! summed up into one row (the fleet view draws rows, never per-queue data, whatever the
//! number of queues).

use std::collections::HashMap;

use tokio::sync::mpsc;

use super::budget::Budget;
use super::multi_poller::{self, Answer, PollHandle, Timeout};
use crate::depth_window::{self, DepthWindow};
use crate::session::Session;
use crate::severity::{severity, Signals};
use qdeck_backend::BackendError;
use qdeck_model::config::{self, LoadOptions};
use qdeck_model::domain::{BrokerKind, QueueId, QueueInfo, StatsBatch};

/// What the fleet view shows for one profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetRow {
    pub profile: String,
    /// Broker kind, once the profile's configuration was read.
    pub kind: Option<BrokerKind>,
    pub queues: Option<usize>,
    /// Ready messages across ordinary queues (DLQs apart).
    pub depth: Option<u64>,
    /// Messages across the DLQs.
    pub dlq_depth: Option<u64>,
    /// The DLQs' rise over the depth window (`depth_window`: ≥ 30 s, ≥ three polls).
    pub dlq_change: Option<i64>,
    /// The oldest message of any queue, DLQs included (the on-fire view ranks them on the
    /// same age), and its queue.
    pub worst_age: Option<(f64, QueueId)>,
    /// The queue of `worst_age` is a DLQ: said next to the age, as where it comes from.
    pub worst_age_in_dlq: bool,
    /// Queues deeper than at the previous poll.
    pub growing: Option<usize>,
    /// Why the last poll failed (one line, redacted); the figures are from the last success.
    pub error: Option<String>,
    /// When the polls started failing (unix ms): the first failure since the last success.
    pub failing_since_ms: Option<i64>,
    /// The last poll failed by not answering within this many seconds (a hung broker, as
    /// opposed to one that refuses).
    pub silent_after_secs: Option<u64>,
    /// When the last poll succeeded (unix ms).
    pub updated_ms: Option<i64>,
    pub refresh_secs: f64,
    pub calls_per_min: Option<f64>,
    /// The profile's `max_calls_per_minute` (after defaults); `None` for no limit.
    pub calls_budget: Option<u32>,
    /// SQS/CloudWatch: estimated dollars per hour at the current call rate.
    pub usd_per_hour: Option<f64>,
    /// The most severe queues of the last poll, worst first (at most [`FIRE_ROWS`]).
    pub fire: Vec<FireEntry>,
    /// `[fire] max_age_secs` of the profile's configuration.
    pub max_age_secs: f64,
}

/// Rows each profile contributes to the on-fire view: enough to fill any screen, bounded
/// whatever the number of queues.
pub const FIRE_ROWS: usize = 200;

/// One queue in the on-fire view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FireEntry {
    pub queue: QueueId,
    pub is_dlq: bool,
    pub severity: f64,
    pub depth: Option<u64>,
    /// Depth now minus at the start of its depth window (≥ 30 s, ≥ three polls ago).
    pub change: Option<i64>,
    pub age_secs: Option<f64>,
    pub out_rate: Option<f64>,
}

impl FleetRow {
    /// No success for three refresh periods: the figures shown are old.
    pub fn stale(&self, now_ms: i64) -> bool {
        multi_poller::stale(self.updated_ms, self.refresh_secs, now_ms)
    }

    /// What is wrong with the broker itself, if anything: its polls fail, or no poll has
    /// succeeded for three refresh periods. A profile still connecting for the first time
    /// is not (yet) a problem.
    pub fn broker_problem(&self, now_ms: i64) -> Option<BrokerProblem> {
        if let Some(secs) = self.silent_after_secs {
            return Some(BrokerProblem::Silent {
                since_ms: self.failing_since_ms,
                after_secs: secs,
            });
        }
        if let Some(e) = &self.error {
            return Some(BrokerProblem::Failing {
                since_ms: self.failing_since_ms,
                error: e.clone(),
            });
        }
        let at = self.updated_ms?;
        self.stale(now_ms)
            .then_some(BrokerProblem::Stale { since_ms: at })
    }
}

/// Why a whole profile is on fire: the most on-fire thing there is, since none of its
/// queues can be seen.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerProblem {
    /// Its polls fail (unreachable, refused, no answer in time); the error is one line.
    Failing {
        since_ms: Option<i64>,
        error: String,
    },
    /// It accepts but does not answer: no answer within `after_secs`.
    Silent {
        since_ms: Option<i64>,
        after_secs: u64,
    },
    /// No failure reported, but no success since `since_ms` either.
    Stale { since_ms: i64 },
}

/// The summary of one poll. `window` holds each queue's recent depths: "growing" and a DLQ's
/// rise are measured from the start of its window (`depth_window`), not from the previous
/// poll, so figures a broker refreshes every few seconds do not read as stop-and-go.
pub fn summarize(
    row: &mut FleetRow,
    infos: &[QueueInfo],
    batch: &StatsBatch,
    window: &mut DepthWindow,
) {
    let dlqs: std::collections::HashSet<&QueueId> =
        infos.iter().filter(|i| i.is_dlq).map(|i| &i.id).collect();
    let (mut depth, mut dlq, mut growing) = (0u64, 0u64, 0usize);
    let mut worst: Option<(f64, QueueId, bool)> = None;
    let had_previous = !window.is_empty();
    let span = depth_window::window_ms(row.refresh_secs);
    let polled_at = qdeck_model::domain::now_ms();
    let mut dlq_rise: Option<i64> = None;
    let max_age = if row.max_age_secs > 0.0 {
        row.max_age_secs
    } else {
        300.0
    };
    let mut fire: Vec<FireEntry> = Vec::with_capacity(batch.stats.len());
    for s in &batch.stats {
        let d = s.depth.unwrap_or(0);
        let is_dlq = dlqs.contains(&s.id);
        // When the figure was true: a sampled metric's point time (Cloud Monitoring's, a
        // minute apart and read minutes later), else the broker's answer, else this poll.
        // A point read again at a later poll is the same measurement, not a flat minute.
        let at = match s.sampled {
            Some(p) if p.at_ms > 0 => p.at_ms,
            _ if s.at_ms > 0 => s.at_ms,
            _ => polled_at,
        };
        let before = window.record(&s.id, at, d, span);
        let change = before.map(|p| d as i64 - p as i64);
        if is_dlq {
            if let Some(c) = change {
                *dlq_rise.get_or_insert(0) += c;
            }
        }
        let signals = Signals {
            dlq_rise: change.filter(|_| is_dlq),
            age_secs: s.oldest_age_secs,
            depth: s.depth,
            previous_depth: before,
            out_rate: s.out_rate,
            consumers: s.consumers,
        };
        fire.push(FireEntry {
            queue: s.id.clone(),
            is_dlq,
            severity: severity(&signals, max_age),
            depth: s.depth,
            change,
            age_secs: s.oldest_age_secs,
            out_rate: s.out_rate,
        });
        if is_dlq {
            dlq += d;
        } else {
            depth += d;
        }
        // A DLQ's oldest counts too: on RabbitMQ the live queues often report no age at all,
        // and a failure left for 5 minutes is what the on-fire view shows first.
        if let Some(a) = s.oldest_age_secs {
            if worst.as_ref().is_none_or(|(w, _, _)| a > *w) {
                worst = Some((a, s.id.clone(), is_dlq));
            }
        }
        if !is_dlq && before.is_some_and(|p| d > p) {
            growing += 1;
        }
    }
    let listed: std::collections::HashSet<&QueueId> = infos.iter().map(|i| &i.id).collect();
    window.retain(|q| listed.contains(q));
    // Worst first, then deepest; only the head is kept.
    let worse = |a: &FireEntry, b: &FireEntry| {
        b.severity
            .total_cmp(&a.severity)
            .then(b.depth.cmp(&a.depth))
            .then(a.queue.as_str().cmp(b.queue.as_str()))
    };
    if fire.len() > FIRE_ROWS {
        fire.select_nth_unstable_by(FIRE_ROWS - 1, worse);
        fire.truncate(FIRE_ROWS);
    }
    fire.sort_by(worse);
    row.fire = fire;
    row.dlq_change = dlq_rise.filter(|_| had_previous);
    row.queues = Some(infos.len());
    row.depth = Some(depth);
    row.dlq_depth = Some(dlq);
    row.worst_age_in_dlq = worst.as_ref().is_some_and(|w| w.2);
    row.worst_age = worst.map(|(a, q, _)| (a, q));
    row.growing = had_previous.then_some(growing);
    row.error = None;
}

/// The profiles the fleet view and `ls`/`stats`/`check -p a,b` poll: the ones the user named
/// (`-p a,b`, in that order, once each, the implicit `local` included), else every configured
/// profile, else the local broker.
pub fn profiles_to_poll(cfg: &config::AppConfig, chosen: &[String]) -> Vec<String> {
    if !chosen.is_empty() {
        let mut out: Vec<String> = Vec::with_capacity(chosen.len());
        for n in chosen {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        return out;
    }
    let names: Vec<String> = cfg.profiles.iter().map(|p| p.name.clone()).collect();
    if names.is_empty() {
        vec!["local".to_string()]
    } else {
        names
    }
}

/// Stops every profile's poller when dropped.
pub type FleetHandle = PollHandle;

/// What one round of the fleet reads of a profile: its queues and their figures.
pub type Polled = (Vec<QueueInfo>, StatsBatch);

/// Poll every profile in `names` through the multi-profile poller, each at its own refresh
/// period; every answer becomes that profile's updated row on `tx`.
///
/// The alert `rules` are evaluated on every answer (with each profile's history kept for
/// them) into `book`, except on the profile the book gives to the console; a row goes out
/// again when a health rule changed on the clock.
pub fn spawn(
    options: impl Fn(&str) -> LoadOptions,
    names: &[String],
    rules: Vec<crate::alerts::Rule>,
    book: crate::alerts::AlertBook,
    tx: mpsc::Sender<FleetRow>,
) -> FleetHandle {
    let (answers_tx, mut answers) = mpsc::channel::<Answer<Polled, BackendError>>(64);
    let handle = multi_poller::spawn(options, names, Timeout::FromRefresh, read, answers_tx);
    let mut monitor = (!rules.is_empty()).then(|| crate::alerts::Monitor::sharing(rules, book));
    tokio::spawn(async move {
        // Each profile's row and its queues' recent depths (for "growing").
        let mut rows: HashMap<String, (FleetRow, DepthWindow)> = HashMap::new();
        let mut clock = tokio::time::interval(crate::alerts::monitor::HEALTH_TICK);
        loop {
            let a = tokio::select! {
                a = answers.recv() => match a { Some(a) => a, None => return },
                // Health rules fire on time, not on the next answer: the rows whose alerts
                // changed go out again.
                _ = clock.tick() => {
                    let Some(m) = &mut monitor else { continue };
                    let changed = m.evaluate_health(qdeck_model::domain::now_ms());
                    for t in &changed {
                        if let Some((row, _)) = rows.get(&t.profile) {
                            if tx.send(row.clone()).await.is_err() {
                                return;
                            }
                        }
                    }
                    continue;
                }
            };
            let (row, previous) = rows.entry(a.profile.clone()).or_insert_with(|| {
                let row = FleetRow {
                    profile: a.profile.clone(),
                    refresh_secs: multi_poller::DEFAULT_REFRESH_SECS,
                    ..FleetRow::default()
                };
                (row, DepthWindow::default())
            });
            if let Some(m) = &mut monitor {
                m.apply(copy(&a), qdeck_model::domain::now_ms());
            }
            apply(row, previous, a);
            if tx.send(row.clone()).await.is_err() {
                return;
            }
        }
    });
    handle
}

/// An answer for the alert monitor, which keeps figures of its own (the row keeps sums).
fn copy(a: &Answer<Polled, BackendError>) -> Answer<Polled, BackendError> {
    Answer {
        profile: a.profile.clone(),
        settings: a.settings.clone(),
        result: match &a.result {
            Ok(p) => Ok(p.clone()),
            Err(multi_poller::PollError::Work(e) | multi_poller::PollError::Open(e)) => {
                Err(multi_poller::PollError::Work(e.clone()))
            }
            Err(multi_poller::PollError::Timeout(d)) => Err(multi_poller::PollError::Timeout(*d)),
            Err(e) => Err(multi_poller::PollError::Lost(e.message())),
        },
        updated_ms: a.updated_ms,
        budget: a.budget,
        took: a.took,
        calls: a.calls,
    }
}

pub async fn read(s: Session) -> Result<Polled, BackendError> {
    let infos = s.backend.list_queues().await?;
    let ids: Vec<QueueId> = infos.iter().map(|q| q.id.clone()).collect();
    let batch = if ids.is_empty() {
        StatsBatch::default()
    } else {
        s.backend.stats(&ids).await?
    };
    Ok((infos, batch))
}

/// A profile's row after one answer: the new figures, or the error over the last ones.
fn apply(row: &mut FleetRow, previous: &mut DepthWindow, a: Answer<Polled, BackendError>) {
    if let Some(s) = &a.settings {
        row.kind = Some(s.kind);
        row.refresh_secs = s.refresh_secs;
        row.max_age_secs = s.max_age_secs;
        row.calls_budget = s.calls_budget;
    }
    match &a.result {
        Ok((infos, batch)) => {
            summarize(row, infos, batch, previous);
            row.failing_since_ms = None;
            row.silent_after_secs = None;
        }
        Err(e) => {
            row.error = Some(e.message());
            row.silent_after_secs = match e {
                multi_poller::PollError::Timeout(d) => Some(d.as_secs()),
                _ => None,
            };
            row.failing_since_ms
                .get_or_insert_with(qdeck_model::domain::now_ms);
        }
    }
    row.updated_ms = a.updated_ms;
    apply_budget(row, a.budget);
}

/// Calls per minute and, for SQS, estimated dollars per hour since the previous poll.
fn apply_budget(row: &mut FleetRow, b: Option<Budget>) {
    if let Some(b) = b {
        row.calls_per_min = Some(b.calls_per_min);
        row.usd_per_hour = b.usd_per_hour;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::domain::QueueStats;

    fn info(id: &str, is_dlq: bool) -> QueueInfo {
        QueueInfo {
            id: QueueId::new(id),
            is_dlq,
            ..QueueInfo::default()
        }
    }

    fn stat(id: &str, depth: u64, age: Option<f64>) -> QueueStats {
        QueueStats {
            id: QueueId::new(id),
            depth: Some(depth),
            oldest_age_secs: age,
            ..QueueStats::default()
        }
    }

    #[test]
    fn totals_keep_dlqs_apart_and_growth_needs_two_polls() {
        let infos = vec![info("a", false), info("b", false), info("a.dlq", true)];
        let mut prev = DepthWindow::default();
        let mut row = FleetRow::default();
        let batch = |a, b, d| StatsBatch {
            stats: vec![
                stat("a", a, Some(30.0)),
                stat("b", b, Some(90.0)),
                stat("a.dlq", d, Some(900.0)),
            ],
            ..StatsBatch::default()
        };
        summarize(&mut row, &infos, &batch(3, 4, 2), &mut prev);
        assert_eq!(
            (row.queues, row.depth, row.dlq_depth),
            (Some(3), Some(7), Some(2))
        );
        assert_eq!(row.worst_age, Some((900.0, QueueId::new("a.dlq"))));
        assert!(row.worst_age_in_dlq);
        assert_eq!((row.growing, row.dlq_change), (None, None));
        summarize(&mut row, &infos, &batch(5, 4, 5), &mut prev);
        assert_eq!((row.growing, row.dlq_change), (Some(1), Some(3)));
    }

    /// RabbitMQ gives no age for live queues without a message timestamp; its DLQs' 5 minutes
    /// were `5m` on the on-fire view and `—` on the fleet.
    #[test]
    fn oldest_is_the_oldest_the_fire_view_shows_dlqs_included() {
        let infos = vec![info("orders", false), info("orders.dlq", true)];
        let mut row = FleetRow::default();
        let batch = StatsBatch {
            stats: vec![stat("orders", 40, None), stat("orders.dlq", 3, Some(300.0))],
            ..StatsBatch::default()
        };
        summarize(&mut row, &infos, &batch, &mut DepthWindow::default());
        assert_eq!(row.worst_age, Some((300.0, QueueId::new("orders.dlq"))));
        assert!(row.worst_age_in_dlq);
        let fire_oldest = row
            .fire
            .iter()
            .filter_map(|f| f.age_secs)
            .fold(0.0, f64::max);
        assert_eq!(row.worst_age.as_ref().map(|w| w.0), Some(fire_oldest));
        // A live queue older than the DLQ is the one named, and not as a DLQ.
        let batch = StatsBatch {
            stats: vec![
                stat("orders", 40, Some(900.0)),
                stat("orders.dlq", 3, Some(300.0)),
            ],
            ..StatsBatch::default()
        };
        summarize(&mut row, &infos, &batch, &mut DepthWindow::default());
        assert_eq!(row.worst_age, Some((900.0, QueueId::new("orders"))));
        assert!(!row.worst_age_in_dlq);
    }

    /// A DLQ growing steadily while its broker refreshes figures every 5 s, polled every 2 s:
    /// it keeps one rank beside a queue whose old message scores in between, poll after poll
    /// (measured poll to poll it scored 63, 21, 61, 22 and swapped places each time).
    #[test]
    fn a_steadily_growing_dlq_keeps_its_rank() {
        let infos = vec![info("orders.dlq", true), info("billing", false)];
        let mut window = DepthWindow::default();
        let mut row = FleetRow {
            max_age_secs: 300.0,
            refresh_secs: 2.0,
            ..FleetRow::default()
        };
        let mut ranks = Vec::new();
        for poll in 0..30i64 {
            let at = 1_000_000 + poll * 2_000;
            // The broker's figure moves every 5 s.
            let figure_at = at - at % 5_000;
            let dlq = QueueStats {
                at_ms: figure_at,
                ..stat("orders.dlq", (figure_at / 5_000) as u64 * 5, Some(60.0))
            };
            let billing = QueueStats {
                at_ms: figure_at,
                ..stat("billing", 40, Some(400.0))
            };
            let batch = StatsBatch {
                stats: vec![dlq, billing],
                ..StatsBatch::default()
            };
            summarize(&mut row, &infos, &batch, &mut window);
            if poll > 0 {
                ranks.push(
                    row.fire
                        .iter()
                        .position(|f| f.queue.as_str() == "orders.dlq")
                        .unwrap(),
                );
            }
        }
        // Until the broker's figure first moves nothing has grown; from then on, first.
        let from = ranks.iter().position(|r| *r == 0).expect("it ranks first");
        assert!(from <= 3, "{ranks:?}");
        assert!(ranks[from..].iter().all(|r| *r == 0), "{ranks:?}");
    }

    /// A sampled metric (Cloud Monitoring: a point a minute), polled every 5 s: the same point
    /// comes back at twelve polls, and the 30 s window is shorter than a point's interval.
    /// Measured on the points' own times its DLQ rises steadily; measured on the polls' times
    /// it read +6 for half a minute, then +0, as the window did or did not reach a new point.
    #[test]
    fn a_sampled_dlq_grows_on_its_points_times_not_the_polls() {
        let infos = vec![info("sub-dlq", true)];
        let mut window = DepthWindow::default();
        let mut row = FleetRow {
            max_age_secs: 300.0,
            refresh_secs: 5.0,
            ..FleetRow::default()
        };
        let mut changes = Vec::new();
        for poll in 0..48i64 {
            let at = 10_000_000 + poll * 5_000;
            // Points every 60 s, readable 90 s after their time.
            let point = (at - 90_000) - (at - 90_000).rem_euclid(60_000);
            let depth = (point / 60_000) as u64 * 6;
            let s = QueueStats {
                at_ms: at,
                sampled: Some(qdeck_model::domain::Sampled {
                    at_ms: point,
                    every_secs: 60,
                }),
                ..stat("sub-dlq", depth, None)
            };
            let batch = StatsBatch {
                stats: vec![s],
                ..StatsBatch::default()
            };
            summarize(&mut row, &infos, &batch, &mut window);
            changes.push(row.fire[0].change);
        }
        // After the first point has a predecessor, every poll reads one point's rise.
        let from = changes
            .iter()
            .position(|c| *c == Some(6))
            .unwrap_or_else(|| panic!("{changes:?}"));
        assert!(from <= 13, "{changes:?}");
        assert!(changes[from..].iter().all(|c| *c == Some(6)), "{changes:?}");
    }

    #[test]
    fn fire_keeps_the_worst_queues_worst_first() {
        let mut infos: Vec<QueueInfo> =
            (0..300).map(|i| info(&format!("q{i:03}"), false)).collect();
        infos.push(info("jobs.dlq", true));
        let mut prev = DepthWindow::default();
        let mut row = FleetRow {
            max_age_secs: 300.0,
            ..FleetRow::default()
        };
        let batch = |dlq, old| {
            let mut stats: Vec<QueueStats> = (0..300)
                .map(|i| stat(&format!("q{i:03}"), 1, Some(1.0)))
                .collect();
            stats[7].oldest_age_secs = Some(old);
            stats.push(stat("jobs.dlq", dlq, None));
            StatsBatch {
                stats,
                ..StatsBatch::default()
            }
        };
        summarize(&mut row, &infos, &batch(0, 600.0), &mut prev);
        assert_eq!(
            row.fire.len(),
            FIRE_ROWS,
            "bounded whatever the queue count"
        );
        assert_eq!(row.fire[0].queue.as_str(), "q007", "the old message first");
        summarize(&mut row, &infos, &batch(12, 600.0), &mut prev);
        let first = &row.fire[0];
        assert_eq!((first.queue.as_str(), first.change), ("jobs.dlq", Some(12)));
        assert!(first.is_dlq);
        assert!(row.fire.windows(2).all(|w| w[0].severity >= w[1].severity));
    }

    #[test]
    #[cfg(feature = "sqs")]
    fn budget_prices_sqs_and_leaves_other_kinds_blank() {
        use crate::budget;
        use qdeck_model::domain::BrokerKind;
        use std::collections::BTreeMap;
        use std::time::Duration;
        let before: BTreeMap<String, u64> = [("sqs:GetQueueAttributes".to_string(), 100)].into();
        let now: BTreeMap<String, u64> = [
            ("sqs:GetQueueAttributes".to_string(), 1_100),
            (qdeck_backend::sqs::ops::CW_METRICS_BILLED.to_string(), 500),
        ]
        .into();
        let mut row = FleetRow {
            kind: Some(BrokerKind::Sqs),
            ..FleetRow::default()
        };
        let between = |kind| budget::between(kind, &before, &now, Duration::from_secs(60));
        apply_budget(&mut row, between(BrokerKind::Sqs));
        assert_eq!(
            row.calls_per_min,
            Some(1_000.0),
            "billing counters are not calls"
        );
        // Per hour: 60 × (1,000 requests at $0.40/M + 500 metrics at $0.01/k).
        let want = 60.0 * (1_000.0 * 0.4e-6 + 500.0 * 0.01e-3);
        assert!((row.usd_per_hour.unwrap() - want).abs() < 1e-9);
        let mut rabbit = FleetRow {
            kind: Some(BrokerKind::Rabbitmq),
            ..FleetRow::default()
        };
        apply_budget(&mut rabbit, between(BrokerKind::Rabbitmq));
        assert_eq!(rabbit.usd_per_hour, None);
    }
}
