//! The console at 3 a.m.: brokers that do not answer rank first in the on-fire view, Enter
//! there lands on exactly the row's queue in its profile, a message view acts on its
//! message, and an operation's progress and result stay readable at 80×24.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::console::*;
use common::pty::Console;

use crossterm::event::KeyCode;

use qdeck::tui::state::{DialogKind, OpSummary, Setup, State, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::BackendError;
use qdeck_engine::fleet::FleetRow;
use qdeck_engine::ops::Verdict;
use qdeck_engine::poller::{PollError, PollEvent};
use qdeck_engine::store::Store;
use qdeck_model::domain::*;

/// The screen's rows without borders, joined by spaces: wrapped text reads as one line.
fn flatten(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.trim_matches('│').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

fn snap(name: &str, st: &State, w: u16, h: u16) {
    let t = draw(st, w, h);
    insta::assert_snapshot!(name, text(&t));
}

/// The fleet of `fire_state` plus a profile that refuses connections (down 2 minutes) and
/// one that accepts and never answers.
fn fire_with_dead_brokers() -> State {
    fire_with_dead_brokers_and(|_| {})
}

/// `fire_with_dead_brokers` of a console started with the settings `set` gives.
fn fire_with_dead_brokers_and(set: impl FnOnce(&mut Setup)) -> State {
    let mut st = fire_state_with(set);
    let now = st.now_ms;
    grow_fleet(
        &mut st,
        vec![
            FleetRow {
                profile: "dead".into(),
                kind: Some(qdeck_model::domain::BrokerKind::Rabbitmq),
                error: Some(
                    "broker unreachable: management API at http://127.0.0.1:1: connection refused"
                        .into(),
                ),
                failing_since_ms: Some(now - 120_000),
                refresh_secs: 5.0,
                ..Default::default()
            },
            FleetRow {
                profile: "hung".into(),
                kind: Some(qdeck_model::domain::BrokerKind::Rabbitmq),
                error: Some("no answer within 20s".into()),
                failing_since_ms: Some(now - 45_000),
                silent_after_secs: Some(20),
                refresh_secs: 5.0,
                ..Default::default()
            },
        ],
    );
    assert_eq!(st.stack, vec![View::Fleet, View::Fire]);
    st
}

#[test]
fn brokers_that_do_not_answer_rank_first_in_the_on_fire_view() {
    let st = fire_with_dead_brokers();
    let fl = st.fleet.as_ref().unwrap();
    let rows = fl.fire_rows(st.now_ms);
    let heads: Vec<(&str, Option<&str>)> = rows
        .iter()
        .take(5)
        .map(|r| (r.profile(), r.queue().map(QueueId::as_str)))
        .collect();
    // Configuration order among the brokers, then the worst queue.
    assert_eq!(
        heads,
        vec![
            ("rabbit-eu", None),
            ("sqs-prod", None),
            ("dead", None),
            ("hung", None),
            ("local", Some("orders-dlq")),
        ]
    );
    let screen = text(&draw(&st, 80, 24));
    assert!(
        screen.contains("on fire 4 brokers not answering · 5 queues"),
        "the title counts them:\n{screen}"
    );
    assert!(screen.contains("down 2m"), "{screen}");
    assert!(screen.contains("no answer for 45s"), "{screen}");
    assert!(screen.contains("stale 60s"), "{screen}");
    snap("oncall_fire_dead_brokers_80x24", &st, 80, 24);
    snap("oncall_fire_dead_brokers_60x15", &st, 60, 15);
}

/// The selected broker row's error is read in full under the table, in the on-fire view and
/// in the fleet, without switching profile.
#[test]
fn a_profiles_error_is_read_in_full_from_the_fleet_and_the_fire_view() {
    let mut st = fire_with_dead_brokers();
    // On-fire view: `dead` is the third row.
    update(&mut st, key('j'));
    update(&mut st, key('j'));
    let flat = flatten(&text(&draw(&st, 80, 24)));
    assert!(
        flat.contains(
            "dead: broker unreachable: management API at http://127.0.0.1:1: connection refused (for 2m)"
        ),
        "{flat}"
    );
    // The hung one says what it does: accepts, never answers.
    update(&mut st, key('j'));
    let flat = flatten(&text(&draw(&st, 80, 24)));
    assert!(flat.contains("hung: no answer within 20s"), "{flat}");
    // Fleet: the cursor on `dead` (4th row) shows its whole error under the table.
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fleet);
    for _ in 0..3 {
        update(&mut st, key('j'));
    }
    let flat = flatten(&text(&draw(&st, 80, 24)));
    assert!(
        flat.contains(
            "dead: broker unreachable: management API at http://127.0.0.1:1: connection refused"
        ),
        "{flat}"
    );
    snap("oncall_fleet_error_in_full_80x24", &st, 80, 24);
}

/// The current profile's own error is told in its queue table: over the fleet and the
/// on-fire view (which tell every profile's errors in their rows) it is not pinned.
#[test]
fn the_current_profiles_error_is_not_pinned_over_the_fleet() {
    let mut st = fire_with_dead_brokers();
    update(
        &mut st,
        Action::Poll(PollEvent::Error(PollError::Backend(
            BackendError::Unreachable("connection refused at 127.0.0.1:1".into()),
        ))),
    );
    assert!(st.store.backend_error.is_some());
    for (k, stack) in [
        (code(KeyCode::Esc), vec![View::Fleet]),
        (key('f'), vec![View::Fleet, View::Fire]),
    ] {
        update(&mut st, k);
        assert_eq!(st.stack, stack);
        let screen = text(&draw(&st, 80, 24));
        assert!(!screen.contains("broker unreachable"), "{screen}");
    }
    run_command(&mut st, "queues");
    assert_eq!(st.stack, vec![View::Fleet, View::Queues]);
    let screen = text(&draw(&st, 80, 24));
    assert!(screen.contains("broker unreachable"), "{screen}");
    assert!(!screen.contains("broker error"), "said once: {screen}");
}

/// Enter on another profile's queue in the on-fire view switches profile and lands on that
/// very queue (not on row 1 of that profile's table): `R` there names it, Esc comes back to
/// the on-fire view.
#[test]
fn enter_on_another_profiles_fire_row_lands_on_that_queue() {
    let mut st = fire_state();
    let target = st
        .fleet
        .as_ref()
        .unwrap()
        .fire_rows(st.now_ms)
        .iter()
        .position(|r| r.queue().map(QueueId::as_str) == Some("billing-dlq"))
        .unwrap();
    for _ in 0..target {
        update(&mut st, key('j'));
    }
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::SwitchProfile("sqs-prod".into())),
        "{fx:?}"
    );
    // The executor opens the session; its state takes over with the fleet.
    let mut dlq = qinfo("billing-dlq", None);
    dlq.is_dlq = true;
    dlq.dlq_sources = vec![QueueId::new("billing")];
    let fresh = listed_state(
        Setup::new("sqs-prod", "sqs"),
        caps(),
        vec![
            qinfo("a-first-queue", Some("a-first-dlq")),
            qinfo("billing", Some("billing-dlq")),
            dlq,
        ],
    );
    qdeck::tui::update::switched(&mut st, fresh);
    assert_eq!(st.stack, vec![View::Fleet, View::Fire, View::Detail]);
    assert_eq!(st.focus, Some(QueueId::new("billing-dlq")));
    let header = text(&draw(&st, 80, 24));
    assert!(
        header
            .lines()
            .next()
            .unwrap()
            .contains("on fire › billing-dlq"),
        "{header}"
    );
    update(&mut st, key('R'));
    match &st.dialog.as_ref().expect("R opens the redrive dialog").kind {
        DialogKind::Redrive { source, .. } => assert_eq!(source.as_str(), "billing-dlq"),
        other => panic!("{other:?}"),
    }
    let screen = text(&draw(&st, 80, 24));
    assert!(screen.contains("billing-dlq"), "{screen}");
    update(&mut st, code(KeyCode::Esc));
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Fire);
    // A later switch by hand (not from an on-fire row) lands on the queue table as before.
    let fresh = State::new(Store::new(600, 240, 600.0), caps(), "local", "local");
    qdeck::tui::update::switched(&mut st, fresh);
    assert_eq!(st.stack, vec![View::Fleet, View::Queues]);
}

/// `R` in the single-message view redrives that message, as `D` there deletes it; in the
/// list without a selection it is the whole queue, and the dialog says "all N messages".
#[test]
fn r_in_the_message_view_redrives_that_message() {
    let mut st = populated();
    open_dlq(&mut st);
    let fx = update(&mut st, key('R'));
    answer_plan(&mut st, &fx, 7, &[]);
    match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Redrive { only_ids, .. } => assert_eq!(*only_ids, None),
        other => panic!("{other:?}"),
    }
    let screen = text(&draw(&st, 80, 24));
    assert!(
        screen.contains("About to move 7 message(s) from orders-dlq"),
        "{screen}"
    );
    update(&mut st, key('n'));
    // Open the first message, then R.
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    let fx = update(&mut st, key('R'));
    answer_plan(&mut st, &fx, 1, &[]);
    match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Redrive {
            only_ids, source, ..
        } => {
            assert_eq!(source.as_str(), "orders-dlq");
            assert_eq!(only_ids.as_deref(), Some(&["1".to_string()][..]));
        }
        other => panic!("{other:?}"),
    }
    let screen = text(&draw(&st, 80, 24));
    assert!(
        screen.contains("About to move message 1 from orders-dlq"),
        "{screen}"
    );
    snap("oncall_redrive_one_message_80x24", &st, 80, 24);
}

/// The page under an open message reloads (an operation changed the queue): the view keeps
/// showing the message it opened, headers and body from the one read, and an operation that
/// ends while it is open returns to the list and says so, so a second `R` can never act on a
/// message whose body was not on screen. Reloading a group keeps the group.
#[test]
fn an_operation_from_the_message_view_never_mixes_two_messages() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    let opened = text(&draw(&st, 80, 24));
    assert!(opened.contains("content-type"), "{opened}");
    assert!(opened.contains("order"), "{opened}");
    // Message 1 was redriven: the reload's first message is now 2, which has no headers.
    let mut rest = hostile_messages();
    rest.remove(0);
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: rest.clone(),
                next: None,
                effect_note: None,
            }),
        },
    );
    let screen = text(&draw(&st, 80, 24));
    assert!(
        screen.contains("content-type"),
        "headers of the message opened:\n{screen}"
    );
    assert!(screen.contains("order"), "its body:\n{screen}");
    assert!(
        !screen.contains("pwned"),
        "no other message's body:\n{screen}"
    );
    // The operation's end closes the message view and the list reloads.
    let fx = update(
        &mut st,
        Action::OpDone(OpSummary::new(
            "redrove 1 of 1 from orders-dlq to orders",
            Verdict::Ok,
        )),
    );
    assert_eq!(st.view(), View::Messages);
    assert!(st.body.msg.is_none());
    let status = st.status.as_ref().unwrap().text.clone();
    assert!(status.contains("message view closed"), "{status}");
    assert!(fx.iter().any(|e| matches!(e, Effect::Browse { .. })));
    // In a reasons group, the reload reads the group again, not the whole DLQ.
    update(&mut st, key('F'));
    assert_eq!(st.view(), View::Reasons);
    let now = st.now_ms;
    reasons_progress(
        &mut st,
        vec![reason_group(now, "max receives", 2)],
        2,
        Some(2),
    );
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.iter().any(
            |e| matches!(e, Effect::BrowseGroup { signature, .. } if signature == "max receives")
        ),
        "{fx:?}"
    );
    page(&mut st, "orders-dlq", rest.clone());
    assert_eq!(
        (st.msgs.group.as_deref(), st.msgs.group_origin.as_deref()),
        (Some("max receives"), Some("orders"))
    );
    let fx = update(
        &mut st,
        Action::OpDone(OpSummary::new("deleted 1", Verdict::Ok)),
    );
    assert!(
        fx.iter().any(
            |e| matches!(e, Effect::BrowseGroup { signature, origin, .. }
            if signature == "max receives" && origin.as_deref() == Some("orders"))
        ),
        "{fx:?}"
    );
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Browse { .. })),
        "{fx:?}"
    );
}

fn running(st: &mut State, done: u64, total: u64) {
    let in_table = st.view() == View::Queues;
    start_redrive(
        st,
        qdeck_backend::ProgressState {
            done,
            failed: 3,
            total: Some(total),
            phase: "copying".into(),
        },
    );
    if in_table {
        // The cursor back on the first row, where the scene had it.
        update(st, code(KeyCode::Home));
    }
}

/// The progress row keeps its count, failures and cancel key at 80 and at 60 columns; the
/// bar and the label come when there is room.
#[test]
fn the_progress_line_keeps_count_and_cancel_key_when_narrow() {
    let mut st = populated();
    running(&mut st, 12_000, 20_000);
    for (w, h) in [(80, 24), (60, 15), (40, 10)] {
        let screen = text(&draw(&st, w, h));
        let last = screen.lines().last().unwrap();
        assert!(last.contains("12,000/20,000"), "{w}: {last}");
        assert!(last.contains("3 failed"), "{w}: {last}");
        assert!(last.contains("x cancel"), "{w}: {last}");
    }
    let wide = text(&draw(&st, 120, 24));
    assert!(wide.contains("redrive orders-dlq → origin"), "{wide}");
    snap("oncall_progress_80x24", &st, 80, 24);
    snap("oncall_progress_60x15", &st, 60, 15);
}

/// An operation's result stays until replaced or dismissed (`x`), never covers the
/// breadcrumb, wraps when long, and is kept whole in the operations log (`:ops`).
#[test]
fn an_operations_result_stays_until_dismissed_and_is_logged() {
    let mut st = populated();
    open_dlq(&mut st);
    running(&mut st, 10, 10);
    let long = "redrove 7 of 9 from orders-dlq to orders; 2 failed: possibly duplicated \
                (copy confirmed, delete refused by the broker: PRECONDITION_FAILED - unknown \
                delivery tag 42); see the audit log";
    update(
        &mut st,
        Action::OpDone(OpSummary::new(long, Verdict::Partial)),
    );
    let screen = text(&draw(&st, 80, 24));
    let header = screen.lines().next().unwrap();
    assert!(header.contains("queues › messages orders-dlq"), "{header}");
    assert!(!header.contains("redrove"), "{header}");
    assert!(screen.contains("redrove 7 of 9"), "{screen}");
    assert!(
        screen.contains("(:ops)"),
        "a cut result says where it is whole:\n{screen}"
    );
    snap("oncall_result_80x24", &st, 80, 24);
    // A minute later it is still there; the flashes of other actions expire.
    let later = st.now_ms + 60_000;
    update(&mut st, Action::Tick(later));
    assert!(st
        .status
        .as_ref()
        .is_some_and(|s| s.text.contains("redrove")));
    update(&mut st, key('x'));
    assert!(st.status.is_none(), "x dismisses it when nothing runs");
    // The log keeps it whole, with its verdict's exit code.
    for c in ":ops".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Ops);
    let screen = text(&draw(&st, 80, 24));
    assert!(screen.contains("1 operation this session"), "{screen}");
    let flat = flatten(&screen);
    assert!(flat.contains("see the audit log"), "{flat}");
    assert!(flat.contains("exit code 3"), "{flat}");
    snap("oncall_ops_log_80x24", &st, 80, 24);
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Messages);

    // Another profile: the log is the session's, not the profile's, and names each entry's
    // profile, so the "(:ops)" hint never points at a log that vanished.
    let fresh = State::new(Store::new(600, 240, 600.0), caps(), "sqs-prod", "sqs");
    qdeck::tui::update::switched(&mut st, fresh);
    for c in ":ops".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Ops);
    let flat = flatten(&text(&draw(&st, 80, 24)));
    assert!(flat.contains("1 operation this session"), "{flat}");
    assert!(
        flat.contains("local · "),
        "the entry names its profile: {flat}"
    );
    assert!(flat.contains("redrove 7 of 9"), "{flat}");
}

/// A dead letter with many headers: the one that tells the error comes last.
fn many_headers() -> Message {
    let mut headers: Vec<(String, Value)> = (0..12)
        .map(|i| (format!("x-trace-{i:02}"), format!("span-{i}").into()))
        .collect();
    headers.push((
        "x-exception-message".into(),
        "ValueError: order 42 has no customer".into(),
    ));
    Message {
        id: "m-1".into(),
        seq: Some(1),
        enqueued_ms: Some(T0),
        receive_count: Some(5),
        headers,
        body: (0..30)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            .into_bytes(),
        ..Default::default()
    }
}

/// At 80×24 the whole message scrolls as one document (headers, then body): every header
/// is reachable, none is hidden behind "taller terminal", and no row is left empty above
/// the body.
#[test]
fn the_message_view_scrolls_headers_and_body_as_one() {
    let mut st = populated();
    open_dlq(&mut st);
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: vec![many_headers()],
                next: None,
                effect_note: None,
            }),
        },
    );
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    let top = text(&draw(&st, 80, 24));
    assert!(!top.contains("taller terminal"), "{top}");
    assert!(top.contains("x-trace-00"), "{top}");
    assert!(top.contains("rows 1-20 of"), "{top}");
    snap("oncall_message_top_80x24", &st, 80, 24);
    // j scrolls by one row, G to the end; the error header was reachable on the way.
    let mut seen_error = top.contains("x-exception-message");
    for _ in 0..30 {
        update(&mut st, key('j'));
        seen_error |= text(&draw(&st, 80, 24)).contains("ValueError: order 42");
    }
    assert!(seen_error, "x-exception-message never came into view");
    update(&mut st, key('G'));
    let bottom = text(&draw(&st, 80, 24));
    assert!(bottom.contains("line 29"), "{bottom}");
    update(&mut st, key('g'));
    let again = text(&draw(&st, 80, 24));
    assert_eq!(again, top, "g returns to the top");
    snap("oncall_message_top_60x15", &st, 60, 15);
}

/// A reason group of DLQ `orders-dlq` from `orders`, seen over the last hour.
fn reason_group(now: i64, sig: &str, count: u64) -> qdeck_engine::triage::Group {
    qdeck_engine::triage::Group {
        signature: sig.into(),
        origin: Some("orders".into()),
        count,
        first_seen_ms: Some(now - 3_600_000),
        last_seen_ms: Some(now - 60_000),
        sample_id: "1".into(),
        redriven: 0,
    }
}

/// At 80×24 the reasons view gives the failure text the width (FIRST and LAST give way),
/// cuts it at its end, never in the middle, and shows the selected group's text whole.
#[test]
fn the_reasons_view_keeps_the_failure_text_readable_at_80_columns() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('F'));
    let now = st.now_ms;
    let group = |sig: &str, count: u64| reason_group(now, sig, count);
    let long = "rejected: timeout while reserving stock for order <n> at warehouse <n> after <n> retries (upstream inventory-service answered 503)";
    reasons_progress(
        &mut st,
        vec![group(long, 80), group("max receives", 15)],
        95,
        Some(95),
    );
    let screen = text(&draw(&st, 80, 24));
    // The row starts with the text's beginning and keeps most of the width.
    assert!(
        screen.contains("rejected: timeout while reserving stock for order"),
        "{screen}"
    );
    assert!(
        !screen.contains("FIRST"),
        "FIRST gives way first:\n{screen}"
    );
    // The selected group's text is whole under the table.
    let flat = flatten(&screen);
    assert!(
        flat.contains("after <n> retries (upstream inventory-service answered 503)"),
        "{flat}"
    );
    snap("oncall_reasons_long_text_80x24", &st, 80, 24);
    snap("oncall_reasons_long_text_60x15", &st, 60, 15);
}

/// `F` follows the CLI's rule: a queue's DLQ when it has one, said in the title; a queue with
/// none is grouped itself, and the title says so too.
#[test]
fn reasons_say_which_queue_they_group() {
    for (queue, scanned, scope) in [
        ("orders", "orders-dlq", "(the DLQ of orders)"),
        ("emails", "emails", "(its own messages: no DLQ)"),
    ] {
        let mut st = populated();
        select(&mut st, queue);
        let fx = update(&mut st, key('F'));
        assert!(
            fx.contains(&Effect::Reasons(QueueId::new(scanned))),
            "{fx:?}"
        );
        let screen = text(&draw(&st, 80, 24));
        assert!(
            screen.contains(&format!("reasons {scanned} {scope}")),
            "{screen}"
        );
    }
}

/// The footer never says "updated" for a queue list that has not arrived, whatever figures
/// came first.
#[test]
fn the_footer_says_loading_until_the_list_arrives() {
    let mut st = State::new(Store::new(600, 240, 600.0), caps(), "local", "local");
    // Figures of a queue before any list (the poller's first sweep answered first).
    let at = st.store.epoch_ms();
    polled(
        &mut st,
        vec![QueueStats {
            id: QueueId::new("orders"),
            at_ms: at,
            depth: Some(3),
            ..Default::default()
        }],
    );
    clock_at_last_poll(&mut st);
    assert!(st.store.last_ok_ms.is_some() && !st.poll.listed);
    let footer = text(&draw(&st, 80, 24)).lines().last().unwrap().to_string();
    assert!(footer.contains("loading…"), "{footer}");
    assert!(!footer.contains("updated"), "{footer}");
    update(
        &mut st,
        Action::Poll(PollEvent::Queues(vec![qinfo("orders", None)])),
    );
    let footer = text(&draw(&st, 80, 24)).lines().last().unwrap().to_string();
    assert!(footer.contains("updated 0s ago"), "{footer}");
}

/// A broker that accepts connections and never answers, for as long as the test runs.
fn hung_broker() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    port
}

/// Profile switches between two local profiles stay quick with a hung broker configured and
/// polled by the fleet, and after a switch to the hung one: each lands on its queue list
/// (the issue saw 2 of 8 switches wait about 25 s on `loading the queue list…`).
#[test]
fn profile_switches_are_not_held_up_by_a_hung_broker() {
    let dir = tempfile::tempdir().unwrap();
    let mut profiles = String::from("[ui]\nrefresh_secs = 1.0\n\n");
    for p in ["a", "b"] {
        let db = dir.path().join(format!("{p}.db"));
        let h = qdeck_backend::local::LocalHandle::open(&db).unwrap();
        h.0.create_queue(
            &format!("alpha-{p}"),
            &qdeck_backend::local::QueueOptions::default(),
        )
        .unwrap();
        profiles.push_str(&format!(
            "[[profiles]]\nname = \"local-{p}\"\nkind = \"local\"\npath = {:?}\n\n",
            db.display().to_string()
        ));
    }
    let port = hung_broker();
    profiles.push_str(&format!(
        "[[profiles]]\nname = \"hung\"\nkind = \"rabbitmq\"\namqp_url = \"amqp://guest@127.0.0.1:{port}/%2f\"\nmanagement_url = \"http://127.0.0.1:{port}\"\nusername = \"guest\"\npassword_env = \"QDECK_T_HUNG_PW\"\n"
    ));
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, profiles).unwrap();
    let mut c = Console::spawn(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "--fleet"],
        &[("QDECK_T_HUNG_PW", "x")],
        100,
        24,
    );
    c.wait_for("hung");
    let landed = |c: &Console, p: &str| {
        c.poll_until(std::time::Duration::from_secs(10), |s| {
            s.lines()
                .next()
                .unwrap_or("")
                .contains(&format!("local-{p}"))
                && s.contains(&format!("alpha-{p}"))
                && s.contains("› queues")
                && !s.contains("loading")
        })
    };
    for (i, p) in ["b", "a", "b", "a", "b", "a"].iter().enumerate() {
        if i == 2 {
            // Through the hung profile and straight on.
            c.type_keys(":profile hung\r");
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        c.type_keys(&format!(":profile local-{p}\r"));
        assert!(
            landed(&c, p).is_some(),
            "switch {i} to local-{p} did not land on its queue list:\n{}",
            c.screen()
        );
    }
    c.quit();
}

/// On the on-fire view a queue key (`w`, `b`, `d`, `F`, `R`, `P`) never acts on the queue
/// table's row under it, which may be another profile's: it says to open the row first.
#[test]
fn queue_keys_on_the_fire_view_ask_to_open_the_row_first() {
    let mut st = fire_state();
    for k in ['w', 'b', 'd', 'F', 'R', 'P'] {
        let fx = update(&mut st, key(k));
        assert_eq!(st.view(), View::Fire, "{k}");
        assert!(st.dialog.is_none(), "{k}");
        assert!(
            !fx.iter().any(|e| matches!(
                e,
                Effect::Browse { .. } | Effect::Consumers(_) | Effect::Reasons(_)
            )),
            "{k}: {fx:?}"
        );
        assert!(
            st.status
                .as_ref()
                .unwrap()
                .text
                .contains("open the queue first"),
            "{k}"
        );
    }
}

/// A typed refusal reaches the status line as one line, redacted, never as raw broker text.
#[test]
fn a_typed_failure_is_shown_as_one_redacted_line() {
    let mut st = populated();
    update(
        &mut st,
        Action::Failed(qdeck_backend::BackendError::Unsupported(
            "edit deletes the original by id,\nwhich amqp://guest:hunter2@host/ cannot do".into(),
        )),
    );
    let s = st.status.as_ref().unwrap();
    assert!(
        s.text
            .starts_with("not supported by this broker: edit deletes"),
        "{}",
        s.text
    );
    assert!(
        !s.text.contains('\n') && !s.text.contains("hunter2"),
        "{}",
        s.text
    );
}

/// A breadcrumb too long for the header keeps its end (where the user is), not its start.
#[test]
fn a_long_breadcrumb_keeps_where_the_user_is() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    for c in ":ops".chars() {
        update(&mut st, key(c));
    }
    update(&mut st, code(KeyCode::Enter));
    let header = text(&draw(&st, 60, 15)).lines().next().unwrap().to_string();
    assert!(
        header.trim_end().ends_with("message › operations"),
        "{header}"
    );
    assert!(header.contains('…'), "{header}");
}

/// The on-fire list re-sorts as figures arrive; the cursor follows its row, so Enter opens
/// what the user looked at. A row that leaves the list leaves the cursor where it was, on
/// the row now there, and a flash names the one that left.
#[test]
fn the_on_fire_cursor_follows_its_row_and_says_when_it_left() {
    let mut st = fire_state();
    update(&mut st, key('!'));
    assert_eq!(st.view(), View::Fire);
    let under = |st: &State| {
        let f = st.fleet.as_ref().unwrap();
        let rows = f.fire_rows(st.now_ms);
        rows[f.fire_cursor.sel.min(rows.len() - 1)].key().label()
    };
    // Down to local/orders, below local/orders-dlq.
    while under(&st) != "local/orders" {
        update(&mut st, key('j'));
    }
    let at = st.fleet.as_ref().unwrap().fire_cursor.sel;
    // orders-dlq grows past it; then orders outranks everything.
    let mut row = st.fleet.as_ref().unwrap().rows[0].clone();
    assert_eq!(row.profile, "local");
    row.fire[1].severity = 99.0;
    update(&mut st, Action::Fleet(row.clone()));
    assert_eq!(under(&st), "local/orders", "the cursor followed its row");
    assert_ne!(
        st.fleet.as_ref().unwrap().fire_cursor.sel,
        at,
        "the row moved in the list"
    );
    // Its row leaves: the cursor keeps its place and the flash says which row went.
    let before = st.fleet.as_ref().unwrap().fire_cursor.sel;
    row.fire.remove(1);
    update(&mut st, Action::Fleet(row));
    assert_eq!(st.fleet.as_ref().unwrap().fire_cursor.sel, before);
    let flash = &st.status.as_ref().expect("a flash names the row").text;
    assert!(
        flash.contains("local/orders left the on-fire list"),
        "{flash}"
    );
}

/// A profile's figures outlive a switch: back on it, its history resumes (its trend, rates
/// and `stuck?` have the minutes they had), rather than starting from one poll.
#[test]
fn a_profiles_history_survives_a_switch_away_and_back() {
    let mut st = populated();
    let orders = QueueId::new("orders");
    let before = st.store.derived(&orders).expect("the fixture has history");
    let away = State::new(Store::new(600, 240, 600.0), caps(), "sqs-prod", "sqs");
    qdeck::tui::update::switched(&mut st, away);
    assert!(st.store.get(&orders).is_none(), "another profile's table");
    let back = State::new(Store::new(600, 240, 600.0), caps(), "local", "local");
    qdeck::tui::update::switched(&mut st, back);
    assert_eq!(
        st.store.derived(&orders),
        Some(before),
        "the history came back whole"
    );
    assert!(!st.queues.rows.is_empty(), "its table shows at once");
}

/// `R` redrives what the user looks at. In a reason group's list (the walk of 2026-12-07: a
/// group of 6 offered `move 12`, the whole DLQ) and in a searched list, with nothing marked,
/// it takes the rows shown and the dialog says so; from the reasons view it takes every group,
/// and the dialog says that too.
#[test]
fn r_redrives_the_group_or_search_shown_and_says_when_it_takes_every_group() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('F'));
    let now = st.now_ms;
    let group = |sig: &str, count: u64| reason_group(now, sig, count);
    reasons_progress(
        &mut st,
        vec![group("bad amount", 2), group("unknown customer", 1)],
        3,
        Some(3),
    );
    // The reasons view: every group, said.
    let fx = update(&mut st, key('R'));
    assert_eq!(plan_request(&fx).only_ids, None);
    let screen = flatten(&text(&draw(&st, 80, 24)));
    assert!(screen.contains("every reason group"), "{screen}");
    update(&mut st, code(KeyCode::Esc));
    assert!(st.dialog.is_none());

    // The group's list: its two rows, not the DLQ's three.
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Messages);
    let msg = |id: &str| Message {
        id: id.into(),
        body: format!("body of {id}").into_bytes(),
        ..Default::default()
    };
    page(&mut st, "orders-dlq", vec![msg("m1"), msg("m3")]);
    let fx = update(&mut st, key('R'));
    assert_eq!(
        plan_request(&fx).only_ids,
        Some(vec!["m1".to_string(), "m3".to_string()])
    );
    let screen = flatten(&text(&draw(&st, 80, 24)));
    assert!(
        screen.contains("the 2 message(s) this list shows (reason group bad amount)"),
        "{screen}"
    );
    update(&mut st, code(KeyCode::Esc));

    // A search narrows the list further: its one row.
    search(&mut st, "m3");
    let fx = update(&mut st, key('R'));
    assert_eq!(plan_request(&fx).only_ids, Some(vec!["m3".to_string()]));
    update(&mut st, code(KeyCode::Esc));

    // A purge from the narrowed list says it takes the whole queue.
    update(&mut st, key('P'));
    assert!(
        matches!(
            st.dialog.as_ref().map(|d| &d.kind),
            Some(DialogKind::Purge { .. })
        ),
        "P opens the purge dialog"
    );
    let screen = flatten(&text(&draw(&st, 80, 24)));
    assert!(
        screen.contains("the whole queue: every message, not only the reason group and search"),
        "{screen}"
    );
    update(&mut st, code(KeyCode::Esc));

    // A search that shows nothing redrives nothing.
    search(&mut st, "zzz");
    let fx = update(&mut st, key('R'));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::PlanRedrive(_))),
        "{fx:?}"
    );
    assert!(st.dialog.is_none());
}

/// The queue table and the workers list re-sort under a fixed cursor: when the row under it
/// leaves (a queue deleted on the broker, a worker gone from the list), the cursor keeps its
/// place and a flash names the row that left, as the on-fire list does.
#[test]
fn a_row_that_leaves_the_queue_table_or_the_workers_list_is_named() {
    use qdeck_model::domain::{AckMode, Consumer, WorkerState};
    let mut st = populated();
    select(&mut st, "orders-dlq");
    let at = st.queues.cursor.sel;
    let listed: Vec<_> = ["orders", "payments", "emails"]
        .into_iter()
        .map(|n| qinfo(n, None))
        .collect();
    update(
        &mut st,
        Action::Poll(qdeck_engine::poller::PollEvent::Queues(listed)),
    );
    assert_eq!(st.queues.cursor.sel, at);
    let flash = &st.status.as_ref().expect("a flash names the queue").text;
    assert!(flash.contains("orders-dlq left the queue list"), "{flash}");

    let worker = |tag: &str| Consumer {
        queue: QueueId::new("orders"),
        tag: tag.into(),
        peer: None,
        prefetch: None,
        ack_mode: AckMode::Manual,
        state: "active".into(),
        status: WorkerState::Active,
        status_since_ms: None,
        holding: None,
        processed: None,
        failed: None,
        rate: None,
        last_seen_ms: None,
    };
    select(&mut st, "orders");
    update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    let answer = |st: &mut State, tags: &[&str]| {
        update(
            st,
            Action::Consumers {
                queue: q.clone(),
                result: Ok(tags.iter().map(|t| worker(t)).collect()),
            },
        );
    };
    answer(&mut st, &["w-1", "w-2", "w-3"]);
    update(&mut st, key('j'));
    let under = |st: &State| {
        st.workers.list[st.workers.rows[st.workers.cursor.sel]]
            .tag
            .clone()
    };
    assert_eq!(under(&st), "w-2");
    // The broker lists them in another order: the cursor follows w-2.
    answer(&mut st, &["w-3", "w-1", "w-2"]);
    assert_eq!(under(&st), "w-2", "the cursor followed its worker");
    let at = st.workers.cursor.sel;
    answer(&mut st, &["w-3", "w-1", "w-4"]);
    assert_eq!(st.workers.cursor.sel, at, "the cursor keeps its place");
    let flash = &st.status.as_ref().expect("a flash names the worker").text;
    assert!(flash.contains("w-2 left the workers list"), "{flash}");
}

/// The reasons list re-ranks as a scan goes on: the cursor follows its group; a group gone
/// from the next answer (a rescan after a redrive) is named in the flash.
#[test]
fn the_reasons_cursor_follows_its_group_and_names_one_that_left() {
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('F'));
    let now = st.now_ms;
    let answer = |st: &mut State, groups: Vec<qdeck_engine::triage::Group>| {
        reasons_progress(st, groups, 10, Some(20));
    };
    answer(
        &mut st,
        vec![
            reason_group(now, "timeout", 5),
            reason_group(now, "not found", 3),
        ],
    );
    update(&mut st, key('j'));
    let under = |st: &State| st.reasons.groups[st.reasons.cursor.sel].signature.clone();
    assert_eq!(under(&st), "not found");
    answer(
        &mut st,
        vec![
            reason_group(now, "not found", 9),
            reason_group(now, "timeout", 5),
        ],
    );
    assert_eq!(under(&st), "not found", "the cursor followed its group");
    answer(
        &mut st,
        vec![
            reason_group(now, "timeout", 5),
            reason_group(now, "bad json", 4),
        ],
    );
    let flash = &st.status.as_ref().expect("a flash names the group").text;
    assert!(flash.contains("not found left the reasons list"), "{flash}");
}

/// The on-fire title keeps whole words: at 100 columns the long counts, at 60 the short ones
/// (it was cut inside "queues" at 60).
#[test]
fn the_on_fire_title_is_never_cut_inside_a_word() {
    // A rule on the console's own profile fires on orders-dlq's 7 dead letters.
    let cfg = qdeck_model::config::parse_str(
        "[[alerts]]\nname = \"dlq-not-empty\"\nkinds = [\"dlq\"]\nwhen = \"depth > 0\"\n\
         severity = \"critical\"\nsummary = \"{queue} holds {depth} dead letters\"\n",
    )
    .unwrap();
    let st = fire_with_dead_brokers_and(|s| {
        s.alert_rules = qdeck_engine::alerts::rules(&cfg).unwrap();
    });
    let alerts = &st.fleet.as_ref().unwrap().alerts;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].queue, Some(QueueId::new("orders-dlq")));
    let title = |w: u16| {
        text(&draw(&st, w, 15))
            .lines()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    let wide = title(100);
    assert!(
        wide.contains("1 alert firing · 4 brokers not answering · "),
        "{wide}"
    );
    assert!(wide.contains(" queues "), "{wide}");
    let narrow = title(60);
    assert!(
        narrow.contains("down · ") && narrow.contains(" queues "),
        "{narrow}"
    );
}
