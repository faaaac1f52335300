//! The long-run parts of the AMQP path, against the stand-in: CBS tokens put again before they
//! expire (the stand-in enforces expiry on live links as Azure does), locks renewed while a
//! slow batch is in flight, originals settled by lock token after the broker detached the
//! receive link, and missing claims named in one-line errors through the CLI. The slow and
//! broken broker comes from the stand-in's fault switches (QDECK_SB_STANDIN_FAULT, faults.py).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use qdeck_backend::{build_with, Backend, OpProgress};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::ProfileKind;
use qdeck_model::domain::*;

use super::{common, dlq, ids_in, q, redrive_all, req, write_cli_config, Standin};

/// A backend on the stand-in whose SAS tokens live `ttl` (profile `sas_token_ttl`).
async fn backend_with_ttl(s: &Standin, ttl: &str) -> Arc<dyn Backend> {
    let mut p = s.profile("sb-short-tokens");
    if let ProfileKind::Servicebus(sb) = &mut p.kind {
        sb.sas_token_ttl = Some(ttl.into());
    }
    let secrets = SecretMap::new().with("QDECK_TEST_SB_CS", &s.conn);
    build_with(&p, &secrets).await.expect("backend")
}

/// Every message Microsoft's client receives from `queue` (completing each), counted by id.
fn read_back(s: &Standin, queue: &str, expected: usize) -> BTreeMap<String, usize> {
    // Asks for more than expected, so a duplicate would show.
    let got = s.client(&["read", queue, &(expected + 20).to_string()]);
    let mut seen = BTreeMap::new();
    for m in got["messages"].as_array().unwrap() {
        let id = m["message_id"].as_str().unwrap().to_string();
        *seen.entry(id).or_insert(0) += 1;
    }
    seen
}

/// The target holds each of `tag-0` … `tag-(n-1)` exactly once, the DLQ nothing, and the
/// report says all moved, none failed or possibly duplicated.
async fn assert_moved_exactly_once(
    s: &Standin,
    b: &dyn Backend,
    queue: &str,
    tag: &str,
    n: usize,
    report: &RedriveReport,
) {
    assert_eq!(
        (report.moved, report.failed, report.possibly_duplicated),
        (n as u64, 0, 0),
        "{report:?}"
    );
    assert!(
        !report
            .errors
            .iter()
            .any(|e| e.contains("possibly duplicated") || e.contains("resubmitted twice")),
        "{report:?}"
    );
    assert!(
        ids_in(b, &dlq(queue)).await.is_empty(),
        "the DLQ ends empty (the originals were completed)"
    );
    let seen = read_back(s, queue, n);
    let want: BTreeMap<String, usize> = (0..n).map(|i| (format!("{tag}-{i}"), 1)).collect();
    assert_eq!(seen, want, "each message once in the target");
}

/// A backend kept open past its tokens' lifetime peeks and sends again: it puts a new token,
/// and opens new links where the broker dropped the old ones with the expired token.
#[tokio::test]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn a_long_lived_backend_puts_its_token_again_after_the_lifetime() {
    let s = Standin::start(&["tokens".into()]);
    let b = backend_with_ttl(&s, "10s").await;
    let send = |text: &'static str| {
        let b = b.clone();
        async move {
            b.sender()
                .unwrap()
                .send(&q("tokens"), OutgoingMessage::text(text, &[]))
                .await
        }
    };
    send("before").await.unwrap();
    assert_eq!(
        b.browse(&q("tokens"), &req(10))
            .await
            .unwrap()
            .messages
            .len(),
        1
    );
    // Past the lifetime the stand-in refuses the old token and detaches the links it
    // authorised (the kept `$management` link among them).
    tokio::time::sleep(Duration::from_secs(13)).await;
    let page = b
        .browse(&q("tokens"), &req(10))
        .await
        .expect("a peek after the token's lifetime");
    assert_eq!(page.messages.len(), 1);
    send("after")
        .await
        .expect("a send after the token's lifetime");
    assert_eq!(
        b.browse(&q("tokens"), &req(10))
            .await
            .unwrap()
            .messages
            .len(),
        2
    );
}

/// One batch of copies takes longer than the tokens live (the broker accepts a copy every
/// 200 ms): the run keeps its tokens fresh while the batch is in flight, so neither link is
/// dropped, and every message is moved exactly once.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn a_redrive_longer_than_the_token_lifetime_loses_nothing() {
    const N: usize = 60;
    let s = Standin::start_with_faults(&["ttlrun,max-delivery=10".into()], "slow-accept=200");
    let b = backend_with_ttl(&s, "10s").await;
    s.client(&["dead", "ttlrun", "ttl", &N.to_string()]);
    let report = b
        .redrive(&redrive_all("ttlrun", None), &OpProgress::detached())
        .await
        .expect("the redrive");
    assert_moved_exactly_once(&s, b.as_ref(), "ttlrun", "ttl", N, &report).await;
}

/// LockDuration 2 s and a broker that accepts a copy every 100 ms: one batch of 60 takes
/// three lock durations. The locks are renewed while the copies are in flight, so every
/// original is completed after its copy was accepted, exactly once.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn locks_are_renewed_while_a_slow_batch_is_in_flight() {
    const N: usize = 60;
    let s = Standin::start_with_faults(
        &["slowlock,max-delivery=10,lock=2".into()],
        "slow-accept=100",
    );
    let b = s.backend().await;
    s.client(&["dead", "slowlock", "slow", &N.to_string()]);
    let report = b
        .redrive(&redrive_all("slowlock", None), &OpProgress::detached())
        .await
        .expect("the redrive");
    assert_moved_exactly_once(&s, b.as_ref(), "slowlock", "slow", N, &report).await;
}

/// The broker detaches each receive link after its 7th delivery (batches of 10): what a
/// detached link received is still locked, so it is copied and completed by lock token on
/// `$management`, and a new link carries on. Nothing is lost or duplicated.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn originals_are_settled_by_lock_token_after_the_receive_link_is_detached() {
    const N: usize = 30;
    let s = Standin::start_with_faults(
        &["detached,max-delivery=10,lock=30".into()],
        "detach-receiver-after=7",
    );
    let b = s.backend().await;
    s.client(&["dead", "detached", "det", &N.to_string()]);
    let report = b
        .redrive(&redrive_all("detached", Some(10)), &OpProgress::detached())
        .await
        .expect("the redrive");
    assert_moved_exactly_once(&s, b.as_ref(), "detached", "det", N, &report).await;
}

/// The stand-in's narrower policies (standin.py POLICIES): key name and key.
const SEND_ONLY: (&str, &str) = ("SendOnly", "cWRlY2stc2Itc3RhbmRpbi1zZW5kLW9ubHk=");
const LISTEN_ONLY: (&str, &str) = ("ListenOnly", "cWRlY2stc2Itc3RhbmRpbi1saXN0ZW4tb25seQ==");
const LISTEN_SEND: (&str, &str) = ("ListenSend", "cWRlY2stc2Itc3RhbmRpbi1saXN0ZW4tc2VuZA==");

fn with_policy(s: &Standin, (name, key): (&str, &str)) -> String {
    let endpoint = s.conn.split(';').next().unwrap();
    format!(
        "{endpoint};SharedAccessKeyName={name};SharedAccessKey={key};UseDevelopmentEmulator=true;"
    )
}

/// A key without the right an operation needs: the CLI fails with exit code 6 and one line
/// naming the missing claim, never printing the key; a refused redrive leaves the DLQ whole.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn a_missing_claim_is_named_in_one_line_by_the_cli() {
    let s = Standin::start(&["claims,max-delivery=10".into()]);
    let root = s.backend().await;
    s.client(&["dead", "claims", "cl", "3"]);
    let before = ids_in(root.as_ref(), &dlq("claims")).await;
    assert_eq!(before.len(), 3);
    let env = common::cli_env::CliEnv::new();
    write_cli_config(&env, &s);
    let run = |policy: (&str, &str), args: &[&str]| {
        let out = env
            .qdeck()
            .env("QDECK_SB_CS", with_policy(&s, policy))
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !stdout.contains(policy.1) && !stderr.contains(policy.1),
            "{args:?}: the key was printed: {stdout}{stderr}"
        );
        (out.status.code(), stderr)
    };
    let one_error_naming = |(code, err): (Option<i32>, String), right: &str, what: &str| {
        assert_eq!(code, Some(6), "{what}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{what}: one line: {err}");
        assert!(
            lines[0].contains(&format!("{right} right"))
                || lines[0].contains(&format!("'{right}'")),
            "{what}: names {right}: {err}"
        );
    };

    one_error_naming(
        run(SEND_ONLY, &["peek", "claims/$DeadLetterQueue"]),
        "Listen",
        "peek with SendOnly",
    );
    // A key without Manage cannot read the DLQ's count from the management API: the plan
    // counts by peeking instead, and the run is refused for want of Send before anything
    // is received.
    one_error_naming(
        run(
            LISTEN_ONLY,
            &["redrive", "claims/$DeadLetterQueue", "--yes"],
        ),
        "Send",
        "redrive with ListenOnly",
    );
    // The backend's own redrive (no plan) reads the DLQ, and the send link is refused for
    // want of Send before anything is received.
    let listen_only = s.backend_with(&with_policy(&s, LISTEN_ONLY)).await.unwrap();
    let e = listen_only
        .redrive(&redrive_all("claims", None), &OpProgress::detached())
        .await
        .expect_err("a redrive without Send");
    assert!(
        matches!(e, qdeck_backend::BackendError::Forbidden { right: Some(ref r), .. } if r == "Send"),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        !text.contains('\n') && !text.contains(LISTEN_ONLY.1),
        "{text}"
    );
    // Nothing was taken away or copied.
    assert_eq!(ids_in(root.as_ref(), &dlq("claims")).await, before);
    assert!(
        read_back(&s, "claims", 0).is_empty(),
        "no copy reached the queue"
    );
    // Listing the namespace comes from the management API, which wants Manage; so do one
    // queue's figures, which are shown as far as they go but exit as a failure.
    one_error_naming(run(LISTEN_SEND, &["ls"]), "Manage", "ls with ListenSend");
    one_error_naming(
        run(LISTEN_SEND, &["stats", "claims"]),
        "Manage",
        "stats with ListenSend",
    );
    assert_eq!(ids_in(root.as_ref(), &dlq("claims")).await, before);
    // A Listen/Send key redrives (the plan counted by peek) and purges, as the mgmt.rs hint
    // promises.
    let (code, err) = run(
        LISTEN_SEND,
        &["redrive", "claims/$DeadLetterQueue", "--yes"],
    );
    assert_eq!(code, Some(0), "redrive with ListenSend: {err}");
    assert!(ids_in(root.as_ref(), &dlq("claims")).await.is_empty());
    assert_eq!(
        read_back(&s, "claims", 3).len(),
        3,
        "the three copies arrived"
    );
    s.client(&["dead", "claims", "cl2", "2"]);
    let (code, err) = run(LISTEN_SEND, &["purge", "claims/$DeadLetterQueue", "--yes"]);
    assert_eq!(code, Some(0), "purge with ListenSend: {err}");
    assert!(ids_in(root.as_ref(), &dlq("claims")).await.is_empty());
}

/// Cancelled in the middle of a paced batch (5 a second, 20 received at once): what was
/// copied has its original completed, what was held is abandoned at once, so a reader gets it
/// now rather than after the 30 s lock; nothing is lost or copied twice.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QDECK_TEST_SB_AMQP=1 and QDECK_TEST_PYTHON with azure-servicebus and python-qpid-proton"]
async fn a_cancelled_redrive_abandons_what_it_holds() {
    const N: usize = 40;
    let s = Standin::start(&["cancelled,max-delivery=10,lock=30".into()]);
    let b = s.backend().await;
    s.client(&["dead", "cancelled", "can", &N.to_string()]);
    let p = OpProgress::detached();
    let canceller = p.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        canceller.cancel();
    });
    let mut paced = redrive_all("cancelled", Some(20));
    paced.rate = Some(qdeck_model::rate::Rate::fixed(5.0));
    let report = b.redrive(&paced, &p).await.expect("the redrive");
    let moved = usize::try_from(report.moved).unwrap();
    assert!(moved > 0 && moved < N, "cancelled mid-run: {report:?}");
    assert_eq!(report.possibly_duplicated, 0, "{report:?}");
    let copies = read_back(&s, "cancelled", moved);
    assert_eq!(copies.len(), moved, "{copies:?}");
    assert!(copies.values().all(|&n| n == 1), "{copies:?}");
    // The rest are back in the DLQ and free now: Microsoft's client receives every one within
    // its 3 s wait, which a lock held to its 30 s would not allow.
    let got = s.client(&["read", "cancelled/$DeadLetterQueue", &N.to_string()]);
    let rest: Vec<&str> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["message_id"].as_str())
        .collect();
    assert_eq!(rest.len(), N - moved, "received now: {rest:?}");
}
