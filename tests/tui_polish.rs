#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping
//! Console polish of issue 25 (items 15-17): the `:` prompt's completion and history, the
//! message search's count and scope, dialog wording and cancelling, help wrapping, footers,
//! the header, the workers' STATE column and queue keys on the fleet.

mod common;
use common::console::*;
use common::pty::Console;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use qdeck::tui::state::{DialogKind, Setup, State, TransferAsk, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_engine::edit::{Edited, EditorOutcome};
use qdeck_engine::poller::PollEvent;
use qdeck_model::config::Access;
use qdeck_model::domain::*;

fn snap(name: &str, st: &State, w: u16, h: u16) {
    let t = draw(st, w, h);
    insta::assert_snapshot!(name, text(&t));
}

fn typed(st: &mut State, s: &str) {
    for c in s.chars() {
        update(st, key(c));
    }
}

fn prompt_text(st: &State) -> String {
    st.input
        .as_ref()
        .map(|i| i.text.clone())
        .unwrap_or_default()
}

fn footer(st: &State, w: u16, h: u16) -> String {
    text(&draw(st, w, h)).lines().last().unwrap().to_string()
}

fn shift_tab() -> Action {
    Action::Key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT))
}

// ---------- item 15: the `:` prompt ----------

/// Tab completes a command's name; with several candidates it fills in the first, shows
/// them all, and cycles on each Tab (Shift-Tab goes back).
#[test]
fn tab_completes_command_names_and_cycles() {
    let mut st = populated();
    update(&mut st, key(':'));
    typed(&mut st, "th");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(
        prompt_text(&st),
        "theme ",
        "one candidate: completed, then a space"
    );
    // Several: the first, the list on screen, then the next ones in turn.
    let mut st = populated();
    update(&mut st, key(':'));
    typed(&mut st, "re");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "reasons");
    snap("prompt_candidates_80x24", &st, 80, 24);
    snap("prompt_candidates_60x15", &st, 60, 15);
    let foot = footer(&st, 80, 24);
    assert!(foot.contains("1/3") && foot.contains("redrive"), "{foot}");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "redrive");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "reset");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "reasons", "cycles round");
    update(&mut st, shift_tab());
    assert_eq!(prompt_text(&st), "reset", "Shift-Tab goes back");
    update(&mut st, shift_tab());
    assert_eq!(prompt_text(&st), "redrive");
    // Typing ends the cycle and keeps the text; the next Tab completes the argument.
    typed(&mut st, " orders-");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "redrive orders-dlq ");
    assert!(st.prompt.completion.is_none());
}

/// Every name Tab offers on an empty prompt is a command `:` runs.
#[test]
fn every_completed_command_is_known() {
    let mut st = populated();
    update(&mut st, key(':'));
    update(&mut st, code(KeyCode::Tab));
    let names = st.prompt.completion.clone().expect("candidates").candidates;
    assert!(
        names.len() > 15 && names.contains(&"ops".to_string()),
        "{names:?}"
    );
    for name in names {
        let mut st = populated();
        update(&mut st, key(':'));
        typed(&mut st, &name);
        update(&mut st, code(KeyCode::Enter));
        let said = st
            .status
            .as_ref()
            .map(|s| s.text.clone())
            .unwrap_or_default();
        assert!(!said.contains("unknown command"), ":{name}: {said}");
    }
}

/// Arguments: queue names (`:redrive`, `:copy`), profile names (`:profile`, `:copy Q`),
/// theme names (`:theme`), sort columns; nothing to complete leaves the text alone.
#[test]
fn tab_completes_queue_profile_and_theme_arguments() {
    let cases: &[(&str, &[&str])] = &[
        ("profile ", &["local", "prod-eu", "prod-us"]),
        ("profile prod", &["prod-eu", "prod-us"]),
        ("theme ", &["dark", "light", "mono"]),
        ("theme L", &["light"]),
        ("copy ord", &["orders", "orders-dlq"]),
        ("copy orders p", &["prod-eu", "prod-us"]),
        ("sort e", &["eta"]),
    ];
    for (line, want) in cases {
        let mut st = populated_with(|s| {
            s.session.profiles = vec!["local".into(), "prod-eu".into(), "prod-us".into()];
        });
        update(&mut st, key(':'));
        typed(&mut st, line);
        let mut seen = Vec::new();
        for _ in 0..want.len() {
            update(&mut st, code(KeyCode::Tab));
            seen.push(
                prompt_text(&st)
                    .trim_end()
                    .rsplit(' ')
                    .next()
                    .unwrap()
                    .to_string(),
            );
        }
        assert_eq!(&seen, want, "after {line:?}");
    }
    let mut st = populated();
    update(&mut st, key(':'));
    typed(&mut st, "zzz");
    update(&mut st, code(KeyCode::Tab));
    assert_eq!(prompt_text(&st), "zzz", "no candidate: unchanged");
}

/// ↑/↓ walk the commands run before, ↓ past the newest gives back the line being typed, and
/// Enter writes the history out (bounded, a repeat kept once).
#[test]
fn up_and_down_walk_the_history_and_enter_saves_it() {
    let mut st = populated_with(|s| s.history = vec!["theme light".into(), "sort depth".into()]);
    update(&mut st, key(':'));
    typed(&mut st, "fl");
    update(&mut st, code(KeyCode::Up));
    assert_eq!(prompt_text(&st), "sort depth");
    update(&mut st, code(KeyCode::Up));
    assert_eq!(prompt_text(&st), "theme light");
    update(&mut st, code(KeyCode::Up));
    assert_eq!(prompt_text(&st), "theme light", "the oldest stays");
    update(&mut st, code(KeyCode::Down));
    update(&mut st, code(KeyCode::Down));
    assert_eq!(prompt_text(&st), "fl", "the typed line comes back");
    update(&mut st, code(KeyCode::Up));
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::SaveHistory(_))),
        "the newest again: nothing new to write"
    );
    assert_eq!(st.queues.sort.name(), "depth", "the recalled command ran");
    update(&mut st, key(':'));
    typed(&mut st, "queues");
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(fx.contains(&Effect::SaveHistory(vec![
        "theme light".into(),
        "sort depth".into(),
        "queues".into()
    ])));
    // Bounded: the oldest go first.
    let mut st = populated_with(|s| s.history = (0..500).map(|i| format!("sort {i}")).collect());
    update(&mut st, key(':'));
    typed(&mut st, "help");
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.prompt.history.len(), 500);
    assert_eq!(st.prompt.history[0], "sort 1");
    assert_eq!(st.prompt.history.last().unwrap(), "help");
}

/// The history is kept across runs in `$XDG_STATE_HOME/qdeck/history`: a command run in one
/// console comes back with ↑ in the next.
#[test]
fn pty_prompt_history_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    {
        let h = LocalHandle::open(&db).unwrap();
        h.0.create_queue("jobs", &QueueOptions::default()).unwrap();
    }
    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("jobs");
    c.type_keys(":sort depth\r");
    c.wait_for("sort depth");
    c.quit();
    let file = dir.path().join("s/qdeck/history");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert_eq!(saved.trim(), "sort depth");

    let mut c = local_console(dir.path(), &db, &[]);
    c.wait_for("jobs");
    c.send(b":");
    c.send(b"\x1b[A");
    let s = c.wait_for(":sort depth");
    assert!(
        s.lines().last().unwrap_or("").starts_with(":sort depth"),
        "{s}"
    );
    c.send(b"\x1b");
    c.quit();
}

/// The console in an 80×24 pseudo-terminal on a local broker file.
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

// ---------- item 16: message search ----------

fn search(st: &mut State, pat: &str) {
    update(st, key('/'));
    typed(st, pat);
    update(st, code(KeyCode::Enter));
}

/// The title counts the matches: `3 loaded (more) · 1 match /json`.
#[test]
fn message_search_counts_its_matches_in_the_title() {
    let mut st = populated();
    open_dlq(&mut st);
    search(&mut st, "json");
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("3 loaded (more) · 1 match /json"), "{s}");
    snap("search_count_80x24", &st, 80, 24);
    snap("search_count_60x15", &st, 60, 15);
}

/// Values only (a header's value, the body, the id, the reason); header names only after
/// `h:` (`!` still inverts). Smart case: lower case matches either case, a capital letter
/// makes the pattern match case (`/NaN` is not every `tenant`).
#[test]
fn message_search_matches_values_unless_asked_for_header_names() {
    let mut st = populated();
    open_dlq(&mut st);
    let ids = |st: &State| -> Vec<String> {
        st.msgs
            .rows
            .iter()
            .map(|&i| st.msgs.messages[i].id.clone())
            .collect()
    };
    // Message 1 has the header `content-type: application/json`.
    for (pat, want) in [
        ("content", vec![]),
        ("application/json", vec!["1"]),
        ("APPLICATION/JSON", vec![]),
        ("max receives", vec!["1"]),
        ("Max receives", vec![]),
        ("order.:42", vec!["1"]),
        ("h:content-type", vec!["1"]),
        ("h:^content", vec!["1"]),
        ("h:^CONTENT", vec![]),
        ("h:application", vec![]),
        ("!h:content", vec!["2", "3"]),
    ] {
        if st.msgs.search.is_active() {
            // Esc clears the search before it leaves the browser.
            update(&mut st, code(KeyCode::Esc));
        }
        search(&mut st, pat);
        assert_eq!(ids(&st), want, "/{pat}");
    }
}

// ---------- item 17: dialogs ----------

/// The quit dialog does not use "cancel" for two things: it keeps the run or stops it.
#[test]
fn quit_dialog_says_keep_running_or_stop_it() {
    let mut st = running_op();
    update(&mut st, key('q'));
    for (w, h) in [(80, 24), (60, 15)] {
        let s = text(&draw(&st, w, h));
        let flat = s.replace(['│', '\n'], " ");
        assert!(flat.contains("[ Keep running ]"), "{s}");
        assert!(flat.contains("[ stop it and quit ]"), "{s}");
        assert!(
            !flat.contains("Cancel") && !flat.contains("cancel it"),
            "{s}"
        );
    }
}

fn running_op() -> State {
    running_op_on(caps())
}

/// `running_op` on a broker that can do `caps`.
fn running_op_on(caps: Capabilities) -> State {
    let mut st = populated_on(caps, |_| {});
    start_redrive(
        &mut st,
        qdeck_backend::ProgressState {
            done: 10,
            total: Some(50),
            ..Default::default()
        },
    );
    st
}

fn message() -> Box<Message> {
    Box::new(hostile_messages().remove(0))
}

/// How the user comes to one kind of dialog, from nothing.
type OpenDialog = fn() -> State;

/// One dialog of every kind, each opened as the user meets it while a redrive runs.
fn every_dialog() -> Vec<(&'static str, OpenDialog)> {
    vec![
        ("purge", || {
            let mut st = running_op();
            let fx = update(&mut st, key('P'));
            answer_purge(&mut st, &fx, 7);
            st
        }),
        ("redrive", || {
            let mut st = running_op();
            update(&mut st, key('R'));
            st
        }),
        ("browse", || {
            let mut c = caps();
            c.browse = BrowseEffect::SideEffect("requeues".into());
            let mut st = running_op_on(c);
            update(&mut st, key('b'));
            st
        }),
        ("delete", || {
            let mut st = running_op();
            open_dlq(&mut st);
            let q = QueueId::new("orders-dlq");
            let ids = vec!["1".to_string()];
            let result = Ok(delete_plan(&q, &ids, None));
            update(
                &mut st,
                Action::DeletePlanned {
                    queue: q,
                    ids,
                    result,
                },
            );
            st
        }),
        ("transfer", || {
            let mut st = running_op();
            open_dlq(&mut st);
            let ask = TransferAsk {
                source: QueueId::new("orders-dlq"),
                messages: vec![*message()],
                to: QueueId::new("orders"),
                to_profile: None,
                moving: false,
                from_label: "local/orders-dlq (local)".into(),
                to_label: "local/orders (local)".into(),
                header_lines: vec![],
                delete_note: None,
                typed: None,
                plan: None,
            };
            transfer_planned(&mut st, ask);
            st
        }),
        ("quit", || {
            let mut st = running_op();
            update(&mut st, key('q'));
            st
        }),
        ("edit", || {
            let mut st = running_op();
            let edited = Edited {
                key: None,
                properties: vec![],
                headers: vec![],
                body: b"x".to_vec(),
            };
            update(
                &mut st,
                Action::Edited {
                    queue: QueueId::new("orders-dlq"),
                    original: message(),
                    result: Ok(EditorOutcome::Changed(edited)),
                },
            );
            st
        }),
        ("edit unreadable", || {
            let mut st = running_op();
            update(
                &mut st,
                Action::EditUnreadable {
                    queue: QueueId::new("orders-dlq"),
                    original: message(),
                    text: "[headers\n".into(),
                    why: "the header block is not valid TOML".into(),
                },
            );
            // It opens on "edit again": the cancel button is one arrow away.
            update(&mut st, code(KeyCode::Right));
            st
        }),
    ]
}

/// `n`, `Esc`, Ctrl-C and Enter on the focused Cancel close every dialog with a "cancelled"
/// flash and no effect; a typed-name dialog, where `n` is text, cancels on Esc.
#[test]
fn every_dialog_says_cancelled_when_cancelled() {
    let ctrl_c = Action::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    for (what, open) in every_dialog() {
        for (name, k) in [
            ("n", key('n')),
            ("Esc", code(KeyCode::Esc)),
            ("Ctrl-C", ctrl_c.clone()),
            ("Enter on the cancel button", code(KeyCode::Enter)),
        ] {
            let mut st = open();
            let d = st
                .dialog
                .as_ref()
                .unwrap_or_else(|| panic!("no {what} dialog"));
            let kind = d.kind.clone();
            let typing = matches!(kind, DialogKind::Edit { .. });
            assert_eq!(d.needs_name, typing, "{what}");
            assert!(!d.confirm_focused, "{what}: Cancel has the focus");
            if typing && name != "Esc" && name != "Ctrl-C" {
                continue;
            }
            let fx = update(&mut st, k);
            assert!(st.dialog.is_none(), "{kind:?} stays open on {name}");
            let flash = st
                .status
                .as_ref()
                .map(|s| s.text.clone())
                .unwrap_or_default();
            assert!(flash.contains("cancelled"), "{name} on {kind:?}: {flash:?}");
            assert!(
                fx.iter().all(|e| matches!(e, Effect::Visible(_))),
                "{name} on {kind:?} acted: {fx:?}"
            );
        }
    }
}

/// A header block that does not parse keeps the user's text: the dialog offers to edit it
/// again (Enter, the focused button, does), or to drop it.
#[test]
fn unreadable_edit_offers_edit_again() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    let text_left = "[headers\nx = 1\n+++ body below this line +++\nHELLO\n".to_string();
    update(
        &mut st,
        Action::EditUnreadable {
            queue: QueueId::new("orders-dlq"),
            original: message(),
            text: text_left.clone(),
            why: "the header block is not valid TOML: invalid table header".into(),
        },
    );
    snap("edit_unreadable_80x24", &st, 80, 24);
    snap("edit_unreadable_60x15", &st, 60, 15);
    let s = text(&draw(&st, 80, 24));
    assert!(
        s.contains("[ edit again ]") && s.contains("not valid TOML"),
        "{s}"
    );
    let fx = update(&mut st, code(KeyCode::Enter));
    assert!(
        fx.contains(&Effect::EditAgain {
            queue: QueueId::new("orders-dlq"),
            message: message(),
            draft: text_left,
        }),
        "{fx:?}"
    );
    // Below tier redrive it opens nothing.
    let mut st = populated_with(|s| s.session.access = Access::Browse);
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    update(
        &mut st,
        Action::EditUnreadable {
            queue: QueueId::new("orders-dlq"),
            original: message(),
            text: String::new(),
            why: "x".into(),
        },
    );
    let fx = update(&mut st, key('y'));
    assert!(!fx.iter().any(|e| matches!(e, Effect::EditAgain { .. })));
}

/// In the real console: the first save breaks the header block, the dialog offers to edit
/// again, the editor opens on the broken text, the second save fixes it and the copy is sent
/// with the first save's change.
#[test]
fn pty_unreadable_edit_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    {
        let h = LocalHandle::open(&db).unwrap();
        h.0.create_queue("jobs", &QueueOptions::default()).unwrap();
        h.0.send_sync(
            "jobs",
            &OutgoingMessage {
                body: b"hello world".to_vec(),
                headers: vec![("x-keep".into(), "1".into())],
                ..Default::default()
            },
        )
        .unwrap();
    }
    let mark = dir.path().join("edited-once");
    let script = dir.path().join("editor.sh");
    std::fs::write(
        &script,
        format!(
            "if [ -e {m} ]; then sed -i 's/^\\[headers$/[headers]/' \"$1\"; \
             else touch {m}; sed -i -e 's/hello/HELLO/' -e 's/^\\[headers\\]$/[headers/' \"$1\"; fi\n",
            m = mark.display()
        ),
    )
    .unwrap();
    let visual = format!("sh {}", script.display());
    let mut c = local_console(dir.path(), &db, &[("VISUAL", visual.as_str())]);
    c.wait_for("jobs");
    c.send(b"b");
    c.wait_for("hello world");
    c.send(b"e");
    c.wait_for("edit again");
    c.send(b"\r");
    c.wait_for("edit and resend");
    c.type_keys("jobs\r");
    c.wait_for("sent the edited copy");
    c.wait_for("HELLO world");
    c.quit();
}

// ---------- item 17: help, footer, header ----------

/// A wrapped help line continues under its text, not at the box's edge; the box has one
/// border, not the view's and its own side by side (`┌┌`).
#[test]
fn help_wraps_under_its_text_and_has_single_corners() {
    let mut st = populated();
    open_dlq(&mut st);
    update(&mut st, key('?'));
    snap("help_messages_80x24", &st, 80, 24);
    snap("help_messages_60x15", &st, 60, 15);
    for (w, h) in [(80, 24), (60, 15)] {
        let s = text(&draw(&st, w, h));
        for bad in ["┌┌", "┐┐", "└└", "┘┘", "││"] {
            assert!(!s.contains(bad), "{bad} at {w}x{h}:\n{s}");
        }
    }
    let s = text(&draw(&st, 60, 15));
    // `sort by the next column (1…9 sort directly)` wraps at 60: its second row starts under
    // its text (column 16 inside the border).
    let row = s
        .lines()
        .find(|l| l.contains("directly)"))
        .expect("the wrapped row");
    assert!(
        row.starts_with(&format!("│{}directly)", " ".repeat(16))),
        "{s}"
    );
}

/// A profile allowed 600 calls a minute, its poller busy and spending 120 of them.
fn with_calls(set: impl FnOnce(&mut Setup)) -> State {
    let mut st = populated_with(|s| {
        s.session.call_budget = Some(600);
        set(s);
    });
    update(&mut st, Action::Poll(PollEvent::Busy(true)));
    let rate = qdeck_engine::budget::Budget {
        calls_per_min: 120.0,
        usd_per_hour: Some(0.0042),
    };
    update(&mut st, Action::Poll(PollEvent::ApiRate(rate)));
    st
}

/// The footer's right part keeps `? help`; below 100 columns the call rate and cost give way
/// to the keys (at 120 they show).
#[test]
fn footer_keeps_help_at_60_columns() {
    let st = with_calls(|_| {});
    snap("footer_calls_60x15", &st, 60, 15);
    for w in [60, 80] {
        let f = footer(&st, w, 15);
        assert!(f.trim_end().ends_with("? help"), "{w}: {f:?}");
        assert!(!f.contains("calls/min"), "{w}: {f:?}");
    }
    let f = footer(&st, 120, 15);
    assert!(
        f.contains("120/600 calls/min · ≈$0.0042/h · ? help"),
        "{f:?}"
    );
    let mut st = populated();
    open_dlq(&mut st);
    let f = footer(&st, 60, 15);
    assert!(f.trim_end().ends_with("? help"), "{f:?}");
}

/// At 80 columns both message views advertise redrive, delete, edit and reasons, as far as
/// the tier allows.
#[test]
fn message_views_hint_redrive_delete_edit_and_reasons_at_80_columns() {
    // The call rate of a polled broker does not take their room.
    let mut full = with_calls(|_| {});
    let mut redrive = with_calls(|s| s.session.access = Access::Redrive);
    open_dlq(&mut full);
    open_dlq(&mut redrive);
    for view in [View::Messages, View::Message] {
        if view == View::Message {
            update(&mut full, code(KeyCode::Enter));
            update(&mut redrive, code(KeyCode::Enter));
        }
        assert_eq!((full.view(), redrive.view()), (view, view));
        let f = footer(&full, 80, 24);
        for hint in ["R redrive", "D delete", "e edit", "F reasons"] {
            assert!(f.contains(hint), "{view:?} lacks {hint}: {f:?}");
        }
        let f = footer(&redrive, 80, 24);
        assert!(!f.contains("D delete"), "{f:?}");
        assert!(f.contains("R redrive") && f.contains("e edit"), "{f:?}");
    }
}

/// A broker without the delete-by-id facet (Kafka: a record is not deleted on its own) is not
/// offered `D` or `e` in the message views, which would be refused after the key; without
/// the send facet `e` goes too. What the footer leaves out comes from the facets the session
/// read, so it cannot disagree with what the keys do.
#[test]
fn message_views_offer_only_what_the_brokers_facets_can_do() {
    let mut st = with_calls(|s| s.session.deletes_by_id = false);
    open_dlq(&mut st);
    for view in [View::Messages, View::Message] {
        if view == View::Message {
            update(&mut st, code(KeyCode::Enter));
        }
        let f = footer(&st, 80, 24);
        assert!(
            !f.contains("D delete") && !f.contains("e edit"),
            "{view:?}: {f:?}"
        );
        assert!(
            f.contains("R redrive") && f.contains("F reasons"),
            "{view:?}: {f:?}"
        );
    }
    let mut st = with_calls(|s| s.session.sends = false);
    open_dlq(&mut st);
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Message);
    let f = footer(&st, 80, 24);
    assert!(f.contains("D delete") && !f.contains("e edit"), "{f:?}");
}

/// The broker kind follows the profile name only when the name does not already say it.
#[test]
fn header_says_the_broker_kind_once() {
    for (profile, broker, want, not) in [
        ("local-a", "local", " local-a queues", "local-a local"),
        ("prod", "rabbitmq", " prod rabbitmq queues", "prod queues"),
        ("Local-B", "local", " Local-B queues", "Local-B local"),
    ] {
        let st = populated_with(|s| {
            s.session.profile = profile.into();
            s.session.broker = broker.into();
        });
        let s = text(&draw(&st, 80, 24));
        let head = s.lines().next().unwrap();
        assert!(head.contains(want) && !head.contains(not), "{head:?}");
    }
    let st = populated_with(|s| s.session.profile = "local-a".into());
    snap("header_local_a_80x24", &st, 80, 24);
}

// ---------- item 17: workers and the fleet ----------

/// The STATE column holds the local broker's longest state, `lease lost ×N`.
#[test]
fn workers_state_fits_lease_lost() {
    let mut st = populated();
    update(&mut st, code(KeyCode::Home));
    update(&mut st, key('w'));
    let q = st.workers.queue.clone().unwrap();
    let now = st.now_ms;
    let worker = |tag: &str, state: &str| Consumer {
        queue: q.clone(),
        tag: tag.into(),
        peer: Some("pid 4242".into()),
        prefetch: Some(1),
        ack_mode: AckMode::Manual,
        state: state.into(),
        status: if state.starts_with("lease") {
            WorkerState::LeaseLost
        } else {
            WorkerState::Active
        },
        status_since_ms: None,
        holding: Some(0),
        processed: Some(12),
        failed: Some(3),
        rate: Some(0.5),
        last_seen_ms: Some(now - 61_000),
    };
    update(
        &mut st,
        Action::Consumers {
            queue: q.clone(),
            result: Ok(vec![
                worker("w-1", "lease lost ×12"),
                worker("w-2", "lease lost ×103"),
                worker("w-3", "active"),
            ]),
        },
    );
    snap("workers_lease_lost_80x24", &st, 80, 24);
    snap("workers_lease_lost_60x15", &st, 60, 15);
    for (w, h) in [(80, 24), (60, 15)] {
        let s = text(&draw(&st, w, h));
        assert!(
            s.contains("lease lost ×12") && s.contains("lease lost ×103"),
            "{w}x{h}:\n{s}"
        );
    }
}

/// `w` (and the other keys about one queue) on the fleet opens nothing: its rows are
/// profiles, and the queue under the queue table's cursor is not the one meant.
#[test]
fn queue_keys_on_the_fleet_say_what_they_need() {
    let mut st = populated();
    update(
        &mut st,
        Action::FleetStarted(vec!["local".into(), "prod".into()]),
    );
    assert_eq!(st.view(), View::Fleet);
    for k in ['w', 'b', 'd', 'F', 'R', 'P'] {
        let fx = update(&mut st, key(k));
        assert_eq!(st.view(), View::Fleet, "{k} left the fleet");
        assert!(st.dialog.is_none(), "{k} opened a dialog");
        assert!(
            fx.iter().all(|e| matches!(e, Effect::Visible(_))),
            "{k}: {fx:?}"
        );
        let flash = &st.status.as_ref().unwrap().text;
        assert!(flash.contains("choose a queue first"), "{k}: {flash}");
    }
    let fx = update(&mut st, key(':'));
    assert!(fx.iter().all(|e| matches!(e, Effect::Visible(_))));
    typed(&mut st, "workers");
    update(&mut st, code(KeyCode::Enter));
    assert_eq!(st.view(), View::Fleet, ":workers on the fleet");
}

/// The ordering key has a column only where a message carries one, named as the broker names
/// it (a Service Bus session, an SQS FIFO group), and the message view labels it the same way.
#[test]
fn the_key_column_is_the_brokers_session_or_group_and_only_where_messages_have_one() {
    let mut st = populated_with(|s| s.session.broker = "servicebus".into());
    open_dlq(&mut st);
    assert!(
        text(&draw(&st, 120, 12)).contains(" KEY "),
        "a partition key is no session"
    );
    // The broker's next read of the page carries a session on the first message.
    let mut msgs = hostile_messages();
    msgs[0]
        .properties
        .push(("SessionId".into(), "k\x1b[31m".into()));
    page(&mut st, "orders-dlq", msgs);
    let screen = text(&draw(&st, 120, 12));
    assert!(screen.contains("SESSION"), "{screen}");
    assert!(
        screen.contains("k␛[31m"),
        "the key is shown escaped: {screen}"
    );
    update(&mut st, code(KeyCode::Enter));
    let screen = text(&draw(&st, 100, 16));
    assert!(screen.contains("session k␛[31m"), "{screen}");

    let mut st = populated_with(|s| s.session.broker = "sqs".into());
    open_dlq(&mut st);
    assert!(text(&draw(&st, 120, 12)).contains("GROUP"));

    let mut st = populated();
    open_dlq(&mut st);
    let mut msgs = hostile_messages();
    for m in &mut msgs {
        m.key = None;
    }
    page(&mut st, "orders-dlq", msgs);
    let screen = text(&draw(&st, 200, 12));
    assert!(
        !screen.contains("KEY") && !screen.contains("SESSION"),
        "{screen}"
    );
}
