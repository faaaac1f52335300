//! `qdeck check`: the monitoring-plugin convention. Exit 0 OK, 1 WARNING, 2 CRITICAL,
//! 3 UNKNOWN, and one summary line (with perfdata after `|`).

use super::args::CheckArgs;
use super::exit::CliResult;
use super::fetch::{self, QueueRow};
use super::output::{self, name};
use crate::engine::session::Session;

const OK: u8 = 0;
const WARNING: u8 = 1;
const CRITICAL: u8 = 2;
const UNKNOWN: u8 = 3;

fn label(code: u8) -> &'static str {
    match code {
        OK => "OK",
        WARNING => "WARNING",
        CRITICAL => "CRITICAL",
        _ => "UNKNOWN",
    }
}

/// Problems found on one queue, worst first.
fn judge(r: &QueueRow, a: &CheckArgs) -> Vec<(u8, String)> {
    let mut out = Vec::new();
    if let Some(e) = &r.error {
        out.push((UNKNOWN, format!("{} {}", name(&r.name), name(e))));
        return out;
    }
    let mut limit = |v: Option<f64>,
                     warn: Option<f64>,
                     crit: Option<f64>,
                     what: &str,
                     fmt: &dyn Fn(f64) -> String| {
        if warn.is_none() && crit.is_none() {
            return;
        }
        match v {
            None => out.push((UNKNOWN, format!("{} {what} unknown", name(&r.name)))),
            Some(v) => {
                if let Some(c) = crit.filter(|c| v > *c) {
                    out.push((
                        CRITICAL,
                        format!("{} {what} {} > {}", name(&r.name), fmt(v), fmt(c)),
                    ));
                } else if let Some(w) = warn.filter(|w| v > *w) {
                    out.push((
                        WARNING,
                        format!("{} {what} {} > {}", name(&r.name), fmt(v), fmt(w)),
                    ));
                }
            }
        }
    };
    let count = |v: f64| format!("{v:.0}");
    let secs = |v: f64| output::human_secs(v);
    limit(
        r.depth.map(|d| d as f64),
        a.warn_depth.map(|x| x as f64),
        a.max_depth.map(|x| x as f64),
        "depth",
        &count,
    );
    limit(
        r.oldest_age_secs,
        a.warn_age.map(|d| d.as_secs_f64()),
        a.max_age.map(|d| d.as_secs_f64()),
        "age",
        &secs,
    );
    // DLQ thresholds look at DLQs themselves and at each source's DLQ depth once.
    if r.is_dlq {
        limit(
            r.depth.map(|d| d as f64),
            a.warn_dlq.map(|x| x as f64),
            a.max_dlq.map(|x| x as f64),
            "dlq depth",
            &count,
        );
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.0));
    out
}

pub async fn check(s: &Session, a: &CheckArgs) -> CliResult {
    let re = match fetch::compile_pattern(a.pattern.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            output::print(&format!("QDECK UNKNOWN - {}\n", e.message));
            return Ok(UNKNOWN);
        }
    };
    let rows = match fetch::rows(s.backend.as_ref(), re.as_ref()).await {
        Ok(r) => r,
        Err(e) => {
            output::print(&format!("QDECK UNKNOWN - {}\n", e.message));
            return Ok(UNKNOWN);
        }
    };
    if rows.is_empty() {
        output::print("QDECK UNKNOWN - no queue matches\n");
        return Ok(UNKNOWN);
    }
    let mut problems: Vec<(u8, String)> = rows.iter().flat_map(|r| judge(r, a)).collect();
    problems.sort_by_key(|p| std::cmp::Reverse(p.0));
    // UNKNOWN ranks below CRITICAL: a known critical queue is the louder news.
    let worst = if problems.iter().any(|p| p.0 == CRITICAL) {
        CRITICAL
    } else if problems.iter().any(|p| p.0 == UNKNOWN) {
        UNKNOWN
    } else if problems.iter().any(|p| p.0 == WARNING) {
        WARNING
    } else {
        OK
    };
    let perf: Vec<String> = rows
        .iter()
        .take(50)
        .filter_map(|r| {
            r.depth
                .map(|d| format!("'{}'={d}", name(&r.name).replace('\'', "")))
        })
        .collect();
    let summary = if problems.is_empty() {
        format!("{} queue(s) within limits", rows.len())
    } else {
        let shown: Vec<&str> = problems.iter().take(5).map(|p| p.1.as_str()).collect();
        let more = problems.len().saturating_sub(5);
        format!(
            "{} problem(s) in {} queue(s): {}{}",
            problems.len(),
            rows.len(),
            shown.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )
    };
    output::print(&format!(
        "QDECK {} - {summary} | {}\n",
        label(worst),
        perf.join(" ")
    ));
    Ok(worst)
}
