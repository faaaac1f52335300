//! Console tests: snapshots of every view (ratatui TestBackend + insta), the pure update,
//! hostile broker text, tiny terminals, and the console's engine parts against the real
//! local broker.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::sync::Arc;
use std::time::Duration;

mod common;
use common::console::*;
use common::pty::Console;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use qdeck::tui::state::{DialogKind, OpSummary, PlanShown, State, View};
use qdeck::tui::theme::Theme;
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_backend::{Backend, BackendError};
use qdeck_engine::ops::{Planned, Verdict};
use qdeck_engine::poller::{self, PollConfig, PollError, PollEvent};
use qdeck_engine::store::Store;
use qdeck_model::config::Access;
use qdeck_model::domain::*;

fn snap(name: &str, st: &State, w: u16, h: u16) {
    let t = draw(st, w, h);
    insta::assert_snapshot!(name, text(&t));
}

// ---------- snapshots ----------

#[test]
fn snapshot_queues() {
    let st = populated();
    snap("queues_80x24", &st, 80, 24);
    snap("queues_120x30", &st, 120, 30);
}

#[test]
fn snapshot_queues_states() {
    let mut st = State::new(Store::with_defaults(), caps(), "local", "local");
    update(&mut st, Action::Tick(T0));
    snap("queues_loading", &st, 80, 12);
    update(&mut st, Action::Poll(PollEvent::Queues(vec![])));
    snap("queues_empty", &st, 80, 12);

    let mut st = populated();
    update(
        &mut st,
        Action::Poll(PollEvent::Error(PollError::Backend(
            BackendError::Unreachable("connection refused".into()),
        ))),
    );
    snap("queues_error_stale", &st, 80, 14);

    // The poll answers again a minute later, without these queues' figures: their rows are
    // two refreshes behind.
    let mut st = populated();
    let later = st.now_ms + 60_000;
    update(&mut st, Action::Tick(later));
    polled(&mut st, vec![]);
    snap("queues_stale_rows", &st, 80, 14);

    let st = populated_with(|s| s.session.access = Access::Browse);
    snap("queues_read_only", &st, 100, 12);

    let st = populated_with(|s| {
        s.demo_workers = Some(1);
        s.session.protected = true;
    });
    snap("queues_demo_protected", &st, 100, 12);

    let mut st = populated();
    for c in "/zzz".chars() {
        update(&mut st, key(c));
    }
    snap("queues_filter_no_match", &st, 80, 10);
}

#[test]
fn snapshot_detail() {
    let mut st = populated();
    select(&mut st, "orders");
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    snap("detail_80x24", &st, 80, 24);
    snap("detail_120x40", &st, 120, 40);
}

#[test]
fn snapshot_messages_and_body() {
    let mut st = populated();
    open_dlq(&mut st);
    snap("messages_80x24", &st, 80, 24);
    let t = draw(&st, 120, 24);
    assert_no_controls(&t);
    snap("messages_120x24", &st, 120, 24);
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    snap("message_json_80x24", &st, 80, 24);
    update(&mut st, code(KeyCode::Esc));
    update(&mut st, key('j'));
    update(&mut st, code(KeyCode::Enter));
    snap("message_text_hostile", &st, 80, 16);
    update(&mut st, code(KeyCode::Esc));
    update(&mut st, key('j'));
    update(&mut st, code(KeyCode::Enter));
    snap("message_binary", &st, 80, 16);

    let mut st = populated();
    open_dlq(&mut st);
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Err(BackendError::RefusedUnlessForced(
                "3 messages are one receive away from their DLQ".into(),
            )),
        },
    );
    snap("messages_refused", &st, 80, 12);
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page::default()),
        },
    );
    snap("messages_empty", &st, 80, 10);
}

/// The `:force` advice follows the refusal's type: shown for a browse refused for what it
/// could do to the messages, not for a limit forcing cannot lift (RabbitMQ's browse window),
/// though both read "refused: …".
#[test]
fn force_advice_only_for_a_refusal_force_lifts() {
    for (err, advised) in [
        (
            BackendError::RefusedUnlessForced(
                "'jobs' is a quorum queue with delivery limit 3; use --force to browse anyway"
                    .into(),
            ),
            true,
        ),
        (
            BackendError::Refused(
                "browsing past the first 5000 messages would hold too many unacknowledged messages"
                    .into(),
            ),
            false,
        ),
    ] {
        let mut st = populated();
        open_dlq(&mut st);
        update(
            &mut st,
            Action::Page {
                queue: QueueId::new("orders-dlq"),
                append: false,
                result: Err(err),
            },
        );
        let s = text(&draw(&st, 100, 24));
        assert!(s.contains("browse failed: refused: "), "{s}");
        assert_eq!(s.contains(":force browses anyway"), advised, "{s}");
    }
}

#[test]
fn snapshot_dialogs() {
    let mut st = populated();
    select(&mut st, "orders");
    let fx = update(&mut st, key('P'));
    snap("dialog_purge_planning", &st, 80, 24);
    answer_purge(&mut st, &fx, 240);
    snap("dialog_purge", &st, 80, 24);
    update(&mut st, code(KeyCode::Esc));
    let fx = update(&mut st, key('R'));
    answer_plan(&mut st, &fx, 7, &[]);
    snap("dialog_redrive", &st, 80, 24);

    let mut st = populated_with(|s| s.session.protected = true);
    select(&mut st, "payments");
    let fx = update(&mut st, key('P'));
    answer_purge(&mut st, &fx, 420);
    for c in "paym".chars() {
        update(&mut st, key(c));
    }
    snap("dialog_purge_protected", &st, 80, 24);
}

#[test]
fn snapshot_help_and_workers() {
    let mut st = populated_with(|s| s.session.access = Access::Browse);
    update(&mut st, key('?'));
    snap("help_read_only", &st, 80, 40);

    let mut st = populated();
    update(&mut st, code(KeyCode::Home));
    let fx = update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    assert!(fx.contains(&Effect::Consumers(q.clone())));
    snap("workers_loading", &st, 80, 10);
    let now = st.now_ms;
    update(
        &mut st,
        Action::Consumers {
            queue: q,
            result: Ok(vec![
                Consumer {
                    queue: QueueId::new("emails"),
                    tag: "worker-1".into(),
                    peer: Some("pid 4242".into()),
                    prefetch: Some(10),
                    ack_mode: AckMode::Manual,
                    state: "active".into(),
                    status: WorkerState::Active,
                    status_since_ms: None,
                    holding: Some(2),
                    processed: Some(1200),
                    failed: Some(3),
                    rate: Some(4.0),
                    last_seen_ms: Some(now - 1000),
                },
                Consumer {
                    queue: QueueId::new("emails"),
                    tag: "amq.ctag-\x1b[2J".into(),
                    peer: None,
                    prefetch: Some(0),
                    ack_mode: AckMode::Auto,
                    state: "idle".into(),
                    status: WorkerState::Idle,
                    status_since_ms: None,
                    holding: None,
                    processed: None,
                    failed: None,
                    rate: None,
                    last_seen_ms: None,
                },
            ]),
        },
    );
    snap("workers_80x24", &st, 80, 12);
}

/// Unsorted, the workers view lists the live first: a crashed worker the broker lists first
/// goes below the one working.
#[test]
fn the_workers_view_lists_live_workers_first() {
    let mut st = populated();
    update(&mut st, code(KeyCode::Home));
    update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    let worker = |tag: &str, status: WorkerState, state: &str| Consumer {
        queue: q.clone(),
        tag: tag.into(),
        peer: None,
        prefetch: None,
        ack_mode: AckMode::Manual,
        state: state.into(),
        status,
        status_since_ms: None,
        holding: None,
        processed: None,
        failed: None,
        rate: None,
        last_seen_ms: None,
    };
    update(
        &mut st,
        Action::Consumers {
            queue: q.clone(),
            result: Ok(vec![
                worker("a-crashed", WorkerState::LeaseLost, "lease lost ×1"),
                worker("b-gone", WorkerState::Gone, "gone 1m"),
                worker("c-live", WorkerState::Busy, "busy"),
            ]),
        },
    );
    let order: Vec<&str> = st
        .workers
        .rows
        .iter()
        .map(|&i| st.workers.list[i].tag.as_str())
        .collect();
    assert_eq!(order, ["c-live", "a-crashed", "b-gone"]);
}

#[test]
fn snapshot_themes() {
    let mut st = populated_with(|s| s.theme = Theme::mono());
    let t = draw(&st, 80, 24);
    // Mono sets no colours anywhere.
    for c in t.backend().buffer().content() {
        assert_eq!(c.fg, ratatui::style::Color::Reset);
        assert_eq!(c.bg, ratatui::style::Color::Reset);
    }
    update(&mut st, key(':'));
    for c in "theme light".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.theme.name, "light");
}

// ---------- robustness ----------

#[test]
fn tiny_sizes_never_panic() {
    // Each screen reached from `populated` as a user would: the table, the DLQ's messages,
    // one message, the detail, its purge dialog, and help.
    let scenes: [fn(&mut State); 6] = [
        |_| {},
        open_dlq,
        |s| {
            open_dlq(s);
            update(s, code(KeyCode::Enter));
        },
        |s| {
            update(s, code(KeyCode::Enter));
        },
        |s| {
            update(s, code(KeyCode::Enter));
            update(s, key('P'));
        },
        |s| {
            update(s, code(KeyCode::Enter));
            update(s, key('P'));
            update(s, code(KeyCode::Esc));
            update(s, key('?'));
        },
    ];
    for scene in scenes {
        let mut st = populated();
        scene(&mut st);
        for w in 0..=40u16 {
            for h in 0..=14u16 {
                let t = draw(&st, w, h);
                assert_no_controls(&t);
            }
        }
        let t = draw(&st, 10, 5);
        assert!(text(&t).contains("qdeck"));
    }
}

#[test]
fn no_raw_escape_reaches_the_screen() {
    let mut st = populated();
    // A hostile queue name too.
    let mut qs: Vec<QueueInfo> = st.store.entries().iter().map(|e| e.info.clone()).collect();
    qs.push(qinfo("evil\x1b[2J\x1b]0;x\x07\u{202e}", None));
    update(&mut st, Action::Poll(PollEvent::Queues(qs)));
    update(
        &mut st,
        Action::Poll(PollEvent::Error(PollError::Backend(BackendError::Other(
            "boom \x1b[31m red".into(),
        )))),
    );
    let t = draw(&st, 120, 30);
    assert_no_controls(&t);
    assert!(text(&t).contains("evil␛[2J␛]0;x␇⟨U+202E⟩"));
    open_dlq(&mut st);
    for _ in 0..3 {
        update(&mut st, code(KeyCode::Enter));
        for (w, h) in [(80, 24), (200, 50), (40, 10)] {
            assert_no_controls(&draw(&st, w, h));
        }
        update(&mut st, code(KeyCode::Esc));
        update(&mut st, key('j'));
    }
}

// ---------- the pure update ----------

#[test]
fn navigation_and_filter() {
    let mut st = populated();
    assert_eq!(st.queues.rows.len(), 4);
    update(&mut st, key('j'));
    assert_eq!(st.queues.cursor.sel, 1);
    update(&mut st, key('G'));
    assert_eq!(st.queues.cursor.sel, 3);
    update(&mut st, key('g'));
    assert_eq!(st.queues.cursor.sel, 0);
    update(&mut st, key('k'));
    assert_eq!(st.queues.cursor.sel, 0);
    for c in "/ord".chars() {
        update(&mut st, key(c));
    }
    assert_eq!(st.queues.rows.len(), 2);
    update(&mut st, code(KeyCode::Enter));
    assert!(st.input.is_none());
    assert_eq!(st.queues.rows.len(), 2);
    // `!` inverts.
    update(&mut st, key('/'));
    assert_eq!(st.input.as_ref().unwrap().text, "ord");
    update(
        &mut st,
        Action::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)),
    );
    for c in "!ord".chars() {
        update(&mut st, key(c));
    }
    assert_eq!(st.queues.rows.len(), 2);
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.queues.rows.len(), 4);
    // A bad regex matches literally instead of failing.
    for c in "/(".chars() {
        update(&mut st, key(c));
    }
    assert!(st.queues.filter.literal);
    assert_eq!(st.queues.rows.len(), 0);
    update(&mut st, code(KeyCode::Esc));
}

#[test]
fn sort_keeps_selection() {
    let mut st = populated();
    select(&mut st, "payments");
    update(&mut st, key('s')); // depth, descending
    let top = &st.store.entries()[st.queues.rows[0]].info.id;
    assert_eq!(top.as_str(), "payments"); // 420 deep
    assert_eq!(st.selected_queue().unwrap().as_str(), "payments");
    update(&mut st, key(':'));
    for c in "sort eta".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.queues.sort.name(), "eta");
    assert_eq!(st.selected_queue().unwrap().as_str(), "payments");
}

#[test]
fn drill_in_and_back_with_breadcrumb() {
    let mut st = populated();
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    let fx = update(&mut st, key('w'));
    assert_eq!(st.view(), View::Workers);
    assert!(fx.iter().any(|e| matches!(e, Effect::Consumers(_))));
    update(&mut st, code(KeyCode::Esc));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Queues);
    update(&mut st, key('q'));
    assert!(st.exit.quit);
}

#[test]
fn visible_queues_are_reported() {
    let mut st = populated();
    let fx = update(&mut st, key('j'));
    let vis = fx
        .iter()
        .find_map(|e| match e {
            Effect::Visible(v) => Some(v.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(vis.len(), 4);
}

/// Every queue row the table draws is in the visible set the poller serves first, at the top,
/// in the middle and at the end of a long list, with and without a problem line under it.
#[test]
fn every_row_drawn_is_reported_visible() {
    let mut st = populated();
    let mut qs: Vec<QueueInfo> = (0..300)
        .map(|i| qinfo(&format!("bulk-{i:03}"), None))
        .collect();
    qs.push(qinfo("orders", Some("orders-dlq")));
    update(&mut st, Action::Poll(PollEvent::Queues(qs)));
    for (w, h) in [(200u16, 50u16), (80, 24), (60, 15)] {
        update(&mut st, Action::Resize(w, h));
        for keys in [
            &[][..],
            &[KeyCode::PageDown, KeyCode::PageDown],
            &[KeyCode::End],
        ] {
            update(&mut st, code(KeyCode::Home));
            let mut vis = None;
            for k in keys {
                for fx in update(&mut st, code(*k)) {
                    if let Effect::Visible(v) = fx {
                        vis = Some(v);
                    }
                }
            }
            let vis = vis.or_else(|| {
                update(&mut st, code(KeyCode::Down))
                    .into_iter()
                    .chain(update(&mut st, code(KeyCode::Up)))
                    .filter_map(|fx| match fx {
                        Effect::Visible(v) => Some(v),
                        _ => None,
                    })
                    .next_back()
            });
            let vis = vis.expect("a visible set");
            let screen = text(&draw(&st, w, h));
            let drawn: Vec<&str> = screen
                .lines()
                .filter_map(|l| l.split_whitespace().find(|t| t.starts_with("bulk-")))
                .collect();
            assert!(drawn.len() > 3, "{w}x{h} {keys:?}: rows drawn\n{screen}");
            for q in &drawn {
                assert!(
                    vis.iter().any(|v| v.as_str() == *q),
                    "{w}x{h} after {keys:?}: {q} is drawn but not reported visible ({} reported)\n{screen}",
                    vis.len()
                );
            }
            assert!(
                vis.len() <= drawn.len() + 2,
                "{w}x{h}: {} reported for {} drawn",
                vis.len(),
                drawn.len()
            );
        }
    }
}

/// A sort on a figure that some queues lack says how many, in full where the title has room
/// and in short where not, at every size.
#[test]
fn partial_sort_is_said_in_the_title_at_every_size() {
    // `listed` queues, of which the first four have been polled; sorted by depth.
    let sorted = |listed: usize| {
        let names: Vec<String> = (0..listed).map(|i| format!("q-{i:04}")).collect();
        let infos = names.iter().map(|n| qinfo(n, None)).collect();
        let mut st = listed_state(
            qdeck::tui::state::Setup::new("local", "local"),
            caps(),
            infos,
        );
        let at = st.now_ms;
        let stats = names[..4]
            .iter()
            .map(|n| QueueStats {
                id: QueueId::new(n),
                at_ms: at,
                depth: Some(5),
                ..Default::default()
            })
            .collect();
        polled(&mut st, stats);
        for c in ":sort depth".chars() {
            update(&mut st, key(c));
        }
        update(&mut st, code(KeyCode::Enter));
        update(&mut st, Action::Tick(at + 1_000));
        st
    };
    let many = sorted(2905);
    let few = sorted(300);
    for (st, w, h, want) in [
        (
            &many,
            120u16,
            40u16,
            "2,901 without figures yet, sorted last",
        ),
        (&many, 80, 24, "2,901 unpolled"),
        (&few, 80, 24, "296 without figures yet, sorted last"),
        (&many, 60, 15, "2,901 unpolled"),
        (&few, 60, 15, "296 unpolled"),
    ] {
        let screen = text(&draw(st, w, h));
        assert!(screen.contains(want), "{w}x{h}:\n{screen}");
    }
}

#[test]
fn purge_needs_confirmation() {
    let mut st = populated();
    select(&mut st, "payments");
    let fx = update(&mut st, key('P'));
    assert!(run_of(&fx).is_none());
    // The dialog asks the engine for the plan; the poller's figure is not the question.
    assert!(fx.contains(&Effect::PlanPurge(QueueId::new("payments"))));
    match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Purge { queue, plan } => {
            assert_eq!(queue.as_str(), "payments");
            assert_eq!(*plan, PlanShown::Planning);
        }
        other => panic!("{other:?}"),
    }
    // `y` before the plan came back runs nothing.
    let fx = update(&mut st, key('y'));
    assert!(run_of(&fx).is_none() && st.dialog.is_some(), "{fx:?}");
    update(&mut st, key('n'));
    assert!(st.dialog.is_none());
    let fx = update(&mut st, key('P'));
    // The broker's count now differs from the poller's last figure (423): the plan's shows.
    answer_purge(&mut st, &fx, 17);
    let s = text(&draw(&st, 80, 24));
    assert!(
        s.contains("About to purge payments (17 ready, 0 in flight). This cannot be"),
        "{s}"
    );
    let shown = match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Purge { plan, .. } => plan.held().cloned().unwrap(),
        other => panic!("{other:?}"),
    };
    let fx = update(&mut st, key('y'));
    // The very plan the dialog showed runs: nothing is planned again between them.
    assert!(fx.contains(&Effect::RunPlan(shown)), "{fx:?}");
    assert!(st.op.is_some());
    update(
        &mut st,
        Action::OpDone(OpSummary::new("purged payments: 17 messages", Verdict::Ok)),
    );
    assert!(st.op.is_none());
    assert!(st.status.as_ref().unwrap().text.contains("17"));
}

#[test]
fn protected_profile_types_the_name() {
    let mut st = populated_with(|s| s.session.protected = true);
    select(&mut st, "payments");
    let fx = update(&mut st, key('P'));
    answer_purge(&mut st, &fx, 423);
    // 'y' is just a typed letter here.
    let fx = update(&mut st, key('y'));
    assert!(run_of(&fx).is_none());
    update(&mut st, code(KeyCode::Backspace));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(run_of(&fx).is_none());
    for c in "payments".chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        matches!(run_of(&fx), Some(Planned::Purge { queue, .. }) if queue.id.as_str() == "payments"),
        "{fx:?}"
    );
}

#[test]
fn read_only_has_no_mutating_keys() {
    let mut st = populated_with(|s| s.session.access = Access::Browse);
    for (a, what) in [(key('P'), "purge"), (key('R'), "redrive")] {
        let fx = update(&mut st, a);
        assert!(st.dialog.is_none());
        // Nothing reaches the broker: the only effect is the gate's audit line.
        assert!(
            fx.iter()
                .all(|e| matches!(e, Effect::Visible(_) | Effect::Refused { .. })),
            "{fx:?}"
        );
        assert!(fx.iter().any(|e| matches!(e, Effect::Refused { .. })));
        let flash = st.status.as_ref().expect("a flash says why").text.clone();
        assert!(flash.contains(what) && flash.contains("browse"), "{flash}");
    }
    let fx = update(&mut st, key('x'));
    assert!(st.dialog.is_none() && !fx.contains(&Effect::CancelOp));
    update(&mut st, key(':'));
    for c in "purge".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert!(st.dialog.is_none());
    // `:reset` is refused like every key: worded as they are, audited, kept in `:ops`.
    update(&mut st, key(':'));
    for c in "reset earliest".chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(st.dialog.is_none());
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Refused { .. })),
        "{fx:?}"
    );
    let flash = st.status.as_ref().expect("a flash says why").text.clone();
    assert!(
        flash.contains("resetting offsets needs access = \"full\"") && flash.contains("browse"),
        "{flash}"
    );
    let logged = st.ops_log.entries.last().expect("the refusal is in :ops");
    assert_eq!(logged.summary.exit_code, 5);
    // No key of this tier dismisses a refusal's line (`x` is refused too): the screen of
    // the same profile with no line on it.
    let mut st = populated_with(|s| s.session.access = Access::Browse);
    let t = draw(&st, 120, 24);
    let s = text(&t);
    assert!(!s.contains("purge") && !s.contains("redrive"), "{s}");
    assert!(s.contains("READ-ONLY"));
    // Browsing stays allowed.
    let fx = update(&mut st, key('b'));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Browse { .. })),
        "{fx:?}"
    );
}

/// Tier `redrive`: redrive works, purge is refused with a flash.
#[test]
fn redrive_tier_redrives_but_never_purges() {
    let mut st = populated_with(|s| s.session.access = Access::Redrive);
    select(&mut st, "orders-dlq");
    update(&mut st, key('P'));
    assert!(st.dialog.is_none());
    assert!(st.status.as_ref().unwrap().text.contains("full"));
    update(&mut st, key('R'));
    assert!(st.dialog.is_some(), "redrive opens its dialog");
    update(&mut st, code(KeyCode::Esc));
    assert!(st.dialog.is_none());
    // Esc's "cancelled" flash goes by.
    let now = st.now_ms;
    update(
        &mut st,
        Action::Tick(now + qdeck::tui::update::FLASH_INFO_MS),
    );
    assert!(st.status.is_none());
    let s = text(&draw(&st, 160, 24));
    assert!(s.contains("redrive") && !s.contains("purge"), "{s}");
    assert!(s.contains("NO PURGE"));
}

/// Tier `stats`: no message view opens, by key, by `:` command or by Enter on the detail.
#[test]
fn stats_tier_never_opens_messages() {
    let mut st = populated_with(|s| s.session.access = Access::Stats);
    for a in [key('b'), key('d')] {
        let fx = update(&mut st, a);
        assert!(!fx.iter().any(|e| matches!(e, Effect::Browse { .. })));
        assert_eq!(st.view(), View::Queues);
        assert!(st.status.as_ref().unwrap().text.contains("stats"));
    }
    for cmd in ["dlq", "browse", "force"] {
        update(&mut st, key(':'));
        for c in cmd.chars() {
            update(&mut st, key(c));
        }
        let fx = update(&mut st, code(KeyCode::Enter));
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::Browse { .. })),
            ":{cmd}"
        );
        assert_ne!(st.view(), View::Messages);
    }
    // Enter opens the detail (figures); Enter there would browse, and is refused.
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(fx.iter().any(|e| matches!(e, Effect::Refused { .. })));
    assert_eq!(st.view(), View::Detail);
    // This tier has no key that dismisses the refusal's line: the same detail, fresh.
    let mut st = populated_with(|s| s.session.access = Access::Stats);
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    let s = text(&draw(&st, 160, 24));
    assert!(s.contains("STATS ONLY"), "{s}");
    let footer = s.lines().last().unwrap();
    assert!(
        !footer.contains("browse") && !footer.contains("dlq"),
        "{footer}"
    );
    assert!(footer.contains("workers"), "{footer}");
}

#[test]
fn redrive_selected_messages() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    assert_eq!(st.msgs.marked.len(), 2);
    let fx = update(&mut st, key('R'));
    answer_plan(&mut st, &fx, 2, &[]);
    match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Redrive {
            source,
            only_ids,
            targets,
            ..
        } => {
            assert_eq!(source.as_str(), "orders-dlq");
            assert_eq!(
                only_ids.as_deref(),
                Some(&["1".to_string(), "2".to_string()][..])
            );
            assert_eq!(targets.len(), 2); // origin, orders
        }
        other => panic!("{other:?}"),
    }
    // Another target is planned again before it can run.
    let fx = update(&mut st, code(KeyCode::Tab));
    answer_plan(&mut st, &fx, 2, &[]);
    update(&mut st, code(KeyCode::Up)); // 1 msg/s
                                        // Enter presses the focused Cancel; y confirms.
    let fx = update(&mut st, key('y'));
    let Some(Planned::Redrive { req, .. }) = run_of(&fx) else {
        panic!("{fx:?}");
    };
    assert_eq!(req.target, RedriveTarget::Queue(QueueId::new("orders")));
    assert_eq!(req.rate, Some(qdeck_model::rate::Rate::fixed(1.0)));
    assert_eq!(req.only_ids.as_ref().unwrap().len(), 2);
    // Progress, cancel.
    update(
        &mut st,
        Action::OpProgress(qdeck_backend::ProgressState {
            done: 1,
            failed: 0,
            total: Some(2),
            phase: "copying".into(),
        }),
    );
    let fx = update(&mut st, key('x'));
    assert!(fx.contains(&Effect::CancelOp));
    snap("redrive_progress", &st, 80, 12);
}

/// `D` in the browser: the selection goes to be planned first (the broker's refusal or its
/// note on the other messages), the dialog shows count, ids and note, `y` runs it.
#[test]
fn delete_selected_messages_plans_asks_then_runs() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    let fx = update(&mut st, key('D'));
    let (queue, ids) = fx
        .iter()
        .find_map(|e| match e {
            Effect::PlanDelete { queue, ids } => Some((queue.clone(), ids.clone())),
            _ => None,
        })
        .expect("D asks for a plan first");
    assert_eq!(queue.as_str(), "orders-dlq");
    assert_eq!(ids, vec!["1".to_string(), "2".to_string()]);
    assert!(st.dialog.is_none(), "no dialog before the plan");
    update(
        &mut st,
        Action::DeletePlanned {
            queue: queue.clone(),
            ids: ids.clone(),
            result: Ok(delete_plan(
                &queue,
                &ids,
                Some("every other message read gets the redelivered flag"),
            )),
        },
    );
    let s = text(&draw(&st, 80, 24));
    assert!(
        s.contains("About to delete 2 chosen message(s) from orders-dlq"),
        "{s}"
    );
    assert!(s.contains("ids 1, 2"), "{s}");
    assert!(s.contains("redelivered flag"), "{s}");
    snap("dialog_delete_80x24", &st, 80, 24);
    snap("dialog_delete_60x15", &st, 60, 15);
    // Enter presses the focused Cancel.
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(st.dialog.is_none() && run_of(&fx).is_none());
    update(&mut st, key('D'));
    let result = Ok(delete_plan(&queue, &ids, None));
    update(&mut st, Action::DeletePlanned { queue, ids, result });
    let fx = update(&mut st, key('y'));
    assert!(
        matches!(run_of(&fx), Some(Planned::Delete { ids, .. }) if ids.len() == 2),
        "{fx:?}"
    );
    assert!(st.op.is_some());
    assert!(
        st.msgs.marked.is_empty(),
        "deleted ids are no longer selected"
    );
    // One operation at a time.
    let fx = update(&mut st, key('D'));
    assert!(fx.iter().all(|e| !matches!(e, Effect::PlanDelete { .. })));
    assert!(st.status.as_ref().unwrap().text.contains("already running"));
}

/// A broker that cannot delete these messages says so in a flash; no dialog opens. Below tier
/// `full` the key is refused and audited.
#[test]
fn delete_refusals_are_said_not_asked() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, key('D'));
    update(
        &mut st,
        Action::DeletePlanned {
            queue: QueueId::new("orders-dlq"),
            ids: vec!["1".into()],
            result: Err(BackendError::Refused(
                "a quorum queue with delivery limit 5".into(),
            )),
        },
    );
    assert!(st.dialog.is_none());
    let flash = &st.status.as_ref().unwrap().text;
    assert!(flash.contains("cannot delete from orders-dlq") && flash.contains("quorum"));

    let mut st = populated_with(|s| s.session.access = Access::Redrive);
    open_dlq(&mut st);
    let fx = update(&mut st, key('D'));
    assert!(fx.iter().all(|e| !matches!(e, Effect::PlanDelete { .. })));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Refused { .. })),
        "{fx:?}"
    );
}

/// `:copy QUEUE [PROFILE]` in the browser: the chosen messages go to be checked first; the
/// dialog names both ends, `y` runs it. An unknown profile or a missing queue name is said.
#[test]
fn copy_command_checks_then_asks() {
    let mut st = populated_with(|s| s.session.profiles = vec!["local".into(), "other".into()]);
    open_dlq(&mut st);
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    for (cmd, said) in [
        (":copy\r", "usage: :copy QUEUE [PROFILE]"),
        (":copy orders nowhere\r", "unknown profile \"nowhere\""),
    ] {
        for ch in cmd.chars() {
            let a = if ch == '\r' {
                code(KeyCode::Enter)
            } else {
                key(ch)
            };
            let fx = update(&mut st, a);
            assert!(fx.iter().all(|e| !matches!(e, Effect::PlanTransfer { .. })));
        }
        assert!(st.status.as_ref().unwrap().text.contains(said), "{cmd}");
    }
    let mut planned = None;
    for ch in ":copy repro other\r".chars() {
        let a = if ch == '\r' {
            code(KeyCode::Enter)
        } else {
            key(ch)
        };
        for e in update(&mut st, a) {
            if let Effect::PlanTransfer {
                messages,
                to,
                to_profile,
                moving,
                ..
            } = e
            {
                planned = Some((messages.len(), to, to_profile, moving));
            }
        }
    }
    assert_eq!(
        planned,
        Some((2, QueueId::new("repro"), Some("other".to_string()), false))
    );
    let ask = qdeck::tui::state::TransferAsk {
        source: QueueId::new("orders-dlq"),
        messages: hostile_messages().into_iter().take(2).collect(),
        to: QueueId::new("repro"),
        to_profile: Some("other".into()),
        moving: false,
        from_label: "local/orders-dlq (local)".into(),
        to_label: "other/repro (sqs)".into(),
        header_lines: vec![
            "header x-death → x-qdeck-x-death (2 message(s): no such attribute)".into(),
        ],
        delete_note: None,
        typed: None,
        plan: None,
    };
    transfer_planned(&mut st, ask.clone());
    let s = text(&draw(&st, 100, 24));
    assert!(
        s.contains("Copy 2 message(s) from local/orders-dlq (local)"),
        "{s}"
    );
    assert!(
        s.contains("other/repro (sqs)") && s.contains("x-qdeck-x-death"),
        "{s}"
    );
    snap("dialog_copy_80x24", &st, 80, 24);
    snap("dialog_copy_60x15", &st, 60, 15);
    let fx = update(&mut st, key('y'));
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Transfer(t) if t.messages.len() == 2)));
    assert!(st.op.is_some());
    // On a `browse` profile the command goes to the planner, which checks the tiers of both
    // profiles as `qdeck copy` does (it used to be refused here from this profile's alone).
    let mut st = populated_with(|s| {
        s.session.access = Access::Browse;
        s.session.profiles = vec!["local".into(), "other".into()];
    });
    open_dlq(&mut st);
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    let mut fx = Vec::new();
    for ch in ":copy repro other\r".chars() {
        let a = if ch == '\r' {
            code(KeyCode::Enter)
        } else {
            key(ch)
        };
        fx.extend(update(&mut st, a));
    }
    assert!(
        fx.iter().any(|e| matches!(e, Effect::PlanTransfer { .. })),
        "{fx:?}"
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::Refused { .. })));
    // Confirming that copy runs it: a copy to another profile only reads this one, so a
    // browse-tier profile may (it used to confirm, then do nothing at all).
    transfer_planned(&mut st, ask.clone());
    let fx = update(&mut st, key('y'));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Transfer(_))),
        "{fx:?}"
    );
    assert!(st.op.is_some());
    // Within this profile the copy writes here: refused, and never silently: the result line
    // and `:ops` say why, with the CLI's exit code for a refusal.
    update(
        &mut st,
        Action::OpDone(OpSummary::new("copied 2 message(s)", Verdict::Ok)),
    );
    assert!(st.op.is_none());
    let mut same = ask;
    same.to_profile = None;
    transfer_planned(&mut st, same);
    let fx = update(&mut st, key('y'));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Transfer(_))));
    assert!(st.op.is_none());
    let status = st.status.as_ref().unwrap().text.clone();
    assert!(
        status.contains("refused") && status.contains("browse"),
        "{status}"
    );
    let logged = st.ops_log.entries.last().expect("the refusal is in :ops");
    assert_eq!(logged.summary.exit_code, 5);
}

/// `A` selects what the browser shows: after a search, exactly the matches; again, none.
#[test]
fn select_all_takes_the_search_matches() {
    let mut st = populated();
    open_dlq(&mut st);
    for c in "/order".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.msgs.rows.len(), 1);
    update(&mut st, key('A'));
    let want: std::collections::BTreeSet<String> = st
        .msgs
        .rows
        .iter()
        .map(|&i| st.msgs.messages[i].id.clone())
        .collect();
    assert_eq!(st.msgs.marked, want);
    assert!(st.status.as_ref().unwrap().text.contains("1 selected"));
    update(&mut st, key('A'));
    assert!(st.msgs.marked.is_empty());
}

#[test]
fn search_copy_and_save() {
    let mut st = populated();
    open_dlq(&mut st);
    for c in "/order".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.msgs.rows, vec![0]);
    let fx = update(&mut st, key('y'));
    assert!(matches!(&fx[0], Effect::Copy(t) if t.contains("\"order\":42")));
    let fx = update(
        &mut st,
        Action::Key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL)),
    );
    let msgs = fx
        .iter()
        .find_map(|e| match e {
            Effect::Save { messages, .. } => Some(messages.clone()),
            _ => None,
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = qdeck::tui::app::save_jsonl(
        dir.path(),
        qdeck_model::domain::BrokerKind::Local,
        &QueueId::new("orders-dlq/../x"),
        &msgs,
    )
    .unwrap();
    assert!(r.contains("saved 1 messages"));
    let f = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // The export format: the same record `qdeck export` writes, read back as it.
    let line = std::fs::read_to_string(f).unwrap();
    let back = qdeck_engine::triage::transfer::Record::parse_line(line.trim()).unwrap();
    assert_eq!(
        back,
        qdeck_engine::triage::transfer::Record::from_message(
            &msgs[0],
            qdeck_model::domain::BrokerKind::Local,
            "orders-dlq/../x"
        )
    );
    assert_eq!(back.v, Some(qdeck_engine::triage::transfer::FORMAT));
}

#[test]
fn demo_keys_only_with_demo() {
    let mut st = populated();
    assert!(update(&mut st, key('+'))
        .iter()
        .all(|e| matches!(e, Effect::Visible(_))));
    // The demo runs from the start or not at all.
    let mut st = populated_with(|s| s.demo_workers = Some(1));
    assert!(update(&mut st, key('+')).contains(&Effect::AddWorker));
    assert!(update(&mut st, key('-')).contains(&Effect::RemoveWorker));
}

#[test]
fn keymap_overrides_from_config() {
    let mut o = std::collections::BTreeMap::new();
    o.insert("down".to_string(), vec!["n".to_string()]);
    let (km, problems) = qdeck::tui::keymap::KeyMap::new(&o);
    assert!(problems.is_empty());
    let mut st = populated_with(|s| s.keymap = km);
    update(&mut st, key('n'));
    assert_eq!(st.queues.cursor.sel, 1);
    update(&mut st, key('j'));
    assert_eq!(st.queues.cursor.sel, 1);
    update(&mut st, key('?'));
    let s = text(&draw(&st, 80, 40));
    assert!(s.contains("n  move down"), "{s}");
}

// ---------- against the real local broker ----------

fn local() -> (tempfile::TempDir, Arc<LocalHandle>) {
    let dir = tempfile::tempdir().unwrap();
    let h = LocalHandle::open(&dir.path().join("q.db")).unwrap();
    (dir, Arc::new(h))
}

#[tokio::test]
async fn poller_feeds_the_store_from_the_local_broker() {
    let (_d, h) = local();
    let b = &h.0;
    b.create_queue(
        "jobs",
        &QueueOptions {
            max_receives: Some(3),
            dlq: Some("jobs-dlq".into()),
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..5 {
        b.send_sync(
            "jobs",
            &OutgoingMessage {
                body: format!("m{i}").into_bytes(),
                ..Default::default()
            },
        )
        .unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut cfg = PollConfig::with_refresh(0.2);
    cfg.sweep_every = Duration::from_millis(200);
    let backend: Arc<dyn Backend> = h.clone();
    let handle = poller::spawn(backend, cfg, tx);
    let mut st = State::new(Store::with_defaults(), caps(), "t", "local");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while st
        .store
        .get(&QueueId::new("jobs"))
        .and_then(|e| e.latest.as_ref())
        .is_none()
    {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("poll in time")
            .expect("open");
        for e in update(&mut st, Action::Poll(ev)) {
            if let Effect::Visible(v) = e {
                handle.set_visible(v);
            }
        }
    }
    let e = st.store.get(&QueueId::new("jobs")).unwrap();
    assert_eq!(e.latest.as_ref().unwrap().depth, Some(5));
    assert_eq!(e.info.dlq, Some(QueueId::new("jobs-dlq")));
    assert_eq!(st.queues.rows.len(), 2);
    handle.stop();
}

/// A backend that never answers: the poller reports a timeout instead of hanging.
struct Hang;

#[async_trait::async_trait]
impl Backend for Hang {
    fn kind(&self) -> qdeck_model::domain::BrokerKind {
        qdeck_model::domain::BrokerKind::Local
    }
    fn capabilities(&self) -> Capabilities {
        caps()
    }
    async fn list_queues(&self) -> qdeck_backend::Result<Vec<QueueInfo>> {
        std::future::pending().await
    }
    async fn stats(&self, _: &[QueueId]) -> qdeck_backend::Result<StatsBatch> {
        std::future::pending().await
    }
    async fn consumers(&self, _: &QueueId) -> qdeck_backend::Result<Vec<Consumer>> {
        std::future::pending().await
    }
    async fn browse(&self, _: &QueueId, _: &BrowseRequest) -> qdeck_backend::Result<Page> {
        std::future::pending().await
    }
    async fn redrive(
        &self,
        _: &RedriveRequest,
        _: &qdeck_backend::OpProgress,
    ) -> qdeck_backend::Result<RedriveReport> {
        std::future::pending().await
    }
    async fn purge(
        &self,
        _: &QueueId,
        _: &qdeck_backend::OpProgress,
    ) -> qdeck_backend::Result<PurgeReport> {
        std::future::pending().await
    }
    fn api_calls(&self) -> &qdeck_backend::ApiCalls {
        static C: std::sync::OnceLock<qdeck_backend::ApiCalls> = std::sync::OnceLock::new();
        C.get_or_init(Default::default)
    }
}

/// `:copy` from a profile with access = "browse" (prod) to a writable one (local) is the
/// repro path the CLI allows: the console's planner gives the same answers as `qdeck copy`
/// (browse on the source, redrive on the target; a move needs full on the source).
#[tokio::test]
async fn copy_from_a_browse_profile_is_checked_like_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for p in ["prod", "local"] {
        std::fs::create_dir_all(d.join(p)).unwrap();
    }
    let prod = LocalHandle::open(&d.join("prod/q.db")).unwrap();
    prod.0
        .create_queue("orders.dlq", &QueueOptions::default())
        .unwrap();
    let m = OutgoingMessage {
        body: b"{}".to_vec(),
        ..Default::default()
    };
    prod.0.send_sync("orders.dlq", &m).unwrap();
    let local = LocalHandle::open(&d.join("local/q.db")).unwrap();
    local
        .0
        .create_queue("repro", &QueueOptions::default())
        .unwrap();
    let toml = format!(
        "default_profile = \"prod\"\naudit_log = \"{}\"\n[[profiles]]\n{}[[profiles]]\n{}",
        d.join("audit.log").display(),
        common::local_profile("prod", &d.join("prod/q.db"), "access = \"browse\""),
        common::local_profile("local", &d.join("local/q.db"), ""),
    );
    std::fs::write(d.join("config.toml"), toml).unwrap();
    let loaded = qdeck_model::config::load(&qdeck_model::config::LoadOptions {
        file: Some(d.join("config.toml")),
        profile: None,
        read_only: false,
    })
    .unwrap();
    let own = qdeck_engine::session::Session::open(loaded).await.unwrap();
    assert_eq!(own.gate.access(), Access::Browse);
    let src = QueueId::new("orders.dlq");
    let req = BrowseRequest {
        cursor: None,
        max: 10,
        force: false,
    };
    let msgs = own.gate.browse(&src, &req).await.unwrap().messages;
    let plan = |to: &str, profile: Option<&str>, moving: bool| {
        qdeck::tui::transfer::plan(
            &own,
            src.clone(),
            msgs.clone(),
            QueueId::new(to),
            profile.map(String::from),
            moving,
        )
    };
    let ask = plan("repro", Some("local"), false)
        .await
        .expect("prod → local");
    assert_eq!(ask.to_label, "local/repro (local)");
    // Onto prod itself, or a move (it deletes on prod): refused with the tier named.
    let e = plan("orders", None, false).await.unwrap_err().to_string();
    assert!(e.contains("copy needs access = \"redrive\""), "{e}");
    let e = plan("repro", Some("local"), true)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("delete needs access = \"full\""), "{e}");
}

/// The local broker, except that deleting by id always fails (the trait's default), as a
/// broker lost between the copies and the deletion would.
struct DeletesFail(Arc<LocalHandle>);

#[async_trait::async_trait]
impl Backend for DeletesFail {
    fn kind(&self) -> qdeck_model::domain::BrokerKind {
        qdeck_model::domain::BrokerKind::Local
    }
    fn capabilities(&self) -> Capabilities {
        caps()
    }
    async fn list_queues(&self) -> qdeck_backend::Result<Vec<QueueInfo>> {
        self.0.list_queues().await
    }
    async fn stats(&self, q: &[QueueId]) -> qdeck_backend::Result<StatsBatch> {
        self.0.stats(q).await
    }
    async fn consumers(&self, q: &QueueId) -> qdeck_backend::Result<Vec<Consumer>> {
        self.0.consumers(q).await
    }
    async fn browse(&self, q: &QueueId, r: &BrowseRequest) -> qdeck_backend::Result<Page> {
        self.0.browse(q, r).await
    }
    fn sender(&self) -> Option<&dyn qdeck_backend::Sender> {
        self.0.sender()
    }
    async fn redrive(
        &self,
        r: &RedriveRequest,
        p: &qdeck_backend::OpProgress,
    ) -> qdeck_backend::Result<RedriveReport> {
        self.0.redrive(r, p).await
    }
    async fn purge(
        &self,
        q: &QueueId,
        p: &qdeck_backend::OpProgress,
    ) -> qdeck_backend::Result<PurgeReport> {
        self.0.purge(q, p).await
    }
    fn api_calls(&self) -> &qdeck_backend::ApiCalls {
        self.0.api_calls()
    }
    fn deleter(&self) -> Option<&dyn qdeck_backend::DeleteById> {
        Some(self)
    }
}

/// Deletes by id, as far as the plan can tell; every deletion then fails, as a broker lost
/// mid-way would.
#[async_trait::async_trait]
impl qdeck_backend::DeleteById for DeletesFail {
    async fn delete_ids(
        &self,
        _queue: &QueueId,
        _ids: &[String],
        _progress: &qdeck_backend::OpProgress,
    ) -> qdeck_backend::Result<DeleteReport> {
        Err(BackendError::Unreachable("connection lost".into()))
    }
}

/// `:move` whose copies were confirmed but whose deletes failed: the console's status line,
/// its quit exit code and the audit log all say partial (the console said ok, exit 0, while
/// the audit said partial and `qdeck move` exited 3).
#[tokio::test]
async fn console_move_whose_deletes_fail_is_partial_like_the_cli() {
    let (dir, h) = local();
    for q in ["dlq", "repro"] {
        h.0.create_queue(q, &QueueOptions::default()).unwrap();
    }
    for body in [&b"a"[..], b"b"] {
        let m = OutgoingMessage {
            body: body.to_vec(),
            ..Default::default()
        };
        h.0.send_sync("dlq", &m).unwrap();
    }
    let backend: Arc<dyn Backend> = Arc::new(DeletesFail(h.clone()));
    let mut cfg = qdeck_model::config::parse_str("").unwrap();
    cfg.audit_log = Some(dir.path().join("audit.log").display().to_string());
    let loaded = qdeck_model::config::Loaded {
        config: cfg,
        file: None,
        profile: qdeck_model::config::Profile::default_local(),
        cli_read_only: false,
    };
    let session = qdeck_engine::session::Session::with_backend(loaded, backend.clone());
    let req = BrowseRequest {
        cursor: None,
        max: 10,
        force: false,
    };
    let messages = backend
        .browse(&QueueId::new("dlq"), &req)
        .await
        .unwrap()
        .messages;
    // Planned as the dialog opens (its count and notes), then that plan is what runs.
    let ask = qdeck::tui::transfer::plan(
        &session,
        QueueId::new("dlq"),
        messages,
        QueueId::new("repro"),
        None,
        true,
    )
    .await
    .unwrap();
    assert_eq!(
        (
            ask.messages.len(),
            ask.from_label.as_str(),
            ask.to_label.as_str()
        ),
        (2, "local/dlq (local)", "local/repro (local)")
    );
    assert!(ask.plan.is_some());
    // The console browses `dlq`, confirms the move, and is asked to quit while it runs.
    let mut st = listed_state(
        qdeck::tui::state::Setup::new("local", "local"),
        caps(),
        vec![qinfo("dlq", None), qinfo("repro", None)],
    );
    select(&mut st, "dlq");
    update(&mut st, key('b'));
    page(&mut st, "dlq", ask.messages.clone());
    transfer_planned(&mut st, (*ask).clone());
    let fx = update(&mut st, key('y'));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Transfer(_))),
        "{fx:?}"
    );
    update(&mut st, key('q'));
    update(&mut st, key('y'));
    assert!(st.exit.after_op && !st.exit.quit);

    let ask = *ask;
    let p = qdeck_backend::OpProgress::detached();
    let done = qdeck::tui::transfer::run(&session, ask, &p).await;
    assert_eq!(done.verdict, Verdict::Partial, "{}", done.text);

    update(&mut st, Action::OpDone(done));
    let status = st.status.as_ref().unwrap();
    assert_eq!(
        status.level,
        qdeck::tui::state::Level::Error,
        "{}",
        status.text
    );
    assert!(status.text.contains("exist twice"), "{}", status.text);
    let exit = st.exit.summary.as_ref().expect("quit after the move");
    assert_eq!(exit.exit_code, qdeck::cli::exit::PARTIAL);
    let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    for line in audit.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["result"], exit.verdict.audit_result(), "{line}");
    }
    assert_eq!(audit.lines().count(), 2, "{audit}");
}

#[tokio::test]
async fn hung_broker_becomes_an_error_not_a_freeze() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut cfg = PollConfig::with_refresh(0.1);
    cfg.timeout = Duration::from_millis(300);
    let _h = poller::spawn(Arc::new(Hang), cfg, tx);
    let mut got_error = false;
    for _ in 0..10 {
        match tokio::time::timeout(Duration::from_secs(60), rx.recv()).await {
            Ok(Some(PollEvent::Error(e))) => {
                assert!(matches!(e, PollError::Timeout(..)), "{e:?}");
                got_error = true;
                break;
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    assert!(got_error);
}

#[tokio::test]
async fn browse_and_purge_through_the_gate_on_the_local_broker() {
    let (dir, h) = local();
    h.0.create_queue("in", &QueueOptions::default()).unwrap();
    h.0.send_sync(
        "in",
        &OutgoingMessage {
            body: b"\x1b[2J\x1b]0;pwned\x07hello".to_vec(),
            ..Default::default()
        },
    )
    .unwrap();
    let backend: Arc<dyn Backend> = h.clone();
    let page = backend
        .browse(
            &QueueId::new("in"),
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: false,
            },
        )
        .await
        .unwrap();
    let mut st = State::new(Store::with_defaults(), caps(), "t", "local");
    update(
        &mut st,
        Action::Poll(PollEvent::Queues(backend.list_queues().await.unwrap())),
    );
    update(&mut st, key('b'));
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("in"),
            append: false,
            result: Ok(page),
        },
    );
    update(&mut st, code(KeyCode::Enter));
    let t = draw(&st, 80, 24);
    assert_no_controls(&t);
    assert!(text(&t).contains("␛[2J␛]0;pwned␇hello"));

    // Purge through the same gate the console uses, with a read-only profile first.
    let mut cfg = qdeck_model::config::parse_str("").unwrap();
    cfg.audit_log = Some(dir.path().join("audit.log").display().to_string());
    let mut profile = qdeck_model::config::Profile::default_local();
    profile.read_only = true;
    let loaded = qdeck_model::config::Loaded {
        config: cfg.clone(),
        file: None,
        profile: profile.clone(),
        cli_read_only: false,
    };
    let ro = qdeck_engine::session::Session::with_backend(loaded, backend.clone());
    let st_ro = qdeck::tui::app::initial_state(&ro, None);
    assert!(st_ro.read_only());
    assert!(ro
        .gate
        .purge(&QueueId::new("in"), &qdeck_backend::OpProgress::detached())
        .await
        .is_err());
    profile.read_only = false;
    let loaded = qdeck_model::config::Loaded {
        config: cfg,
        file: None,
        profile,
        cli_read_only: false,
    };
    let rw = qdeck_engine::session::Session::with_backend(loaded, backend.clone());
    let r = rw
        .gate
        .purge(&QueueId::new("in"), &qdeck_backend::OpProgress::detached())
        .await
        .unwrap();
    assert_eq!(r.purged, Some(1));
    let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    assert_eq!(audit.lines().count(), 2);
}

// ---------- end to end, in a pseudo-terminal ----------

/// `:profile NAME` in the real binary lists the new profile's queues, also with the fleet
/// view open under it (`--fleet`), and Esc goes back to the fleet. The old profile's figures
/// must not be taken for the new one's, nor the new poller's first list be dropped with them.
#[test]
fn pty_profile_switch_lists_the_new_profile() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    for (db, q) in [(&a, "alpha-q"), (&b, "beta-q")] {
        let h = LocalHandle::open(db).unwrap();
        h.0.create_queue(q, &QueueOptions::default()).unwrap();
    }
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nrefresh_secs = 0.5\n\n[[profiles]]\nname = \"pa\"\nkind = \"local\"\npath = {:?}\n\n\
             [[profiles]]\nname = \"pb\"\nkind = \"local\"\npath = {:?}\n",
            a.display().to_string(),
            b.display().to_string()
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();

    let mut c = Console::spawn(dir.path(), &["--config", cfg, "-p", "pa"], &[], 100, 30);
    c.wait_for("alpha-q");
    c.type_keys(":profile pb\r");
    c.wait_for("beta-q");
    c.type_keys(":q!\r");
    assert_eq!(c.wait_exit(Duration::from_secs(10)), 0);

    let mut c = Console::spawn(dir.path(), &["--config", cfg, "--fleet"], &[], 100, 30);
    c.wait_for("fleet 2 profiles");
    c.type_keys(":profile pb\r");
    // The fleet already shows beta-q: wait for pb's own table (no alpha-q), or the Esc below can
    // land before the switch and the switch then covers the fleet again.
    c.poll_until(Duration::from_secs(10), |s| {
        s.contains("beta-q") && !s.contains("alpha-q") && !s.contains("fleet 2 profiles")
    })
    .unwrap_or_else(|| panic!("pb's own table:\n{}", c.screen()));
    c.send(b"\x1b");
    let fleet = c
        .poll_until(Duration::from_secs(10), |s| {
            s.contains("fleet 2 profiles") && s.contains("alpha-q") && s.contains("beta-q")
        })
        .unwrap_or_else(|| panic!("back on the fleet with both rows:\n{}", c.screen()));
    assert!(!fleet.contains("connecting"), "{fleet}");
    c.type_keys(":q!\r");
    assert_eq!(c.wait_exit(Duration::from_secs(10)), 0);
}

/// Drives the real binary: open, filter, open a DLQ, open a message, quit; the terminal is
/// restored (alternate screen left) and no raw escape sequence from a body reaches it.
#[test]
fn pty_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    {
        let h = LocalHandle::open(&db).unwrap();
        h.0.create_queue(
            "orders",
            &QueueOptions {
                max_receives: Some(3),
                dlq: Some("orders-dlq".into()),
                ..Default::default()
            },
        )
        .unwrap();
        h.0.create_queue("payments", &QueueOptions::default())
            .unwrap();
        h.0.send_sync(
            "orders-dlq",
            &OutgoingMessage {
                body: b"poison \x1b]0;pwned\x07 \x1b[2J body".to_vec(),
                ..Default::default()
            },
        )
        .unwrap();
        // Enough for a redrive at 1 msg/s to be running when the user quits.
        for i in 0..30 {
            h.0.send_sync(
                "orders-dlq",
                &OutgoingMessage {
                    body: format!("dead {i}").into_bytes(),
                    ..Default::default()
                },
            )
            .unwrap();
        }
    }
    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("payments");
    c.type_keys("/ord\r");
    c.wait_for("queues /ord");
    c.send(b"d");
    c.wait_for("messages orders-dlq");
    c.wait_for("poison");
    c.send(b"\r");
    c.wait_for("body (text,");
    // Back to the list, open the redrive dialog: its key legend is on screen; cancel it.
    c.send(b"\x1b");
    c.wait_for("loaded");
    c.send(b"R");
    c.wait_for("y confirm");
    c.send(b"\x1b");
    // Help scrolled to its end shows the last : command.
    c.send(b"?");
    c.wait_for("keys of the message browser");
    c.send(b"G");
    c.wait_for(":queues");
    c.send(b"q");
    // A redrive at 1 msg/s, then q while it runs: qdeck asks first.
    c.send(b"R");
    c.wait_for("y confirm");
    c.send(b"\x1b[A");
    c.wait_for("1 msg/s");
    c.send(b"y");
    c.wait_for("redrive orders-dlq");
    c.send(b"q");
    c.wait_for("stop it and quit?");
    c.send(b"y");
    // The CLI's code for a cancelled redrive.
    assert_eq!(c.wait_exit(Duration::from_secs(10)), 130);
    std::thread::sleep(Duration::from_millis(200));
    let bytes = c.raw();
    let s = String::from_utf8_lossy(&bytes);
    // Terminal restored: the alternate screen was left after it was entered.
    let enter = s.find("\x1b[?1049h").expect("entered the alternate screen");
    let leave = s.rfind("\x1b[?1049l").expect("left the alternate screen");
    assert!(leave > enter);
    // The summary is printed on the restored terminal.
    let after = &s[leave..];
    assert!(
        after.contains("moved") && after.contains("cancelled"),
        "summary after the console: {after:?}"
    );
    // The body's escape sequences were shown, never sent: on the raw bytes the terminal
    // got, since the screen a test can read (vt100, ratatui's buffer) drops them anyway.
    let foreign = common::pty::foreign_controls(&bytes);
    assert!(
        foreign.is_empty(),
        "raw controls reached the terminal: {foreign:?}"
    );
    assert!(!s.contains("\x1b]0;pwned"));
    assert!(!s.contains("pwned\x07"));
    assert!(
        !s.contains("\x1b[2J body"),
        "the body's clear-screen reached the terminal"
    );
    assert!(
        s.contains("poison ␛]0;pwned␇ ␛[2J body"),
        "visible form on the terminal"
    );
}

#[test]
fn profile_command() {
    let mut st = populated_with(|s| s.session.profiles = vec!["local".into(), "prod".into()]);
    let run = |st: &mut State, cmd: &str| {
        update(st, key(':'));
        for c in cmd.chars() {
            update(st, key(c));
        }
        update(st, code(KeyCode::Enter))
    };
    // The file is re-read first: a profile added since start is seen without a restart.
    let fx = run(&mut st, "profile nope");
    assert!(fx.contains(&Effect::ReadProfiles(Some("nope".into()))));
    let fx = update(
        &mut st,
        Action::Profiles {
            names: Ok(vec!["local".into(), "prod".into()]),
            then: Some("nope".into()),
        },
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::SwitchProfile(_))));
    assert!(st.status.as_ref().unwrap().text.contains("unknown profile"));
    let fx = run(&mut st, "profile");
    assert!(fx.contains(&Effect::ReadProfiles(None)));
    update(
        &mut st,
        Action::Profiles {
            names: Ok(vec!["local".into(), "prod".into(), "staging".into()]),
            then: None,
        },
    );
    assert!(st.status.as_ref().unwrap().text.contains("staging"));
    let fx = update(
        &mut st,
        Action::Profiles {
            names: Ok(vec!["local".into(), "prod".into()]),
            then: Some("prod".into()),
        },
    );
    assert!(fx.contains(&Effect::SwitchProfile("prod".into())));
    let fx = run(&mut st, "bogus");
    // Kept in the history (for ↑ to fix the typo), and nothing else.
    assert!(fx
        .iter()
        .all(|e| matches!(e, Effect::Visible(_) | Effect::SaveHistory(_))));
    assert!(st.status.as_ref().unwrap().text.contains("unknown command"));
}

#[test]
fn workers_view_refreshes_on_the_tick() {
    let mut st = populated();
    update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    let now = st.now_ms;
    update(
        &mut st,
        Action::Consumers {
            queue: q.clone(),
            result: Ok(vec![]),
        },
    );
    let fx = update(&mut st, Action::Tick(now + 500));
    assert!(!fx.contains(&Effect::Consumers(q.clone())));
    let fx = update(&mut st, Action::Tick(now + 2500));
    assert!(fx.contains(&Effect::Consumers(q)));
}

// ---------- the console issue: every dialog and view at every size ----------

const SIZES: [(u16, u16); 3] = [(200, 50), (80, 24), (60, 15)];

/// A state with a redrive running (1,200 of 5,000 done).
fn running_redrive() -> State {
    let mut st = populated();
    start_redrive(
        &mut st,
        qdeck_backend::ProgressState {
            done: 1200,
            total: Some(5000),
            ..Default::default()
        },
    );
    st
}

/// Every dialog, with the text each one must never lose.
fn dialogs() -> Vec<(&'static str, State, &'static str)> {
    let mut out = Vec::new();
    let mut st = populated();
    select(&mut st, "orders");
    let fx = update(&mut st, key('P'));
    answer_purge(&mut st, &fx, 240);
    out.push(("purge", st, "y confirm"));
    let mut st = populated();
    select(&mut st, "orders-dlq");
    let fx = update(&mut st, key('R'));
    answer_plan(&mut st, &fx, 7, &["copies get a new MessageId"]);
    out.push(("redrive_origin", st, "y confirm"));
    let mut st = populated_with(|s| s.session.protected = true);
    select(&mut st, "payments");
    let fx = update(&mut st, key('P'));
    answer_purge(&mut st, &fx, 420);
    out.push(("purge_protected", st, "Esc cancels"));
    let mut side = caps();
    side.browse = BrowseEffect::SideEffect(
        "each browse requeues the messages it reads and raises their redelivery count, which \
         may push them to the dead-letter queue"
            .into(),
    );
    let mut st = populated_on(side, |_| {});
    select(&mut st, "orders");
    update(&mut st, key('b'));
    out.push(("browse_side_effect", st, "y confirm"));
    let mut st = running_redrive();
    update(&mut st, key('q'));
    out.push(("quit_running", st, "y stop"));
    out
}

#[test]
fn dialogs_keep_their_legend_at_every_size() {
    for (name, st, legend) in dialogs() {
        assert!(st.dialog.is_some(), "{name}: no dialog");
        for (w, h) in SIZES {
            let s = text(&draw(&st, w, h));
            assert!(
                s.contains(legend),
                "{name} at {w}x{h} lost {legend:?}:\n{s}"
            );
            if (w, h) != (200, 50) {
                insta::assert_snapshot!(format!("dialog_{name}_{w}x{h}"), s);
            }
        }
    }
}

#[test]
fn destructive_dialogs_never_confirm_on_enter() {
    for q in ["orders", "orders-dlq"] {
        for k in ['P', 'R'] {
            let mut st = populated();
            select(&mut st, q);
            update(&mut st, key(k));
            assert!(st.dialog.is_some());
            let fx = update(&mut st, code(KeyCode::Enter));
            assert!(run_of(&fx).is_none(), "{k} then Enter on {q} acted");
            assert!(st.dialog.is_none(), "Enter presses the focused Cancel");
        }
    }
    // Moving the focus to the confirm button is a deliberate second step.
    let mut st = populated();
    select(&mut st, "orders");
    let fx = update(&mut st, key('P'));
    answer_purge(&mut st, &fx, 3);
    update(&mut st, code(KeyCode::Right));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        matches!(run_of(&fx), Some(Planned::Purge { queue, .. }) if queue.id.as_str() == "orders"),
        "{fx:?}"
    );
}

#[test]
fn quit_during_an_operation_asks_then_exits_with_its_summary() {
    let mut st = running_redrive();
    update(&mut st, key('q'));
    assert!(!st.exit.quit, "q must ask first while a redrive runs");
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("1,200/5,000"), "{s}");
    assert!(s.contains("stop it and quit?"), "{s}");
    // n keeps it running.
    update(&mut st, key('n'));
    assert!(st.dialog.is_none() && !st.exit.quit && st.op.is_some());
    // Ctrl-C asks the same.
    update(
        &mut st,
        Action::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
    );
    assert!(matches!(
        st.dialog.as_ref().map(|d| &d.kind),
        Some(DialogKind::Quit)
    ));
    let fx = update(&mut st, key('y'));
    assert!(fx.contains(&Effect::CancelOp));
    assert!(!st.exit.quit, "waits for the summary");
    let summary = OpSummary::new(
        "redrive orders-dlq → origin: 1200 moved, 0 failed, 0 possibly duplicated (cancelled)",
        Verdict::Cancelled,
    );
    update(&mut st, Action::OpDone(summary.clone()));
    assert!(st.exit.quit);
    assert_eq!(st.exit.summary, Some(summary));
    // Nothing running: q quits at once.
    let mut st = populated();
    update(&mut st, key('q'));
    assert!(st.exit.quit && st.exit.summary.is_none());
}

fn consumers(now: i64) -> Vec<Consumer> {
    (1..=3)
        .map(|i| Consumer {
            queue: QueueId::new("orders"),
            tag: format!("worker-{i}-with-a-rather-long-consumer-tag-{i}"),
            peer: Some(format!("10.0.0.{i}:5{i}123 pid {i}")),
            prefetch: Some(10),
            ack_mode: AckMode::Manual,
            state: if i == 3 {
                "idle".into()
            } else {
                "active".into()
            },
            status: if i == 3 {
                WorkerState::Idle
            } else {
                WorkerState::Active
            },
            status_since_ms: None,
            holding: Some(i),
            processed: Some(100 * i),
            failed: Some(0),
            rate: Some(i as f64),
            last_seen_ms: Some(now - 1000 * i as i64),
        })
        .collect()
}

fn workers_state() -> State {
    let mut st = populated();
    select(&mut st, "orders");
    update(&mut st, key('w'));
    let now = st.now_ms;
    update(
        &mut st,
        Action::Consumers {
            queue: QueueId::new("orders"),
            result: Ok(consumers(now)),
        },
    );
    st
}

#[test]
fn filters_and_sorts_belong_to_their_view() {
    let mut st = workers_state();
    update(&mut st, key('/'));
    for c in "worker-2".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.workers.rows.len(), 1);
    assert!(
        !st.queues.filter.is_active(),
        "the home filter is untouched"
    );
    // s sorts the workers; 6 sorts by RATE.
    update(&mut st, code(KeyCode::Esc));
    assert!(
        !st.workers.filter.is_active(),
        "first Esc clears the filter"
    );
    assert_eq!(st.view(), View::Workers, "…and stays in the view");
    update(&mut st, key('6'));
    assert_eq!(st.workers.sort, Some(5));
    let first = &st.workers.list[st.workers.rows[0]];
    assert_eq!(first.rate, Some(3.0));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Queues);
    let s = text(&draw(&st, 80, 24));
    assert!(!s.contains("no queue matches"), "{s}");

    // The message browser: Esc clears the search first.
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, key('/'));
    update(&mut st, key('x'));
    update(&mut st, code(KeyCode::Enter));
    assert!(st.msgs.search.is_active());
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Messages);
    assert!(!st.msgs.search.is_active());
    update(&mut st, key('3'));
    assert_eq!(st.msgs.sort, Some(2));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Queues);
}

#[test]
fn help_is_per_view_and_scrolls_to_the_end() {
    let mut st = populated();
    update(&mut st, Action::Resize(80, 24));
    update(&mut st, key('?'));
    let top = text(&draw(&st, 80, 24));
    assert!(top.contains("keys of the queues"), "{top}");
    // A stray key does not close it.
    update(&mut st, key('z'));
    assert_eq!(st.view(), View::Help);
    update(&mut st, key('G'));
    let end = text(&draw(&st, 80, 24));
    assert!(end.contains(":redrive QUEUE"), "{end}");
    assert!(end.contains(":queues"), "{end}");
    insta::assert_snapshot!("help_80x24_end", end);
    for k in ['k', 'j'] {
        update(&mut st, key(k));
    }
    update(&mut st, key('q'));
    assert_eq!(st.view(), View::Queues);
    assert!(!st.exit.quit, "q closes help, it does not quit");

    // The workers view lists its own keys first.
    let mut st = workers_state();
    update(&mut st, key('?'));
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("keys of the workers"), "{s}");
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("help_workers_{w}x{h}"), text(&draw(&st, w, h)));
    }
}

#[test]
fn flashes_expire_and_never_cover_the_hints() {
    let mut st = populated();
    update(
        &mut st,
        Action::Notice(Ok("copied 107 bytes (OSC 52)".into())),
    );
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("copied 107 bytes"), "{s}");
    let footer = s.lines().nth(23).unwrap_or("");
    assert!(footer.contains("open"), "hints stay: {footer:?}");
    let now = st.now_ms;
    update(&mut st, Action::Tick(now + 5_000));
    assert!(
        st.status.is_none(),
        "an info flash is gone after a few seconds"
    );
    // Words never run together in the footer at any width.
    for (w, h) in SIZES {
        let s = text(&draw(&st, w, h));
        let footer = s.lines().nth(h as usize - 1).unwrap_or("");
        assert!(!footer.contains("copyupdated"), "{footer}");
        assert!(!footer.contains("agoupdated"), "{footer}");
    }
}

#[test]
fn narrow_tables_keep_names_apart_and_dlq_reasons() {
    let mut st = populated();
    let mut qs: Vec<QueueInfo> = st.store.entries().iter().map(|e| e.info.clone()).collect();
    qs.push(qinfo(
        "orders-processing-eu-west",
        Some("orders-processing-eu-west.dlq"),
    ));
    let mut d = qinfo("orders-processing-eu-west.dlq", None);
    d.is_dlq = true;
    qs.push(d);
    update(&mut st, Action::Poll(PollEvent::Queues(qs)));
    let s = text(&draw(&st, 60, 15));
    assert!(
        s.contains(".dlq"),
        "the name keeps its end at 60 columns:\n{s}"
    );
    // At 80 columns the DLQ browser keeps REASON and ORIGIN.
    let mut st = populated();
    open_dlq(&mut st);
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("REASON") && s.contains("ORIGIN"), "{s}");
    // Ctrl-W shows every column.
    update(
        &mut st,
        Action::Key(KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL)),
    );
    assert!(st.wide);
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("SIZE"), "{s}");
}

#[test]
fn every_view_at_every_size() {
    let mut views: Vec<(&str, State)> = vec![("queues", populated())];
    let mut st = populated();
    select(&mut st, "orders");
    update(&mut st, code(KeyCode::Enter));
    views.push(("detail", st));
    let mut st = populated();
    open_dlq(&mut st);
    views.push(("messages", st));
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    views.push(("message", st));
    views.push(("workers", workers_state()));
    for (name, st) in &views {
        for (w, h) in SIZES {
            let t = draw(st, w, h);
            assert_no_controls(&t);
            insta::assert_snapshot!(format!("view_{name}_{w}x{h}"), text(&t));
        }
    }
}

// ---------- edit and resend ----------

fn edited_copy() -> qdeck_engine::edit::Edited {
    qdeck_engine::edit::Edited {
        key: None,
        properties: Vec::new(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: br#"{"order":43}"#.to_vec(),
    }
}

#[test]
fn edit_key_hands_the_message_to_the_editor_and_asks_for_a_typed_target() {
    let mut st = populated();
    open_dlq(&mut st);
    let fx = update(&mut st, key('e'));
    let Some(Effect::Edit { queue, message }) =
        fx.iter().find(|e| matches!(e, Effect::Edit { .. }))
    else {
        panic!("no edit effect: {fx:?}");
    };
    assert_eq!(queue.as_str(), "orders-dlq");
    assert_eq!(message.id, "1");
    // The editor came back with a change: the dialog offers the origin first.
    update(
        &mut st,
        Action::Edited {
            queue: queue.clone(),
            original: message.clone(),
            result: Ok(qdeck_engine::edit::EditorOutcome::Changed(edited_copy())),
        },
    );
    let d = st.dialog.as_ref().expect("target dialog");
    assert!(d.needs_name, "always a typed confirmation");
    let s = text(&draw(&st, 100, 30));
    assert!(s.contains("edit and resend") && s.contains("orders"), "{s}");
    assert!(s.contains("1 removed"), "x-evil was dropped: {s}");
    // Enter and y do not confirm until the target's name is typed.
    for a in [code(KeyCode::Enter), key('y')] {
        let fx = update(&mut st, a);
        assert!(!fx.iter().any(|e| matches!(e, Effect::Resend { .. })));
    }
    assert!(st.dialog.is_some());
    update(&mut st, code(KeyCode::Backspace));
    for c in "orders".chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    let resend = fx
        .iter()
        .find_map(|e| match e {
            Effect::Resend {
                source,
                original,
                edited,
                target,
            } => Some((source, original, edited, target)),
            _ => None,
        })
        .expect("resend after the typed name");
    assert_eq!(resend.0.as_str(), "orders-dlq");
    assert_eq!(resend.1.id, "1");
    assert_eq!(resend.2.body, br#"{"order":43}"#.to_vec());
    assert_eq!(resend.3.as_str(), "orders", "origin of the dead letter");
    // The result reloads the browser.
    let fx = update(
        &mut st,
        Action::Resent {
            queue: QueueId::new("orders-dlq"),
            done: OpSummary::new("sent the edited copy", Verdict::Ok),
        },
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::Browse { .. })));
}

#[test]
fn edit_tab_picks_another_queue_and_nothing_is_sent_without_a_change() {
    let mut st = populated();
    open_dlq(&mut st);
    let m = Box::new(hostile_messages().remove(0));
    update(
        &mut st,
        Action::Edited {
            queue: QueueId::new("orders-dlq"),
            original: m.clone(),
            result: Ok(qdeck_engine::edit::EditorOutcome::Changed(edited_copy())),
        },
    );
    update(&mut st, code(KeyCode::Tab));
    let Some(DialogKind::Edit {
        targets, target, ..
    }) = st.dialog.as_ref().map(|d| &d.kind)
    else {
        panic!("dialog")
    };
    let picked = targets[*target].clone();
    assert_ne!(picked.as_str(), "orders");
    for c in picked.as_str().chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Resend { target, .. } if *target == picked)));

    for (result, says) in [
        (
            Ok(qdeck_engine::edit::EditorOutcome::Unchanged),
            "unchanged",
        ),
        (
            Err("the editor \"vi\" exited with exit status: 1; nothing was sent".to_string()),
            "nothing was sent",
        ),
    ] {
        update(
            &mut st,
            Action::Edited {
                queue: QueueId::new("orders-dlq"),
                original: m.clone(),
                result,
            },
        );
        assert!(st.dialog.is_none());
        assert!(st.status.as_ref().unwrap().text.contains(says));
    }
    // Below tier redrive the key only flashes.
    let mut st = populated_with(|s| s.session.access = Access::Browse);
    open_dlq(&mut st);
    let fx = update(&mut st, key('e'));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Edit { .. })));
    assert!(st.status.as_ref().unwrap().text.contains("redrive"));
}

/// The console in an 80×24 pseudo-terminal on a local broker file (profile `e2e`, refreshed
/// every 0.5 s), with extra environment.
fn local_console(dir: &std::path::Path, db: &std::path::Path, env: &[(&str, &str)]) -> Console {
    let cfg = dir.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nrefresh_secs = 0.5\n\n[[profiles]]\nname = \"e2e\"\nkind = \"local\"\npath = {:?}\n",
            db.display().to_string()
        ),
    )
    .unwrap();
    Console::spawn(dir, &["--config", cfg.to_str().unwrap()], env, 80, 24)
}

fn browse_local(h: &LocalHandle, q: &str) -> Vec<Message> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(h.browse(
        &QueueId::new(q),
        &BrowseRequest {
            cursor: None,
            max: 100,
            force: false,
        },
    ))
    .unwrap()
    .messages
}

/// The real console in a pseudo-terminal, with a non-interactive "editor": the screen is
/// given back while it runs, and the edited copy replaces the original.
#[test]
fn pty_edit_and_resend() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    {
        let h = LocalHandle::open(&db).unwrap();
        h.0.create_queue("jobs", &QueueOptions::default()).unwrap();
        h.0.send_sync(
            "jobs",
            &OutgoingMessage {
                body: b"hello world".to_vec(),
                headers: vec![("x-drop".into(), "1".into())],
                ..Default::default()
            },
        )
        .unwrap();
    }
    let mut c = local_console(
        dir.path(),
        &db,
        &[("VISUAL", "sed -i -e s/hello/HELLO/ -e /^x-drop/d")],
    );
    c.wait_for("jobs");
    c.send(b"b");
    c.wait_for("hello world");
    let before = c.raw().len();
    c.send(b"e");
    c.wait_for("edit and resend");
    // The alternate screen was left for the editor and entered again.
    let during = c.raw()[before..].to_vec();
    let find = |pat: &[u8]| during.windows(pat.len()).position(|w| w == pat);
    let left = find(b"\x1b[?1049l").expect("left the alternate screen");
    let back = find(b"\x1b[?1049h").expect("came back");
    assert!(left < back);
    for ch in "jobs".bytes() {
        c.send(&[ch]);
    }
    c.send(b"\r");
    c.wait_for("sent the edited copy");
    c.wait_for("HELLO world");
    c.quit();
    let h = LocalHandle::open(&db).unwrap();
    let msgs = browse_local(&h, "jobs");
    assert_eq!(msgs.len(), 1, "original deleted: {msgs:?}");
    assert_eq!(msgs[0].body, b"HELLO world");
    assert!(
        !msgs[0].headers.iter().any(|(k, _)| k == "x-drop"),
        "{msgs:?}"
    );
}

/// `orders-dlq` on a local broker at `db`: five messages dead-lettered from `orders` (one
/// reason, a group) and two sent to it directly (no reason, a second group).
fn seed_dead_letters(db: &std::path::Path) {
    let h = LocalHandle::open(db).unwrap();
    h.0.create_queue(
        "orders",
        &QueueOptions {
            max_receives: Some(1),
            dlq: Some("orders-dlq".into()),
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..5 {
        h.0.send_sync(
            "orders",
            &OutgoingMessage {
                body: format!("order {i}").into_bytes(),
                ..Default::default()
            },
        )
        .unwrap();
    }
    let got = h.0.receive("orders", "w1", 5, None).unwrap();
    let receipts: Vec<String> = got.iter().map(|l| l.receipt.clone()).collect();
    h.0.nack("orders", "w1", &receipts, Duration::ZERO).unwrap();
    // Two more put straight into the DLQ: no recorded reason, a second group.
    for i in 0..2 {
        h.0.send_sync(
            "orders-dlq",
            &OutgoingMessage {
                body: format!("manual {i}").into_bytes(),
                ..Default::default()
            },
        )
        .unwrap();
    }
    assert_eq!(browse_local(&h, "orders-dlq").len(), 7);
}

/// Reasons on a real DLQ: groups from the local broker's dead-letter reasons, Enter shows
/// exactly the group's messages.
#[test]
fn pty_reasons_view_on_the_local_broker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    seed_dead_letters(&db);
    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("orders-dlq");
    c.send(b"/");
    for ch in "dlq\r".bytes() {
        c.send(&[ch]);
    }
    c.send(b"F");
    c.wait_for("grouped all 7");
    c.wait_for("2 groups");
    // The largest group is first: the five dead-lettered ones.
    c.send(b"\r");
    c.wait_for("group:");
    c.wait_for("5 loaded");
    c.wait_for("order 4");
    c.send(b"\x1b");
    c.wait_for("reasons orders-dlq");
    c.quit();
}

/// Incident flow on a real DLQ: reasons, Enter on the largest group, `A` selects its
/// messages, `D` plans and asks, `y` deletes exactly them; the other group stays, and the
/// audit log has the line.
#[test]
fn pty_delete_a_reasons_group_on_the_local_broker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    seed_dead_letters(&db);
    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("orders-dlq");
    c.type_keys("/dlq\r");
    c.send(b"F");
    c.wait_for("grouped all 7");
    c.send(b"\r");
    c.wait_for("5 loaded");
    c.send(b"A");
    c.wait_for("5 selected");
    c.send(b"D");
    c.wait_for("About to delete 5 chosen message(s) from orders-dlq");
    c.send(b"y");
    c.wait_for("deleted 5, already gone 0");
    c.quit();
    let h = LocalHandle::open(&db).unwrap();
    let left: Vec<String> = browse_local(&h, "orders-dlq")
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(left, vec!["manual 0".to_string(), "manual 1".to_string()]);
    let audit = std::fs::read_to_string(dir.path().join("s/qdeck/audit.log")).unwrap_or_default();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"delete\"") && l.contains("\"deleted\":5")),
        "{audit}"
    );
    // A console started later shows it in `:ops`: the audit log is the one record.
    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("orders-dlq");
    c.type_keys(":ops\r");
    c.wait_for("earlier from the audit log");
    c.wait_for("delete orders-dlq by");
    c.quit();
}

/// `:copy QUEUE PROFILE` and `:move QUEUE` from the browser on real local brokers: the copy
/// lands on the other profile's queue and the source keeps every message; the move empties the
/// source into a queue of the same profile; both audited.
#[test]
fn pty_copy_to_another_profile_and_move_within_one() {
    let dir = tempfile::tempdir().unwrap();
    let (db_a, db_b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    seed_dead_letters(&db_a);
    LocalHandle::open(&db_a)
        .unwrap()
        .0
        .create_queue("orders-replay", &QueueOptions::default())
        .unwrap();
    LocalHandle::open(&db_b)
        .unwrap()
        .0
        .create_queue("repro", &QueueOptions::default())
        .unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nrefresh_secs = 0.5\n\n[[profiles]]\nname = \"a\"\nkind = \"local\"\npath = {:?}\n\n[[profiles]]\nname = \"b\"\nkind = \"local\"\npath = {:?}\n",
            db_a.display().to_string(),
            db_b.display().to_string()
        ),
    )
    .unwrap();
    let mut c = Console::spawn(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "-p", "a"],
        &[],
        100,
        30,
    );
    c.wait_for("orders-dlq");
    c.type_keys("/dlq\r");
    c.send(b"b");
    c.wait_for("7 loaded");
    c.send(b"A");
    c.wait_for("7 selected");
    c.type_keys(":copy repro b\r");
    // The plan's own question, as `qdeck copy` asks it.
    c.wait_for("About to copy 7 message(s) from a/orders-dlq (local) to b/repro");
    c.send(b"y");
    c.wait_for("copy → b/repro: sent 7, failed 0");
    // A copy keeps the selection (a move or a delete clears it).
    c.type_keys(":move orders-replay\r");
    c.wait_for("About to move 7 message(s) from a/orders-dlq (local) to");
    c.wait_for("each original is deleted after the target confirmed its copy");
    c.send(b"y");
    c.wait_for("originals deleted 7, already gone 0");
    c.quit();
    let bodies = |db: &std::path::Path, q: &str| {
        let mut v: Vec<String> = browse_local(&LocalHandle::open(db).unwrap(), q)
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect();
        v.sort();
        v
    };
    let all: Vec<String> = {
        let mut v: Vec<String> = (0..5)
            .map(|i| format!("order {i}"))
            .chain((0..2).map(|i| format!("manual {i}")))
            .collect();
        v.sort();
        v
    };
    assert_eq!(bodies(&db_b, "repro"), all, "the copy on profile b");
    assert_eq!(bodies(&db_a, "orders-replay"), all, "the move on profile a");
    assert!(
        bodies(&db_a, "orders-dlq").is_empty(),
        "the move emptied the DLQ"
    );
    let audit = std::fs::read_to_string(dir.path().join("s/qdeck/audit.log")).unwrap_or_default();
    for action in ["\"copy\"", "\"move\""] {
        assert!(
            audit
                .lines()
                .any(|l| l.contains(action) && l.contains("\"sent\":7")),
            "{action}: {audit}"
        );
    }
}

// ---------- reasons view ----------

/// A group first seen an hour and last seen a minute before `now` (the state's clock, so the
/// "ago" columns do not drift with the date the tests run on).
fn group(
    now: i64,
    sig: &str,
    origin: &str,
    count: u64,
    redriven: u64,
) -> qdeck_engine::triage::Group {
    qdeck_engine::triage::Group {
        signature: sig.into(),
        origin: Some(origin.into()),
        count,
        first_seen_ms: Some(now - 3_600_000),
        last_seen_ms: Some(now - 60_000),
        sample_id: "1".into(),
        redriven,
    }
}

/// A scan's progress re-ranks the groups by count: the cursor follows its group, so Enter
/// opens the group the user was on.
#[test]
fn the_reasons_cursor_follows_its_group_as_the_scan_reranks() {
    let mut st = populated();
    select(&mut st, "orders");
    update(&mut st, key('F'));
    let now = st.now_ms;
    let q = QueueId::new("orders-dlq");
    let progress = |a: u64, b: u64| Action::ReasonsProgress {
        queue: QueueId::new("orders-dlq"),
        groups: {
            let mut g = vec![
                group(now, "timeout", "orders", a, 0),
                group(now, "max receives", "orders", b, 0),
            ];
            g.sort_by_key(|x| std::cmp::Reverse(x.count));
            g
        },
        scanned: a + b,
        total: None,
    };
    update(&mut st, progress(50, 10));
    update(&mut st, key('j'));
    assert_eq!(
        st.reasons.groups[st.reasons.cursor.sel].signature,
        "max receives"
    );
    update(&mut st, progress(60, 90));
    assert_eq!(st.reasons.cursor.sel, 0, "its group moved up");
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::BrowseGroup {
            queue: q,
            signature: "max receives".into(),
            origin: Some("orders".into()),
        }),
        "{fx:?}"
    );
}

#[test]
fn reasons_view_groups_progress_cancel_and_drill_in() {
    let mut st = populated();
    select(&mut st, "orders");
    // On a source queue, F groups its DLQ.
    let fx = update(&mut st, key('F'));
    assert!(
        fx.contains(&Effect::Reasons(QueueId::new("orders-dlq"))),
        "{fx:?}"
    );
    assert_eq!(st.view(), View::Reasons);
    let now = st.now_ms;
    reasons_progress(
        &mut st,
        vec![
            group(
                now,
                "rejected: order <n> invalid \x1b[2J",
                "orders",
                1200,
                3,
            ),
            group(now, "max receives", "orders", 7, 0),
        ],
        1207,
        Some(48_553),
    );
    let t = draw(&st, 100, 20);
    assert_no_controls(&t);
    let s = text(&t);
    assert!(s.contains("scanning 1,207 of 48,553"), "{s}");
    assert!(s.contains("Esc cancels"), "{s}");
    assert!(s.contains("1,200") && s.contains("↺3"), "{s}");
    assert!(
        s.contains("order <n> invalid ␛[2J"),
        "broker text escaped: {s}"
    );
    // Esc stops the scan and keeps the view; a second Esc leaves.
    let fx = update(&mut st, code(KeyCode::Esc));
    assert!(fx.contains(&Effect::CancelReasons));
    assert_eq!(st.view(), View::Reasons);
    assert!(!st.reasons.scanning);
    // Late pictures of the cancelled scan change nothing.
    reasons_progress(&mut st, vec![], 2000, Some(48_553));
    assert_eq!(st.reasons.groups.len(), 2);
    snap("reasons_100x20", &st, 100, 20);
    // Enter on the second group opens its messages.
    update(&mut st, key('j'));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::BrowseGroup {
            queue: QueueId::new("orders-dlq"),
            signature: "max receives".into(),
            origin: Some("orders".into()),
        }),
        "{fx:?}"
    );
    assert_eq!(st.view(), View::Messages);
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: hostile_messages(),
                next: None,
                effect_note: None,
            }),
        },
    );
    assert!(text(&draw(&st, 100, 20)).contains("group: max receives"));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Reasons);
    update(&mut st, code(KeyCode::Esc));
    assert_ne!(st.view(), View::Reasons);
}

#[test]
fn reasons_view_final_wording_and_tier() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key(':'));
    for c in "reasons".chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(fx.contains(&Effect::Reasons(QueueId::new("orders-dlq"))));
    let report = qdeck_engine::triage::ReasonsReport {
        scan: qdeck_engine::triage::ScanSummary {
            queue: QueueId::new("orders-dlq"),
            scanned: 5000,
            total: Some(48_553),
            total_exact: true,
            stopped: qdeck_engine::triage::StopReason::Limit,
            effect_note: None,
            elapsed_ms: 900,
        },
        groups: vec![group(st.now_ms, "max receives", "orders", 5000, 0)],
    };
    update(
        &mut st,
        Action::ReasonsDone {
            queue: QueueId::new("orders-dlq"),
            result: Ok(report),
        },
    );
    let s = text(&draw(&st, 120, 20));
    assert!(
        s.contains("grouped 5,000 of 48,553"),
        "says it is a sample: {s}"
    );
    // One group is "1 group", and the count and the note are two phrases, not one run-on.
    assert!(
        s.contains("1 group · grouped 5,000 of 48,553"),
        "title wording: {s}"
    );
    // At tier stats no scan starts.
    let mut st = populated_with(|s| s.session.access = Access::Stats);
    select(&mut st, "orders-dlq");
    let fx = update(&mut st, key('F'));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Reasons(_))));
    assert_eq!(st.view(), View::Queues);
}

#[test]
fn fleet_view_shows_each_profile_its_error_and_staleness() {
    let st = fleet_state();
    snap("fleet_120x10", &st, 120, 10);
    snap("fleet_80x24", &st, 80, 24);
    assert_no_controls(&draw(&st, 120, 10));
}

/// Counts in titles agree with their noun: one profile is "1 profile".
#[test]
fn fleet_title_says_one_profile_in_the_singular() {
    let mut st = populated();
    update(&mut st, Action::FleetStarted(vec!["local".to_string()]));
    let now = st.now_ms;
    update(
        &mut st,
        Action::Fleet(qdeck_engine::fleet::FleetRow {
            profile: "local".into(),
            kind: Some(qdeck_model::domain::BrokerKind::Local),
            updated_ms: Some(now),
            refresh_secs: 5.0,
            ..Default::default()
        }),
    );
    assert_eq!(st.view(), View::Fleet);
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("fleet 1 profile "), "{s}");
    assert!(!s.contains("1 profiles"), "{s}");
}

#[test]
fn fleet_enter_opens_a_profile_and_esc_comes_back() {
    let mut st = fleet_state();
    // The current profile: its queue table is already loaded, Esc returns to the fleet.
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Queues);
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet);
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet, "Esc on the fleet stays");
    // Another profile goes through the profile switch.
    update(&mut st, key('j'));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::SwitchProfile("rabbit-eu".into())),
        "{fx:?}"
    );
    // `:fleet` starts the pollers; on an open fleet it reads the profile list again (the
    // executor restarts the pollers only when the list changed).
    let mut fresh = populated();
    for c in ":fleet".chars() {
        update(&mut fresh, key(c));
    }
    let fx = update(&mut fresh, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::StartFleet(fresh.alerts.book.clone())),
        "{fx:?}"
    );
    for c in ":fleet".chars() {
        update(&mut st, key(c));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::StartFleet(st.alerts.book.clone())),
        "{fx:?}"
    );
    assert_eq!(st.view(), View::Fleet);
    // A profile added to the file joins; the rows of the others keep their figures.
    let names: Vec<String> = ["local", "rabbit-eu", "sqs-prod", "added"]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    update(&mut st, Action::FleetStarted(names));
    let fl = st.fleet.as_ref().unwrap();
    assert_eq!(fl.rows.len(), 4);
    assert_eq!(fl.rows[0].depth, Some(740), "local kept its figures");
    assert_eq!(fl.rows[3].profile, "added");
    assert!(text(&draw(&st, 80, 24)).contains("added"));
}

#[test]
fn fire_view_ranks_every_profiles_queues_by_severity() {
    let st = fire_state();
    snap("fire_80x24", &st, 80, 24);
    snap("fire_120x35", &st, 120, 35);
    assert_no_controls(&draw(&st, 120, 35));
    let fl = st.fleet.as_ref().unwrap();
    let rows = fl.fire_rows(st.now_ms);
    let order: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.profile(), r.queue().map_or("", QueueId::as_str)))
        .collect();
    // The broker that fails and the one gone stale first, then the queues by severity.
    assert_eq!(order[0], ("rabbit-eu", ""));
    assert_eq!(order[1], ("sqs-prod", ""));
    assert_eq!(order[2], ("local", "orders-dlq"));
    assert_eq!(order[3].0, "sqs-prod");
    assert_eq!(order.len(), 7, "every kept queue of every profile");
    // The fleet row shows the SQS cost per hour, blank for the other kinds.
    let mut fleet = fire_state();
    update(&mut fleet, code(KeyCode::Esc));
    assert_eq!(fleet.view(), View::Fleet);
    let s = text(&draw(&fleet, 120, 10));
    assert!(s.contains("$/h") && s.contains("0.0123"), "{s}");
    snap("fleet_cost_120x10", &fleet, 120, 10);
}

#[test]
fn help_over_the_fire_view_gives_the_formula() {
    let mut st = fire_state();
    update(&mut st, key('?'));
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("keys of the on-fire view"), "{s}");
    assert!(s.contains("severity (SEV) = 40·G + 30·A + 30·S"), "{s}");
}

#[test]
fn fire_view_filters_opens_and_comes_back() {
    let mut st = fire_state();
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet);
    update(&mut st, key('f'));
    assert_eq!(st.view(), View::Fire);
    // `/` filters on profile/queue as you type; Esc clears it, a second Esc leaves.
    update(&mut st, key('/'));
    for c in "sqs-prod/".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    let n = st.fleet.as_ref().unwrap().fire_rows(st.now_ms).len();
    assert_eq!(n, 2);
    let s = text(&draw(&st, 120, 35));
    assert!(!s.contains("orders-dlq"), "{s}");
    // Enter on another profile's queue goes through the profile switch.
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::SwitchProfile("sqs-prod".into())),
        "{fx:?}"
    );
    update(&mut st, code(KeyCode::Esc));
    // The two profiles that do not answer rank first, then the five queues.
    assert_eq!(st.fleet.as_ref().unwrap().fire_rows(st.now_ms).len(), 7);
    // Enter on a queue of the current profile opens its detail; Esc comes back here.
    update(&mut st, key('j'));
    update(&mut st, key('j'));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::SwitchProfile(_))),
        "{fx:?}"
    );
    assert_eq!(st.view(), View::Detail);
    assert_eq!(st.focus, Some(QueueId::new("orders-dlq")));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fire);
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet);
    // `:fire` before the fleet runs starts the pollers and opens the view over the fleet.
    let mut fresh = populated();
    for c in ":fire".chars() {
        update(&mut fresh, key(c));
    }
    let fx = update(&mut fresh, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::StartFleet(fresh.alerts.book.clone())),
        "{fx:?}"
    );
    assert_eq!(fresh.stack, vec![View::Fleet, View::Fire]);
}

/// Two local profiles and a RabbitMQ nobody listens on, each on its own poller: the local
/// rows get figures while the dead one reports its error.
#[tokio::test(flavor = "multi_thread")]
async fn fleet_pollers_answer_around_a_dead_broker() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (db, n) in [("east.db", 3), ("west.db", 1)] {
        let h = LocalHandle::open(&d.join(db)).unwrap();
        h.0.create_queue("jobs", &QueueOptions::default()).unwrap();
        for i in 0..n {
            h.sender()
                .expect("this backend publishes")
                .send(
                    &QueueId::new("jobs"),
                    OutgoingMessage {
                        body: format!("m{i}").into_bytes(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
        }
    }
    let cfg = d.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[profiles]]\nname = \"east\"\nkind = \"local\"\npath = \"{}\"\nrefresh_secs = 0.5\n\
             [[profiles]]\nname = \"gone\"\nkind = \"rabbitmq\"\namqp_url = \"amqp://guest@127.0.0.1:1/%2f\"\nmanagement_url = \"http://127.0.0.1:1\"\nrefresh_secs = 0.5\n\
             [[profiles]]\nname = \"west\"\nkind = \"local\"\npath = \"{}\"\nrefresh_secs = 0.5\n",
            d.join("east.db").display(),
            d.join("west.db").display()
        ),
    )
    .unwrap();
    let names: Vec<String> = ["east", "gone", "west"]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let _fleet = qdeck_engine::fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        },
        &names,
        Vec::new(),
        Default::default(),
        tx,
    );
    let mut rows = std::collections::HashMap::new();
    let got = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = rx.recv().await {
            rows.insert(r.profile.clone(), r);
            let live = |p: &str| rows.get(p).is_some_and(|r| r.updated_ms.is_some());
            // Two polls of each local profile, so "growing" is known.
            if live("east")
                && live("west")
                && rows["east"].growing.is_some()
                && rows.get("gone").is_some_and(|r| r.error.is_some())
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(got, Ok(true), "{rows:?}");
    assert_eq!(rows["east"].depth, Some(3));
    assert_eq!(rows["west"].depth, Some(1));
    assert_eq!(
        rows["east"].kind,
        Some(qdeck_model::domain::BrokerKind::Local)
    );
    assert!(rows["gone"].updated_ms.is_none());
    // The on-fire view gets each live profile's queues with the configured age threshold.
    let east = &rows["east"];
    assert_eq!(east.fire.len(), 1);
    assert_eq!(
        (east.fire[0].queue.as_str(), east.fire[0].depth),
        ("jobs", Some(3))
    );
    assert_eq!(east.max_age_secs, 300.0);
    assert!(rows["gone"].fire.is_empty());
    assert_eq!(east.usd_per_hour, None, "only SQS profiles are priced");
}

/// An SQS profile on moto: its fleet row prices the calls it made (`$/h`), a local one does
/// not.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SQS_ENDPOINT"]
async fn fleet_prices_sqs_calls() {
    let ep = common::broker_var("QDECK_TEST_SQS_ENDPOINT", "moto");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prefix = format!("qdfire{}", std::process::id());
    let cfg = d.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[profiles]]\nname = \"aws\"\nkind = \"sqs\"\nregions = [\"us-east-1\"]\n\
             endpoint_url = \"{ep}\"\nqueue_prefix = \"{prefix}\"\nrefresh_secs = 0.5\n\
             [[profiles]]\nname = \"here\"\nkind = \"local\"\npath = \"{}\"\nrefresh_secs = 0.5\n",
            d.join("here.db").display()
        ),
    )
    .unwrap();
    let names: Vec<String> = vec!["aws".into(), "here".into()];
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let _fleet = qdeck_engine::fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        },
        &names,
        Vec::new(),
        Default::default(),
        tx,
    );
    let mut rows = std::collections::HashMap::new();
    let got = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = rx.recv().await {
            rows.insert(r.profile.clone(), r);
            let priced = |p: &str| rows.get(p).is_some_and(|r| r.calls_per_min.is_some());
            if priced("aws") && priced("here") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(got, Ok(true), "{rows:?}");
    let aws = &rows["aws"];
    assert!(aws.error.is_none(), "{aws:?}");
    assert!(aws.calls_per_min.unwrap() > 0.0, "{aws:?}");
    assert!(aws.usd_per_hour.unwrap() > 0.0, "{aws:?}");
    println!(
        "aws: {:.0} calls/min, ${:.6}/h",
        aws.calls_per_min.unwrap(),
        aws.usd_per_hour.unwrap()
    );
    assert_eq!(rows["here"].usd_per_hour, None);
}

/// The status line says what refreshing costs: calls per minute, and dollars per hour where
/// the broker bills per call.
#[test]
fn status_line_shows_the_refresh_budget() {
    use qdeck_engine::budget::Budget;
    let mut st = populated();
    update(
        &mut st,
        Action::Poll(PollEvent::ApiRate(Budget {
            calls_per_min: 126.0,
            usd_per_hour: Some(0.003024),
        })),
    );
    let screen = text(&draw(&st, 120, 30));
    assert!(
        screen.contains("126 calls/min · ≈$0.0030/h"),
        "status line: {screen}"
    );
    update(
        &mut st,
        Action::Poll(PollEvent::ApiRate(Budget {
            calls_per_min: 12.0,
            usd_per_hour: None,
        })),
    );
    let screen = text(&draw(&st, 120, 30));
    assert!(screen.contains("12 calls/min"), "{screen}");
    assert!(
        !screen.contains("/h"),
        "no price where calls are not billed"
    );
}

/// Leaving the on-fire view for the queue table (`:queues`) reads `fleet › queues`; a queue
/// opened from the on-fire view reads `fleet › on fire › QUEUE`, and help over the fleet
/// `fleet › help`.
#[test]
fn header_breadcrumb_follows_the_fleet_and_on_fire_views() {
    let header = |st: &State| {
        text(&draw(st, 120, 35))
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let mut st = fire_state();
    assert!(header(&st).contains("fleet › on fire"), "{}", header(&st));
    for c in ":queues".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.stack, vec![View::Fleet, View::Queues]);
    let h = header(&st);
    assert!(
        h.contains("fleet › queues") && !h.contains("on fire"),
        "{h}"
    );
    // Into a queue of this profile from the on-fire view (past the two broker rows), and back.
    let mut st = fire_state();
    update(&mut st, key('j'));
    update(&mut st, key('j'));
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    let h = header(&st);
    assert!(h.contains("fleet › on fire › orders-dlq"), "{h}");
    update(&mut st, code(KeyCode::Esc));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet);
    let h = header(&st);
    assert!(h.contains("fleet") && !h.contains("on fire"), "{h}");
    update(&mut st, key('?'));
    let h = header(&st);
    assert!(h.contains("fleet › help") && !h.contains("queues"), "{h}");
    // `:filter` from the on-fire view lands on the filtered queue table over the fleet.
    let mut st = fire_state();
    for c in ":filter ord".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.stack, vec![View::Fleet, View::Queues]);
    assert!(
        header(&st).contains("fleet › queues /ord"),
        "{}",
        header(&st)
    );
}

/// A queue whose oldest message is old and that nobody consumes ranks on the fleet's first
/// poll of the real local broker: no second sample is needed for age or "no consumer".
#[tokio::test(flavor = "multi_thread")]
async fn fire_ranks_an_old_idle_queue_on_the_first_poll() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fire.db");
    {
        let h = LocalHandle::open(&db).unwrap();
        for q in ["stale", "fresh", "empty"] {
            h.0.create_queue(q, &QueueOptions::default()).unwrap();
        }
        for q in ["stale", "fresh"] {
            h.0.send_sync(
                q,
                &OutgoingMessage {
                    body: b"m".to_vec(),
                    ..Default::default()
                },
            )
            .unwrap();
        }
    }
    // Fifteen minutes old, as if it had waited that long.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE messages SET enqueued_ms = enqueued_ms - 900000 WHERE queue = 'stale'",
        [],
    )
    .unwrap();
    drop(conn);
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[fire]\nmax_age_secs = 300\n[[profiles]]\nname = \"here\"\nkind = \"local\"\npath = {:?}\nrefresh_secs = 30\n",
            db.display().to_string()
        ),
    )
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let _fleet = qdeck_engine::fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        },
        &["here".to_string()],
        Vec::new(),
        Default::default(),
        tx,
    );
    let first = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(first.error.is_none(), "{first:?}");
    assert_eq!(first.growing, None, "this is the first poll");
    let sev = |q: &str| {
        first
            .fire
            .iter()
            .find(|e| e.queue.as_str() == q)
            .map(|e| e.severity)
            .unwrap()
    };
    assert_eq!(first.fire[0].queue.as_str(), "stale", "{:?}", first.fire);
    // Age 900 s against 2 × 300 s: the whole age term (30), and no consumer (15).
    assert!((sev("stale") - 45.0).abs() < 0.5, "{}", sev("stale"));
    assert!((sev("fresh") - 15.0).abs() < 0.5, "{}", sev("fresh"));
    assert_eq!(sev("empty"), 0.0);
}

/// `qdeck -p east,local` opens the fleet view with exactly the listed profiles, the implicit
/// `local` one included, and none of the others configured.
#[test]
fn pty_profile_list_opens_the_fleet_with_every_listed_profile() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = d.join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nrefresh_secs = 0.5\n\
             [[profiles]]\nname = \"east\"\nkind = \"local\"\npath = {:?}\n\
             [[profiles]]\nname = \"west\"\nkind = \"local\"\npath = {:?}\n\
             [[profiles]]\nname = \"north\"\nkind = \"local\"\npath = {:?}\n",
            d.join("east.db").display().to_string(),
            d.join("west.db").display().to_string(),
            d.join("north.db").display().to_string(),
        ),
    )
    .unwrap();
    let mut c = Console::spawn(
        d,
        &["--config", cfg.to_str().unwrap(), "-p", "east,local,north"],
        &[],
        100,
        24,
    );
    // Every listed row reports a successful poll of its own broker.
    let first_word = |l: &str| {
        l.trim_start_matches('│')
            .split_whitespace()
            .next()
            .map(String::from)
    };
    let s = c
        .poll_until(Duration::from_secs(20), |s| {
            let rows = |p: &str| {
                s.lines()
                    .any(|l| first_word(l).as_deref() == Some(p) && l.contains("ok "))
            };
            rows("east") && rows("local") && rows("north")
        })
        .unwrap_or_else(|| {
            panic!(
                "timed out waiting for the three rows; screen so far:\n{}",
                c.screen()
            )
        });
    assert!(
        !s.lines()
            .any(|l| l.split_whitespace().next() == Some("west")),
        "west was not listed:\n{s}"
    );
    c.type_keys(":q!\r");
    c.wait_exit(Duration::from_secs(10));
}

/// The raw-byte check of the PTY tests flags what broker text could smuggle in (a title
/// change, BEL, a lone ESC, C1) and passes what the terminal library writes itself.
#[test]
fn foreign_controls_flags_smuggled_sequences_only() {
    use common::pty::foreign_controls;
    let own = "\x1b[?1049h\x1b[?25l\x1b[2J\x1b[1;1H\x1b[38;5;9m\x1b[48;2;1;2;3mqueues\x1b[0m\x1b[K\r\n\x1b[?1049l";
    assert_eq!(foreign_controls(own.as_bytes()), Vec::<String>::new());
    for bad in [
        "x\x1b]0;pwned\x07y",
        "x\x07",
        "x\x1bPq#0;2;0;0;0\x1b\\",
        "x\x1b",
        "x\u{9b}2J",
        "x\x08\x08",
        "x\x1b[1;2$z",
    ] {
        assert!(!foreign_controls(bad.as_bytes()).is_empty(), "{bad:?}");
    }
}

/// The redrive dialog confirms the plan, not the broker's general abilities: it shows the
/// plan's count and notes (as the CLI's prompt does), `y` waits for the plan, a refused plan
/// never runs, and the run is capped by the count the dialog showed.
#[test]
fn redrive_dialog_shows_and_runs_its_own_plan() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    let fx = update(&mut st, key('R'));
    let s = text(&draw(&st, 100, 24));
    assert!(s.contains("planning with the broker"), "{s}");
    let fx_early = update(&mut st, key('y'));
    assert!(
        run_of(&fx_early).is_none(),
        "y before the plan runs nothing"
    );
    assert!(st.dialog.is_some(), "the dialog stays open");
    answer_plan(
        &mut st,
        &fx,
        6,
        &["the target requires sessions: each copy keeps its SessionId"],
    );
    let s = text(&draw(&st, 100, 24));
    // The plan's own question, as `qdeck redrive` asks it.
    assert!(
        s.contains("About to move 6 message(s) from orders-dlq"),
        "{s}"
    );
    assert!(s.contains("target requires sessions"), "{s}");
    let fx = update(&mut st, key('y'));
    let Some(Planned::Redrive { plan, .. }) = run_of(&fx) else {
        panic!("y runs the planned redrive: {fx:?}");
    };
    // `ops::run` caps an exact plan at its count: the 6 the dialog showed.
    assert_eq!(plan.count.ready, 6, "the plan the dialog showed runs");

    // A plan the broker refuses: the reason shows and y does nothing.
    let mut st = populated();
    select(&mut st, "orders-dlq");
    let fx = update(&mut st, key('R'));
    let req = fx
        .iter()
        .find_map(|e| match e {
            Effect::PlanRedrive(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    update(
        &mut st,
        Action::RedrivePlanned {
            req,
            result: Err(BackendError::Refused(
                "the target is a stream: redrive cannot delete from it".into(),
            )),
        },
    );
    let s = text(&draw(&st, 100, 24));
    assert!(s.contains("cannot redrive") && s.contains("stream"), "{s}");
    let fx = update(&mut st, key('y'));
    assert!(run_of(&fx).is_none());
}

/// The console asks the backend about the queue at hand, not the broker in general: a queue
/// the backend cannot browse (a RabbitMQ stream) is refused before any dialog, one whose
/// browse has a side effect asks first, and the others browse straight away.
#[test]
fn browse_decides_on_the_queues_own_capabilities() {
    let mut broker = caps();
    broker.browse = BrowseEffect::None;
    let mut st = populated_on(broker, |s| {
        s.caps_of = Some(Arc::new(|info: &QueueInfo| {
            let mut c = caps();
            c.browse = match info.id.as_str() {
                "orders" => BrowseEffect::Unsupported(
                    "orders is a stream: its messages are read by offset".into(),
                ),
                "payments" => BrowseEffect::SideEffect("raises the quorum delivery count".into()),
                _ => BrowseEffect::None,
            };
            c
        }));
    });
    select(&mut st, "orders");
    let fx = update(&mut st, key('b'));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Browse { .. })),
        "{fx:?}"
    );
    assert!(st.dialog.is_none(), "no confirmation for what would fail");
    assert!(st.status.as_ref().unwrap().text.contains("stream"));
    select(&mut st, "payments");
    update(&mut st, key('b'));
    assert!(matches!(
        st.dialog.as_ref().map(|d| &d.kind),
        Some(DialogKind::Browse { note, .. }) if note.contains("quorum")
    ));
    update(&mut st, code(KeyCode::Esc));
    assert!(st.dialog.is_none());
    select(&mut st, "emails");
    let fx = update(&mut st, key('b'));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Browse { .. })),
        "{fx:?}"
    );
}

/// A page of Service Bus session messages gets a SESSION column; a page without sessions
/// keeps its columns as they were.
#[test]
fn session_messages_show_their_session() {
    let mut st = populated();
    open_dlq(&mut st);
    assert!(!text(&draw(&st, 120, 24)).contains("SESSION"));
    let msg = |i: usize, s: &str| Message {
        id: format!("m-{i}"),
        properties: vec![("SessionId".into(), Value::str(s))],
        body: b"{}".to_vec(),
        ..Default::default()
    };
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: vec![msg(1, "cart-17"), msg(2, "cart-42")],
                next: None,
                effect_note: None,
            }),
        },
    );
    let screen = text(&draw(&st, 120, 24));
    assert!(screen.contains("SESSION"), "{screen}");
    assert!(
        screen.contains("cart-17") && screen.contains("cart-42"),
        "{screen}"
    );
}
