//! The partition table of a Kafka group row in the detail: per partition the lag, records
//! appended and committed per second, the member holding it and its state; then how skewed
//! the lag is and which partitions are stuck.

use ratatui::text::Line;

use super::super::{fmt_count, fmt_rate, styled};

use crate::tui::state::Model;
use qdeck_engine::partitions::{PartitionState, STUCK_POLLS};
use qdeck_model::sanitize::clean_short;

/// Lines for the open detail, empty when it is not a Kafka group row.
pub(super) fn lines<'a>(st: &Model) -> Vec<Line<'a>> {
    let t = &st.theme;
    if st.partition_row().is_none() {
        return Vec::new();
    }
    let p = &st.detail.partitions;
    let mut out = vec![Line::from(styled("partitions", t.title))];
    if let Some(e) = &p.error {
        out.push(Line::from(styled(format!("  {e}"), t.warn)));
    }
    let Some(table) = &p.table else {
        if p.error.is_none() {
            out.push(Line::from(styled("  reading the partitions…", t.dim)));
        }
        return out;
    };
    out.push(Line::from(styled(
        format!(
            "  {:>5} {:>10} {:>8} {:>8}  {:<16} {}",
            "part", "lag", "in/s", "out/s", "state", "member"
        ),
        t.dim,
    )));
    for r in &table.rows {
        let state_style = match r.state {
            PartitionState::Stuck(_) => t.error,
            _ => t.text,
        };
        let lag = if r.lost > 0 {
            format!("{} ({} lost)", fmt_count(r.lag), r.lost)
        } else {
            fmt_count(r.lag)
        };
        out.push(Line::from(vec![
            styled(
                format!(
                    "  {:>5} {:>10} {:>8} {:>8}  ",
                    r.partition,
                    lag,
                    fmt_rate(r.in_rate),
                    fmt_rate(r.out_rate)
                ),
                if r.lost > 0 { t.error } else { t.text },
            ),
            styled(format!("{:<16} ", r.state.label()), state_style),
            styled(
                r.member
                    .as_deref()
                    .map_or_else(|| "unassigned".to_string(), |m| clean_short(m, 60)),
                t.dim,
            ),
        ]));
    }
    if let Some(s) = &table.skew {
        out.push(Line::from(styled(format!("  {s}"), t.warn)));
    }
    if table.stuck.is_empty() {
        out.push(Line::from(styled(
            format!("  none stuck (a partition is stuck when its commit stands still with lag for {STUCK_POLLS} polls)"),
            t.dim,
        )));
    } else {
        let list: Vec<String> = table.stuck.iter().map(i32::to_string).collect();
        out.push(Line::from(styled(
            format!(
                "  stuck: partition {} (commit unchanged with lag for {STUCK_POLLS}+ polls)",
                list.join(", ")
            ),
            t.error,
        )));
    }
    out
}
