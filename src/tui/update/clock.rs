//! The one-second tick: re-sorting, the workers view's refresh, flashes that expire, and
//! clocks that move.

use super::state::*;
use super::{queues, Effect, FLASH_INFO_MS, FLASH_WARN_MS};

pub(super) fn tick(st: &mut Model, now: i64, fx: &mut Vec<Effect>) {
    st.now_ms = now;
    // Re-sorting runs over every queue: on user actions and this tick, not per batch.
    if st.queues.rows_dirty {
        queues::rebuild_rows(st);
    }
    // A broker counts as down from a time on, so the on-fire list can change with the clock,
    // and a health rule fires on time rather than at the next answer.
    queues::alerts(st, fx, true);
    super::follow_fire(st);
    // The workers view follows the poll rhythm; message pages do not (browsing may
    // have side effects on some brokers). So does the detail of a queue whose workers are
    // listed: its worker count reads that list (`views::workers::shown_count`).
    let listed = match st.view() {
        View::Workers => st.workers.queue.clone(),
        View::Detail => st.focus.clone().filter(|q| {
            !matches!(
                st.caps_for(q).consumers,
                qdeck_model::domain::ConsumerListing::Unsupported(_)
            )
        }),
        _ => None,
    };
    if let Some(q) = listed {
        if st.workers.queue.as_ref() != Some(&q) {
            st.workers = WorkersState {
                queue: Some(q.clone()),
                ..Default::default()
            };
        }
        let w = &st.workers;
        if !w.loading
            && w.fetched_ms
                .is_none_or(|t| (now - t) as f64 >= st.session.refresh_secs * 1000.0)
        {
            st.workers.loading = true;
            fx.push(Effect::Consumers(q));
        }
    }
    super::partitions::tick(st, now, fx);
    // Status messages are flashes: gone after a few seconds, errors a little later (an
    // operation's result stays).
    if st.status.as_ref().is_some_and(|s| {
        if s.sticky {
            return false;
        }
        let ttl = match s.level {
            Level::Info => FLASH_INFO_MS,
            Level::Warn | Level::Error => FLASH_WARN_MS,
        };
        now - s.at_ms >= ttl
    }) {
        st.status = None;
    }
    // Clocks ("updated 3 s ago") move every second.
    st.dirty = true;
}
