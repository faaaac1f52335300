//! A checked alert rule: which queues it watches, its condition, how long the condition must
//! hold, and the line it prints.

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::figures::Figures;
use qdeck_model::config::alerts::AlertRuleConfig;
use qdeck_model::domain::{QueueInfo, QueueKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    fn parse(s: &str) -> Option<Severity> {
        match s {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "critical" => Some(Severity::Critical),
            _ => None,
        }
    }
}

const KINDS: &str = "standard, fifo, classic, quorum, stream, subscription, topic, consumer, dlq";

#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    queues: Option<Regex>,
    profiles: Vec<String>,
    kinds: Vec<String>,
    pub when: Condition,
    /// Seconds `when` must hold before the rule fires.
    pub for_secs: f64,
    pub severity: Severity,
    summary: Option<String>,
}

/// The name `kinds` uses for a queue kind (as `ls` prints it).
pub fn kind_name(k: QueueKind) -> &'static str {
    match k {
        QueueKind::Standard => "standard",
        QueueKind::Fifo => "fifo",
        QueueKind::Classic => "classic",
        QueueKind::Quorum => "quorum",
        QueueKind::Stream => "stream",
        QueueKind::Subscription => "subscription",
        QueueKind::Topic => "topic",
        QueueKind::Consumer => "consumer",
    }
}

impl Rule {
    /// Checks `alerts[i]`; an error names the key that is wrong.
    pub fn compile(c: &AlertRuleConfig, i: usize) -> Result<Rule, String> {
        let key = |k: &str| format!("alerts[{i}].{k}");
        if c.name.trim().is_empty() {
            return Err(format!("{} is empty; every rule needs a name", key("name")));
        }
        let queues = match &c.queues {
            Some(q) => Some(Regex::new(q).map_err(|e| {
                let last = e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
                    .to_string();
                format!(
                    "{} = {q:?} is not a regular expression: {last}",
                    key("queues")
                )
            })?),
            None => None,
        };
        for k in &c.kinds {
            if !KINDS.split(", ").any(|known| known == k) {
                return Err(format!("{} has {k:?}, not one of {KINDS}", key("kinds")));
            }
        }
        let when = Condition::parse(&c.when).map_err(|e| format!("{}: {e}", key("when")))?;
        let for_secs = match &c.for_ {
            Some(d) => {
                qdeck_model::expr::duration_ms(d).ok_or_else(|| {
                    format!(
                        "{} = {d:?} is not a duration such as 90s, 5m or 1h",
                        key("for")
                    )
                })? as f64
                    / 1000.0
            }
            None => 0.0,
        };
        let severity = match &c.severity {
            Some(s) => Severity::parse(s).ok_or_else(|| {
                format!(
                    "{} = {s:?} is not one of info, warning, critical",
                    key("severity")
                )
            })?,
            None => Severity::Warning,
        };
        if let Some(s) = &c.summary {
            check_placeholders(s).map_err(|e| format!("{}: {e}", key("summary")))?;
        }
        Ok(Rule {
            name: c.name.clone(),
            queues,
            profiles: c.profiles.clone(),
            kinds: c.kinds.clone(),
            when,
            for_secs,
            severity,
            summary: c.summary.clone(),
        })
    }

    pub fn watches_profile(&self, profile: &str) -> bool {
        self.profiles.is_empty() || self.profiles.iter().any(|p| p == profile)
    }

    pub fn watches(&self, profile: &str, q: &QueueInfo) -> bool {
        self.watches_profile(profile)
            && self
                .queues
                .as_ref()
                .is_none_or(|r| r.is_match(q.id.as_str()))
            && (self.kinds.is_empty()
                || self
                    .kinds
                    .iter()
                    .any(|k| k == kind_name(q.kind) || (k == "dlq" && q.is_dlq)))
    }

    /// The rule's line for one queue (`queue` empty for a rule on the profile's health).
    pub fn summary(&self, profile: &str, queue: &str, f: &Figures) -> String {
        let text = match &self.summary {
            Some(s) => s.clone(),
            None => {
                let figures: Vec<String> = self
                    .when
                    .figures()
                    .iter()
                    .map(|fig| {
                        let name = figure_name(*fig);
                        format!("{name} {{{name}}}")
                    })
                    .collect();
                let place = if queue.is_empty() {
                    "{profile}"
                } else {
                    "{queue}"
                };
                format!("{place}: {}", figures.join(", "))
            }
        };
        fill(&text, &mut |name| match name {
            "queue" => Some(queue.to_string()),
            "profile" => Some(profile.to_string()),
            "rule" => Some(self.name.clone()),
            "severity" => Some(self.severity.as_str().to_string()),
            other => figure_text(other, f),
        })
    }
}

fn figure_name(f: super::condition::Figure) -> &'static str {
    use super::condition::Figure::*;
    match f {
        Depth => "depth",
        InFlight => "in_flight",
        Delayed => "delayed",
        Age => "age",
        DlqDepth => "dlq_depth",
        DlqGrowth => "dlq_growth",
        Consumers => "consumers",
        InRate => "in_rate",
        OutRate => "out_rate",
        Workers => "workers",
        WorkersNeeded => "workers_needed",
        Lost => "lost",
        Eta => "eta",
        Retained => "retained",
        RetainedAge => "retained_age",
        FigureAge => "figure_age",
        Forwarded => "forwarded",
        Unreachable => "unreachable",
        Stale => "stale",
    }
}

/// A figure as a summary shows it: durations in words, counts whole, rates to 0.1, `?` when
/// the broker does not give it. `None` for a name that is no figure.
fn figure_text(name: &str, f: &Figures) -> Option<String> {
    let count = |v: Option<f64>| v.map_or("?".to_string(), |x| format!("{}", x.round() as i64));
    let rate = |v: Option<f64>| v.map_or("?".to_string(), |x| format!("{x:.1}/s"));
    let secs = |v: Option<f64>| v.map_or("?".to_string(), duration_words);
    Some(match name {
        "depth" => count(f.depth),
        "in_flight" => count(f.in_flight),
        "delayed" => count(f.delayed),
        "age" => secs(f.age),
        "dlq_depth" => count(f.dlq_depth),
        "dlq_growth" => count(f.dlq_growth),
        "consumers" => count(f.consumers),
        "in_rate" => rate(f.in_rate),
        "out_rate" => rate(f.out_rate),
        "workers" => count(f.workers),
        "workers_needed" => count(f.workers_needed),
        "lost" => count(f.lost),
        "eta" => secs(f.eta),
        "retained" => count(f.retained),
        "retained_age" => secs(f.retained_age),
        "figure_age" => secs(f.figure_age),
        "forwarded" => count(f.forwarded),
        "unreachable" => f.unreachable.to_string(),
        "stale" => f.stale.to_string(),
        _ => return None,
    })
}

/// `90` → `1m30s`, `7200` → `2h`.
pub fn duration_words(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Replaces each `{name}` with `value(name)`; `{{` and `}}` are braces.
fn fill(text: &str, value: &mut dyn FnMut(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
        } else if let (true, Some(end)) = (tail.starts_with('{'), tail.find('}')) {
            let name = &tail[1..end];
            out.push_str(&value(name).unwrap_or_else(|| format!("{{{name}}}")));
            rest = &tail[end + 1..];
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn check_placeholders(text: &str) -> Result<(), String> {
    let mut bad = None;
    let known = |name: &str| {
        matches!(name, "queue" | "profile" | "rule" | "severity")
            || figure_text(name, &Figures::default()).is_some()
    };
    fill(text, &mut |name| {
        if !known(name) && bad.is_none() {
            bad = Some(name.to_string());
        }
        Some(String::new())
    });
    match bad {
        Some(name) => Err(format!(
            "unknown placeholder {{{name}}} (queue, profile, rule, severity or a figure: {})",
            super::figures::NAMES
        )),
        None => Ok(()),
    }
}
