//! Age of oldest on group rows: the timestamp of the first record a group has yet to read on
//! each lagging partition (one small Fetch at its committed offset, from the partition's
//! leader), the oldest of them. Fetches are bounded per poll: at most `MAX_FETCHES`
//! partitions, shared out among the rows a partition at a time, largest lag first; a row
//! whose lagging partitions were not all read gets an estimate, and its note says so.

use std::collections::HashMap;

use super::fetch;
use super::routing::{Cluster, ClusterMeta};

/// Partitions read for their first unread record in one poll (one Fetch each).
pub const MAX_FETCHES: usize = 16;
/// Bytes asked of each Fetch: the first batch at the offset is enough (Kafka returns at
/// least one whole batch even when it is larger).
const FETCH_BYTES: i32 = 64 << 10;

/// One lagging partition of a row: where the group's next record is, and how far behind.
#[derive(Debug, Clone)]
pub struct Lagging {
    pub topic: String,
    pub partition: i32,
    pub from: i64,
    pub lag: u64,
}

/// What was read for one row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Head {
    /// The oldest first-unread timestamp among the partitions read (Unix ms).
    pub oldest_ms: Option<i64>,
    pub read: usize,
    pub lagging: usize,
}

/// Which partitions to read: each row's largest lag first, then each row's second, and so
/// on, until `budget` partitions are picked (so no row is starved by another's many).
pub fn pick(rows: &[Vec<Lagging>], budget: usize) -> Vec<(usize, Lagging)> {
    let mut sorted: Vec<Vec<&Lagging>> = rows
        .iter()
        .map(|r| {
            let mut v: Vec<&Lagging> = r.iter().collect();
            v.sort_by(|a, b| b.lag.cmp(&a.lag).then(a.partition.cmp(&b.partition)));
            v
        })
        .collect();
    let mut out = Vec::new();
    let deepest = sorted.iter().map(Vec::len).max().unwrap_or(0);
    'rank: for rank in 0..deepest {
        for (i, r) in sorted.iter_mut().enumerate() {
            if out.len() >= budget {
                break 'rank;
            }
            if let Some(l) = r.get(rank) {
                out.push((i, (*l).clone()));
            }
        }
    }
    out
}

/// Read the picked partitions' first unread records; one `Head` per row. A partition that
/// could not be read (leader gone, records deleted meanwhile) counts as not read.
pub async fn heads(c: &Cluster, meta: &ClusterMeta, rows: &[Vec<Lagging>]) -> Vec<Head> {
    let mut out: Vec<Head> = rows
        .iter()
        .map(|r| Head {
            lagging: r.len(),
            ..Default::default()
        })
        .collect();
    let mut cache: HashMap<(String, i32, i64), Option<i64>> = HashMap::new();
    for (row, l) in pick(rows, MAX_FETCHES) {
        let key = (l.topic.clone(), l.partition, l.from);
        let ts = match cache.get(&key) {
            Some(t) => *t,
            None => {
                let t = match fetch::fetch(c, meta, &l.topic, l.partition, l.from, FETCH_BYTES)
                    .await
                {
                    Ok(f) => f
                        .records
                        .iter()
                        .find(|r| r.offset >= l.from)
                        .map(|r| r.timestamp)
                        .filter(|t| *t >= 0),
                    Err(e) => {
                        tracing::debug!(topic = %l.topic, partition = l.partition, error = %e, "age fetch");
                        None
                    }
                };
                cache.insert(key, t);
                t
            }
        };
        if let Some(t) = ts {
            let h = &mut out[row];
            h.read += 1;
            h.oldest_ms = Some(h.oldest_ms.map_or(t, |o| o.min(t)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(p: i32, lag: u64) -> Lagging {
        Lagging {
            topic: "t".into(),
            partition: p,
            from: 0,
            lag,
        }
    }

    #[test]
    fn picks_each_rows_largest_lag_first_within_the_budget() {
        let rows = vec![vec![l(0, 5), l(1, 50), l(2, 7)], vec![l(0, 1)], vec![]];
        let got: Vec<(usize, i32)> = pick(&rows, 3)
            .into_iter()
            .map(|(r, l)| (r, l.partition))
            .collect();
        assert_eq!(got, vec![(0, 1), (1, 0), (0, 2)]);
        assert_eq!(pick(&rows, 10).len(), 4);
        assert!(pick(&rows, 0).is_empty());
    }
}
