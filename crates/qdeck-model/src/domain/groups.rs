//! Consumer-group operations (Kafka): moving a group's committed offsets and deleting a group.
//! The plans carry every figure the confirmation shows, read from the broker when planned.

use serde::{Deserialize, Serialize};

/// Where `reset-offsets` moves a group's committed offsets on each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "to", content = "value")]
pub enum ResetTo {
    /// The log start offset.
    Earliest,
    /// The end offset (the group skips everything not yet read).
    Latest,
    /// This offset on every partition, kept within [log start, end].
    Offset(i64),
    /// The first record with a timestamp at or after this Unix time in milliseconds; the end
    /// where no record is that recent.
    Time(i64),
    /// The committed offset moved by this many records (negative: back), kept within
    /// [log start, end]; partitions without a committed offset are left as they are.
    Shift(i64),
}

impl ResetTo {
    /// The one word the console's `:reset` takes: `earliest`, `latest`, an offset, a shift
    /// (`+N`, `-N`) or an RFC 3339 time; the error says what is accepted.
    pub fn parse(word: &str) -> Result<ResetTo, String> {
        let w = word.trim();
        let usage = || {
            format!(
                "{:?}: expected earliest, latest, an offset, +N or -N (a shift), or an RFC 3339 time",
                crate::sanitize::clean_short(w, 40)
            )
        };
        match w {
            "earliest" => return Ok(ResetTo::Earliest),
            "latest" => return Ok(ResetTo::Latest),
            _ => {}
        }
        if let Some(n) = w.strip_prefix('+').or(w.starts_with('-').then_some(w)) {
            let n: i64 = n.parse().map_err(|_| usage())?;
            return Ok(ResetTo::Shift(n));
        }
        if w.bytes().all(|b| b.is_ascii_digit()) && !w.is_empty() {
            return w.parse().map(ResetTo::Offset).map_err(|_| usage());
        }
        chrono::DateTime::parse_from_rfc3339(w)
            .map(|t| ResetTo::Time(t.timestamp_millis()))
            .map_err(|_| usage())
    }
}

impl std::fmt::Display for ResetTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResetTo::Earliest => f.write_str("earliest"),
            ResetTo::Latest => f.write_str("latest"),
            ResetTo::Offset(o) => write!(f, "offset {o}"),
            ResetTo::Time(ms) => match chrono::DateTime::from_timestamp_millis(*ms) {
                Some(t) => write!(f, "time {}", t.to_rfc3339()),
                None => write!(f, "time {ms} ms"),
            },
            ResetTo::Shift(n) => write!(f, "shift {n:+}"),
        }
    }
}

/// One partition of an offset reset: the committed offset now and after, and the lag each
/// leaves (end offset − committed offset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionReset {
    pub partition: i32,
    /// `None`: the group has committed nothing on this partition.
    pub old: Option<i64>,
    pub new: i64,
    pub lag_before: Option<u64>,
    pub lag_after: u64,
    /// The offset asked for lay outside [log start, end] and was moved to the nearer bound.
    pub clamped: bool,
}

/// What resetting one group's offsets on one topic will do, read when planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetResetPlan {
    pub group: String,
    pub topic: String,
    pub to: ResetTo,
    pub partitions: Vec<PartitionReset>,
}

impl OffsetResetPlan {
    pub fn lag_before(&self) -> u64 {
        self.partitions.iter().filter_map(|p| p.lag_before).sum()
    }

    pub fn lag_after(&self) -> u64 {
        self.partitions.iter().map(|p| p.lag_after).sum()
    }

    /// Partitions whose committed offset changes.
    pub fn changed(&self) -> usize {
        self.partitions
            .iter()
            .filter(|p| p.old != Some(p.new))
            .count()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetResetReport {
    pub group: String,
    pub topic: String,
    /// Partitions whose new offset the coordinator accepted.
    pub partitions: u64,
    pub lag_after: u64,
}

/// What deleting a consumer group loses: its committed offsets on these topics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDeletePlan {
    pub group: String,
    /// Topics the group has committed offsets on, with its lag on each.
    pub topics: Vec<(String, u64)>,
}

/// One partition of a group row as the broker tells it now (Kafka), for the detail's
/// partition table: the log's bounds, the group's committed offset and who holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionFigures {
    pub partition: i32,
    pub log_start: i64,
    pub end: i64,
    /// `None`: the group has committed nothing on this partition.
    pub committed: Option<i64>,
    /// The member it is assigned to (client id and host), when the broker tells it.
    pub member: Option<String>,
}

impl PartitionFigures {
    /// End − committed; `None` where nothing is committed (Kafka has no offset to measure from).
    pub fn lag(&self) -> Option<u64> {
        self.committed
            .map(|c| u64::try_from(self.end - c).unwrap_or(0))
    }

    /// Records retention deleted before the group read them (committed below the log start).
    pub fn lost(&self) -> u64 {
        self.committed
            .map_or(0, |c| u64::try_from(self.log_start - c).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::ResetTo;

    #[test]
    fn one_word_names_each_target_and_anything_else_is_refused() {
        assert_eq!(ResetTo::parse("earliest"), Ok(ResetTo::Earliest));
        assert_eq!(ResetTo::parse("latest"), Ok(ResetTo::Latest));
        assert_eq!(ResetTo::parse("42"), Ok(ResetTo::Offset(42)));
        assert_eq!(ResetTo::parse("+5"), Ok(ResetTo::Shift(5)));
        assert_eq!(ResetTo::parse("-5"), Ok(ResetTo::Shift(-5)));
        assert_eq!(
            ResetTo::parse("2026-12-07T10:00:00Z"),
            Ok(ResetTo::Time(1_796_637_600_000))
        );
        for bad in ["", "soon", "+x", "-", "4.5", "1e3"] {
            let e = ResetTo::parse(bad).unwrap_err();
            assert!(e.contains("expected earliest, latest"), "{bad}: {e}");
        }
    }
}
