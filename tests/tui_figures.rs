#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping
//! Figures that must not contradict each other on screen (issue 25, items 9 and 10): the
//! detail's trend after scaling, sort titles against the rows they sort, the ETA order, and
//! the fleet's oldest message against the on-fire view.

mod common;
use common::console::*;

use crossterm::event::KeyCode;
use qdeck::tui::state::{Setup, State, View};
use qdeck::tui::{update, Action};
use qdeck_engine::fleet::{summarize, FleetRow};
use qdeck_engine::poller::PollEvent;
use qdeck_model::domain::*;

fn snap(name: &str, st: &State, w: u16, h: u16) {
    insta::assert_snapshot!(name, text(&draw(st, w, h)));
}

fn sorted_names(st: &State) -> Vec<String> {
    st.queues
        .rows
        .iter()
        .map(|&i| st.store.entries()[i].info.id.as_str().to_string())
        .collect()
}

// ---------- item 9: the trend follows a scaling ----------

/// `jobs`, polled every 2 s as the console does: 10/s arrive onto a backlog of 200, one worker
/// does 6/s until the poll at t = 60 sees three (`+ +`), which do 18/s together.
fn scaled_up(until: i64) -> State {
    let mut st = listed_state(
        Setup::new("local", "local"),
        caps(),
        vec![qinfo("jobs", None)],
    );
    let epoch = st.store.epoch_ms();
    for t in (0..=until).step_by(2) {
        let tu = t as u64;
        let done = if tu <= 60 {
            6 * tu
        } else {
            360 + 18 * (tu - 60)
        };
        let enq = 200 + 10 * tu;
        let workers = if tu < 60 { 1 } else { 3 };
        polled(
            &mut st,
            vec![QueueStats {
                id: QueueId::new("jobs"),
                at_ms: epoch + t * 1000,
                depth: Some(enq - done),
                in_flight: Some(workers as u64),
                delayed: Some(0),
                oldest_age_secs: Some(20.0),
                consumers: Some(workers),
                enqueued_total: Some(enq),
                completed_total: Some(done),
                ..Default::default()
            }],
        );
    }
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(80, 24));
    select(&mut st, "jobs");
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Detail);
    st
}

/// After `+ +` the depth falls at once; the detail used to say "growing at 4.0/s: does not
/// drain" until its 60 s window forgot the single worker.
#[test]
fn detail_says_draining_two_polls_after_the_workers_scale_up() {
    let before = text(&draw(&scaled_up(58), 80, 24));
    assert!(before.contains("trend growing"), "{before}");
    let mut st = scaled_up(64);
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("trend draining"), "{s}");
    assert!(s.contains("drains in ~51s"), "408 left at 8/s:\n{s}");
    assert!(s.contains("since the worker count changed"), "{s}");
    assert!(!s.contains("does not drain"), "{s}");
    snap("figures_detail_after_scale_up_80x24", &st, 80, 24);
    // The table's ETA agrees with the detail.
    update(&mut st, code(KeyCode::Esc));
    assert_eq!(st.view(), View::Queues);
    let table = text(&draw(&st, 80, 24));
    assert!(table.contains("~51s"), "{table}");
}

// ---------- item 10a: sort titles count the rows that show no figure ----------

/// The populated queues, plus `fresh` (listed, never polled) and `partial` (polled once: a
/// depth, a DLQ it reports nothing of, no age and no rates yet).
fn with_gaps() -> State {
    let mut st = populated();
    let mut infos: Vec<QueueInfo> = st.store.entries().iter().map(|e| e.info.clone()).collect();
    infos.push(qinfo("fresh", None));
    infos.push(qinfo("partial", Some("partial-dlq")));
    update(&mut st, Action::Poll(PollEvent::Queues(infos)));
    let at = st.store.epoch_ms() + 40_000;
    polled(
        &mut st,
        vec![QueueStats {
            id: QueueId::new("partial"),
            at_ms: at,
            depth: Some(12),
            ..Default::default()
        }],
    );
    clock_at_last_poll(&mut st);
    st
}

/// The number the title gives for rows sorted last, 0 when it says none.
fn title_count(screen: &str) -> usize {
    let title = screen
        .lines()
        .find(|l| l.contains("┌ queues "))
        .unwrap_or("");
    let Some(at) = title.find(" without ") else {
        return 0;
    };
    let n: String = title[..at]
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .collect();
    n.chars()
        .rev()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Each row's cell in the column whose header carries the sort arrow, read off the screen.
fn sorted_cells(screen: &str) -> Vec<String> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let head = lines
        .iter()
        .position(|l| l.iter().collect::<String>().contains("QUEUE¹"))
        .expect("header");
    let h = &lines[head];
    let arrow = h
        .iter()
        .position(|c| *c == '↓' || *c == '↑')
        .expect("arrow");
    // The header's name starts after the blank before it.
    let col = (0..arrow).rev().find(|&i| h[i] == ' ').expect("blank") + 1;
    lines[head + 1..]
        .iter()
        .take_while(|l| l.first() == Some(&'│'))
        .map(|l| l[col..].iter().take_while(|c| **c != ' ').collect())
        .collect()
}

/// `6` (DLQ) said `3 without figures yet, sorted last` while every row showed `7` or `·`.
#[test]
fn dlq_sort_counts_no_row_that_shows_a_figure() {
    let mut st = populated();
    update(&mut st, key('6'));
    let s = text(&draw(&st, 120, 30));
    assert!(s.contains("sort dlq ↓"), "{s}");
    assert!(
        !s.contains("without"),
        "every row shows its DLQ figure:\n{s}"
    );
    // Most in the DLQ first, then 0, then the queues with no DLQ (`·`).
    assert_eq!(sorted_names(&st)[0], "orders");
}

/// For every sort column: the title counts exactly the rows whose cell shows `—`.
#[test]
fn every_sort_title_counts_exactly_the_rows_showing_no_figure() {
    for digit in ['2', '3', '4', '5', '6', '7', '8', '9'] {
        let mut st = with_gaps();
        update(&mut st, key(digit));
        let s = text(&draw(&st, 200, 50));
        let cells = sorted_cells(&s);
        assert_eq!(cells.len(), 6, "{digit}: every row drawn\n{s}");
        let dashes = cells.iter().filter(|c| *c == "—").count();
        assert!(dashes > 0, "{digit}: `fresh` shows no figure\n{s}");
        assert_eq!(title_count(&s), dashes, "{digit}: {cells:?}\n{s}");
        // Those rows come last, whatever the direction.
        assert!(
            cells[cells.len() - dashes..].iter().all(|c| c == "—"),
            "{digit}: {cells:?}"
        );
        update(&mut st, key(digit));
        let s = text(&draw(&st, 200, 50));
        let cells = sorted_cells(&s);
        assert_eq!(title_count(&s), dashes, "{digit} reversed\n{s}");
        assert!(
            cells[cells.len() - dashes..].iter().all(|c| c == "—"),
            "{digit}: {cells:?}"
        );
    }
}

/// "yet" only while the rows are unpolled: `partial` was polled and will not get a DLQ figure
/// from the next sweep (`fresh` has no DLQ: its `·` is a figure).
#[test]
fn the_title_says_yet_only_of_unpolled_rows() {
    let mut st = with_gaps();
    update(&mut st, key('2'));
    let s = text(&draw(&st, 120, 30));
    assert!(s.contains("1 without figures yet, sorted last"), "{s}");
    update(&mut st, key('6'));
    let s = text(&draw(&st, 120, 30));
    assert!(s.contains("1 without a figure, sorted last"), "{s}");
    let s = text(&draw(&st, 60, 15));
    assert!(s.contains("1 no figure"), "{s}");
}

// ---------- item 10b: one ETA order ----------

/// The populated queues (`orders` +6.0/s, `payments` ~3m, `orders-dlq` flat, `emails`
/// empty) plus `surge` (+20.0/s), `nearly` (~10s), `poison` (stuck?) and `fresh` (—).
fn every_eta() -> State {
    let mut st = populated();
    let mut infos: Vec<QueueInfo> = st.store.entries().iter().map(|e| e.info.clone()).collect();
    for q in ["surge", "nearly", "poison", "fresh"] {
        infos.push(qinfo(q, None));
    }
    update(&mut st, Action::Poll(PollEvent::Queues(infos)));
    let epoch = st.store.epoch_ms();
    for t in 0..=40u64 {
        let s = |id: &str, depth: u64, enq: u64, done: u64, age: f64| QueueStats {
            id: QueueId::new(id),
            at_ms: epoch + t as i64 * 1000,
            depth: Some(depth),
            enqueued_total: Some(enq),
            completed_total: Some(done),
            consumers: Some(1),
            oldest_age_secs: Some(age),
            ..Default::default()
        };
        polled(
            &mut st,
            vec![
                s("surge", 20 * t, 30 * t, 10 * t, 1.0),
                s("nearly", 400 - 8 * t, 2 * t, 10 * t, 1.0),
                s("poison", 5, 0, 0, 100.0 + t as f64),
            ],
        );
    }
    clock_at_last_poll(&mut st);
    st
}

/// `+0.2/s` sorted below `~1s` and `empty`, and growing queues among themselves by name.
/// Descending is worst first: growing fastest, stuck?, flat, longest to drain … empty.
#[test]
fn eta_sorts_worst_first_and_ascending_is_the_reverse() {
    let mut st = every_eta();
    update(&mut st, key('9'));
    let s = text(&draw(&st, 120, 30));
    assert!(s.contains("sort eta ↓"), "{s}");
    let want = [
        ("surge", "+20.0/s"),
        ("orders", "+6.0/s"),
        ("poison", "stuck?"),
        ("orders-dlq", "flat"),
        ("payments", "~3m"),
        ("nearly", "~10s"),
        ("emails", "empty"),
        ("fresh", "—"),
    ];
    let cells = sorted_cells(&s);
    let got: Vec<(String, String)> = sorted_names(&st).into_iter().zip(cells).collect();
    let want_v: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(got, want_v, "\n{s}");
    update(&mut st, key('9'));
    let mut reversed: Vec<&str> = want[..7].iter().rev().map(|(q, _)| *q).collect();
    reversed.push("fresh");
    assert_eq!(sorted_names(&st), reversed, "ascending, `—` still last");
    // The help says the order.
    update(&mut st, key('?'));
    let help = text(&draw(&st, 80, 24));
    assert!(
        help.contains("ETA worst first: growing, stuck?, flat, longest … empty"),
        "{help}"
    );
}

// ---------- item 10c: the fleet's oldest message counts DLQs ----------

/// A RabbitMQ profile whose live queues report no age (no message timestamps) and whose DLQ
/// holds messages 5 minutes old, summed up as the fleet's poller does.
fn rabbit_fleet() -> State {
    let mut st = populated();
    let infos = vec![
        qinfo("orders", Some("orders.dlq")),
        QueueInfo {
            id: QueueId::new("orders.dlq"),
            is_dlq: true,
            ..Default::default()
        },
    ];
    let stat = |q: &str, depth: u64, age: Option<f64>| QueueStats {
        id: QueueId::new(q),
        depth: Some(depth),
        oldest_age_secs: age,
        ..Default::default()
    };
    let batch = StatsBatch {
        stats: vec![stat("orders", 40, None), stat("orders.dlq", 3, Some(300.0))],
        errors: vec![],
    };
    let mut row = FleetRow {
        profile: "rabbit".into(),
        kind: Some(qdeck_model::domain::BrokerKind::Rabbitmq),
        refresh_secs: 5.0,
        max_age_secs: 300.0,
        updated_ms: Some(st.now_ms),
        ..Default::default()
    };
    summarize(
        &mut row,
        &infos,
        &batch,
        &mut qdeck_engine::depth_window::DepthWindow::default(),
    );
    update(&mut st, Action::FleetStarted(vec!["rabbit".to_string()]));
    update(&mut st, Action::Fleet(row));
    assert_eq!(st.view(), View::Fleet);
    st
}

/// Fleet OLDEST was `—` while the on-fire view showed the DLQ's `5m`.
#[test]
fn fleet_oldest_counts_the_dlq_and_says_so_as_the_fire_view_does() {
    let mut st = rabbit_fleet();
    let fleet = text(&draw(&st, 80, 24));
    let row = fleet.lines().find(|l| l.contains("rabbit ")).unwrap();
    assert!(row.contains("5m dlq"), "{fleet}");
    snap("figures_fleet_dlq_oldest_80x24", &st, 80, 24);
    let wide = text(&draw(&st, 120, 10));
    let row = wide.lines().find(|l| l.contains("rabbit ")).unwrap();
    assert!(
        row.contains("5m dlq") && row.contains("orders.dlq"),
        "{wide}"
    );
    update(&mut st, key('f'));
    let fire = text(&draw(&st, 80, 24));
    let dlq_row = fire.lines().find(|l| l.contains("orders.dlq")).unwrap();
    assert!(dlq_row.contains("5m"), "{fire}");
}

// ---------- Kafka: records lost to retention ----------

/// A Kafka group row behind its topic's log start: its depth is drawn in the theme's error
/// colour and the detail counts the records lost; a row with none lost stays plain.
#[test]
fn records_lost_to_retention_turn_the_depth_red_and_are_counted() {
    let mut st = listed_state(
        Setup::new("kafka", "kafka"),
        caps(),
        vec![qinfo("late@orders", None), qinfo("fine@orders", None)],
    );
    let epoch = st.store.epoch_ms();
    let stats = |name: &str, lost: u64| QueueStats {
        id: QueueId::new(name),
        at_ms: epoch,
        depth: Some(4321),
        lost: Some(lost),
        ..Default::default()
    };
    polled(
        &mut st,
        vec![stats("late@orders", 17), stats("fine@orders", 0)],
    );
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(80, 24));
    let t = draw(&st, 80, 24);
    let buf = t.backend().buffer();
    let depth_style = |row: &str| {
        let y = (0..buf.area.height)
            .find(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, *y)].symbol())
                    .collect::<String>()
                    .contains(row)
            })
            .unwrap_or_else(|| panic!("{row} not drawn:\n{}", text(&t)));
        let line: Vec<&str> = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        let x = (0..line.len() - 3)
            .find(|x| line[*x..*x + 4].concat() == "4321")
            .unwrap_or_else(|| panic!("no depth on the row of {row}"));
        buf[(x as u16, y)].style()
    };
    let error_fg = st.theme.error.fg;
    assert!(error_fg.is_some());
    assert_eq!(depth_style("late@orders").fg, error_fg);
    assert_ne!(depth_style("fine@orders").fg, error_fg);

    select(&mut st, "late@orders");
    update(&mut st, code(KeyCode::Enter));
    let detail = text(&draw(&st, 80, 24));
    assert!(detail.contains("17 lost to retention"), "{detail}");
}

/// Figures a metrics service sampled (Pub/Sub's Cloud Monitoring: a point a minute, read
/// minutes later) are marked `≈` in the table, and the summary pane says how old they are; a
/// row read live has neither.
#[test]
fn sampled_figures_are_marked_and_their_age_is_said() {
    let mut st = listed_state(
        Setup::new("ps", "ps"),
        caps(),
        vec![qinfo("proj/sampled-sub", None), qinfo("live", None)],
    );
    let epoch = st.store.epoch_ms();
    let stats = |name: &str, sampled: Option<Sampled>| QueueStats {
        id: QueueId::new(name),
        at_ms: epoch,
        depth: Some(7),
        oldest_age_secs: Some(900.0),
        sampled,
        ..Default::default()
    };
    let three_min_before = Sampled {
        at_ms: epoch - 180_000,
        every_secs: 60,
    };
    polled(
        &mut st,
        vec![
            stats("proj/sampled-sub", Some(three_min_before)),
            stats("live", None),
        ],
    );
    update(&mut st, Action::Tick(epoch));
    update(&mut st, Action::Resize(80, 24));
    let screen = text(&draw(&st, 80, 24));
    let marker = |name: &str| {
        screen
            .lines()
            .find(|l| l.contains(name) && !l.contains("selected"))
            .and_then(|l| l.trim_start_matches(['│', ' ']).chars().next())
            .unwrap_or_else(|| panic!("{name} not drawn:\n{screen}"))
    };
    assert_eq!(marker("proj/sampled-sub"), '≈', "{screen}");
    assert_eq!(
        marker("live"),
        'l',
        "no marker before a live row:\n{screen}"
    );

    select(&mut st, "proj/sampled-sub");
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("15m · as of 3m ago (sampled every 60s)"), "{s}");
    select(&mut st, "live");
    let s = text(&draw(&st, 80, 24));
    assert!(!s.contains("as of"), "{s}");
}
