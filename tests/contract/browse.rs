//! Browsing: lossless, and exactly as free of side effects as the backend declares.

use qdeck_model::domain::*;

use super::support::{browse_all, expect_count, ids};
use super::{tag, Fixture};

/// Browsing the DLQ shows every dead letter with its origin, twice the same, and removes none.
pub async fn browse_shows_every_dead_letter_and_removes_none<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("browse"), 2, 5).await;
    let seen = browse_all(b, &s.dlq, false).await;
    let first = ids(&seen);
    assert_eq!(first.len(), 5, "browse saw every dead letter: {first:?}");
    let mut unique = first.clone();
    unique.dedup();
    assert_eq!(unique.len(), 5, "each message once: {first:?}");
    for m in &seen {
        let origin = m.dead_letter.as_ref().and_then(|d| d.origin.as_ref());
        assert_eq!(
            origin,
            Some(&s.src),
            "dead letter {} records its origin",
            m.id
        );
    }
    expect_count(fx, &s.dlq, 5, "browse removed nothing").await;
    let again = ids(&browse_all(b, &s.dlq, false).await);
    assert_eq!(again, first, "a second browse shows the same messages");
    expect_count(fx, &s.dlq, 5, "the second browse removed nothing").await;
    expect_count(fx, &s.src, 2, "browsing the DLQ left the source alone").await;
}

/// Where a queue's browse is declared side-effect-free, browsing changes no receive count
/// and no figure; where it is declared unsupported, browsing is refused.
pub async fn browse_declared_side_effect_free_changes_nothing<F: Fixture>(fx: &F) {
    let b = fx.backend();
    let s = fx.scene(&tag("peek"), 3, 3).await;
    for (q, n) in [(&s.src, 3usize), (&s.dlq, 3usize)] {
        let info = b.describe(q).await.expect("describe");
        match b.capabilities_for(&info).browse {
            BrowseEffect::None => {
                let before = b.count(q).await.expect("count before");
                let first = browse_all(b, q, false).await;
                let second = browse_all(b, q, false).await;
                assert_eq!(first.len(), n, "{q}: browse saw every message");
                assert_eq!(ids(&first), ids(&second), "{q}: same messages twice");
                for m in &first {
                    let later = second.iter().find(|x| x.id == m.id).expect("seen again");
                    assert_eq!(
                        m.receive_count, later.receive_count,
                        "{q}: browse is declared side-effect-free but message {} changed its \
                         receive count",
                        m.id
                    );
                }
                let after = b.count(q).await.expect("count after");
                assert_eq!(
                    (before.ready, before.in_flight),
                    (after.ready, after.in_flight),
                    "{q}: browse is declared side-effect-free but changed the figures"
                );
            }
            BrowseEffect::SideEffect(what) => {
                assert!(
                    !what.trim().is_empty(),
                    "{q}: a side effect says what it is"
                );
            }
            BrowseEffect::Unsupported(why) => {
                let r = b
                    .browse(
                        q,
                        &BrowseRequest {
                            cursor: None,
                            max: 10,
                            force: true,
                        },
                    )
                    .await;
                assert!(
                    r.is_err(),
                    "{q}: browse declared unsupported ({why}) but it answered"
                );
            }
        }
    }
}
