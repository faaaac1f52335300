//! The per-partition table of a group row (Kafka): lag, produce and commit rates, member and
//! state per partition, how skewed the lag is, and which partitions are stuck. The broker
//! gives only offsets; rates and "stuck" come from watching them over successive polls, so a
//! [`PartitionWatch`] lives as long as the detail view that shows the table.

use std::collections::HashMap;

use qdeck_model::domain::PartitionFigures;

/// Polls with the committed offset unchanged while lag > 0 before a partition is "stuck".
pub const STUCK_POLLS: u32 = 3;
/// The share of the lag the skew line accounts for at least.
const SKEW_SHARE: f64 = 0.9;

#[derive(Debug, Clone, PartialEq)]
pub enum PartitionState {
    /// Nothing unread.
    CaughtUp,
    /// Lag, and the committed offset moved since the last poll (or this is the first).
    Reading,
    /// Lag, and no member holds the partition (an empty group, or one not assigned it):
    /// nothing reads it, which is not the same as a reader stuck on it.
    Unassigned,
    /// Lag, and the committed offset has not moved for this many polls (≥ STUCK_POLLS).
    Stuck(u32),
    /// The group has committed nothing here.
    NoOffset,
}

impl PartitionState {
    pub fn label(&self) -> String {
        match self {
            PartitionState::CaughtUp => "caught up".into(),
            PartitionState::Reading => "reading".into(),
            PartitionState::Unassigned => "behind, no member".into(),
            PartitionState::Stuck(n) => format!("stuck ({n} polls)"),
            PartitionState::NoOffset => "no offset".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PartitionRow {
    pub partition: i32,
    pub lag: Option<u64>,
    pub lost: u64,
    /// Records appended per second (end offset's change), from the second poll on.
    pub in_rate: Option<f64>,
    /// Records committed per second by the group, from the second poll on.
    pub out_rate: Option<f64>,
    pub member: Option<String>,
    pub state: PartitionState,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionTable {
    pub rows: Vec<PartitionRow>,
    /// "3 of 12 partitions hold 90 % of the lag", when the lag is uneven enough to say so.
    pub skew: Option<String>,
    /// Partitions stuck now, in order.
    pub stuck: Vec<i32>,
}

/// Offsets of the last poll, and for how many polls each partition's commit stood still.
#[derive(Debug, Clone, Default)]
pub struct PartitionWatch {
    last: HashMap<i32, (f64, i64, Option<i64>)>,
    still: HashMap<i32, u32>,
}

impl PartitionWatch {
    /// Take one poll's figures, read at `t_secs` (any monotonic clock), and make the table.
    pub fn observe(&mut self, t_secs: f64, figures: &[PartitionFigures]) -> PartitionTable {
        let mut rows = Vec::with_capacity(figures.len());
        for f in figures {
            let before = self.last.get(&f.partition).copied();
            let rate = |now: i64, then: i64, t0: f64| {
                let dt = t_secs - t0;
                (dt > 0.0).then(|| (now - then).max(0) as f64 / dt)
            };
            let in_rate = before.and_then(|(t0, end0, _)| rate(f.end, end0, t0));
            let out_rate = before.and_then(|(t0, _, c0)| match (f.committed, c0) {
                (Some(c), Some(c0)) => rate(c, c0, t0),
                _ => None,
            });
            let lag = f.lag();
            let moved = before.is_none_or(|(_, _, c0)| c0 != f.committed);
            let still = self.still.entry(f.partition).or_insert(0);
            *still = if moved || lag.unwrap_or(0) == 0 {
                0
            } else {
                *still + 1
            };
            let state = match lag {
                None => PartitionState::NoOffset,
                Some(0) => PartitionState::CaughtUp,
                Some(_) if f.member.is_none() => PartitionState::Unassigned,
                Some(_) if *still >= STUCK_POLLS => PartitionState::Stuck(*still),
                Some(_) => PartitionState::Reading,
            };
            self.last.insert(f.partition, (t_secs, f.end, f.committed));
            rows.push(PartitionRow {
                partition: f.partition,
                lag,
                lost: f.lost(),
                in_rate,
                out_rate,
                member: f.member.clone(),
                state,
            });
        }
        rows.sort_by_key(|r| r.partition);
        let stuck = rows
            .iter()
            .filter(|r| matches!(r.state, PartitionState::Stuck(_)))
            .map(|r| r.partition)
            .collect();
        let lags: Vec<u64> = rows.iter().filter_map(|r| r.lag).collect();
        PartitionTable {
            skew: skew(&lags, rows.len()),
            rows,
            stuck,
        }
    }
}

/// "K of N partitions hold P % of the lag": the fewest partitions whose lag adds up to 90 %
/// of the total. Said only when that is at most half of the partitions: an even spread is not
/// worth a line.
pub fn skew(lags: &[u64], partitions: usize) -> Option<String> {
    let total: u64 = lags.iter().sum();
    if total == 0 || partitions < 2 {
        return None;
    }
    let mut sorted = lags.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let want = (total as f64 * SKEW_SHARE).ceil() as u64;
    let mut sum = 0u64;
    let mut k = 0usize;
    for l in sorted {
        sum += l;
        k += 1;
        if sum >= want {
            break;
        }
    }
    // The share they really hold, rounded down (so 100 % only when it is all of it).
    let share = (sum as u128 * 100 / total as u128) as u64;
    (k * 2 <= partitions)
        .then(|| format!("{k} of {partitions} partitions hold {share} % of the lag"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(partition: i32, end: i64, committed: Option<i64>) -> PartitionFigures {
        PartitionFigures {
            partition,
            log_start: 0,
            end,
            committed,
            member: Some("consumer-1".into()),
        }
    }

    #[test]
    fn skew_names_the_few_partitions_holding_most_of_the_lag() {
        let mut lags = vec![0u64; 12];
        lags[0] = 500;
        lags[4] = 300;
        lags[7] = 150;
        lags[9] = 50;
        assert_eq!(
            skew(&lags, 12).as_deref(),
            Some("3 of 12 partitions hold 95 % of the lag")
        );
        // Even lag: no line; no lag: no line.
        assert_eq!(skew(&[10, 10, 10, 10], 4), None);
        assert_eq!(skew(&[0, 0, 0], 3), None);
    }

    #[test]
    fn a_partition_whose_commit_stands_still_with_lag_is_stuck_after_n_polls() {
        let mut w = PartitionWatch::default();
        let mut t = 0.0;
        let mut table = PartitionTable::default();
        // Partition 0 keeps reading, 1 stays at 10 with lag, 2 is caught up, 3 has no offset.
        for i in 0..=STUCK_POLLS as i64 {
            table = w.observe(
                t,
                &[
                    fig(0, 100 + i * 10, Some(50 + i * 5)),
                    fig(1, 40, Some(10)),
                    fig(2, 30, Some(30)),
                    fig(3, 5, None),
                ],
            );
            t += 2.0;
        }
        let st: Vec<_> = table.rows.iter().map(|r| r.state.clone()).collect();
        assert_eq!(
            st,
            vec![
                PartitionState::Reading,
                PartitionState::Stuck(STUCK_POLLS),
                PartitionState::CaughtUp,
                PartitionState::NoOffset
            ]
        );
        assert_eq!(table.stuck, vec![1]);
        assert_eq!(table.rows[0].in_rate, Some(5.0), "10 records in 2 s");
        assert_eq!(table.rows[0].out_rate, Some(2.5), "5 commits in 2 s");
        assert_eq!(table.rows[1].out_rate, Some(0.0));
        assert_eq!(table.rows[3].out_rate, None);
        // Once it moves again it is reading, not stuck.
        let table = w.observe(t, &[fig(1, 40, Some(11))]);
        assert_eq!(table.rows[0].state, PartitionState::Reading);
        assert!(table.stuck.is_empty());
    }

    /// An empty group's lagging partition has no reader at all: it says so, and however long
    /// its commit stands still it is not called stuck (nothing is stuck on it).
    #[test]
    fn a_lagging_partition_no_member_holds_is_behind_not_reading_or_stuck() {
        let mut w = PartitionWatch::default();
        let mut table = PartitionTable::default();
        for i in 0..=STUCK_POLLS {
            let mut f = fig(0, 40, Some(10));
            f.member = None;
            table = w.observe(f64::from(i) * 2.0, &[f]);
        }
        assert_eq!(table.rows[0].state, PartitionState::Unassigned);
        assert_eq!(table.rows[0].state.label(), "behind, no member");
        assert!(table.stuck.is_empty());
    }

    #[test]
    fn first_poll_has_no_rates_and_lost_records_are_counted() {
        let mut w = PartitionWatch::default();
        let mut f = fig(0, 100, Some(20));
        f.log_start = 50;
        let table = w.observe(1.0, &[f]);
        assert_eq!(table.rows[0].in_rate, None);
        assert_eq!(table.rows[0].lost, 30);
        assert_eq!(table.rows[0].lag, Some(80));
    }
}
