//! The console's scheduled view (`L`): a queue's delayed messages, due soonest first, and `D`
//! cancelling one through the same plan, gate and audit as `qdeck cancel-scheduled`. Pure
//! update tests, then the real binary on the local broker in a pseudo-terminal.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::time::Duration;

mod common;
use common::console::*;
use common::pty::Console;

use qdeck::tui::state::{DialogKind, HeldPlan, OpSummary, View};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::local::{LocalHandle, QueueOptions};
use qdeck_backend::{Backend, BackendError};
use qdeck_engine::ops::{Planned, Verdict};
use qdeck_model::config::Access;
use qdeck_model::domain::*;

/// A delayed message as a backend's scheduled listing gives it (`due-at` in RFC 3339).
fn scheduled(id: &str, due: &str, body: &str) -> Message {
    Message {
        id: id.into(),
        enqueued_ms: Some(T0),
        meta: vec![("due-at".into(), Value::String(due.into()))],
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A first page of `orders`' scheduled messages arriving (the answer to `L`).
fn scheduled_page(st: &mut qdeck::tui::state::State, result: Result<Page, BackendError>) {
    update(
        st,
        Action::ScheduledPage {
            queue: QueueId::new("orders"),
            append: false,
            result,
        },
    );
}

fn page(messages: Vec<Message>) -> Result<Page, BackendError> {
    Ok(Page {
        messages,
        next: None,
        effect_note: None,
    })
}

/// `L` on a queue opens its scheduled messages: the effect asks for the scheduled listing,
/// the title and the DUE column say what the list is, a late page of the queue's own
/// messages is not mixed in, and what only delivered messages allow is refused with a reason.
#[test]
fn l_lists_scheduled_messages_by_due_time() {
    let mut st = populated();
    select(&mut st, "orders");
    let fx = update(&mut st, key('L'));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Browse { queue, scheduled: true, cursor: None, .. } if queue.as_str() == "orders"
        )),
        "{fx:?}"
    );
    assert_eq!(st.view(), View::Messages);
    // A page of the queue's own messages, asked for before `L`, arrives late: dropped.
    update(
        &mut st,
        Action::Page {
            queue: QueueId::new("orders"),
            append: false,
            result: page(vec![scheduled("own-1", "2026-12-06T10:00:00Z", "own")]),
        },
    );
    assert!(
        st.msgs.messages.is_empty(),
        "a plain page landed in the scheduled list"
    );
    scheduled_page(
        &mut st,
        page(vec![
            scheduled("s-late", "2030-01-02T03:04:05Z", "later"),
            scheduled("s-soon", "2030-01-01T00:00:09Z", "sooner"),
        ]),
    );
    assert_eq!(st.msgs.messages.len(), 2);
    // Sorted by the time column, it is the due time that orders them.
    update(&mut st, key('2'));
    let s = text(&draw(&st, 80, 24));
    assert!(s.contains("› scheduled orders"), "the breadcrumb: {s}");
    assert!(s.contains("┌ scheduled orders"), "the title: {s}");
    assert!(s.contains("DUE"), "{s}");
    assert!(!s.contains("ENQUEUED"), "{s}");
    // Due times read from now (the fixture's clock, today's): `in 1121d`, not a date. The
    // days are counted from that clock, so the test holds on any day it runs.
    let days = |due: &str| {
        let at = chrono::DateTime::parse_from_rfc3339(due)
            .unwrap()
            .timestamp_millis();
        (at - st.now_ms) / 86_400_000
    };
    let (soon_in, late_in) = (
        format!("in {}d", days("2030-01-01T00:00:09Z")),
        format!("in {}d", days("2030-01-02T03:04:05Z")),
    );
    assert!(
        s.contains(&soon_in) && s.contains(&late_in),
        "{soon_in}, {late_in}: {s}"
    );
    let soon = s.find("s-soon").expect("s-soon listed");
    let late = s.find("s-late").expect("s-late listed");
    assert!(soon < late, "due soonest first: {s}");
    assert!(
        s.contains("D cancel"),
        "the footer says what D does here: {s}"
    );

    // Redrive, edit and copy are for delivered messages: each says so, nothing starts.
    for k in ['R', 'e'] {
        let fx = update(&mut st, key(k));
        assert!(st.dialog.is_none(), "{k} opened a dialog");
        assert!(fx
            .iter()
            .all(|e| !matches!(e, Effect::Edit { .. } | Effect::PlanRedrive(_))));
        let flash = &st.status.as_ref().expect("a flash").text;
        assert!(flash.contains("D cancels one"), "{k}: {flash}");
    }
    // `n` asks for the next page of the same listing (a listing read again has one).
    scheduled_page(
        &mut st,
        Ok(Page {
            messages: vec![
                scheduled("s-late", "2030-01-02T03:04:05Z", "later"),
                scheduled("s-soon", "2030-01-01T00:00:09Z", "sooner"),
            ],
            next: Some("c1".into()),
            effect_note: None,
        }),
    );
    assert_eq!(st.msgs.next.as_deref(), Some("c1"));
    let fx = update(&mut st, key('n'));
    assert!(
        fx.iter().any(|e| matches!(
            e,
            Effect::Browse {
                scheduled: true,
                cursor: Some(_),
                ..
            }
        )),
        "{fx:?}"
    );
}

/// `D` on a scheduled message plans the cancel, asks with the plan's own sentence, and `y`
/// runs it; several selected are refused (one at a time, as the CLI); below `full` the key
/// is refused and audited like delete.
#[test]
fn d_cancels_one_scheduled_message_after_asking() {
    let mut st = populated();
    select(&mut st, "orders");
    update(&mut st, key('L'));
    scheduled_page(
        &mut st,
        page(vec![
            scheduled("s-1", "2030-01-01T00:00:00Z", "a"),
            scheduled("s-2", "2030-01-01T00:01:00Z", "b"),
        ]),
    );
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    let fx = update(&mut st, key('D'));
    assert!(fx
        .iter()
        .all(|e| !matches!(e, Effect::PlanCancel { .. } | Effect::PlanDelete { .. })));
    assert!(st
        .status
        .as_ref()
        .unwrap()
        .text
        .contains("one scheduled message at a time"));
    // Both unselected again, the cursor back on the first.
    update(&mut st, key('g'));
    update(&mut st, key(' '));
    update(&mut st, key(' '));
    assert!(st.msgs.marked.is_empty());
    update(&mut st, key('g'));

    let fx = update(&mut st, key('D'));
    let (queue, id) = fx
        .iter()
        .find_map(|e| match e {
            Effect::PlanCancel { queue, id } => Some((queue.clone(), id.clone())),
            _ => None,
        })
        .expect("D plans the cancel first");
    assert!(
        fx.iter().all(|e| !matches!(e, Effect::PlanDelete { .. })),
        "not a plain delete"
    );
    assert_eq!((queue.as_str(), id.as_str()), ("orders", "s-1"));
    assert!(st.dialog.is_none(), "no dialog before the plan");
    update(
        &mut st,
        Action::CancelPlanned {
            queue: queue.clone(),
            id: id.clone(),
            result: Ok(HeldPlan::new(Planned::CancelScheduled {
                queue: qinfo("orders", None),
                message: scheduled("s-1", "2030-01-01T00:00:00Z", "a"),
            })),
        },
    );
    assert!(matches!(
        st.dialog.as_ref().map(|d| &d.kind),
        Some(DialogKind::CancelScheduled { .. })
    ));
    let s = text(&draw(&st, 80, 24));
    assert!(
        s.contains("About to cancel delayed message s-1 in orders"),
        "{s}"
    );
    // Its buttons cannot be mistaken for each other: "Cancel" would read as the action.
    assert!(
        s.contains("[ Keep it ]") && !s.contains("[ Cancel ]"),
        "{s}"
    );
    let fx = update(&mut st, key('y'));
    assert!(
        matches!(run_of(&fx), Some(Planned::CancelScheduled { message, .. }) if message.id == "s-1"),
        "{fx:?}"
    );
    assert!(st.op.is_some());

    // A plan that failed (the message fell due meanwhile) is said, not asked.
    update(
        &mut st,
        Action::OpDone(OpSummary::new("cancelled s-1 in orders", Verdict::Ok)),
    );
    assert!(st.op.is_none());
    update(&mut st, key('D'));
    update(
        &mut st,
        Action::CancelPlanned {
            queue,
            id,
            result: Err(BackendError::NotFound(
                "no delayed message s-1 in orders".into(),
            )),
        },
    );
    assert!(st.dialog.is_none());
    assert!(st
        .status
        .as_ref()
        .unwrap()
        .text
        .contains("cannot cancel s-1"));

    let mut st = populated_with(|s| s.session.access = Access::Redrive);
    select(&mut st, "orders");
    update(&mut st, key('L'));
    scheduled_page(
        &mut st,
        page(vec![scheduled("s-1", "2030-01-01T00:00:00Z", "a")]),
    );
    let fx = update(&mut st, key('D'));
    assert!(fx.iter().all(|e| !matches!(e, Effect::PlanCancel { .. })));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Refused { .. })),
        "{fx:?}"
    );
}

/// The real console on the local broker: `L` lists the delayed message, `D` then `y` cancels
/// it; the broker no longer holds it, the ready message is untouched, and the audit log has
/// the cancel.
#[test]
fn pty_cancels_a_delayed_message_on_the_local_broker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("local.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    {
        let h = LocalHandle::open(&db).unwrap();
        h.0.create_queue("jobs", &QueueOptions::default()).unwrap();
        let sender = h.sender().unwrap();
        let q = QueueId::new("jobs");
        rt.block_on(async {
            let later = OutgoingMessage {
                delay: Some(Duration::from_secs(3600)),
                ..OutgoingMessage::text("send-the-invoice-later", &[])
            };
            sender.send(&q, later).await.unwrap();
            sender
                .send(&q, OutgoingMessage::text("ready-now", &[]))
                .await
                .unwrap();
        });
    }
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "audit_log = {:?}\n[ui]\nrefresh_secs = 0.5\n\n[[profiles]]\nname = \"e2e\"\nkind = \"local\"\npath = {:?}\n",
            dir.path().join("audit.log").display().to_string(),
            db.display().to_string()
        ),
    )
    .unwrap();
    let mut c = Console::spawn(
        dir.path(),
        &["--config", cfg.to_str().unwrap()],
        &[],
        80,
        24,
    );
    c.wait_for("jobs");
    c.send(b"L");
    c.wait_for("DUE");
    c.wait_for("send-the-invoice-later");
    c.send(b"D");
    c.wait_for("About to cancel delayed message");
    c.send(b"y");
    c.wait_for("no scheduled messages");
    c.send(b"q");
    assert_eq!(c.wait_exit(Duration::from_secs(10)), 0);

    let h = LocalHandle::open(&db).unwrap();
    let req = BrowseRequest {
        cursor: None,
        max: 100,
        force: false,
    };
    let q = QueueId::new("jobs");
    let left = rt
        .block_on(
            h.scheduled()
                .expect("lists scheduled")
                .browse_scheduled(&q, &req),
        )
        .unwrap();
    assert!(
        left.messages.is_empty(),
        "still scheduled: {:?}",
        left.messages
    );
    let ready = rt.block_on(h.browse(&q, &req)).unwrap();
    let bodies: Vec<_> = ready.messages.iter().map(|m| m.body.clone()).collect();
    assert_eq!(bodies, vec![b"ready-now".to_vec()]);
    let audit = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("cancel") && l.contains("jobs")),
        "{audit}"
    );
}
