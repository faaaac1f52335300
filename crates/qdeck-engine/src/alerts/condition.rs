//! An alert rule's `when`: comparisons over a queue's [`Figures`], combined with
//! `and`/`or`/`not`, parsed by the same machinery as the message predicate (`--where`).
//!
//! ```text
//! depth > 0
//! age > 5m and consumers = 0
//! dlq_growth > 0 or unreachable
//! ```
//!
//! Numbers compare with `= != < <= > >=`; `age` and `eta` also take durations (`90s`, `5m`,
//! `2h`), a bare number being seconds. `unreachable` and `stale` stand alone or compare with
//! `true`/`false`. A figure the broker does not give satisfies no comparison.

use std::fmt;

use super::figures::{Figures, NAMES};
use qdeck_model::expr::{self, err, Expr, Op, PredicateError, Tok, Token, Vocabulary};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Depth,
    InFlight,
    Delayed,
    Age,
    DlqDepth,
    DlqGrowth,
    Consumers,
    InRate,
    OutRate,
    Workers,
    WorkersNeeded,
    Lost,
    Eta,
    Retained,
    RetainedAge,
    FigureAge,
    Forwarded,
    Unreachable,
    Stale,
}

impl Figure {
    fn named(word: &str) -> Option<Figure> {
        Some(match word.to_ascii_lowercase().as_str() {
            "depth" => Figure::Depth,
            "in_flight" => Figure::InFlight,
            "delayed" => Figure::Delayed,
            "age" => Figure::Age,
            "dlq_depth" => Figure::DlqDepth,
            "dlq_growth" => Figure::DlqGrowth,
            "consumers" => Figure::Consumers,
            "in_rate" => Figure::InRate,
            "out_rate" => Figure::OutRate,
            "workers" => Figure::Workers,
            "workers_needed" => Figure::WorkersNeeded,
            "lost" => Figure::Lost,
            "eta" => Figure::Eta,
            "retained" => Figure::Retained,
            "retained_age" => Figure::RetainedAge,
            "figure_age" => Figure::FigureAge,
            "forwarded" => Figure::Forwarded,
            "unreachable" => Figure::Unreachable,
            "stale" => Figure::Stale,
            _ => return None,
        })
    }

    fn is_flag(self) -> bool {
        matches!(self, Figure::Unreachable | Figure::Stale)
    }

    fn is_duration(self) -> bool {
        matches!(
            self,
            Figure::Age | Figure::Eta | Figure::RetainedAge | Figure::FigureAge
        )
    }

    /// The figure's value: a number (durations in seconds), or 1/0 for a flag.
    fn read(self, f: &Figures) -> Option<f64> {
        let flag = |b: bool| Some(if b { 1.0 } else { 0.0 });
        match self {
            Figure::Depth => f.depth,
            Figure::InFlight => f.in_flight,
            Figure::Delayed => f.delayed,
            Figure::Age => f.age,
            Figure::DlqDepth => f.dlq_depth,
            Figure::DlqGrowth => f.dlq_growth,
            Figure::Consumers => f.consumers,
            Figure::InRate => f.in_rate,
            Figure::OutRate => f.out_rate,
            Figure::Workers => f.workers,
            Figure::WorkersNeeded => f.workers_needed,
            Figure::Lost => f.lost,
            Figure::Eta => f.eta,
            Figure::Retained => f.retained,
            Figure::RetainedAge => f.retained_age,
            Figure::FigureAge => f.figure_age,
            Figure::Forwarded => f.forwarded,
            Figure::Unreachable => flag(f.unreachable),
            Figure::Stale => flag(f.stale),
        }
    }
}

/// One comparison: figure, operator and the number it is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub figure: Figure,
    pub op: Op,
    pub value: f64,
}

impl Comparison {
    fn holds(&self, f: &Figures) -> bool {
        self.figure
            .read(f)
            .and_then(|x| x.partial_cmp(&self.value))
            .is_some_and(|o| self.op.order(o))
    }
}

struct FigureNames;

impl Vocabulary for FigureNames {
    type Field = Figure;
    type Cmp = Comparison;

    fn fields(&self) -> &'static str {
        NAMES
    }

    fn field(&self, word: &str, col: usize) -> Result<Figure, PredicateError> {
        Figure::named(word)
            .ok_or_else(|| err(col, format!("unknown figure {word:?} (figures: {NAMES})")))
    }

    fn compare(
        &self,
        figure: Figure,
        word: &str,
        op: Op,
        v: &Token,
    ) -> Result<Comparison, PredicateError> {
        if op.matching() {
            return Err(err(
                v.col - 1,
                format!("{word} is a figure: compare it with = != < <= > >="),
            ));
        }
        let value = match (&v.kind, figure.is_flag()) {
            (Tok::Word(w), true) if w == "true" || w == "false" => {
                if op.ordering() {
                    return Err(err(
                        v.col - 1,
                        format!("{word} is true or false: use = or !="),
                    ));
                }
                if w == "true" {
                    1.0
                } else {
                    0.0
                }
            }
            (_, true) => {
                return Err(err(
                    v.col,
                    format!("{word} is true or false, found {}", v.kind.describe()),
                ))
            }
            (Tok::Num(n), false) => *n,
            (Tok::Duration(ms), false) if figure.is_duration() => *ms as f64 / 1000.0,
            (Tok::Duration(_), false) => {
                return Err(err(
                    v.col,
                    format!(
                        "{word} is a count or a rate, not a duration: compare it with a number"
                    ),
                ))
            }
            _ => {
                let what = if figure.is_duration() {
                    "a duration such as 5m (or seconds)"
                } else {
                    "a number"
                };
                return Err(err(
                    v.col,
                    format!(
                        "{word} {} needs {what}, found {}",
                        op.text(),
                        v.kind.describe()
                    ),
                ));
            }
        };
        Ok(Comparison { figure, op, value })
    }

    fn alone(&self, figure: &Figure) -> Option<Comparison> {
        figure.is_flag().then_some(Comparison {
            figure: *figure,
            op: Op::Eq,
            value: 1.0,
        })
    }
}

/// A parsed `when`.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    expr: Expr<Comparison>,
}

impl Condition {
    pub fn parse(text: &str) -> Result<Condition, PredicateError> {
        Ok(Condition {
            source: text.trim().to_string(),
            expr: expr::parse(text, &FigureNames)?,
        })
    }

    pub fn holds(&self, f: &Figures) -> bool {
        self.expr.eval(&mut |c| c.holds(f))
    }

    /// The figures it reads, in source order, once each (for summaries and `watch` lines).
    pub fn figures(&self) -> Vec<Figure> {
        let mut out = Vec::new();
        for c in self.expr.comparisons() {
            if !out.contains(&c.figure) {
                out.push(c.figure);
            }
        }
        out
    }

    /// Whether it reads a figure computed from two polls or more (growth, rates, workers,
    /// drain time): unknown, not false, on a queue's first poll, so such a rule neither fires
    /// nor resolves before the second (after a restart of `watch`, a firing rule stays firing).
    pub fn needs_history(&self) -> bool {
        self.figures().iter().any(|f| {
            matches!(
                f,
                Figure::DlqGrowth
                    | Figure::InRate
                    | Figure::OutRate
                    | Figure::Workers
                    | Figure::WorkersNeeded
                    | Figure::Eta
            )
        })
    }

    /// Whether it reads only the profile's health (such a rule also fires for a profile
    /// whose queues are not known).
    pub fn only_health(&self) -> bool {
        self.figures().iter().all(|f| f.is_flag())
    }

    pub fn source(&self) -> &str {
        &self.source
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figs() -> Figures {
        Figures {
            depth: Some(12.0),
            in_flight: Some(3.0),
            age: Some(400.0),
            dlq_depth: Some(0.0),
            consumers: Some(0.0),
            eta: None,
            ..Figures::default()
        }
    }

    fn t(src: &str) -> bool {
        Condition::parse(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .holds(&figs())
    }

    #[test]
    fn numbers_durations_and_logic() {
        assert!(t("depth > 0"));
        assert!(!t("depth > 12"));
        assert!(t("depth >= 12 and in_flight = 3"));
        assert!(t("age > 5m"));
        assert!(t("age > 399"));
        assert!(!t("age > 7m"));
        assert!(t("dlq_depth = 0 or depth < 1"));
        assert!(t("not consumers > 0"));
        assert!(t("(depth > 100 or age > 1m) and consumers = 0"));
    }

    #[test]
    fn records_lost_to_retention_are_a_figure() {
        let c = Condition::parse("lost > 0 and depth > 10").unwrap();
        let lost = |n: Option<f64>| Figures { lost: n, ..figs() };
        assert!(c.holds(&lost(Some(3.0))));
        assert!(!c.holds(&lost(Some(0.0))));
        assert!(!c.holds(&lost(None)));
    }

    #[test]
    fn retention_is_read_only_by_name() {
        // A log's row: what it keeps is no depth or age, so backlog rules pass it by.
        let log = Figures {
            retained: Some(5_000.0),
            retained_age: Some(86_400.0),
            ..Figures::default()
        };
        let holds = |src: &str| Condition::parse(src).unwrap().holds(&log);
        assert!(!holds("age > 5m"));
        assert!(!holds("depth > 0"));
        assert!(holds("retained_age > 1h and retained > 1000"));
    }

    #[test]
    fn the_brokers_forwarded_count_is_a_figure_where_it_counts_one() {
        let c = Condition::parse("forwarded > 3").unwrap();
        let with = |n: Option<f64>| Figures {
            forwarded: n,
            ..figs()
        };
        assert!(c.holds(&with(Some(5.0))));
        assert!(!c.holds(&with(Some(0.0))));
        // A broker that counts no forwarding (not Pub/Sub) never meets it.
        assert!(!c.holds(&with(None)));
    }

    #[test]
    fn an_unknown_figure_satisfies_nothing() {
        assert!(!t("eta > 0"));
        assert!(!t("eta < 1h"));
        assert!(!t("eta != 5"));
        assert!(t("not eta > 0"));
        assert!(!t("workers_needed > 0"));
        // Only Kafka group rows know records lost to retention.
        assert!(!t("lost > 0"));
        assert!(!t("lost = 0"));
    }

    #[test]
    fn flags_stand_alone_or_compare_with_booleans() {
        let mut f = figs();
        assert!(!Condition::parse("unreachable").unwrap().holds(&f));
        f.unreachable = true;
        assert!(Condition::parse("unreachable").unwrap().holds(&f));
        assert!(Condition::parse("unreachable = true").unwrap().holds(&f));
        assert!(!Condition::parse("unreachable != true").unwrap().holds(&f));
        assert!(Condition::parse("stale or unreachable and not stale")
            .unwrap()
            .holds(&f));
        assert!(Condition::parse("unreachable or stale")
            .unwrap()
            .only_health());
        assert!(!Condition::parse("unreachable or depth > 1")
            .unwrap()
            .only_health());
    }

    #[test]
    fn errors_name_the_figure_and_column() {
        let e = Condition::parse("depth > 0 and dlq_size > 1").unwrap_err();
        assert_eq!(e.column, 15);
        assert!(e.message.contains("unknown figure \"dlq_size\""), "{e}");
        assert!(e.message.contains("workers_needed"), "{e}");
        let e = Condition::parse("depth > 5m").unwrap_err();
        assert!(e.message.contains("not a duration"), "{e}");
        let e = Condition::parse("depth ~ \"x\"").unwrap_err();
        assert!(e.message.contains("is a figure"), "{e}");
        let e = Condition::parse("unreachable > true").unwrap_err();
        assert!(e.message.contains("use = or !="), "{e}");
        let e = Condition::parse("depth >").unwrap_err();
        assert!(e.message.contains("expected a value at the end"), "{e}");
        let e = Condition::parse("depth").unwrap_err();
        assert!(e.message.contains("expected an operator at the end"), "{e}");
        let e = Condition::parse("age > \"5m\"").unwrap_err();
        assert!(e.message.contains("needs a duration"), "{e}");
    }

    #[test]
    fn figures_read_are_listed_once() {
        let c = Condition::parse("depth > 1 or (age > 5m and depth < 9)").unwrap();
        assert_eq!(c.figures(), vec![Figure::Depth, Figure::Age]);
    }
}
