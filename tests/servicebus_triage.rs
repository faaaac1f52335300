//! Triage on Service Bus against the in-process stand-in (tests/servicebus_standin), which
//! models peek-lock, unlock, complete and DeliveryCount as Microsoft's REST API documents:
//! `purge --where` and `move --where` delete exactly the chosen dead letters and release the
//! rest, and redriven copies carry the redrive stamp the reasons view reads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

mod common;
#[path = "servicebus_standin/mod.rs"]
mod standin;

use std::path::Path;
use std::sync::Arc;

use qdeck_backend::{Backend, OpProgress};
use qdeck_engine::triage::{self, ScanLimits, SignatureConfig};
use qdeck_model::domain::*;
use standin::{new_msg, StandIn};

const DLQ: &str = "orders/$DeadLetterQueue";

async fn backend(s: &StandIn) -> Arc<dyn Backend> {
    common::servicebus_backend("sb", &s.manage_conn_str(), None)
        .await
        .expect("backend")
}

/// orders (MaxDeliveryCount 2) with 6 dead letters: tenants t0, t1, t2, t0, t1, t2.
fn seed(s: &StandIn) {
    s.create_queue("orders", 2, 30);
    for i in 0..6 {
        let mut m = new_msg(format!("{{\"order\":{i}}}").as_bytes());
        m.message_id = format!("msg-{i}");
        m.custom.push(("tenant".into(), format!("\"t{}\"", i % 3)));
        s.seed_dlq("orders", m, "rejected");
    }
}

fn tenant(m: &standin::Msg) -> String {
    m.custom
        .iter()
        .find(|(k, _)| k == "tenant")
        .map(|(_, v)| v.trim_matches('"').to_string())
        .unwrap_or_default()
}

/// Run qdeck with a config holding the stand-in as profile `sb` (default) and a local
/// broker as profile `lo`, off the runtime so the stand-in keeps serving.
async fn qdeck(s: &StandIn, dir: &Path, args: &[&str]) -> std::process::Output {
    qdeck_with(s, dir, &[], args).await
}

/// As `qdeck`, with extra environment (an editor, say).
async fn qdeck_with(
    s: &StandIn,
    dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    common::write_config(
        dir,
        "sb",
        &[
            common::servicebus_profile("sb", "QDECK_SB_CS"),
            common::local_profile("lo", &dir.join("lo.db"), ""),
        ],
    );
    let mut cmd = common::qdeck(dir);
    cmd.envs(env.iter().copied());
    cmd.env("QDECK_SB_CS", s.manage_conn_str())
        .args(args)
        .timeout(std::time::Duration::from_secs(60));
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn purge_where_deletes_exactly_the_selected_dead_letters_and_releases_the_rest() {
    let s = StandIn::start().await;
    seed(&s);
    let dir = tempfile::tempdir().unwrap();
    let out = qdeck(
        &s,
        dir.path(),
        &[
            "purge",
            DLQ,
            "--where",
            "header.tenant = \"t1\"",
            "-y",
            "-o",
            "json",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["deleted"], 2, "{r}");
    assert_eq!(r["missing"], 0);
    let left = s.messages("orders", true);
    let mut tenants: Vec<String> = left.iter().map(tenant).collect();
    tenants.sort();
    assert_eq!(tenants, vec!["t0", "t0", "t2", "t2"]);
    // Released, not held: nothing stays locked, and the cost the dialog names was paid
    // (the scan's browse and the delete pass each locked and unlocked them once).
    assert!(left.iter().all(|m| m.lock.is_none()));
    assert!(
        left.iter().all(|m| m.delivery_count >= 1),
        "DeliveryCount rose"
    );
    assert_eq!(s.counts("orders"), (0, 4));
}

/// `purge --where`, `move` and `edit` all delete chosen messages by id, which on an active
/// Service Bus queue would raise every other message's DeliveryCount: each is refused (exit 5)
/// before a single message is locked, and before an editor would open.
#[tokio::test]
async fn deleting_chosen_messages_of_an_active_queue_is_refused_before_anything_is_locked() {
    let s = StandIn::start().await;
    seed(&s);
    let b = backend(&s).await;
    b.sender()
        .expect("this backend publishes")
        .send(
            &QueueId::new("orders"),
            OutgoingMessage {
                body: b"live".to_vec(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let before = s.requests().get("peek-lock").copied().unwrap_or(0);
    let dir = tempfile::tempdir().unwrap();
    qdeck_local_queue(dir.path(), "repro");
    let live = ["--where", "body ~ \"live\"", "--force", "-y"];
    let to_local = ["--to", "repro", "--to-profile", "lo"];
    let commands: [Vec<&str>; 3] = [
        [&["purge", "orders"][..], &live].concat(),
        [&["move", "orders"][..], &to_local, &live].concat(),
        vec!["edit", "orders", "msg-0", "--yes"],
    ];
    for args in commands {
        let out = qdeck(&s, dir.path(), &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {stderr}");
        assert!(stderr.contains("DeliveryCount +1"), "{args:?}: {stderr}");
        assert_eq!(
            s.requests().get("peek-lock").copied().unwrap_or(0),
            before,
            "{args:?}"
        );
    }
    assert_eq!(s.messages("orders", false)[0].delivery_count, 0);
    assert_eq!(s.messages("orders", false).len(), 1);
}

#[tokio::test]
async fn move_with_where_takes_the_chosen_dead_letters_into_the_local_broker() {
    let s = StandIn::start().await;
    seed(&s);
    let dir = tempfile::tempdir().unwrap();
    qdeck_local_queue(dir.path(), "repro");
    let out = qdeck(
        &s,
        dir.path(),
        &[
            "move",
            DLQ,
            "--to",
            "repro",
            "--to-profile",
            "lo",
            "--where",
            "header.tenant = \"t2\"",
            "-y",
            "-o",
            "json",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["sent"].as_u64(), r["deleted"].as_u64()),
        (Some(2), Some(2)),
        "{r}"
    );
    let mut left: Vec<String> = s.messages("orders", true).iter().map(tenant).collect();
    left.sort();
    assert_eq!(left, vec!["t0", "t0", "t1", "t1"]);
    let local = qdeck_backend::local::LocalHandle::open(&dir.path().join("lo.db")).unwrap();
    let page = local
        .browse(
            &QueueId::new("repro"),
            &BrowseRequest {
                max: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut bodies: Vec<String> = page
        .messages
        .iter()
        .map(|m| String::from_utf8(m.body.clone()).unwrap())
        .collect();
    bodies.sort();
    assert_eq!(bodies, vec!["{\"order\":2}", "{\"order\":5}"]);
    // The custom property arrives by name, the broker's dead-letter facts as x-qdeck-*.
    let h = &page.messages[0].headers;
    let get = |k: &str| h.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.as_str());
    assert_eq!(get("tenant"), Some("t2"));
    assert_eq!(get("x-qdeck-dead-letter-reason"), Some("rejected"));
    assert_eq!(get("x-qdeck-dead-letter-origin"), Some("orders"));
    assert!(
        h.iter().any(|(n, _)| n == "x-qdeck-SequenceNumber"),
        "{h:?}"
    );
}

fn qdeck_local_queue(dir: &Path, name: &str) {
    qdeck_backend::local::LocalBackend::open(&dir.join("lo.db"))
        .unwrap()
        .create_queue(name, &Default::default())
        .unwrap();
}

#[tokio::test]
async fn redriven_copies_are_stamped_and_marked_when_they_dead_letter_again() {
    let s = StandIn::start().await;
    seed(&s);
    let b = backend(&s).await;
    let req = RedriveRequest {
        source: QueueId::new(DLQ),
        target: RedriveTarget::Origin,
        max: None,
        rate: None,
        only_ids: None,
        window: None,
    };
    let r = b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert_eq!(r.moved, 6);
    let copies = s.messages("orders", false);
    assert_eq!(copies.len(), 6);
    for m in &copies {
        let get = |k: &str| {
            m.custom
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get("x-qdeck-redriven").as_deref(),
            Some("1"),
            "{:?}",
            m.custom
        );
        let at: i64 = get("x-qdeck-redriven-at").unwrap().parse().unwrap();
        assert!((at - chrono::Utc::now().timestamp_millis()).abs() < 60_000);
    }
    // The fix did not work: each copy is received and abandoned until MaxDeliveryCount (2)
    // sends it back to the DLQ, as the broker does.
    for _ in 0..3 {
        let _ = b
            .browse(
                &QueueId::new("orders"),
                &BrowseRequest {
                    max: 10,
                    force: true,
                    ..Default::default()
                },
            )
            .await;
    }
    assert_eq!(s.counts("orders"), (0, 6));
    let report = triage::reasons(
        b.as_ref(),
        &QueueId::new(DLQ),
        &ScanLimits::default(),
        &SignatureConfig::default(),
        &OpProgress::detached(),
    )
    .await
    .unwrap();
    let redriven: u64 = report.groups.iter().map(|g| g.redriven).sum();
    assert_eq!(redriven, 6, "{:?}", report.groups);
    assert!(report
        .groups
        .iter()
        .all(qdeck_engine::triage::Group::came_back_after_redrive));
    // A second redrive counts on.
    b.redrive(&req, &OpProgress::detached()).await.unwrap();
    assert!(s.messages("orders", false).iter().all(|m| m
        .custom
        .iter()
        .any(|(k, v)| k == "x-qdeck-redriven" && v == "2")));
}

/// Edit and resend on a Service Bus DLQ: the edited copy goes to the dead letter's origin
/// with the properties the user kept and without the one removed; only then is the original
/// completed, and the other dead letters are released unchanged but for their delivery count.
#[tokio::test]
async fn edit_resends_the_edited_copy_to_origin_then_completes_the_dead_letter() {
    let s = StandIn::start().await;
    seed(&s);
    s.create_queue("elsewhere", 2, 30);
    let dir = tempfile::tempdir().unwrap();
    let out = qdeck_with(
        &s,
        dir.path(),
        &[("EDITOR", "sed -i -e s/order/ORDER/ -e /^tenant/d")],
        &["edit", DLQ, "msg-1", "--yes", "-o", "json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["target"], "orders", "{r}");
    assert_eq!(r["deleted"], true, "{r}");
    let copies = s.messages("orders", false);
    assert_eq!(copies.len(), 1, "one copy in the origin");
    assert_eq!(copies[0].body, b"{\"ORDER\":1}");
    assert!(
        !copies[0].custom.iter().any(|(k, _)| k == "tenant"),
        "the removed property stays removed: {:?}",
        copies[0].custom
    );
    let mut left: Vec<String> = s
        .messages("orders", true)
        .iter()
        .map(|m| m.message_id.clone())
        .collect();
    left.sort();
    assert_eq!(left, vec!["msg-0", "msg-2", "msg-3", "msg-4", "msg-5"]);
    // An editor that changes nothing sends nothing and deletes nothing.
    let out = qdeck_with(
        &s,
        dir.path(),
        &[("EDITOR", "true")],
        &["edit", DLQ, "msg-2", "--to", "elsewhere", "--yes"],
    )
    .await;
    assert_ne!(out.status.code(), Some(0));
    assert!(s.messages("elsewhere", false).is_empty());
    assert_eq!(s.messages("orders", true).len(), 5);
}
