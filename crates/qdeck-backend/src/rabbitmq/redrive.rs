//! Client-side redrive: consume the DLQ with a prefetch window, publish each message with
//! publisher confirms (many in flight), and ack the DLQ message only after its copy is
//! confirmed. Messages that cannot be moved stay unacknowledged and return to the DLQ when
//! the channel closes. A crash mid-way may duplicate, never lose.
//!
//! Two filters ride on the same loop: chosen ids (`only_ids`, from a scan), and a predicate
//! tested on each delivery (`redrive_matching`, a one-pass `redrive --where`). Either way the
//! messages passed over stay unacknowledged until the channel closes, so none is read twice.

mod lanes;
mod pass;

use std::collections::HashSet;

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::Channel;

use super::conn::amqp_error;
use super::RabbitBackend;
use crate::{BackendError, MessageFilter, OpProgress, Result};
use qdeck_model::domain::*;

/// Copies sent but not yet confirmed-and-deleted at once, unless the request says: what a
/// crash (kill -9, lost connection) may duplicate. 500 keeps a 1 KB redrive near the
/// broker's own shovel speed on a local broker (confirms are pipelined; the window only has
/// to cover one round trip of publishes) while a crash costs at most 500 duplicates.
pub const DEFAULT_WINDOW: u32 = 500;
/// Largest window a request may ask for.
const MAX_WINDOW: u32 = 5000;

/// Prefetch window when the average message size is unknown.
const UNKNOWN_SIZE_WINDOW: u16 = 2000;
/// Bytes we let the broker push ahead of us (prefetched plus in flight).
const WINDOW_BYTES: u64 = 64 * 1024 * 1024;

/// Prefetch window from the source's average message size (management API), so big
/// messages do not buffer gigabytes: at most `MAX_WINDOW`, at least 10.
async fn window_for(b: &RabbitBackend, source: &QueueId) -> u16 {
    match b.queue_bytes(source).await {
        Some((bytes, msgs)) if msgs > 0 && bytes > 0 => {
            let avg = (bytes / msgs).max(1);
            (WINDOW_BYTES / avg).clamp(10, MAX_WINDOW as u64) as u16
        }
        // Size unknown (new queue whose stats are not in yet, management API down).
        _ => UNKNOWN_SIZE_WINDOW,
    }
}

/// Passive declare (NotFound names the queue as the user knows it). A failure closes the
/// channel: callers use a throw-away one.
pub(super) async fn declare_passive(
    ch: &Channel,
    queue: &str,
    id: &QueueId,
) -> Result<lapin::Queue> {
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            passive: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .map_err(|e| match amqp_error(&e, &format!("queue '{id}'")) {
        BackendError::NotFound(_) => BackendError::NotFound(format!("queue '{id}' not found")),
        other => other,
    })
}

/// Messages ready in `queue`, by passive declare.
pub(super) async fn count(ch: &Channel, queue: &str, id: &QueueId) -> Result<u64> {
    Ok(declare_passive(ch, queue, id).await?.message_count() as u64)
}

pub async fn redrive(
    b: &RabbitBackend,
    req: &RedriveRequest,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    run(b, req, None, progress).await
}

/// A one-pass filtered redrive (checks in `one_pass`).
pub async fn redrive_matching(
    b: &RabbitBackend,
    req: &RedriveRequest,
    filter: &MessageFilter,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    super::one_pass::check(b, req, filter).await?;
    run(b, req, Some(filter), progress).await
}

async fn run(
    b: &RabbitBackend,
    req: &RedriveRequest,
    matching: Option<&MessageFilter>,
    progress: &OpProgress,
) -> Result<RedriveReport> {
    let (vhost, src) = b.resolve(&req.source);
    let fixed = fixed_target(b, req, &vhost, &src)?;
    if let (true, Some(dest)) = (
        shovel_fits(req, fixed.is_some(), matching.is_some()) && b.shovel_in_use().await,
        &fixed,
    ) {
        if let Some(rep) =
            super::shovel::move_with_shovel(b, &vhost, &src, dest, req.max, progress).await?
        {
            return Ok(rep);
        }
    }
    let mut report = RedriveReport {
        mode: "client-side".into(),
        ..Default::default()
    };

    // Count first: we move at most what is there now (new dead letters wait for next time).
    let probe = b.pool.channel(&vhost).await?;
    b.calls.bump("amqp:queue.declare");
    let available = count(&probe, &src, &req.source).await?;
    if let (Some(t), RedriveTarget::Queue(tid)) = (&fixed, &req.target) {
        b.calls.bump("amqp:queue.declare");
        count(&probe, t, tid).await?;
    }
    // The probe stays open: an id-filtered redrive asks it whether the queue is drained.
    let plan = Plan::new(req, matching, fixed, available);
    if let Some(n) = plan.examine {
        super::one_pass::check_size(b, &req.source, n).await?;
    }
    progress.set_total(plan.progress_total());
    if plan.examine.is_some() {
        report.examined = Some(0);
        report.matched = Some(0);
    }
    if plan.nothing_to_do() {
        let _ = probe.close(200, "ok".into()).await;
        progress.phase("done");
        return Ok(report);
    }
    let pass = pass::Pass::start(b, req, (&vhost, &src), plan, probe, report, progress).await?;
    Ok(pass.run().await.finish().await)
}

/// The queue every copy goes to, or `None` for each message's x-death origin.
/// A shovel moves a whole queue to one queue as fast as the broker goes: not to each
/// message's origin, not at a rate, not chosen messages.
fn shovel_fits(req: &RedriveRequest, fixed: bool, matching: bool) -> bool {
    fixed && req.rate.is_none() && req.only_ids.is_none() && !matching
}

/// The plan says how this request would move its messages, not what the broker can do in
/// general: a to-origin redrive is client-side even where the shovel moves the others.
pub async fn plan(b: &RabbitBackend, req: &RedriveRequest) -> Result<RedrivePlan> {
    let (vhost, src) = b.resolve(&req.source);
    let fixed = fixed_target(b, req, &vhost, &src)?;
    let mut plan = crate::plan_redrive_checked(b, req).await?;
    plan.mode = if shovel_fits(req, fixed.is_some(), false) && b.shovel_in_use().await {
        RedriveMode::Native("a dynamic shovel on the broker".into())
    } else {
        RedriveMode::ClientSide
    };
    Ok(plan)
}

fn fixed_target(
    b: &RabbitBackend,
    req: &RedriveRequest,
    vhost: &str,
    src: &str,
) -> Result<Option<String>> {
    Ok(match &req.target {
        RedriveTarget::Origin => None,
        RedriveTarget::Queue(t) => {
            let (tv, tn) = b.resolve(t);
            if tv != vhost {
                return Err(BackendError::Unsupported(
                    "redrive across vhosts is not supported".into(),
                ));
            }
            if tn == src {
                return Err(BackendError::Invalid(
                    "source and target are the same queue".into(),
                ));
            }
            Some(tn)
        }
    })
}

/// How far a client-side pass goes, from the request and the messages ready in the source.
struct Plan<'r> {
    /// The queue every copy goes to, or `None` for each message's x-death origin.
    fixed: Option<String>,
    only: Option<HashSet<&'r str>>,
    matching: Option<&'r MessageFilter>,
    available: u64,
    max_moved: u64,
    /// With a predicate: how many messages the pass examines.
    examine: Option<u64>,
    /// Deliveries the pass takes at most.
    total: u64,
    /// Messages matched (by id or predicate) after which the pass stops.
    want: Option<u64>,
}

impl<'r> Plan<'r> {
    fn new(
        req: &'r RedriveRequest,
        matching: Option<&'r MessageFilter>,
        fixed: Option<String>,
        available: u64,
    ) -> Self {
        // `max` caps the messages moved. Without an id filter that is the deliveries taken;
        // with one, the matching messages may sit anywhere in the queue, so every message
        // there now is passed (skipped ones held) until `max` of them matched.
        let max_moved = req.max.map_or(available, |m| m.min(available));
        let only: Option<HashSet<&str>> = req
            .only_ids
            .as_ref()
            .map(|v| v.iter().map(String::as_str).collect());
        // With a predicate, the pass examines the messages ready now (they come first: the
        // ones passed over are held, so none comes round again) and `max` caps the matches.
        let examine = matching.map(|f| f.max_examined.map_or(available, |l| l.min(available)));
        // With an id filter the count taken before the scan's requeues settled (or before new
        // dead letters) is no bound: we pass messages until every selected one matched or the
        // broker has no ready message left for us.
        let total = match (&only, examine) {
            (Some(_), _) => u64::MAX,
            (None, Some(n)) => n,
            (None, None) => max_moved,
        };
        let want = match (&only, matching) {
            (Some(o), _) => Some((o.len() as u64).min(max_moved)),
            (None, Some(_)) => req.max,
            (None, None) => None,
        };
        Plan {
            fixed,
            only,
            matching,
            available,
            max_moved,
            examine,
            total,
            want,
        }
    }

    /// The total the progress shows.
    fn progress_total(&self) -> Option<u64> {
        match (&self.only, self.examine) {
            (Some(ids), _) => Some((ids.len() as u64).min(self.max_moved)),
            // How many will match is not known until the pass ends.
            (None, Some(_)) => None,
            (None, None) => Some(self.max_moved),
        }
    }

    fn nothing_to_do(&self) -> bool {
        self.available == 0 || self.max_moved == 0 || self.examine == Some(0)
    }

    /// Skipped messages stay held: the pass runs on lanes (see `lanes::LANE`).
    fn filtered(&self) -> bool {
        self.only.is_some() || self.matching.is_some()
    }
}
