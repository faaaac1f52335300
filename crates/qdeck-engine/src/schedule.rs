//! Which queues one poll asks figures for, when calls are rationed: what matters first.
//!
//! Order: the rows on screen, then DLQs (deepest first), then the `worst_n` other queues by
//! their last known figures, then the rest round-robin from where the previous sweep stopped.
//! The budget cuts the list from the end, so the rows on screen are the last to go without.

use std::collections::{HashMap, HashSet};

use qdeck_model::domain::QueueId;

/// A queue's last known figures, as far as ranking needs them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LastFigures {
    pub depth: Option<u64>,
    pub age_secs: Option<f64>,
    /// Depth of the queue's DLQ.
    pub dlq_depth: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
pub struct TickShape {
    /// DLQs, the worst and a round-robin share of the rest are due this poll (the sweep).
    pub sweep: bool,
    /// How many non-DLQ queues rank as "worst" and come before the round-robin.
    pub worst_n: usize,
    /// Round-robin share of the rest per sweep.
    pub rest_n: usize,
    /// Queues the call budget affords this poll; `None` for no limit.
    pub affordable: Option<usize>,
}

/// The queues to poll this tick, in order, and where the round-robin continues next time.
/// `all` is the listing; `cursor` the round-robin position in it.
pub fn plan_tick<'a>(
    shape: TickShape,
    visible: &'a [QueueId],
    dlqs: &'a [QueueId],
    all: &'a [QueueId],
    last: &HashMap<QueueId, LastFigures>,
    cursor: usize,
) -> (Vec<QueueId>, usize) {
    let mut plan = Plan {
        cap: shape.affordable.unwrap_or(usize::MAX),
        out: Vec::new(),
        taken: HashSet::new(),
    };
    if !visible.iter().all(|id| plan.take(id)) || !shape.sweep || all.is_empty() {
        return (plan.out, cursor);
    }
    let figures = |id: &QueueId| last.get(id).copied().unwrap_or_default();
    let mut dlq_order: Vec<&QueueId> = dlqs.iter().collect();
    dlq_order.sort_by_key(|id| std::cmp::Reverse(figures(id).depth));
    if !dlq_order.into_iter().all(|id| plan.take(id)) {
        return (plan.out, cursor);
    }
    let dlq_set: HashSet<&QueueId> = dlqs.iter().collect();
    if !worst(all, &dlq_set, last, shape.worst_n)
        .into_iter()
        .all(|id| plan.take(id))
    {
        return (plan.out, cursor);
    }
    let n = all.len();
    let mut pos = cursor % n;
    let mut swept = 0;
    for _ in 0..n {
        if swept >= shape.rest_n || plan.full() {
            break;
        }
        let id = &all[pos];
        if !plan.taken.contains(id) {
            plan.take(id);
            swept += 1;
        }
        pos = (pos + 1) % n;
    }
    (plan.out, pos)
}

struct Plan<'a> {
    cap: usize,
    out: Vec<QueueId>,
    taken: HashSet<&'a QueueId>,
}

impl<'a> Plan<'a> {
    fn full(&self) -> bool {
        self.out.len() >= self.cap
    }

    /// Add `id` unless already there; false once the budget is spent.
    fn take(&mut self, id: &'a QueueId) -> bool {
        if self.full() {
            return false;
        }
        if self.taken.insert(id) {
            self.out.push(id.clone());
        }
        true
    }
}

/// The `n` ordinary queues that look worst by what was last seen: a DLQ holding messages
/// first (failures already happened), then the oldest message, then the deepest. Queues never
/// measured rank last, where the round-robin reaches them.
fn worst<'a>(
    all: &'a [QueueId],
    dlqs: &HashSet<&QueueId>,
    last: &HashMap<QueueId, LastFigures>,
    n: usize,
) -> Vec<&'a QueueId> {
    if n == 0 {
        return Vec::new();
    }
    let mut ranked: Vec<(&QueueId, LastFigures)> = all
        .iter()
        .filter(|id| !dlqs.contains(id))
        .filter_map(|id| last.get(id).map(|f| (id, *f)))
        .filter(|(_, f)| {
            f.depth.unwrap_or(0) > 0 || f.dlq_depth.unwrap_or(0) > 0 || f.age_secs > Some(0.0)
        })
        .collect();
    let key = |f: &LastFigures| {
        (
            f.dlq_depth.unwrap_or(0) > 0,
            f.age_secs.unwrap_or(0.0),
            f.depth.unwrap_or(0),
        )
    };
    let worse = |a: &(&QueueId, LastFigures), b: &(&QueueId, LastFigures)| {
        let (ka, kb) = (key(&a.1), key(&b.1));
        kb.0.cmp(&ka.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(kb.2.cmp(&ka.2))
            .then(a.0.as_str().cmp(b.0.as_str()))
    };
    if ranked.len() > n {
        ranked.select_nth_unstable_by(n - 1, worse);
        ranked.truncate(n);
    }
    ranked.sort_by(worse);
    ranked.into_iter().map(|(id, _)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<QueueId> {
        names.iter().map(|n| QueueId::new(*n)).collect()
    }

    fn names(v: &[QueueId]) -> Vec<&str> {
        v.iter().map(qdeck_model::domain::QueueId::as_str).collect()
    }

    fn fig(depth: u64, age: Option<f64>, dlq: u64) -> LastFigures {
        LastFigures {
            depth: Some(depth),
            age_secs: age,
            dlq_depth: Some(dlq),
        }
    }

    fn shape(sweep: bool, worst_n: usize, rest_n: usize, affordable: Option<usize>) -> TickShape {
        TickShape {
            sweep,
            worst_n,
            rest_n,
            affordable,
        }
    }

    /// q0..q9 plus two DLQs; q3 has an old message, q5 is deep, q7's DLQ holds messages.
    fn scene() -> (Vec<QueueId>, Vec<QueueId>, HashMap<QueueId, LastFigures>) {
        let mut all: Vec<QueueId> = (0..10).map(|i| QueueId::new(format!("q{i}"))).collect();
        all.extend(ids(&["a.dlq", "b.dlq"]));
        let mut last = HashMap::new();
        for id in &all {
            last.insert(id.clone(), fig(0, None, 0));
        }
        last.insert(QueueId::new("q3"), fig(1, Some(900.0), 0));
        last.insert(QueueId::new("q5"), fig(5_000, Some(2.0), 0));
        last.insert(QueueId::new("q7"), fig(1, Some(1.0), 4));
        last.insert(QueueId::new("b.dlq"), fig(12, None, 0));
        (all, ids(&["a.dlq", "b.dlq"]), last)
    }

    #[test]
    fn visible_then_dlqs_then_worst_then_round_robin() {
        let (all, dlqs, last) = scene();
        let visible = ids(&["q0", "q1"]);
        let (plan, next) = plan_tick(shape(true, 3, 2, None), &visible, &dlqs, &all, &last, 0);
        assert_eq!(
            names(&plan),
            vec!["q0", "q1", "b.dlq", "a.dlq", "q7", "q3", "q5", "q2", "q4"],
            "deepest DLQ first; a full DLQ, then age, then depth rank the worst"
        );
        assert_eq!(
            next, 5,
            "the round-robin resumes after the last queue it took"
        );
    }

    #[test]
    fn the_budget_cuts_from_the_end_and_visible_rows_go_last() {
        let (all, dlqs, last) = scene();
        let visible = ids(&["q0", "q1"]);
        let (plan, next) = plan_tick(shape(true, 3, 2, Some(4)), &visible, &dlqs, &all, &last, 0);
        assert_eq!(names(&plan), vec!["q0", "q1", "b.dlq", "a.dlq"]);
        assert_eq!(next, 0, "the round-robin did not move");
        let (plan, _) = plan_tick(shape(true, 3, 2, Some(1)), &visible, &dlqs, &all, &last, 0);
        assert_eq!(names(&plan), vec!["q0"]);
        let (plan, _) = plan_tick(shape(true, 3, 2, Some(0)), &visible, &dlqs, &all, &last, 0);
        assert!(plan.is_empty());
    }

    #[test]
    fn outside_the_sweep_only_visible_rows() {
        let (all, dlqs, last) = scene();
        let visible = ids(&["q9"]);
        let (plan, next) = plan_tick(shape(false, 3, 5, None), &visible, &dlqs, &all, &last, 4);
        assert_eq!(names(&plan), vec!["q9"]);
        assert_eq!(next, 4);
    }

    #[test]
    fn round_robin_covers_every_queue_across_sweeps_without_repeats() {
        let all: Vec<QueueId> = (0..25).map(|i| QueueId::new(format!("q{i:02}"))).collect();
        let last = HashMap::new();
        let mut cursor = 0;
        let mut seen = Vec::new();
        for _ in 0..5 {
            let (plan, next) = plan_tick(shape(true, 10, 5, None), &[], &[], &all, &last, cursor);
            assert_eq!(plan.len(), 5, "unmeasured queues are not ranked worst");
            seen.extend(plan);
            cursor = next;
        }
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 25);
    }

    #[test]
    fn round_robin_skips_queues_already_taken_and_stops_after_one_lap() {
        let all = ids(&["a", "b", "c"]);
        let (plan, _) = plan_tick(
            shape(true, 0, 10, None),
            &ids(&["b"]),
            &[],
            &all,
            &HashMap::new(),
            0,
        );
        assert_eq!(names(&plan), vec!["b", "a", "c"]);
    }
}
