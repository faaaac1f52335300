//! The console on Kafka, headless: a group row's detail shows its partition table (lag, rates,
//! state, member per partition, the skew line and stuck partitions) and the workers view lists
//! the group's members, from what the real broker answered for a scene made by Java's client.

use std::io::BufRead;
use std::sync::Arc;

use crossterm::event::KeyCode;
use qdeck::tui::state::{Setup, State};
use qdeck::tui::{update, Action, Effect};
use qdeck_backend::Backend;
use qdeck_engine::partitions::STUCK_POLLS;
use qdeck_engine::poller::PollEvent;
use qdeck_model::domain::*;

use crate::common::console::{
    clock_at_last_poll, code, dialog_text, draw, key, listed_state, select, text,
};
use crate::{bootstrap, now_ms, prefix, scene, scenes};
use qdeck::tui::state::{DialogKind, HeldPlan};
use qdeck_backend::OpProgress;
use qdeck_engine::audit::AuditLog;
use qdeck_engine::gate::Gate;
use qdeck_engine::ops::{self, Outcome};

/// A console holding the rows named with `prefix` and their figures now.
async fn console(b: &Arc<dyn Backend>, prefix: &str) -> State {
    let queues: Vec<QueueInfo> = b
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .filter(|q| q.id.as_str().contains(prefix))
        .collect();
    let ids: Vec<QueueId> = queues.iter().map(|q| q.id.clone()).collect();
    let mut st = listed_state(Setup::new("kafka-test", "kafka"), b.capabilities(), queues);
    let batch = b.stats(&ids).await.unwrap();
    update(&mut st, Action::Poll(PollEvent::Stats(batch)));
    clock_at_last_poll(&mut st);
    update(&mut st, Action::Resize(160, 60));
    st
}

/// One clock tick at `now`: the partition read it asks for, answered by the backend.
async fn tick_and_answer(st: &mut State, b: &Arc<dyn Backend>, now: i64) -> bool {
    let fx = update(st, Action::Tick(now));
    let Some(q) = fx.iter().find_map(|e| match e {
        Effect::Partitions(q) => Some(q.clone()),
        _ => None,
    }) else {
        return false;
    };
    let result = b.group_admin().unwrap().partitions(&q).await;
    update(st, Action::Partitions { queue: q, result });
    true
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_KAFKA_BOOTSTRAP and QDECK_TEST_KAFKA_SCENES (scripts/kafka_up.sh)"]
async fn a_group_rows_detail_shows_its_partitions_skew_stuck_ones_and_members() {
    let p = prefix("console");
    let (t, g) = (format!("{p}pay"), format!("{p}billing"));
    let dlt = format!("{t}-dlt");
    // Four partitions, read to the end by the group; then twenty records land on partition 0
    // only (the Spring DLT scene writes to partition 0), so partition 0 holds all the lag.
    scene(&["topic", &dlt, "4"]);
    scene(&["produce", &dlt, "8"]);
    scene(&["group", &dlt, &g, "8"]);
    scene(&["spring-dlt", &t, "20"]);
    // A member of the group that holds the partitions and commits nothing.
    let mut member = std::process::Command::new("java")
        .args(["-Xmx256m", "-cp", &scenes(), "Scenes", "hold"])
        .args([&bootstrap(), &dlt, &g, "90"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let joined = std::io::BufReader::new(member.stdout.take().unwrap())
        .lines()
        .map_while(std::result::Result::ok)
        .any(|l| l.contains("joined"));
    assert!(joined, "the scene's consumer never got its partitions");

    let b = crate::kafka_contract::backend().await;
    let mut st = console(&b, &p).await;
    let row = format!("{g}@{dlt}");
    select(&mut st, &row);
    update(&mut st, code(KeyCode::Enter));
    let mut now = now_ms();
    assert!(
        tick_and_answer(&mut st, &b, now).await,
        "the open detail asks for the partitions"
    );
    let screen = text(&draw(&st, 160, 60));
    assert!(screen.contains("partitions"), "{screen}");
    assert!(
        screen.contains("1 of 4 partitions hold 100 % of the lag"),
        "the skew line: {screen}"
    );
    let part0 = screen
        .lines()
        .find(|l| l.trim_start_matches(['│', ' ']).starts_with("0 ") && l.contains(" 20 "))
        .unwrap_or_else(|| panic!("partition 0 with its lag of 20: {screen}"));
    assert!(part0.contains("qdeck-scenes"), "its member: {part0}");
    assert!(part0.contains("reading"), "{part0}");
    assert!(screen.contains("caught up"), "{screen}");
    assert!(screen.contains("none stuck"), "{screen}");

    // The member commits nothing: after STUCK_POLLS more polls partition 0 is stuck.
    let refresh = (st.session.refresh_secs * 1000.0) as i64;
    let mut asked = 0;
    for _ in 0..STUCK_POLLS {
        now += refresh;
        asked += usize::from(tick_and_answer(&mut st, &b, now).await);
    }
    assert_eq!(asked, STUCK_POLLS as usize, "one read a refresh period");
    let screen = text(&draw(&st, 160, 60));
    assert!(
        screen.contains("stuck: partition 0"),
        "partition 0 stuck: {screen}"
    );

    // The workers view: the group's member with its client id and partitions.
    update(&mut st, code(KeyCode::Esc));
    let fx = update(&mut st, key('w'));
    let q = fx
        .iter()
        .find_map(|e| match e {
            Effect::Consumers(q) => Some(q.clone()),
            _ => None,
        })
        .expect("the workers view asks for the consumers");
    let result = b.consumers(&q).await;
    update(&mut st, Action::Consumers { queue: q, result });
    let screen = text(&draw(&st, 160, 40));
    assert!(
        screen.contains("qdeck-scenes partitions 0,1,2,3")
            && screen.contains("127.0.0.1")
            && screen.contains("4 partitions"),
        "the member and its partitions: {screen}"
    );
    let _ = member.kill();
    let _ = member.wait();
}

fn command(st: &mut State, text: &str) -> Vec<Effect> {
    for c in text.chars() {
        update(st, key(c));
    }
    update(st, code(KeyCode::Enter))
}

/// `:reset` on a group row: the dialog asks what `qdeck reset-offsets --dry-run` prints (per
/// partition the offset now → the new one, the lag before → after), `y` runs that very plan,
/// and Kafka's Admin client reads the new offsets back; a word that names no target is one
/// line, and no dialog.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_KAFKA_BOOTSTRAP and QDECK_TEST_KAFKA_SCENES (scripts/kafka_up.sh)"]
async fn reset_in_the_console_asks_the_clis_plan_and_moves_the_offsets() {
    let p = prefix("console-reset");
    let (t, g) = (format!("{p}orders"), format!("{p}shipping"));
    let row = format!("{g}@{t}");
    scene(&["topic", &t, "2"]);
    scene(&["produce", &t, "30"]);
    scene(&["group", &t, &g, "8"]);
    let bounds = crate::bounds(&t);
    let before = crate::committed(&g, &t);
    assert!(!before.is_empty(), "the scene's group committed offsets");

    let b = crate::kafka_contract::backend().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(
        b.clone(),
        &crate::kafka_contract::profile_at(&crate::bootstrap(), None),
        AuditLog::new(dir.path().join("audit.log")),
    );
    let mut st = console(&b, &p).await;
    select(&mut st, &row);

    let fx = command(&mut st, ":reset soon");
    assert!(
        st.dialog.is_none(),
        "no dialog for a word that names no target"
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::PlanReset(..))));
    let screen = text(&draw(&st, 160, 60));
    assert!(screen.contains("expected earliest, latest"), "{screen}");

    let fx = command(&mut st, ":reset earliest");
    let (queue, to) = fx
        .iter()
        .find_map(|e| match e {
            Effect::PlanReset(q, to) => Some((q.clone(), *to)),
            _ => None,
        })
        .expect(":reset asks for the plan");
    assert_eq!((queue.as_str(), to), (row.as_str(), ResetTo::Earliest));
    let planned = ops::plan_offset_reset(&gate, &queue, to).await.unwrap();
    let result = Ok(HeldPlan::new(planned));
    update(&mut st, Action::ResetPlanned { queue, result });
    let shown = dialog_text(&text(&draw(&st, 160, 60)), "reset offsets");

    crate::write_kafka_config(dir.path(), &format!("^{p}"));
    let out = crate::common::qdeck(dir.path())
        .args(["reset-offsets", &row, "--to", "earliest", "--dry-run"])
        .output()
        .unwrap();
    let cli = String::from_utf8_lossy(&out.stdout);
    let asked = cli
        .trim()
        .strip_prefix("dry run: would ")
        .and_then(|r| r.strip_suffix("; nothing changed"))
        .unwrap_or_else(|| panic!("not a dry run's sentence: {cli:?}"));
    assert!(
        shown.starts_with(&format!("About to {asked}.")),
        "console: {shown:?}\nCLI: {asked:?}"
    );
    for (pn, old) in &before {
        let (start, _) = bounds[pn];
        assert!(
            asked.contains(&format!("[{pn}] {old} → {start}")),
            "{asked}"
        );
    }

    let held = match &st.dialog.as_ref().unwrap().kind {
        DialogKind::ResetOffsets { plan, .. } => plan.held().cloned().unwrap(),
        other => panic!("{other:?}"),
    };
    let fx = update(&mut st, key('y'));
    assert!(fx.contains(&Effect::RunPlan(held.clone())), "{fx:?}");
    let outcome = ops::run(&gate, held.planned().clone(), &OpProgress::detached()).await;
    assert!(matches!(outcome, Outcome::OffsetReset(_)), "{outcome:?}");
    let after = crate::committed(&g, &t);
    for (pn, (start, _)) in &bounds {
        assert_eq!(after.get(pn), Some(start), "{after:?}");
    }
}

/// A redrive the backend cannot run is refused before the yes, not after it (the walk of
/// 2026-12-07: a reason group's list on a Spring dead-letter topic asked "About to move 6
/// chosen message(s) … (copy, confirm, then delete)" while Kafka's plan said a subset cannot
/// be marked as redriven). The engine's plan is the refusal, so the console's dialog shows it
/// and `y` runs nothing; the whole topic still plans as a question.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_KAFKA_BOOTSTRAP and QDECK_TEST_KAFKA_SCENES (scripts/kafka_up.sh)"]
async fn a_subset_redrive_kafka_cannot_run_is_refused_in_the_dialog() {
    let p = prefix("console-subset");
    let t = format!("{p}orders");
    scene(&["topic", &t, "1"]);
    scene(&["spring-dlt", &t, "4"]);
    let dlt = QueueId::new(format!("{t}-dlt"));

    let b = crate::kafka_contract::backend().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(
        b.clone(),
        &crate::kafka_contract::profile_at(&crate::bootstrap(), None),
        AuditLog::new(dir.path().join("audit.log")),
    );
    let whole = RedriveRequest {
        source: dlt.clone(),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let planned = ops::plan_redrive(&gate, whole.clone()).await.unwrap();
    assert_eq!(planned.count().ready, 4, "{}", planned.question());

    let mut st = console(&b, &p).await;
    select(&mut st, dlt.as_str());
    update(&mut st, key('b'));
    let page = b
        .browse(
            &dlt,
            &BrowseRequest {
                cursor: None,
                max: 10,
                force: false,
            },
        )
        .await
        .unwrap();
    let marked: Vec<String> = page.messages.iter().take(2).map(|m| m.id.clone()).collect();
    update(
        &mut st,
        Action::Page {
            queue: dlt.clone(),
            append: false,
            result: Ok(page),
        },
    );
    for _ in &marked {
        // Space marks the row and moves down.
        update(&mut st, code(KeyCode::Char(' ')));
    }
    let fx = update(&mut st, key('R'));
    let req = crate::common::console::plan_request(&fx);
    assert_eq!(req.only_ids.as_ref().map(Vec::len), Some(2), "{req:?}");
    let result = ops::plan_redrive(&gate, req.clone())
        .await
        .map(HeldPlan::new);
    let Err(e) = &result else {
        panic!("a subset of a topic is refused")
    };
    assert!(
        matches!(e, qdeck_backend::BackendError::Unsupported(_)),
        "{e:?}"
    );
    update(&mut st, Action::RedrivePlanned { req, result });
    let shown = dialog_text(&text(&draw(&st, 160, 60)), "redrive");
    assert!(shown.contains("cannot redrive"), "{shown}");
    assert!(!shown.contains("About to move"), "{shown}");
    let fx = update(&mut st, key('y'));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::RunPlan(_))),
        "nothing runs on a refused plan: {fx:?}"
    );
}
