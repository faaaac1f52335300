//! `:` commands. Most reuse a key's command so both paths behave alike; the rest take an
//! argument no key can carry.

use super::state::*;
use super::{dialogs, keys::run_cmd, messages, push, queues, status, Effect};
use crate::tui::keymap::Cmd;
use crate::tui::theme::Theme;
use qdeck_model::config::Access;
use qdeck_model::domain::QueueId;

pub(super) fn command(st: &mut Model, text: &str, fx: &mut Vec<Effect>) {
    let mut words = text.split_whitespace();
    let Some(head) = words.next() else {
        return;
    };
    let arg: Vec<&str> = words.collect();
    let arg = arg.join(" ");
    match head {
        "q" | "quit" | "exit" => dialogs::quit(st),
        "q!" => st.exit.quit = true,
        "help" | "h" => push(st, View::Help),
        "dlq" => run_cmd(st, Cmd::Dlq, fx),
        "scheduled" | "delayed" => run_cmd(st, Cmd::Scheduled, fx),
        "reasons" | "why" => run_cmd(st, Cmd::Reasons, fx),
        "workers" | "w" | "consumers" => run_cmd(st, Cmd::Workers, fx),
        "browse" | "messages" | "m" => run_cmd(st, Cmd::Browse, fx),
        "force" | "browse!" => {
            if let Some(q) = st.context_queue().cloned() {
                messages::start_browse(st, q, true, fx);
            }
        }
        "queues" | "home" => home(st),
        "ops" | "log" => {
            st.ops_log.scroll = 0;
            push(st, View::Ops);
        }
        "alerts" | "alert" => {
            st.alerts.scroll = 0;
            push(st, View::Alerts);
        }
        "fleet" => {
            if st.fleet.is_some() {
                st.stack = vec![View::Fleet];
            }
            // Started, or its profile list read again from the file.
            fx.push(Effect::StartFleet(st.alerts.book.clone()));
        }
        "fire" => {
            if st.fleet.is_none() {
                // The executor starts the pollers and keeps the on-fire view on top.
                fx.push(Effect::StartFleet(st.alerts.book.clone()));
            }
            st.stack = vec![View::Fleet, View::Fire];
        }
        "filter" => {
            st.queues.filter = Filter::new(&arg);
            home(st);
            queues::rebuild_rows(st);
        }
        "sort" => {
            let mut a = arg.split_whitespace();
            match a.next().and_then(SortCol::parse) {
                Some(c) => {
                    st.queues.sort = c;
                    st.queues.sort_desc = match a.next() {
                        Some("asc") => false,
                        Some("desc") => true,
                        _ => c != SortCol::Name,
                    };
                    queues::rebuild_rows(st);
                }
                None => status(
                    st,
                    Level::Warn,
                    format!("sort by: {}", SortCol::ALL.map(SortCol::name).join(", ")),
                ),
            }
        }
        "theme" => match Theme::load(&arg, st.session.theme_dir.as_deref()) {
            Ok(t) => {
                st.theme = t;
                status(st, Level::Info, format!("theme {arg}"));
            }
            Err(e) => status(st, Level::Warn, e),
        },
        "profile" | "ctx" => {
            if st.op.is_some() && !arg.is_empty() && arg != st.session.profile {
                status(st, Level::Warn, "wait for the running operation to finish");
            } else {
                // The file may have changed since start: re-read it, then list or switch.
                fx.push(Effect::ReadProfiles(
                    (!arg.is_empty() && arg != st.session.profile).then_some(arg),
                ));
            }
        }
        "purge" => run_cmd(st, Cmd::Purge, fx),
        "reset" => dialogs::open_reset(st, &arg, fx),
        "copy" | "move" => messages::plan_transfer(st, &arg, head == "move", fx),
        "redrive" => {
            if arg.is_empty() || !st.allows(Access::Redrive) {
                run_cmd(st, Cmd::Redrive, fx);
            } else if st.store.get(&QueueId::new(arg.as_str())).is_some() {
                dialogs::open_redrive(st, Some(QueueId::new(arg)), fx);
            } else {
                status(st, Level::Warn, format!("unknown queue {arg:?}"));
            }
        }
        other => status(
            st,
            Level::Warn,
            format!("unknown command :{other} (try :help)"),
        ),
    }
}

/// Enter on a fleet row: the queue table of that profile (through the usual profile switch;
/// Esc comes back to the fleet).
/// Back to the queue table: over the fleet when the fleet is open (`fleet › queues`), whatever
/// view (the on-fire one included) was on top.
fn home(st: &mut Model) {
    st.stack = if st.stack.first() == Some(&View::Fleet) {
        vec![View::Fleet, View::Queues]
    } else {
        vec![View::Queues]
    };
}

pub(super) fn open_fleet_row(st: &mut Model, fx: &mut Vec<Effect>) {
    let Some(name) = st
        .fleet
        .as_ref()
        .and_then(|f| f.selected())
        .map(String::from)
    else {
        return;
    };
    if name == st.session.profile {
        push(st, View::Queues);
    } else if st.op.is_some() {
        status(st, Level::Warn, "wait for the running operation to finish");
    } else {
        status(st, Level::Info, format!("switching to profile {name}…"));
        fx.push(Effect::SwitchProfile(name));
    }
}

/// Enter on an on-fire row: that queue's detail, in its profile. A queue of another profile
/// goes through the profile switch, which lands on exactly that queue (`FleetState::landing`),
/// never on whatever row 1 of that profile is; Esc comes back here. A broker row opens its
/// profile's queue table, where its error is told.
pub(super) fn open_fire_row(st: &mut Model, fx: &mut Vec<Effect>) {
    let now = st.now_ms;
    // Opened is chosen: back from it, the cursor is on this row wherever it went.
    if let Some(f) = &mut st.fleet {
        f.fire_selected_now(now);
    }
    let Some((profile, queue)) = st.fleet.as_ref().and_then(|f| {
        // The rows may have shrunk under the cursor since it last moved: the last row is the
        // one drawn highlighted then.
        let rows = f.fire_rows(now);
        rows.get(f.fire_cursor.sel.min(rows.len().saturating_sub(1)))
            .map(|r| (r.profile().to_string(), r.queue().cloned()))
    }) else {
        return;
    };
    if profile == st.session.profile {
        match queue {
            Some(q) => open_detail(st, q),
            None => push(st, View::Queues),
        }
    } else if st.op.is_some() {
        status(st, Level::Warn, "wait for the running operation to finish");
    } else {
        if let Some(f) = &mut st.fleet {
            f.landing = queue.map(|q| (profile.clone(), q));
        }
        status(st, Level::Info, format!("switching to profile {profile}…"));
        fx.push(Effect::SwitchProfile(profile));
    }
}

/// The detail of `q`, over the view on top (Esc comes back to it).
fn open_detail(st: &mut Model, q: QueueId) {
    st.focus = Some(q);
    st.detail.scroll = 0;
    push(st, View::Detail);
}

/// The profile list re-read from the configuration file: list it, or switch to `then`.
/// The fleet's pollers run: its view opens (under the on-fire view when `:fire` asked).
pub(super) fn fleet_started(st: &mut Model, names: &[String]) {
    // Profiles still in the list keep their rows (and cursors stay); new ones start empty.
    let mut fresh = FleetState::new(names);
    if let Some(old) = st.fleet.take() {
        for row in &mut fresh.rows {
            if let Some(kept) = old.rows.iter().find(|r| r.profile == row.profile) {
                *row = kept.clone();
            }
        }
        fresh.cursor = old.cursor;
        fresh.fire_cursor = old.fire_cursor;
        fresh.fire_sel = old.fire_sel;
        fresh.fire_filter = old.fire_filter;
        fresh.cursor.clamp(fresh.rows.len(), st.size.1 as usize);
    }
    fresh.set_alerts(&st.session.profile, st.alerts.every_firing_row());
    st.fleet = Some(fresh);
    st.stack = if st.view() == View::Fire {
        vec![View::Fleet, View::Fire]
    } else {
        vec![View::Fleet]
    };
    st.dirty = true;
}

pub(super) fn profiles_read(
    st: &mut Model,
    names: Result<Vec<String>, String>,
    then: Option<String>,
    fx: &mut Vec<Effect>,
) {
    match names {
        Ok(n) => st.session.profiles = n,
        Err(e) => status(
            st,
            Level::Warn,
            format!("cannot re-read the configuration: {e}"),
        ),
    }
    match then {
        None => {
            let msg = format!(
                "profile {} ({}); profiles: {}",
                st.session.profile,
                st.session.broker,
                st.session.profiles.join(", ")
            );
            status(st, Level::Info, msg);
        }
        Some(arg) if !st.session.profiles.contains(&arg) => {
            let msg = format!(
                "unknown profile {arg:?}; profiles: {}",
                st.session.profiles.join(", ")
            );
            status(st, Level::Warn, msg);
        }
        Some(arg) => {
            status(st, Level::Info, format!("switching to profile {arg}…"));
            fx.push(Effect::SwitchProfile(arg));
        }
    }
}
