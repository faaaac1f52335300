//! Pub/Sub rows beyond the queue table: the fleet row and the on-fire view (the engine's fleet
//! poller) and `qdeck serve` (the Prometheus exposition), each with the figures the Monitoring
//! stand-in serves.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use qdeck_model::domain::BrokerKind;
use serde_json::json;

use crate::pubsub_kill::qdeck;
use crate::{project, scene, set_series, FORWARDED, OLDEST, UNDELIVERED};

/// A dead-letter scene whose subscriptions the stand-in gives depth 7 (age 15 min) and 2, the
/// source having forwarded 2 + 3 messages to its dead-letter topic in the last minutes.
async fn scripted_scene() -> String {
    let p = project();
    scene(&["dead-letters", &p, "dl", "--good", "1", "--poison", "2"]);
    set_series(
        &p,
        100,
        json!([
            {"metric": UNDELIVERED, "subscription_id": "dl-sub", "values": [7]},
            {"metric": OLDEST, "subscription_id": "dl-sub", "values": [900]},
            {"metric": UNDELIVERED, "subscription_id": "dl-dlq-sub", "values": [2]},
            {"metric": OLDEST, "subscription_id": "dl-dlq-sub", "values": [400]},
            {"metric": FORWARDED, "subscription_id": "dl-sub", "values": [2, 3]},
        ]),
    )
    .await;
    p
}

/// The value of `name{…}` whose labels include all of `want`, in a Prometheus text body.
fn series(body: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix('{')?;
        let (labels, value) = rest.split_once("} ")?;
        want.iter()
            .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\"")))
            .then(|| value.trim().parse().unwrap())
    })
}

fn get_metrics(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split_once("\r\n\r\n").unwrap().1.to_string()
}

#[tokio::test]
#[ignore = "needs QDECK_TEST_PUBSUB_EMULATOR, QDECK_TEST_PUBSUB_MONITORING and QDECK_TEST_PYTHON"]
async fn pubsub_rows_reach_the_fleet_the_fire_view_and_serve() {
    let p = scripted_scene().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::pubsub_kill::write_config(dir.path(), &p, "[ui]\nrefresh_secs = 0.5\n");

    // The fleet row and the on-fire view, with a rule on the forwarded count (5 > 3: it fires
    // on the source only; the DLQ itself forwards nothing).
    let rule = qdeck_model::config::alerts::AlertRuleConfig {
        name: "dead-lettering".into(),
        queues: None,
        profiles: Vec::new(),
        kinds: Vec::new(),
        when: "forwarded > 3".into(),
        for_: None,
        severity: Some("critical".into()),
        summary: None,
    };
    let rules = vec![qdeck_engine::alerts::Rule::compile(&rule, 0).unwrap()];
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let book = qdeck_engine::alerts::AlertBook::default();
    let _fleet = qdeck_engine::fleet::spawn(
        |n| qdeck_model::config::LoadOptions {
            file: Some(cfg.clone()),
            profile: Some(n.to_string()),
            read_only: false,
        },
        &["ps".to_string()],
        rules.clone(),
        book.clone(),
        tx,
    );
    let row = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = rx.recv().await {
            if r.updated_ms.is_some() || r.error.is_some() {
                return r;
            }
        }
        panic!("the fleet stopped");
    })
    .await
    .expect("a fleet row within a minute");
    assert_eq!(row.error, None, "{row:?}");
    assert_eq!(row.kind, Some(BrokerKind::Pubsub));
    assert_eq!((row.depth, row.dlq_depth), (Some(7), Some(2)), "{row:?}");
    let src = format!("{p}/dl-sub");
    assert_eq!(
        row.worst_age.as_ref().map(|(a, q)| (*a, q.as_str())),
        Some((900.0, src.as_str()))
    );
    let fire = |q: &str| row.fire.iter().find(|f| f.queue.as_str() == q).cloned();
    let hot = fire(&src).expect("the source on the on-fire view");
    assert_eq!(
        (hot.depth, hot.age_secs, hot.is_dlq),
        (Some(7), Some(900.0), false)
    );
    let dlq = fire(&format!("{p}/dl-dlq-sub")).expect("its DLQ on the on-fire view");
    assert_eq!((dlq.depth, dlq.is_dlq), (Some(2), true));
    // The rules were evaluated on this answer before its row went out.
    let firing = book.firing_alerts(&rules);
    let alerts: Vec<(&str, &str)> = firing
        .iter()
        .map(|a| (a.key.rule.as_str(), a.key.queue.as_str()))
        .collect();
    assert_eq!(alerts, vec![("dead-lettering", src.as_str())], "{row:?}");

    // `qdeck serve`: the same figures, labelled by profile and queue.
    let mut child = qdeck(
        dir.path(),
        &["serve", "--listen", "127.0.0.1:0", "--duration", "60s"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let started = Instant::now();
    let want = [("profile", "ps"), ("queue", src.as_str())];
    let body = loop {
        let body = get_metrics(&addr);
        if series(&body, "qdeck_queue_depth", &want).is_some()
            || started.elapsed() > Duration::from_secs(30)
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        series(&body, "qdeck_queue_depth", &want),
        Some(7.0),
        "{body}"
    );
    assert_eq!(
        series(&body, "qdeck_queue_dlq_depth", &want),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        series(&body, "qdeck_queue_dlq_forwarded_recent", &want),
        Some(5.0),
        "the forwarded count over Monitoring's window: {body}"
    );
    assert_eq!(
        series(
            &body,
            "qdeck_queue_depth",
            &[("queue", &format!("{p}/dl-dlq-sub")), ("kind", "dlq")]
        ),
        Some(2.0),
        "{body}"
    );
}
