//! Console fixtures shared by the console test files: a populated state, hostile messages,
//! keys, and drawing to a test terminal.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use qdeck::tui::state::{HeldPlan, Setup, State, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_engine::ops::Planned;
use qdeck_engine::poller::PollEvent;
use qdeck_engine::store::Store;
use qdeck_model::domain::*;

pub const T0: i64 = 1_764_600_000_000; // 2025-12-01T14:40:00Z

/// A plan as the engine makes it for a redrive of `n` messages, client-side, with `notes`.
pub fn redrive_plan(req: &RedriveRequest, n: u64, notes: &[&str]) -> HeldPlan {
    HeldPlan::new(Planned::Redrive {
        req: req.clone(),
        source: QueueInfo {
            id: req.source.clone(),
            is_dlq: true,
            ..Default::default()
        },
        plan: RedrivePlan {
            count: MessageCount {
                ready: n,
                in_flight: Some(0),
                exact: true,
            },
            mode: RedriveMode::ClientSide,
            notes: notes.iter().map(std::string::ToString::to_string).collect(),
        },
        selection: None,
        filter: None,
    })
}

/// A plan for purging `queue`, holding `n` ready messages.
pub fn purge_plan(queue: &str, n: u64) -> HeldPlan {
    HeldPlan::new(Planned::Purge {
        queue: QueueInfo {
            id: QueueId::new(queue),
            ..Default::default()
        },
        count: MessageCount {
            ready: n,
            in_flight: Some(0),
            exact: true,
        },
        note: None,
        subject: None,
    })
}

/// A plan for deleting exactly `ids` from `queue`, with the backend's `note`.
pub fn delete_plan(queue: &QueueId, ids: &[String], note: Option<&str>) -> HeldPlan {
    HeldPlan::new(Planned::Delete {
        queue: QueueInfo {
            id: queue.clone(),
            ..Default::default()
        },
        ids: ids.to_vec(),
        note: note.map(str::to_string),
        selection: serde_json::json!({}),
    })
}

/// Answer the redrive dialog's plan request among `fx` as the broker would: `n` messages,
/// client-side, with `notes`.
pub fn answer_plan(st: &mut State, fx: &[Effect], n: u64, notes: &[&str]) {
    let req = plan_request(fx);
    let result = Ok(redrive_plan(&req, n, notes));
    update(st, Action::RedrivePlanned { req, result });
}

/// The redrive request the dialog asked the engine to plan, among `fx`.
pub fn plan_request(fx: &[Effect]) -> RedriveRequest {
    fx.iter()
        .find_map(|e| match e {
            Effect::PlanRedrive(r) => Some(r.clone()),
            _ => None,
        })
        .expect("the dialog asks for its plan")
}

/// The browser's page of `queue` arrived holding `messages` (the last page).
pub fn page(st: &mut State, queue: &str, messages: Vec<Message>) -> Vec<Effect> {
    update(
        st,
        Action::Page {
            queue: QueueId::new(queue),
            append: false,
            result: Ok(Page {
                messages,
                next: None,
                effect_note: None,
            }),
        },
    )
}

/// `/text` and Enter: the list's search.
pub fn search(st: &mut State, text: &str) {
    update(st, key('/'));
    for c in text.chars() {
        update(st, key(c));
    }
    update(st, code(KeyCode::Enter));
}

/// `:text` and Enter: a command of the prompt; the effects of its Enter.
pub fn run_command(st: &mut State, text: &str) -> Vec<Effect> {
    update(st, key(':'));
    for c in text.chars() {
        update(st, key(c));
    }
    update(st, code(KeyCode::Enter))
}

/// Answer the purge dialog's plan request among `fx`: `n` messages in the queue it names.
pub fn answer_purge(st: &mut State, fx: &[Effect], n: u64) {
    let queue = fx
        .iter()
        .find_map(|e| match e {
            Effect::PlanPurge(q) => Some(q.clone()),
            _ => None,
        })
        .expect("the purge dialog asks for its plan");
    let result = Ok(purge_plan(queue.as_str(), n));
    update(st, Action::PurgePlanned { queue, result });
}

/// Redrive orders-dlq to its origin: planned, confirmed, and running at `progress` (whose
/// total is the plan's count).
pub fn start_redrive(st: &mut State, progress: qdeck_backend::ProgressState) {
    // In the browser `R` redrives the queue browsed.
    if st.view() == View::Queues {
        select(st, "orders-dlq");
    }
    let fx = update(st, key('R'));
    answer_plan(st, &fx, progress.total.unwrap_or(0), &[]);
    update(st, key('y'));
    assert!(st.op.is_some(), "the redrive runs");
    update(st, Action::OpProgress(progress));
}

/// The plan an effect runs, if it runs one.
pub fn run_of(fx: &[Effect]) -> Option<&Planned> {
    fx.iter().find_map(|e| match e {
        Effect::RunPlan(p) => Some(p.planned()),
        _ => None,
    })
}

pub fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

pub fn code(c: KeyCode) -> Action {
    Action::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

pub fn caps() -> Capabilities {
    qdeck_backend::local::capabilities()
}

pub fn qinfo(name: &str, dlq: Option<&str>) -> QueueInfo {
    QueueInfo {
        id: QueueId::new(name),
        dlq: dlq.map(QueueId::new),
        settings: QueueSettings {
            lease_secs: Some(30.0),
            max_receives: dlq.map(|_| 5),
            key_policy: Some("parallel".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A state with a handful of queues and 40 s of history: orders grows at 6/s with one
/// worker doing 4/s, its DLQ holds 7, payments drains.
pub fn populated() -> State {
    populated_with(|_| {})
}

/// `populated`, with the settings `set` gives the profile when the console starts.
pub fn populated_with(set: impl FnOnce(&mut Setup)) -> State {
    populated_on(caps(), set)
}

/// `populated_with`, on a broker that can do `caps`.
pub fn populated_on(caps: Capabilities, set: impl FnOnce(&mut Setup)) -> State {
    let mut setup = Setup::new("local", "local");
    set(&mut setup);
    let mut dlq = qinfo("orders-dlq", None);
    dlq.is_dlq = true;
    dlq.dlq_sources = vec![QueueId::new("orders")];
    let mut st = listed_state(
        setup,
        caps,
        vec![
            qinfo("orders", Some("orders-dlq")),
            dlq,
            qinfo("payments", None),
            qinfo("emails", None),
        ],
    );
    let epoch = st.store.epoch_ms();
    for t in 0..=40i64 {
        let at = epoch + t * 1000;
        let s = |id: &str, depth: u64, enq: u64, done: u64, cons: u32, age: f64| QueueStats {
            id: QueueId::new(id),
            at_ms: at,
            depth: Some(depth),
            in_flight: Some(cons as u64),
            delayed: Some(0),
            dlq_depth: None,
            oldest_age_secs: Some(age),
            consumers: Some(cons),
            enqueued_total: Some(enq),
            completed_total: Some(done),
            ..Default::default()
        };
        let tu = t as u64;
        let mut orders = s("orders", 6 * tu, 10 * tu, 4 * tu, 1, 2.0 + t as f64 * 0.5);
        orders.dlq_depth = Some(7);
        polled(
            &mut st,
            vec![
                orders,
                s("orders-dlq", 7, 7, 0, 0, 3600.0 + t as f64),
                s("payments", 500 - 2 * tu, 10 * tu, 12 * tu, 3, 20.0),
                s("emails", 0, 0, 0, 0, 0.0),
            ],
        );
    }
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(80, 24));
    st
}

/// A console started with `setup` on a broker that can do `caps`, whose poller has listed
/// `queues` and measured none yet (the store keeps the console's default history).
pub fn listed_state(setup: Setup, caps: Capabilities, queues: Vec<QueueInfo>) -> State {
    let mut st = State::with(Store::new(600, 240, 600.0), caps, setup);
    update(&mut st, Action::Poll(PollEvent::Queues(queues)));
    st
}

/// One poll's figures arrived.
pub fn polled(st: &mut State, stats: Vec<QueueStats>) {
    let batch = StatsBatch {
        stats,
        errors: vec![],
    };
    update(st, Action::Poll(PollEvent::Stats(batch)));
}

/// The console's clock ticks at the time the last poll answered: nothing on screen is older
/// than the figures.
pub fn clock_at_last_poll(st: &mut State) {
    let at = st.store.last_ok_ms.expect("a poll answered");
    update(st, Action::Tick(at));
}

pub fn hostile_messages() -> Vec<Message> {
    vec![
        Message {
            id: "1".into(),
            seq: Some(1),
            enqueued_ms: Some(T0),
            receive_count: Some(5),
            key: Some("k\x1b[31m".into()),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("x-evil\x1b]0;title\x07".into(), "\u{202e}gnp.exe".into()),
            ],
            properties: Vec::new(),
            meta: Vec::new(),
            body: br#"{"order":42,"note":"\u001b[2J","items":[1,2,3]}"#.to_vec(),
            body_null: false,
            dead_letter: Some(DeadLetterInfo {
                reason: Some("max receives".into()),
                origin: Some(QueueId::new("orders")),
                count: Some(5),
                ..Default::default()
            }),
        },
        Message {
            id: "2".into(),
            seq: Some(2),
            enqueued_ms: Some(T0 + 1000),
            receive_count: Some(5),
            body: b"clear \x1b[2J\x1b[H title \x1b]0;pwned\x07 cr\rlf\n".to_vec(),
            ..Default::default()
        },
        Message {
            id: "3".into(),
            seq: Some(3),
            enqueued_ms: Some(T0 + 2000),
            receive_count: Some(1),
            body: vec![0, 1, 2, 0x1b, 0xff, 0xfe, 0x9b, 0x80, 7, 8],
            ..Default::default()
        },
    ]
}

pub fn draw(st: &State, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| qdeck::tui::views::render(f, st)).expect("draw");
    t
}

pub fn text(t: &Terminal<TestBackend>) -> String {
    let buf = t.backend().buffer();
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

/// Broker text with escape sequences was drawn in its visible form. Looking for raw controls
/// in the buffer cannot fail: ratatui drops control characters itself, so an unescaped
/// `ESC[2J` shows as a bare `[2J`. That remnant is what this looks for: each sequence the
/// fixtures plant must follow a visible escape, `␛` (or `\u001b` in pretty JSON). (The raw bytes a terminal gets are checked in
/// the PTY tests, `common::pty::foreign_controls`.)
pub fn assert_no_controls(t: &Terminal<TestBackend>) {
    let s = text(t);
    for planted in ["[2J", "[31m", "[H", "]0;"] {
        for (i, _) in s.match_indices(planted) {
            assert!(
                s[..i].ends_with('␛') || s[..i].ends_with("\\u001b"),
                "{planted:?} drawn without its ␛: an escape sequence was not made visible\n{s}"
            );
        }
    }
    for c in s.chars() {
        let u = c as u32;
        assert!(
            !(u < 0x20 && c != '\n'
                || u == 0x7f
                || (0x80..=0x9f).contains(&u)
                || (0x202a..=0x202e).contains(&u)),
            "raw control {u:#x} reached the buffer"
        );
    }
}

/// Put the queue table's cursor on `name`, with the keys a user would press.
pub fn select(st: &mut State, name: &str) {
    let at = st
        .queues
        .rows
        .iter()
        .position(|&i| st.store.entries()[i].info.id.as_str() == name)
        .expect("row");
    update(st, code(KeyCode::Home));
    for _ in 0..at {
        update(st, code(KeyCode::Down));
    }
    assert_eq!(
        st.selected_queue().map(QueueId::as_str),
        Some(name),
        "the cursor reached the row"
    );
}

pub fn open_dlq(st: &mut State) {
    // Select orders-dlq and browse it.
    select(st, "orders-dlq");
    let fx = update(st, key('b'));
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Browse { queue, .. } if queue.as_str() == "orders-dlq")));
    update(
        st,
        Action::Page {
            queue: QueueId::new("orders-dlq"),
            append: false,
            result: Ok(Page {
                messages: hostile_messages(),
                next: Some("3".into()),
                effect_note: None,
            }),
        },
    );
}

/// The copy or move dialog's plan arriving (the answer to `c` or `m`).
pub fn transfer_planned(st: &mut State, ask: qdeck::tui::state::TransferAsk) -> Vec<Effect> {
    update(
        st,
        Action::TransferPlanned {
            moving: ask.moving,
            result: Ok(Box::new(ask)),
        },
    )
}

/// A reasons scan of `orders-dlq` reporting: the groups so far, `scanned` of `total` read.
pub fn reasons_progress(
    st: &mut State,
    groups: Vec<qdeck_engine::triage::Group>,
    scanned: u64,
    total: Option<u64>,
) -> Vec<Effect> {
    update(
        st,
        Action::ReasonsProgress {
            queue: QueueId::new("orders-dlq"),
            groups,
            scanned,
            total,
        },
    )
}

/// Profiles joined the configuration of a `fleet_state`: the fleet's pollers start again with
/// the three and `rows`' profiles, then each new profile's first row comes in.
pub fn grow_fleet(st: &mut State, rows: Vec<qdeck_engine::fleet::FleetRow>) {
    let names: Vec<String> = ["local", "rabbit-eu", "sqs-prod"]
        .into_iter()
        .map(String::from)
        .chain(rows.iter().map(|r| r.profile.clone()))
        .collect();
    update(st, Action::FleetStarted(names));
    for row in rows {
        update(st, Action::Fleet(row));
    }
}

/// The fleet view over three profiles, as the executor starts it and its pollers answer.
pub fn fleet_state() -> State {
    fleet_state_with(|_| {})
}

/// `fleet_state` of a console started with the settings `set` gives.
pub fn fleet_state_with(set: impl FnOnce(&mut Setup)) -> State {
    use qdeck_engine::fleet::FleetRow;
    let mut st = populated_with(set);
    let names: Vec<String> = ["local", "rabbit-eu", "sqs-prod"]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    update(&mut st, Action::FleetStarted(names));
    let now = st.now_ms;
    for row in [
        FleetRow {
            profile: "local".into(),
            kind: Some(qdeck_model::domain::BrokerKind::Local),
            queues: Some(4),
            depth: Some(740),
            dlq_depth: Some(7),
            dlq_change: Some(2),
            worst_age: Some((22.0, QueueId::new("orders"))),
            growing: Some(1),
            updated_ms: Some(now - 2_000),
            refresh_secs: 2.0,
            calls_per_min: Some(60.0),
            ..Default::default()
        },
        FleetRow {
            profile: "rabbit-eu".into(),
            kind: Some(qdeck_model::domain::BrokerKind::Rabbitmq),
            error: Some("management API at http://127.0.0.1:1 is not reachable\x1b[2J".into()),
            refresh_secs: 2.0,
            ..Default::default()
        },
        FleetRow {
            profile: "sqs-prod".into(),
            kind: Some(qdeck_model::domain::BrokerKind::Sqs),
            queues: Some(1200),
            depth: Some(15),
            dlq_depth: Some(0),
            dlq_change: Some(0),
            growing: Some(0),
            updated_ms: Some(now - 60_000),
            refresh_secs: 5.0,
            ..Default::default()
        },
    ] {
        update(&mut st, Action::Fleet(row));
    }
    assert_eq!(st.view(), View::Fleet);
    st
}

pub fn fire_entry(
    queue: &str,
    is_dlq: bool,
    severity: f64,
    depth: u64,
    change: Option<i64>,
    age: Option<f64>,
) -> qdeck_engine::fleet::FireEntry {
    qdeck_engine::fleet::FireEntry {
        queue: QueueId::new(queue),
        is_dlq,
        severity,
        depth: Some(depth),
        change,
        age_secs: age,
        out_rate: None,
    }
}

/// The fleet of `fleet_state`, with queues on fire in two profiles and an SQS cost, its
/// on-fire view open (`f`).
pub fn fire_state() -> State {
    fire_state_with(|_| {})
}

/// `fire_state` of a console started with the settings `set` gives.
pub fn fire_state_with(set: impl FnOnce(&mut Setup)) -> State {
    let mut st = fleet_state_with(set);
    let rows = st.fleet.as_ref().expect("the fleet").rows.clone();
    for mut r in rows {
        r.max_age_secs = 300.0;
        match r.profile.as_str() {
            "local" => {
                r.fire = vec![
                    fire_entry("orders-dlq", true, 37.5, 7, Some(2), Some(900.0)),
                    fire_entry("orders", false, 30.0, 700, Some(40), Some(22.0)),
                    fire_entry("emails", false, 0.0, 40, Some(-5), Some(3.0)),
                ];
            }
            "sqs-prod" => {
                r.usd_per_hour = Some(0.0123);
                r.calls_per_min = Some(410.0);
                r.fire = vec![
                    fire_entry(
                        "billing-events-eu-west-1-invoices\x1b[31m",
                        false,
                        33.0,
                        15,
                        Some(0),
                        Some(1_260.0),
                    ),
                    fire_entry("billing-dlq", true, 0.0, 0, Some(0), None),
                ];
            }
            _ => {}
        }
        update(&mut st, Action::Fleet(r));
    }
    update(&mut st, key('f'));
    assert_eq!(st.stack, vec![View::Fleet, View::Fire]);
    st
}

/// The text inside the dialog box titled `title`, its wrapped rows joined again with spaces
/// (the dialog wraps at word boundaries, so the sentence reads as it was written).
pub fn dialog_text(screen: &str, title: &str) -> String {
    let rows: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let head = format!("┌ {title} ");
    let (top, left) = rows
        .iter()
        .enumerate()
        .find_map(|(y, r)| {
            let s: String = r.iter().collect();
            s.find(&head).map(|b| (y, s[..b].chars().count()))
        })
        .unwrap_or_else(|| panic!("no {title:?} dialog on screen:\n{screen}"));
    let right = (left + 1..rows[top].len())
        .find(|x| rows[top][*x] == '┐')
        .expect("the dialog's top right corner");
    let mut out = Vec::new();
    for r in &rows[top + 1..] {
        if r.get(left) == Some(&'└') {
            break;
        }
        let inner: String = r[left + 1..right].iter().collect();
        let inner = inner.trim();
        if !inner.is_empty() {
            out.push(inner.to_string());
        }
    }
    out.join(" ")
}
