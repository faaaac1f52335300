//! Capability honesty: what `capabilities_for` and `plan_redrive` declare is what happens.

use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::*;

use super::support::{assert_clean, expect_count, receive_calls, request};
use super::{tag, Fixture};

/// A redrive planned native (the broker moves the messages) makes no client-side receive,
/// whichever target the user picks; one declared unsupported is refused.
pub async fn redrive_declared_native_receives_nothing<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let to_origin = fx.scene(&tag("natorig"), 0, 3).await;
    let to_named = fx.scene(&tag("natnamed"), 0, 3).await;
    let target = fx.plain_queue(&tag("natto")).await;
    let runs = [
        (&to_origin, RedriveTarget::Origin, &to_origin.src),
        (&to_named, RedriveTarget::Queue(target.clone()), &target),
    ];
    for (s, goal, lands_in) in runs {
        // The plan is what the dialog and the dry run tell the user; it may know more than
        // the queue's general capabilities (an endpoint without move tasks, a selection).
        let declared = b
            .plan_redrive(&request(&s.dlq, goal.clone()))
            .await
            .expect("plan")
            .mode;
        // A mode that depends on the target (a broker that redrives only to the origin) is
        // the plan's to declare; the queue's general capabilities cannot know the target.
        if let RedriveMode::Unsupported(why) = &declared {
            let res = b
                .redrive(&request(&s.dlq, goal.clone()), &OpProgress::detached())
                .await;
            assert!(
                res.is_err(),
                "redrive declared unsupported ({why}) but it ran: {res:?}"
            );
            super::support::does_not_apply(
                "redrive_declared_native_receives_nothing (this target)",
                why,
            );
            continue;
        }
        let info = b.describe(&s.dlq).await.expect("describe DLQ");
        let general = b.capabilities_for(&info).redrive;
        assert_eq!(
            std::mem::discriminant(&general),
            std::mem::discriminant(&declared),
            "after planning, the queue's capabilities ({general:?}) declare what the plan \
             says ({declared:?})"
        );
        let before = receive_calls(&b.api_calls().snapshot());
        let res = b
            .redrive(&request(&s.dlq, goal.clone()), &OpProgress::detached())
            .await;
        let receives = receive_calls(&b.api_calls().snapshot()) - before;
        match declared {
            RedriveMode::Unsupported(why) => {
                assert!(
                    res.is_err(),
                    "redrive declared unsupported ({why}) but it ran: {res:?}"
                );
                continue;
            }
            RedriveMode::Native(how) => {
                let report = res.expect("redrive");
                assert_eq!(
                    receives, 0,
                    "redrive to {goal:?} is declared native ({how}) but made {receives} \
                     client-side receive calls; it ran as {:?}",
                    report.mode
                );
                assert_clean(&report, 3);
            }
            RedriveMode::ClientSide => assert_clean(&res.expect("redrive"), 3),
        }
        expect_count(fx, &s.dlq, 0, "DLQ emptied").await;
        expect_count(fx, lands_in, 3, "every dead letter arrived").await;
    }
}

/// `plan_redrive` changes nothing, states the mode `capabilities_for` then declares, counts what
/// the run would move after `max` and the id selection, and fails where the run would.
pub async fn plan_matches_the_declared_capabilities<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("plan"), 0, 3).await;
    expect_count(fx, &s.dlq, 3, "DLQ before planning").await;
    let plan = b
        .plan_redrive(&request(&s.dlq, RedriveTarget::Origin))
        .await
        .expect("plan");
    // Planning may learn what the endpoint lacks; the queue's capabilities then agree.
    let info = b.describe(&s.dlq).await.expect("describe DLQ");
    let declared = b.capabilities_for(&info).redrive;
    assert_eq!(plan.mode, declared, "plan states the declared mode");
    assert_eq!(plan.count.ready, 3, "plan counts the DLQ: {plan:?}");

    let mut capped = request(&s.dlq, RedriveTarget::Origin);
    capped.max = Some(2);
    let plan = b.plan_redrive(&capped).await.expect("plan with max");
    assert_eq!(plan.count.ready, 2, "plan honours max: {plan:?}");

    let mut chosen = request(&s.dlq, RedriveTarget::Origin);
    chosen.only_ids = Some(vec!["any-one-id".to_string()]);
    let plan = b.plan_redrive(&chosen).await.expect("plan with ids");
    assert!(
        plan.count.ready <= 1,
        "plan honours the selection: {plan:?}"
    );

    let ghost = QueueId::new(tag("ghost"));
    match b
        .plan_redrive(&request(&s.dlq, RedriveTarget::Queue(ghost)))
        .await
    {
        Err(BackendError::NotFound(_)) => {}
        other => panic!("plan to an unknown queue: {other:?}"),
    }
    expect_count(fx, &s.dlq, 3, "planning moved nothing").await;
    expect_count(fx, &s.src, 0, "planning moved nothing to the source").await;
}
