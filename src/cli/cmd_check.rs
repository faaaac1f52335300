//! `qdeck check`: the monitoring-plugin convention. Exit 0 OK, 1 WARNING, 2 CRITICAL,
//! 3 UNKNOWN, and one summary line (with perfdata after `|`).
//!
//! DLQ thresholds judge every DLQ once, whether it matched the pattern itself or is the DLQ of a
//! matched queue: `check 'orders$' --max-dlq 0` is about `orders.dlq` too.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::args::CheckArgs;
use super::exit::CliResult;
use super::fetch::{self, QueueRow};
use super::output::{self, name};
use qdeck_engine::session::Session;

const OK: u8 = 0;
const WARNING: u8 = 1;
const CRITICAL: u8 = 2;
pub(super) const UNKNOWN: u8 = 3;

fn label(code: u8) -> &'static str {
    match code {
        OK => "OK",
        WARNING => "WARNING",
        CRITICAL => "CRITICAL",
        _ => "UNKNOWN",
    }
}

/// One figure against its warning and critical limits.
struct Limit<'a> {
    queue: &'a str,
    what: &'static str,
    value: Option<f64>,
    warn: Option<f64>,
    crit: Option<f64>,
    secs: bool,
}

impl Limit<'_> {
    fn judge(&self, out: &mut Vec<(u8, String)>) {
        if self.warn.is_none() && self.crit.is_none() {
            return;
        }
        let fmt = |v: f64| {
            if self.secs {
                output::human_secs(v)
            } else {
                format!("{v:.0}")
            }
        };
        let q = name(self.queue);
        let Some(v) = self.value else {
            out.push((UNKNOWN, format!("{q} {} unknown", self.what)));
            return;
        };
        if let Some(c) = self.crit.filter(|c| v > *c) {
            out.push((
                CRITICAL,
                format!("{q} {} {} > {}", self.what, fmt(v), fmt(c)),
            ));
        } else if let Some(w) = self.warn.filter(|w| v > *w) {
            out.push((
                WARNING,
                format!("{q} {} {} > {}", self.what, fmt(v), fmt(w)),
            ));
        }
    }
}

fn n(v: Option<u64>) -> Option<f64> {
    v.map(|x| x as f64)
}

fn secs(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

/// What is known about one DLQ: its depth, and its age when it matched itself.
#[derive(Default)]
struct DlqFigures {
    depth: Option<u64>,
    age: Option<f64>,
}

/// Every DLQ in view, once: matched DLQs and the DLQs of matched queues.
fn dlqs(rows: &[QueueRow]) -> BTreeMap<String, DlqFigures> {
    let mut m: BTreeMap<String, DlqFigures> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.error.is_none()) {
        if r.is_dlq {
            let e = m.entry(r.name.clone()).or_default();
            e.depth = r.depth.or(e.depth);
            e.age = r.oldest_age_secs;
        }
        if let Some(d) = &r.dlq {
            let e = m.entry(d.clone()).or_default();
            e.depth = e.depth.or(r.dlq_depth);
        }
    }
    m
}

/// DLQ depths of the previous check, per profile, for `--max-dlq-growth`.
fn state_file(profile: &str) -> PathBuf {
    let safe: String = profile
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    qdeck_model::config::paths::state_dir().join(format!("check-{safe}.json"))
}

fn load_previous(path: &PathBuf) -> BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn save_current(path: &PathBuf, now: &BTreeMap<String, DlqFigures>) {
    let depths: BTreeMap<&String, u64> = now
        .iter()
        .filter_map(|(k, v)| v.depth.map(|d| (k, d)))
        .collect();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(text) = serde_json::to_string(&depths) {
        if let Err(e) = std::fs::write(path, text) {
            tracing::warn!("cannot keep check state in {}: {e}", path.display());
        }
    }
}

fn judge_all(
    rows: &[QueueRow],
    a: &CheckArgs,
    previous: &BTreeMap<String, u64>,
) -> Vec<(u8, String)> {
    let mut out = Vec::new();
    for r in rows {
        if let Some(e) = &r.error {
            out.push((UNKNOWN, format!("{} {}", name(&r.name), name(e))));
            continue;
        }
        // A log's messages are retention: its readers' rows are judged on their backlog, and
        // it has no depth or age to call unknown.
        if r.is_dlq || (r.retained.is_some() && r.depth.is_none()) {
            continue;
        }
        Limit {
            queue: &r.name,
            what: "depth",
            value: n(r.depth),
            warn: n(a.warn_depth),
            crit: n(a.max_depth),
            secs: false,
        }
        .judge(&mut out);
        Limit {
            queue: &r.name,
            what: "age",
            value: r.oldest_age_secs,
            warn: secs(a.warn_age),
            crit: secs(a.max_age),
            secs: true,
        }
        .judge(&mut out);
        if a.max_stuck && r.derived.as_ref().is_some_and(|d| d.stuck) {
            out.push((
                CRITICAL,
                format!("{} stuck (age rising, depth flat)", name(&r.name)),
            ));
        }
    }
    for (q, d) in &dlqs(rows) {
        Limit {
            queue: q,
            what: "dlq depth",
            value: n(d.depth),
            warn: n(a.warn_dlq),
            crit: n(a.max_dlq),
            secs: false,
        }
        .judge(&mut out);
        if a.max_dlq_age.is_some() || a.warn_dlq_age.is_some() {
            // A DLQ that did not match the pattern itself has no age figure here: say so.
            Limit {
                queue: q,
                what: "dlq age",
                value: d.age.or(d.depth.filter(|x| *x == 0).map(|_| 0.0)),
                warn: secs(a.warn_dlq_age),
                crit: secs(a.max_dlq_age),
                secs: true,
            }
            .judge(&mut out);
        }
        // The first run has no previous figure: growth is measured from the next one.
        if let (Some(now), Some(before)) = (d.depth, previous.get(q)) {
            let growth = now.saturating_sub(*before);
            Limit {
                queue: q,
                what: "dlq growth",
                value: Some(growth as f64),
                warn: n(a.warn_dlq_growth),
                crit: n(a.max_dlq_growth),
                secs: false,
            }
            .judge(&mut out);
        }
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.0));
    out
}

/// `;warn;crit` after a perfdata value (monitoring-plugins syntax), so graphers draw the
/// limits the check judged by; nothing when neither was given.
fn thresholds(warn: Option<f64>, crit: Option<f64>) -> String {
    let f = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_default();
    if warn.is_none() && crit.is_none() {
        return String::new();
    }
    format!(";{};{}", f(warn), f(crit))
}

/// Perfdata labels cannot hold quotes or `=`; values are plain numbers (UOM `s` for ages),
/// each followed by the thresholds it is judged by. A DLQ's own depth and age carry the DLQ
/// limits, as that is what judges them. With several profiles each label starts with
/// `profile/`.
pub(super) fn perfdata(rows: &[QueueRow], profile: Option<&str>, a: &CheckArgs) -> String {
    let label = |q: &str, what: &str| {
        let q = match profile {
            Some(p) => format!("{}/{}", name(p), name(q)),
            None => name(q),
        };
        format!("'{} {what}'", q.replace(['\'', '='], "_"))
    };
    let mut out = Vec::new();
    let dlq = thresholds(n(a.warn_dlq), n(a.max_dlq));
    for r in rows.iter().filter(|r| r.error.is_none()) {
        let (depth_t, age_t) = if r.is_dlq {
            (
                dlq.clone(),
                thresholds(secs(a.warn_dlq_age), secs(a.max_dlq_age)),
            )
        } else {
            (
                thresholds(n(a.warn_depth), n(a.max_depth)),
                thresholds(secs(a.warn_age), secs(a.max_age)),
            )
        };
        if let Some(d) = r.depth {
            out.push(format!("{}={d}{depth_t}", label(&r.name, "depth")));
        }
        if let Some(d) = r.dlq_depth {
            out.push(format!("{}={d}{dlq}", label(&r.name, "dlq")));
        }
        if let Some(age) = r.oldest_age_secs {
            out.push(format!("{}={age:.0}s{age_t}", label(&r.name, "age")));
        }
    }
    out.join(" ")
}

/// What one profile's check found: the queues looked at and what is wrong with them.
pub(super) struct Judged {
    pub rows: Vec<QueueRow>,
    pub problems: Vec<(u8, String)>,
}

/// Fetch, judge and remember (DLQ depths for `--max-dlq-growth`) one profile. The error is
/// the reason the check is UNKNOWN.
pub(super) async fn judge_profile(s: &Session, a: &CheckArgs) -> Result<Judged, String> {
    let re = fetch::compile_pattern(a.pattern.as_deref()).map_err(|e| e.message)?;
    let fetched = match a.sample {
        Some(gap) => {
            fetch::rows_sampled(
                s.backend.as_ref(),
                re.as_ref(),
                gap,
                s.loaded.config.ui.drain_target_secs,
            )
            .await
        }
        None if a.max_stuck => Err(super::exit::CliError::usage(
            "--max-stuck needs --sample (two polls to see age rise while depth stays flat)",
        )),
        None => fetch::rows(s.backend.as_ref(), re.as_ref()).await,
    };
    let rows = fetched.map_err(|e| e.message)?;
    if rows.is_empty() {
        return Ok(Judged {
            rows,
            problems: Vec::new(),
        });
    }
    let state = state_file(&s.profile().name);
    let previous = load_previous(&state);
    let problems = judge_all(&rows, a, &previous);
    save_current(&state, &dlqs(&rows));
    Ok(Judged { rows, problems })
}

/// UNKNOWN ranks below CRITICAL: a known critical queue is the louder news.
pub(super) fn rank(code: u8) -> u8 {
    match code {
        CRITICAL => 3,
        UNKNOWN => 2,
        WARNING => 1,
        _ => 0,
    }
}

pub(super) fn worst(problems: &[(u8, String)]) -> u8 {
    problems
        .iter()
        .map(|p| p.0)
        .max_by_key(|c| rank(*c))
        .unwrap_or(OK)
}

/// The text between the status and the perfdata: the worst problems first, five at most.
pub(super) fn summary(queues: usize, problems: &[(u8, String)]) -> String {
    if problems.is_empty() {
        return format!("{queues} queue(s) within limits");
    }
    let shown: Vec<&str> = problems.iter().take(5).map(|p| p.1.as_str()).collect();
    let more = problems.len().saturating_sub(5);
    format!(
        "{} problem(s) in {queues} queue(s): {}{}",
        problems.len(),
        shown.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    )
}

pub(super) fn print_line(code: u8, summary: &str, perfdata: &str) {
    output::print(&format!("QDECK {} - {summary} | {perfdata}\n", label(code)));
}

pub(super) const NO_THRESHOLD: &str = "no threshold given (use --max-depth, --max-age, --max-dlq, --max-dlq-growth or a --warn-* form)";

pub async fn check(s: &Session, a: &CheckArgs) -> CliResult {
    let unknown = |why: &str| {
        output::print(&format!("QDECK UNKNOWN - {why}\n"));
        Ok(UNKNOWN)
    };
    if !a.has_threshold() {
        return unknown(NO_THRESHOLD);
    }
    let j = match judge_profile(s, a).await {
        Ok(j) => j,
        Err(e) => return unknown(&e),
    };
    if j.rows.is_empty() {
        return unknown("no queue matches");
    }
    let code = worst(&j.problems);
    print_line(
        code,
        &summary(j.rows.len(), &j.problems),
        &perfdata(&j.rows, None, a),
    );
    Ok(code)
}
