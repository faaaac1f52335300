//! The fleet view's STATE column (issue 41 item 14, "narrower at 120 columns than at 80"):
//! every state shows whole, at 80 and at 120 columns, in the on-fire view's words; columns
//! give way before a state is cut, and an error's full text is under the table.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
use common::console::*;

use qdeck::tui::state::State;
use qdeck::tui::update;
use qdeck_engine::fleet::FleetRow;
use qdeck_model::domain::BrokerKind;

/// `fleet_state` (ok, refusing, stale) plus a broker that accepts and never answers, down
/// for 45 s, and one still connecting.
fn fleet() -> State {
    let mut st = fleet_state();
    let now = st.now_ms;
    grow_fleet(
        &mut st,
        vec![
            FleetRow {
                profile: "hung".into(),
                kind: Some(BrokerKind::Rabbitmq),
                error: Some("no answer within 20s".into()),
                failing_since_ms: Some(now - 45_000),
                silent_after_secs: Some(20),
                refresh_secs: 5.0,
                ..Default::default()
            },
            FleetRow {
                profile: "new".into(),
                refresh_secs: 5.0,
                ..Default::default()
            },
        ],
    );
    st
}

fn row<'a>(screen: &'a str, profile: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.starts_with(&format!("│{profile} ")))
        .unwrap_or_else(|| panic!("no row {profile}:\n{screen}"))
}

#[test]
fn every_state_shows_whole_at_80_and_120_columns() {
    let st = fleet();
    for w in [80, 120] {
        let screen = text(&draw(&st, w, 24));
        for (profile, state) in [
            ("local", "ok 2s ago"),
            ("rabbit-eu", "down"),
            ("sqs-prod", "stale 60s"),
            ("hung", "no answer for 45s"),
            ("new", "connecting…"),
        ] {
            let r = row(&screen, profile);
            // Whole: followed by blanks up to the border, not by `…`.
            let cell = r.trim_end_matches('│').trim_end();
            assert!(
                cell.ends_with(state),
                "{w} columns, {profile}: {r}\n{screen}"
            );
        }
    }
}

#[test]
fn the_state_column_is_no_narrower_at_120_columns_than_at_80() {
    let st = fleet();
    let width = |w: u16| {
        let screen = text(&draw(&st, w, 24));
        let head = screen.lines().find(|l| l.contains("STATE")).unwrap();
        // From the heading to the frame's right border.
        head.chars().count()
            - head
                .find("STATE")
                .map(|i| head[..i].chars().count())
                .unwrap()
            - 1
    };
    assert!(width(120) >= width(80), "{} < {}", width(120), width(80));
    assert!(width(80) >= "no answer for 47h59".len());
}

#[test]
fn the_selected_profiles_error_is_whole_under_the_table() {
    let mut st = fleet();
    update(&mut st, key('j'));
    assert_eq!(st.fleet.as_ref().unwrap().selected(), Some("rabbit-eu"));
    let t = draw(&st, 80, 24);
    assert_no_controls(&t);
    let flat: String = text(&t)
        .lines()
        .map(|l| l.trim_matches('│').trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains("rabbit-eu: management API at http://127.0.0.1:1 is not reachable"),
        "{flat}"
    );
}
