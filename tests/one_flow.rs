//! One operation flow behind both front doors: the console's dialog asks the very question
//! the CLI asks (`Planned::question`, on the engine's plan of the same queue), and what it runs
//! on confirm is the plan it showed, not one made again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;

use std::sync::Arc;

use common::cli_env::CliEnv as Env;
use common::console::*;
use qdeck::tui::state::{DialogKind, HeldPlan};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::local::LocalHandle;
use qdeck_engine::audit::AuditLog;
use qdeck_engine::gate::Gate;
use qdeck_engine::ops;
use qdeck_model::config::Profile;

/// What the CLI's dry run says it would do: the plan's sentence (`would …; nothing changed`).
fn cli_would(e: &Env, args: &[&str]) -> String {
    let out = e.qdeck().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    s.trim_end()
        .strip_prefix("dry run: would ")
        .and_then(|r| r.strip_suffix("; nothing changed"))
        .unwrap_or_else(|| panic!("not a dry run's sentence: {s:?}"))
        .to_string()
}

fn run(e: &Env, args: &[&str]) {
    let out = e.qdeck().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn the_console_asks_what_the_cli_asks_and_runs_the_plan_it_showed() {
    let e = Env::new();
    run(&e, &["create", "orders", "--dlq", "orders-dlq"]);
    for body in ["a", "b", "c"] {
        run(&e, &["send", "orders-dlq", body]);
    }
    let handle = Arc::new(LocalHandle::open(&e.db()).unwrap());
    let gate = Gate::new(
        handle,
        &Profile::default_local(),
        AuditLog::new(e.dir.path().join("audit.log")),
    );

    // Purge: the dialog asks for the engine's plan; the poller's figure (7 in the fixture)
    // is not the question.
    let mut st = populated();
    select(&mut st, "orders-dlq");
    let fx = update(&mut st, key('P'));
    let queue = fx
        .iter()
        .find_map(|f| match f {
            Effect::PlanPurge(q) => Some(q.clone()),
            _ => None,
        })
        .expect("P asks for the plan");
    let planned = ops::plan_purge(&gate, &queue).await.unwrap();
    let result = Ok(HeldPlan::new(planned));
    update(&mut st, Action::PurgePlanned { queue, result });
    let shown = dialog_text(&text(&draw(&st, 100, 30)), "purge");
    let asked = cli_would(&e, &["purge", "orders-dlq", "--dry-run"]);
    assert!(
        shown.starts_with(&format!("About to {asked}. This cannot be undone.")),
        "console: {shown:?}\nCLI: {asked:?}"
    );
    assert!(asked.contains("3 ready"), "{asked}");
    let held = match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Purge { plan, .. } => plan.held().cloned().unwrap(),
        other => panic!("{other:?}"),
    };
    let fx = update(&mut st, key('y'));
    assert!(fx.contains(&Effect::RunPlan(held)), "{fx:?}");

    // Redrive to a chosen queue: the same.
    let mut st = populated();
    select(&mut st, "orders-dlq");
    update(&mut st, key('R'));
    let fx = update(&mut st, code(crossterm::event::KeyCode::Tab));
    let req = fx
        .iter()
        .find_map(|f| match f {
            Effect::PlanRedrive(r) => Some(r.clone()),
            _ => None,
        })
        .expect("Tab plans the other target");
    let result = ops::plan_redrive(&gate, req.clone())
        .await
        .map(HeldPlan::new);
    update(&mut st, Action::RedrivePlanned { req, result });
    let shown = dialog_text(&text(&draw(&st, 100, 30)), "redrive");
    let asked = cli_would(
        &e,
        &["redrive", "orders-dlq", "--to", "orders", "--dry-run"],
    );
    assert!(
        shown.starts_with(&format!("About to {asked}.")),
        "console: {shown:?}\nCLI: {asked:?}"
    );
    assert!(
        asked.starts_with("move 3 message(s) from orders-dlq to orders"),
        "{asked}"
    );
    let held = match &st.dialog.as_ref().unwrap().kind {
        DialogKind::Redrive { plan, .. } => plan.held().cloned().unwrap(),
        other => panic!("{other:?}"),
    };
    let fx = update(&mut st, key('y'));
    assert!(fx.contains(&Effect::RunPlan(held)), "{fx:?}");
}

/// The audit log's lines, oldest first.
fn audit_lines(e: &Env) -> Vec<serde_json::Value> {
    std::fs::read_to_string(e.dir.path().join("state/qdeck/audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit lines are JSON"))
        .collect()
}

/// `qdeck create` is planned, run and reported like every mutation: a create the broker
/// refuses is audited with its result and why (it used to leave no line at all), and one that
/// succeeds is audited from the run's report, with what it made.
#[test]
fn create_is_audited_from_its_plan_with_the_result() {
    let e = Env::new();
    let out = e
        .qdeck()
        .args(["create", "orders", "--max-receives", "3"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "max-receives needs a DLQ");
    let lines = audit_lines(&e);
    let last = lines.last().expect("a failed create is audited");
    assert_eq!(last["action"], "create", "{last}");
    assert_eq!(last["queue"], "orders", "{last}");
    assert_eq!(last["result"], "error", "{last}");
    assert_eq!(last["counts"]["queues"], 0, "{last}");
    assert!(
        last["error"].as_str().is_some_and(|s| !s.is_empty()),
        "{last}"
    );

    let out = e.qdeck().args(["create", "orders"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "created orders\n");
    let lines = audit_lines(&e);
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["action"], &last["result"], &last["counts"]["queues"]),
        (&"create".into(), &"ok".into(), &1.into()),
        "{last}"
    );
}

/// The demo's own queues are created through the plan before its workload starts: its audit
/// line is the run's report (the queues it made, its result), not a line written beforehand.
#[test]
fn the_demos_queue_set_up_is_audited_from_its_plan() {
    let e = Env::new();
    let out = e
        .qdeck()
        .args(["demo", "--duration", "1s", "--rate", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = audit_lines(&e);
    let demo: Vec<_> = lines.iter().filter(|l| l["action"] == "demo").collect();
    assert_eq!(demo.len(), 1, "{lines:?}");
    assert_eq!(demo[0]["result"], "ok", "{}", demo[0]);
    assert_eq!(demo[0]["counts"]["queues"], 3, "{}", demo[0]);
    assert_eq!(demo[0]["counts"]["workers"], 1, "{}", demo[0]);
}
