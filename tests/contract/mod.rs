//! The backend contract: one set of behaviours every backend must show, whatever the broker.
//!
//! Each broker's test file supplies a `Fixture` (a backend plus a way to build scenes on its
//! broker) and invokes `contract_tests!`, which expands into one `#[tokio::test]` per
//! behaviour, so the first failure does not hide the others. Every test builds its own scene
//! under a unique tag and deletes it afterwards, pass or fail. The behaviours only use the
//! `Backend` trait; the fixture is the only broker-specific code.

#![allow(dead_code)]

pub mod browse;
pub mod honesty;
pub mod listing;
pub mod redrive;
pub mod send;
pub mod support;
pub mod throttle;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use qdeck_backend::Backend;
use qdeck_model::domain::QueueId;

/// The behaviours `contract_tests!` generates, by the names the tests carry.
pub mod cases {
    pub use super::browse::*;
    pub use super::honesty::*;
    pub use super::listing::*;
    pub use super::redrive::*;
    // Not used where every send case is not applicable (the job libraries).
    #[allow(unused_imports)]
    pub use super::send::*;
    pub use super::throttle::*;
}

/// A source queue whose dead letters go to `dlq`, as the fixture built it.
#[derive(Debug, Clone)]
pub struct Scene {
    pub tag: String,
    pub src: QueueId,
    pub dlq: QueueId,
    /// Messages left ready in `src`.
    pub ready: usize,
    /// Messages the broker dead-lettered from `src` into `dlq` (their origin is recorded).
    pub dead: usize,
}

/// One broker's side of the contract.
pub trait Fixture {
    fn backend(&self) -> &dyn Backend;

    /// Create a source queue with a DLQ, put `ready` messages in the source and `dead`
    /// messages in the DLQ, dead-lettered by the broker itself so their origin is recorded.
    /// Every message body is unique.
    async fn scene(&self, tag: &str, ready: usize, dead: usize) -> Scene;

    /// An empty queue without a DLQ, for redrive to a named queue.
    async fn plain_queue(&self, tag: &str) -> QueueId;

    /// Put `n` more messages straight into the scene's DLQ (while a redrive runs). They need
    /// no recorded origin: the behaviours that add them redrive to a named queue.
    async fn add_dead(&self, scene: &Scene, n: usize);

    /// Delete every queue this fixture created (other helpers share the brokers).
    async fn cleanup(&self);

    /// Messages `q` holds now as the broker's own client reads them, for a backend whose
    /// `count` can only be a metric minutes late (Pub/Sub counts only through Cloud
    /// Monitoring). Outcomes are then judged by this. `None` (every other broker): judged by
    /// `Backend::count`.
    async fn held(&self, _q: &QueueId) -> Option<usize> {
        None
    }

    /// How long the broker's figures may lag behind what happened (RabbitMQ's management
    /// API refreshes every 5 s). Checks poll for at most twice this plus a margin.
    fn settle(&self) -> Duration {
        Duration::ZERO
    }
}

/// A tag unique to one test run, short enough for every broker's queue names.
pub fn tag(what: &str) -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("{what}-{}", &u[..8])
}

/// Run one behaviour, clean up whatever it built, then report its outcome.
pub async fn run_case<F: Fixture, Fut: std::future::Future<Output = ()>>(fx: &F, case: Fut) {
    let outcome = AssertUnwindSafe(case).catch_unwind().await;
    fx.cleanup().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Expands into one test per contract behaviour for one backend.
///
/// ```ignore
/// contract_tests!(setup = LocalFixture::setup());
/// contract_tests!(
///     setup = SqsFixture::setup(),
///     ignore = "needs QDECK_TEST_SQS_ENDPOINT",
///     defects = { redrive_declared_native_receives_nothing: "defect: ..." },
/// );
/// ```
/// `setup` is an async expression giving the fixture (it panics, clearly, when its broker
/// is not configured). `ignore` marks every generated test as needing a broker, so a laptop
/// run shows them skipped and CI runs them with `--include-ignored`. `defects` names
/// behaviours this backend fails because of a known defect, each with its reason; they stay
/// ignored until the backend is fixed. `not_applicable` names behaviours that do not apply to
/// the broker's model at all (each with the reason); no test is generated for them, and the
/// broker's own test file checks that it refuses them clearly. Prefer letting the backend
/// declare it: a case whose plan the backend declares `Unsupported`, a facet it does not
/// return (`sender()`), or a typed `Unsupported` answer runs, checks the refusal changed
/// nothing, and prints `contract: CASE does not apply …` (`support::does_not_apply`).
#[macro_export]
macro_rules! contract_tests {
    (
        setup = $setup:expr
        $(, ignore = $needs:literal)?
        $(, defects = { $($defect:ident : $why:literal),* $(,)? })?
        $(, not_applicable = { $($na:ident : $na_why:literal),* $(,)? })?
        $(,)?
    ) => {
        $crate::contract_tests!(
            @expand ($) [$setup] [$($needs)?] [$($($defect : $why),*)?] [$($($na),*)?]
        );
    };
    (
        @expand ($d:tt) [$setup:expr] [$($needs:literal)?]
        [$($defect:ident : $why:literal),*] [$($na:ident),*]
    ) => {
        mod contract_suite {
            #[allow(unused_imports)]
            use super::*;

            macro_rules! case {
                $(
                    ($na) => {};
                )*
                $(
                    ($defect) => {
                        #[tokio::test(flavor = "multi_thread")]
                        #[ignore = $why]
                        async fn $defect() {
                            let fx = $setup.await;
                            let case = $crate::contract::cases::$defect(&fx);
                            $crate::contract::run_case(&fx, case).await;
                        }
                    };
                )*
                ($d name:ident) => {
                    #[tokio::test(flavor = "multi_thread")]
                    $(#[ignore = $needs])?
                    async fn $d name() {
                        let fx = $setup.await;
                        let case = $crate::contract::cases::$d name(&fx);
                        $crate::contract::run_case(&fx, case).await;
                    }
                };
            }

            case!(lists_dlq_links_both_ways);
            case!(figures_match_the_scene);
            case!(unknown_queue_gets_no_figures);
            case!(purge_empties_the_queue);
            case!(browse_shows_every_dead_letter_and_removes_none);
            case!(browse_declared_side_effect_free_changes_nothing);
            case!(redrive_to_origin_loses_nothing);
            case!(redrive_to_a_named_queue);
            case!(redrive_honours_max);
            case!(redrive_moves_only_selected_ids);
            case!(redrive_moves_at_most_the_count_at_start);
            case!(redrive_rate_is_honoured);
            case!(redrive_cancel_leaves_everything_accounted_for);
            case!(redrive_declared_native_receives_nothing);
            case!(plan_matches_the_declared_capabilities);
            case!(send_many_delivers_every_message_once);
            case!(send_many_to_a_missing_queue_sends_nothing);
        }
    };
}
