//! Alert rules in the console: evaluated on every poll of the profile's figures, a firing rule
//! is a header badge, ranks first in the on-fire view (Enter opens its queue), is listed in
//! `:alerts` until it resolves, and rings/notifies only when `[notify]` asks.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use common::console::*;
use crossterm::event::KeyCode;
use qdeck::tui::state::{Setup, State, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::BackendError;
use qdeck_engine::poller::{PollError, PollEvent};
use qdeck_model::domain::{QueueId, QueueStats, StatsBatch};

const RULES: &str = r#"
[[alerts]]
name = "dlq-not-empty"
kinds = ["dlq"]
when = "depth > 0"
severity = "critical"
summary = "{queue} holds {depth} dead letters"

[[alerts]]
name = "backlog"
when = "depth > 100000"
"#;

/// The settings of a console started with the rules of `RULES` and these notifications.
fn with_rules(bell: bool, desktop: bool) -> impl FnOnce(&mut Setup) {
    move |s: &mut Setup| {
        let cfg = qdeck_model::config::parse_str(RULES).unwrap();
        s.alert_rules = qdeck_engine::alerts::rules(&cfg).unwrap();
        s.notify.bell = bell;
        s.notify.desktop = desktop;
    }
}

/// The scene's DLQ (7 dead letters while it was polled) empties, then fills again: the rule
/// that fired while the scene was set up resolves and fires anew.
fn refill_dlq(st: &mut State) -> Vec<Effect> {
    poll_dlq(st, 0);
    assert_eq!(st.alerts.firing(), 0, "{:?}", st.alerts.firing_rows());
    poll_dlq(st, 7)
}

/// A console of `profile` started with no figures and the rules of `RULES`.
fn ruled(profile: &str) -> State {
    let cfg = qdeck_model::config::parse_str(RULES).unwrap();
    let mut setup = Setup::new(profile, "local");
    setup.alert_rules = qdeck_engine::alerts::rules(&cfg).unwrap();
    State::with(
        qdeck_engine::store::Store::new(600, 240, 600.0),
        caps(),
        setup,
    )
}

/// One poll of the DLQ's figures at `depth`.
fn poll_dlq(st: &mut State, depth: u64) -> Vec<Effect> {
    let now = st.now_ms + 2_000;
    update(st, Action::Tick(now));
    let batch = StatsBatch {
        stats: vec![QueueStats {
            id: QueueId::new("orders-dlq"),
            at_ms: st.now_ms,
            depth: Some(depth),
            in_flight: Some(0),
            oldest_age_secs: Some(3_700.0),
            ..Default::default()
        }],
        errors: vec![],
    };
    update(st, Action::Poll(PollEvent::Stats(batch)))
}

/// The rules firing on the console's profile, by name.
fn firing_rules(st: &State) -> Vec<String> {
    let mut v: Vec<String> = st
        .alerts
        .firing_rows()
        .into_iter()
        .map(|f| f.rule)
        .collect();
    v.sort();
    v
}

fn command(st: &mut State, text: &str) {
    for c in text.chars() {
        update(st, key(c));
    }
    update(st, code(KeyCode::Enter));
}

#[test]
fn a_firing_rule_is_a_badge_ranks_first_on_fire_and_opens_its_queue() {
    let mut st = fire_state_with(with_rules(false, false));
    let fx = refill_dlq(&mut st);
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Notify { .. })),
        "notifications are off by default"
    );
    assert_eq!(st.alerts.firing(), 1);
    let screen = text(&draw(&st, 100, 24));
    assert!(screen.contains("⚑ 1 firing"), "{screen}");

    command(&mut st, ":fire");
    assert_eq!(st.view(), View::Fire);
    let rows = st.fleet.as_ref().unwrap().fire_rows(st.now_ms);
    assert!(
        matches!(rows[0], qdeck::tui::state::FireRow::Alert(_)),
        "{rows:?}"
    );
    // Nobody moved the on-fire cursor: it is on the top row, where the alert ranked in.
    assert_eq!(st.fleet.as_ref().unwrap().fire_cursor.sel, 0);
    let screen = text(&draw(&st, 100, 24));
    assert!(screen.contains("1 alert firing"), "{screen}");
    let first_alert_line = screen
        .lines()
        .position(|l| l.contains("⚑ orders-dlq") && l.contains("crit"))
        .unwrap();
    // The alert row carries the queue's figures from its profile's row.
    assert!(
        screen
            .lines()
            .nth(first_alert_line)
            .unwrap()
            .contains(" 7 "),
        "{screen}"
    );
    let first_queue_line = screen
        .lines()
        .position(|l| l.contains("billing-events"))
        .unwrap();
    assert!(first_alert_line < first_queue_line, "{screen}");
    // The selected alert's whole line is under the table.
    assert!(
        screen.contains(
            "critical dlq-not-empty, firing for 0s; when it fired: orders-dlq holds 7 dead letters"
        ),
        "{screen}"
    );

    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    assert_eq!(st.focus, Some(QueueId::new("orders-dlq")));
}

#[test]
fn the_alerts_view_follows_each_rule_until_it_resolves() {
    let mut st = populated_with(with_rules(false, false));
    poll_dlq(&mut st, 7);
    command(&mut st, ":alerts");
    assert_eq!(st.view(), View::Alerts);
    let screen = text(&draw(&st, 80, 24));
    assert!(
        screen.contains("2 rules · 1 firing · 0 pending"),
        "{screen}"
    );
    assert!(screen.contains("FIRING  orders-dlq"), "{screen}");
    assert!(screen.contains("backlog"), "{screen}");
    assert!(screen.contains("quiet"), "{screen}");

    poll_dlq(&mut st, 0);
    assert_eq!(st.alerts.firing(), 0);
    let screen = text(&draw(&st, 80, 24));
    assert!(screen.contains("0 firing"), "{screen}");
    assert!(screen.contains("resolved orders-dlq"), "{screen}");
    assert!(
        !screen.contains("⚑"),
        "the badge goes with the last firing rule: {screen}"
    );
}

#[test]
fn notify_rings_and_sends_a_desktop_line_once_per_firing() {
    let mut st = populated_with(with_rules(true, true));
    let fx = refill_dlq(&mut st);
    let notes: Vec<&Effect> = fx
        .iter()
        .filter(|e| matches!(e, Effect::Notify { .. }))
        .collect();
    assert_eq!(
        notes,
        [&Effect::Notify {
            bell: true,
            desktop: Some("critical dlq-not-empty: orders-dlq holds 7 dead letters".into()),
        }]
    );
    // Still firing: nothing more.
    let fx = poll_dlq(&mut st, 8);
    assert!(!fx.iter().any(|e| matches!(e, Effect::Notify { .. })));
    // A resolution does not ring.
    let fx = poll_dlq(&mut st, 0);
    assert!(!fx.iter().any(|e| matches!(e, Effect::Notify { .. })));
}

/// The fleet poller evaluates the rules on every profile it polls into the console's alert
/// book: another profile's firing rule ranks first in the on-fire view and is in `:alerts`;
/// when that profile becomes the console's own, the same state goes on (no gap, no new age,
/// no drop of the badge) and the profile left stays listed.
#[tokio::test]
async fn another_profiles_firing_rule_comes_through_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    {
        let h = qdeck_backend::local::LocalHandle::open(&b).unwrap();
        let opts = qdeck_backend::local::QueueOptions {
            dlq: Some("orders.dlq".into()),
            max_receives: Some(3),
            ..Default::default()
        };
        h.0.create_queue("orders", &opts).unwrap();
        h.0.send_sync(
            "orders.dlq",
            &qdeck_model::domain::OutgoingMessage {
                body: b"poison".to_vec(),
                ..Default::default()
            },
        )
        .unwrap();
        drop(qdeck_backend::local::LocalHandle::open(&a).unwrap());
    }
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nrefresh_secs = 0.3\n\n[[profiles]]\nname = \"a\"\nkind = \"local\"\npath = {:?}\n\n\
             [[profiles]]\nname = \"b\"\nkind = \"local\"\npath = {:?}\n{RULES}",
            a.display().to_string(),
            b.display().to_string()
        ),
    )
    .unwrap();
    let config = qdeck_model::config::validate_file(&cfg).unwrap();
    let rules = qdeck_engine::alerts::rules(&config).unwrap();
    let names = vec!["a".to_string(), "b".to_string()];
    let mut st = ruled("a");
    update(&mut st, Action::FleetStarted(names.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let _fleet = qdeck_engine::fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: true,
        },
        &names,
        rules,
        st.alerts.book.clone(),
        tx,
    );
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while st.fleet.as_ref().unwrap().alerts.is_empty() {
            let row = rx.recv().await.unwrap();
            update(&mut st, Action::Fleet(row));
        }
    })
    .await
    .expect("profile b's rule fires within 30 s");
    let fl = st.fleet.as_ref().unwrap();
    assert_eq!(fl.alerts.len(), 1);
    let f = &fl.alerts[0];
    assert_eq!(
        (f.profile.as_str(), f.rule.as_str()),
        ("b", "dlq-not-empty")
    );
    assert_eq!(f.queue, Some(QueueId::new("orders.dlq")));
    assert_eq!(f.summary, "orders.dlq holds 1 dead letters");
    let rows = fl.fire_rows(qdeck_model::domain::now_ms());
    assert!(matches!(rows[0], qdeck::tui::state::FireRow::Alert(_)));
    assert_eq!(rows[0].profile(), "b");
    let since = f.since_ms;
    assert_eq!(
        st.alerts.firing(),
        0,
        "nothing fires on the console's own a"
    );

    // `:alerts` lists it under its rule, named with its profile.
    command(&mut st, ":alerts");
    let screen = text(&draw(&st, 100, 24));
    assert!(screen.contains("FIRING  b/orders.dlq"), "{screen}");
    assert!(screen.contains("2 rules · 1 firing"), "{screen}");

    // b becomes the console's own profile: its alert keeps firing since the time the fleet
    // saw it start, listed once, with nothing announced again.
    let badge = st.alerts_firing();
    let fresh = ruled("b");
    qdeck::tui::update::switched(&mut st, fresh);
    assert_eq!(st.alerts.book.console().as_deref(), Some("b"));
    let own = st.alerts.firing_rows();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!((own[0].profile.as_str(), own[0].since_ms), ("b", since));
    // The console's own first polls of b (the DLQ listed, not measured yet) leave it firing.
    update(
        &mut st,
        Action::Poll(PollEvent::Queues(vec![qdeck_model::domain::QueueInfo {
            id: QueueId::new("orders.dlq"),
            is_dlq: true,
            ..Default::default()
        }])),
    );
    update(
        &mut st,
        Action::Poll(PollEvent::Stats(StatsBatch::default())),
    );
    let fl = st.fleet.as_ref().unwrap();
    assert_eq!(fl.alerts.len(), 1, "listed once: {:?}", fl.alerts);
    assert_eq!(fl.alerts[0].since_ms, since);
    assert_eq!(st.alerts_firing(), badge, "the badge does not drop");
    command(&mut st, ":alerts");
    let screen = text(&draw(&st, 100, 24));
    assert!(screen.contains("FIRING  orders.dlq"), "{screen}");
}

#[test]
fn a_health_rule_fires_when_the_profiles_polls_fail_and_when_its_figures_go_stale() {
    let cfg = qdeck_model::config::parse_str(
        "[[alerts]]\nname = \"down\"\nwhen = \"unreachable\"\n\n[[alerts]]\nname = \"old\"\nwhen = \"stale\"\n",
    )
    .unwrap();
    let mut st = populated_with(|s| {
        s.alert_rules = qdeck_engine::alerts::rules(&cfg).unwrap();
        s.session.refresh_secs = 2.0;
    });
    poll_dlq(&mut st, 1);
    assert_eq!(st.alerts.firing(), 0);
    update(
        &mut st,
        Action::Poll(PollEvent::Error(PollError::Backend(
            BackendError::Unreachable("connection refused".into()),
        ))),
    );
    let firing = firing_rules(&st);
    assert_eq!(firing, ["down"]);
    // Seven seconds without a success at a 2 s refresh: stale too.
    let now = st.now_ms + 7_000;
    update(&mut st, Action::Tick(now));
    update(
        &mut st,
        Action::Poll(PollEvent::Error(PollError::Backend(
            BackendError::Unreachable("connection refused".into()),
        ))),
    );
    let firing = firing_rules(&st);
    assert_eq!(firing, ["down", "old"]);
    // A success ends both.
    poll_dlq(&mut st, 1);
    assert_eq!(st.alerts.firing(), 0, "{:?}", st.alerts.firing_rows());
}

/// With no queue on screen (`:alerts` here, the fleet view, `:ops`) the console's poller asks
/// only on its sweep, every 10 s at a 2 s refresh, so the profile's stale rule waits three
/// sweeps there; on the queue table, three refreshes. (In the fleet view it fired and resolved
/// with every sweep.)
#[test]
fn a_stale_rule_goes_by_the_sweep_while_no_queue_is_on_screen() {
    let cfg =
        qdeck_model::config::parse_str("[[alerts]]\nname = \"old\"\nwhen = \"stale\"\n").unwrap();
    let mut st = populated_with(|s| {
        s.alert_rules = qdeck_engine::alerts::rules(&cfg).unwrap();
        s.session.refresh_secs = 2.0;
    });
    poll_dlq(&mut st, 1);
    command(&mut st, ":alerts");
    let polled_at = st.now_ms;
    update(&mut st, Action::Tick(polled_at + 9_000));
    assert_eq!(st.alerts.firing(), 0, "three refreshes, within one sweep");
    update(&mut st, Action::Tick(polled_at + 31_000));
    let firing = firing_rules(&st);
    assert_eq!(firing, ["old"], "three sweeps without an answer");
    // Back on the queue table the refresh is the period again.
    update(&mut st, code(KeyCode::Esc));
    poll_dlq(&mut st, 1);
    assert_eq!(st.alerts.firing(), 0);
    let polled_at = st.now_ms;
    update(&mut st, Action::Tick(polled_at + 7_000));
    assert_eq!(st.alerts.firing(), 1, "three refreshes without an answer");
}

/// Without rules the view says how to add them, whole even on a narrow terminal.
#[test]
fn the_alerts_view_without_rules_says_how_to_add_them_at_60_columns() {
    let mut st = populated();
    command(&mut st, ":alerts");
    let screen = text(&draw(&st, 60, 15));
    assert!(screen.contains("no alert rules"), "{screen}");
    assert!(screen.contains("shows how)"), "{screen}");
}

/// A rule pending on a profile in the fleet (its condition holds, its `for` not over yet) goes
/// on counting from when the fleet saw it start once that profile becomes the console's own:
/// it fires at the console's first poll after the fleet's start plus `for`, not a whole `for`
/// after the switch.
#[test]
fn a_pending_rule_keeps_its_start_when_its_profile_becomes_the_consoles() {
    use qdeck_engine::alerts::{Evaluator, Health, Key, Phase};
    let cfg = qdeck_model::config::parse_str(
        "[[alerts]]\nname = \"slow\"\nwhen = \"depth > 0\"\nfor = \"60s\"\n",
    )
    .unwrap();
    let rules = qdeck_engine::alerts::rules(&cfg).unwrap();
    let mut st = populated_with(|s| s.alert_rules = rules.clone());
    // The fleet poller's view of profile b: orders holds 5, first seen at `since`.
    let mut fleet_store = qdeck_engine::store::Store::new(600, 240, 600.0);
    fleet_store.set_queues(
        vec![qdeck_model::domain::QueueInfo {
            id: QueueId::new("orders"),
            ..Default::default()
        }],
        qdeck_model::domain::now_ms(),
    );
    // After the store's epoch: samples are kept as offsets from it.
    let since = qdeck_model::domain::now_ms() + 1_000;
    fleet_store.apply(
        StatsBatch {
            stats: vec![QueueStats {
                id: QueueId::new("orders"),
                at_ms: since,
                depth: Some(5),
                ..Default::default()
            }],
            errors: vec![],
        },
        qdeck_model::domain::now_ms(),
    );
    let book = st.alerts.book.clone();
    book.evaluate(
        Evaluator::Fleet,
        &rules,
        "b",
        &fleet_store,
        Health::default(),
        since,
    );
    let key = Key {
        rule: "slow".into(),
        profile: "b".into(),
        queue: "orders".into(),
    };
    let mut setup = Setup::new("b", "local");
    setup.alert_rules = rules;
    let mut fresh = State::with(
        qdeck_engine::store::Store::new(600, 240, 600.0),
        caps(),
        setup,
    );
    update(&mut fresh, Action::Tick(since + 30_000));
    qdeck::tui::update::switched(&mut st, fresh);
    let phase = |st: &State| {
        st.alerts
            .book
            .read(|t| t.phases().find(|(k, _)| **k == key).map(|(_, p)| *p))
    };
    assert_eq!(phase(&st), Some(Phase::Pending { since_ms: since }));
    // The console's own polls of b: still pending 30 s in, firing at the first poll past 60 s.
    update(
        &mut st,
        Action::Poll(PollEvent::Queues(vec![qdeck_model::domain::QueueInfo {
            id: QueueId::new("orders"),
            ..Default::default()
        }])),
    );
    let poll = |st: &mut State, at: i64| {
        update(st, Action::Tick(at));
        update(
            st,
            Action::Poll(PollEvent::Stats(StatsBatch {
                stats: vec![QueueStats {
                    id: QueueId::new("orders"),
                    at_ms: at,
                    depth: Some(5),
                    ..Default::default()
                }],
                errors: vec![],
            })),
        );
    };
    poll(&mut st, since + 32_000);
    assert_eq!(phase(&st), Some(Phase::Pending { since_ms: since }));
    poll(&mut st, since + 61_000);
    assert_eq!(
        phase(&st),
        Some(Phase::Firing {
            since_ms: since + 61_000
        })
    );
}
