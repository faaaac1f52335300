//! Redrive: to origin, to a named queue, capped, selected, and never more than was there
//! when it started.

use std::collections::BTreeSet;
use std::time::Duration;

use qdeck_backend::OpProgress;
use qdeck_model::domain::*;

use super::support::{
    assert_clean, browse_all, declared_unsupported, does_not_apply, expect_count, ids, request,
    wait_done,
};
use super::{tag, Fixture};

/// Every dead letter goes back to its origin; none is lost, none stays, none is doubled.
pub async fn redrive_to_origin_loses_nothing<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("origin"), 3, 4).await;
    let report = b
        .redrive(
            &request(&s.dlq, RedriveTarget::Origin),
            &OpProgress::detached(),
        )
        .await
        .expect("redrive");
    assert_clean(&report, 4);
    expect_count(fx, &s.dlq, 0, "DLQ emptied").await;
    expect_count(fx, &s.src, 7, "every dead letter is back in the source").await;
}

/// A named target receives every dead letter; the origin gets none.
pub async fn redrive_to_a_named_queue<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("named"), 1, 3).await;
    let target = fx.plain_queue(&tag("target")).await;
    let req = request(&s.dlq, RedriveTarget::Queue(target.clone()));
    if let Some(why) = declared_unsupported(b, &req).await {
        does_not_apply("redrive_to_a_named_queue", &why);
        expect_count(fx, &s.dlq, 3, "a refused redrive moved nothing").await;
        return;
    }
    let report = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive");
    assert_clean(&report, 3);
    expect_count(fx, &s.dlq, 0, "DLQ emptied").await;
    expect_count(fx, &target, 3, "the named queue got every dead letter").await;
    expect_count(fx, &s.src, 1, "the origin got none").await;
}

/// `max` moves exactly that many, to origin and to a named queue.
pub async fn redrive_honours_max<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("max"), 0, 6).await;
    let mut req = request(&s.dlq, RedriveTarget::Origin);
    req.max = Some(2);
    let report = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive to origin");
    assert_clean(&report, 2);
    expect_count(fx, &s.src, 2, "origin got max").await;
    expect_count(fx, &s.dlq, 4, "the rest stay in the DLQ").await;

    let target = fx.plain_queue(&tag("maxto")).await;
    let mut req = request(&s.dlq, RedriveTarget::Queue(target.clone()));
    req.max = Some(3);
    if let Some(why) = declared_unsupported(b, &req).await {
        does_not_apply("redrive_honours_max (to a named queue)", &why);
        expect_count(fx, &s.dlq, 4, "a refused redrive moved nothing").await;
        return;
    }
    let report = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive to a named queue");
    assert_clean(&report, 3);
    expect_count(fx, &target, 3, "named queue got max").await;
    expect_count(fx, &s.dlq, 1, "the rest stay in the DLQ").await;
}

/// Only the ids chosen from a browse move; every other message stays, unchanged in identity.
pub async fn redrive_moves_only_selected_ids<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("select"), 0, 5).await;
    let all = ids(&browse_all(b, &s.dlq, false).await);
    assert_eq!(all.len(), 5, "browse before selecting: {all:?}");
    let chosen = vec![all[1].clone(), all[3].clone()];
    let mut req = request(&s.dlq, RedriveTarget::Origin);
    req.only_ids = Some(chosen.clone());
    // A broker that cannot take single messages out of a DLQ (Kafka) declares it in the plan.
    if let Some(why) = declared_unsupported(b, &req).await {
        does_not_apply("redrive_moves_only_selected_ids", &why);
        expect_count(fx, &s.dlq, 5, "a refused redrive moved nothing").await;
        expect_count(fx, &s.src, 0, "a refused redrive sent nothing").await;
        return;
    }
    let report = b
        .redrive(&req, &OpProgress::detached())
        .await
        .expect("redrive");
    assert_clean(&report, 2);
    expect_count(fx, &s.dlq, 3, "the others stay").await;
    expect_count(fx, &s.src, 2, "the chosen arrived").await;
    let left: BTreeSet<String> = ids(&browse_all(b, &s.dlq, false).await)
        .into_iter()
        .collect();
    let want: BTreeSet<String> = all.into_iter().filter(|i| !chosen.contains(i)).collect();
    assert_eq!(left, want, "exactly the unchosen messages stay in the DLQ");
}

/// The engine caps a redrive at the count the user confirmed: with `max` = the count at the
/// start, dead letters that arrive during the run are not moved.
pub async fn redrive_moves_at_most_the_count_at_start<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("cap"), 0, 4).await;
    let target = fx.plain_queue(&tag("capto")).await;
    expect_count(fx, &s.dlq, 4, "DLQ before the redrive").await;
    let at_start = b.count(&s.dlq).await.expect("count").ready;
    let mut req = request(&s.dlq, RedriveTarget::Queue(target.clone()));
    req.max = Some(at_start);
    // Slow enough that the newcomers arrive while it runs.
    req.rate = Some(qdeck_model::rate::Rate::fixed(2.0));
    if let Some(why) = declared_unsupported(b, &req).await {
        does_not_apply("redrive_moves_at_most_the_count_at_start", &why);
        expect_count(fx, &s.dlq, 4, "a refused redrive moved nothing").await;
        return;
    }
    let (progress, mut rx) = OpProgress::new();
    let newcomers = async {
        wait_done(&mut rx, 1, Duration::from_secs(30)).await;
        fx.add_dead(&s, 3).await;
    };
    let (report, ()) = tokio::join!(b.redrive(&req, &progress), newcomers);
    let report = report.expect("redrive");
    assert_clean(&report, 4);
    expect_count(fx, &target, 4, "the target got what was there at the start").await;
    expect_count(fx, &s.dlq, 3, "dead letters added during the redrive stay").await;
}
