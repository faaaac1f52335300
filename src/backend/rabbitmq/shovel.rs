//! Server-side move with a dynamic shovel, as the management UI's "Move messages" does:
//! `src-delete-after: queue-length` (or the max), `ack-mode: on-confirm` (the broker acks the
//! source only after the destination confirmed). Used for redrive to a chosen queue when the
//! profile sets `use_shovel` and no rate limit or id filter is asked for.

use std::time::Duration;

use super::mgmt::enc;
use super::RabbitBackend;
use crate::backend::{BackendError, OpProgress, Result};
use crate::domain::*;

/// Give up on a shovel that moved nothing for this long.
const STALL: Duration = Duration::from_secs(60);

async fn ready(b: &RabbitBackend, vhost: &str, queue: &str) -> Result<u64> {
    let ch = b.pool.channel(vhost).await?;
    b.calls.bump("amqp:queue.declare");
    let n = super::redrive::count(&ch, queue, &QueueId::new(queue)).await;
    let _ = ch.close(200, "ok".into()).await;
    n
}

/// `Ok(None)`: the shovel plugin is not there, the caller moves client-side.
pub async fn move_with_shovel(
    b: &RabbitBackend,
    vhost: &str,
    src: &str,
    dest: &str,
    max: Option<u64>,
    progress: &OpProgress,
) -> Result<Option<RedriveReport>> {
    let before = ready(b, vhost, src).await?;
    ready(b, vhost, dest).await?; // the target must exist: a shovel would create it
    let total = max.map_or(before, |m| m.min(before));
    progress.set_total(Some(total));
    let mut report = RedriveReport {
        mode: "shovel".into(),
        ..Default::default()
    };
    if total == 0 {
        progress.phase("done");
        return Ok(Some(report));
    }
    let name = format!("qdeck-move-{}", uuid::Uuid::new_v4().simple());
    let path = format!("/api/parameters/shovel/{}/{}", enc(vhost), enc(&name));
    let uri = format!("amqp:///{}", enc(vhost));
    let delete_after = match max {
        Some(m) if m < before => serde_json::json!(m),
        _ => serde_json::json!("queue-length"),
    };
    let body = serde_json::json!({
        "component": "shovel", "vhost": vhost, "name": name,
        "value": {
            "src-uri": uri, "src-queue": src, "src-protocol": "amqp091",
            "src-prefetch-count": 1000, "src-delete-after": delete_after,
            "dest-uri": uri, "dest-queue": dest, "dest-protocol": "amqp091",
            "dest-add-forward-headers": false, "ack-mode": "on-confirm"
        }
    });
    match b.mgmt.send(reqwest::Method::PUT, &path, Some(&body)).await {
        Ok(_) => {}
        // No plugin, no policymaker tag, …: move client-side instead.
        Err(BackendError::Unreachable(m)) => return Err(BackendError::Unreachable(m)),
        Err(_) => return Ok(None),
    }
    progress.phase("shovel moving");
    let cancel = progress.cancel_token();
    let mut last_done = 0u64;
    let mut last_progress = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => {
                let _ = b.mgmt.send(reqwest::Method::DELETE, &path, None).await;
                report.cancelled = true;
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        // The shovel deletes itself once it moved `src-delete-after` messages.
        let gone = matches!(
            b.mgmt.send(reqwest::Method::GET, &path, None).await,
            Err(BackendError::NotFound(_))
        );
        let now = ready(b, vhost, src).await.unwrap_or(before);
        let done = before.saturating_sub(now).min(total);
        if done > last_done {
            progress.add_done(done - last_done);
            last_done = done;
            last_progress = std::time::Instant::now();
        }
        if gone {
            break;
        }
        if last_progress.elapsed() > STALL {
            // A shovel that cannot connect restarts forever: stop it and say so.
            let _ = b.mgmt.send(reqwest::Method::DELETE, &path, None).await;
            report.errors.push(format!(
                "the shovel made no progress for {} s and was stopped (see /api/shovels)",
                STALL.as_secs()
            ));
            report.cancelled = true;
            break;
        }
    }
    report.moved = if report.cancelled {
        let now = ready(b, vhost, src).await.unwrap_or(before);
        before.saturating_sub(now).min(total)
    } else {
        total
    };
    if report.moved > last_done {
        progress.add_done(report.moved - last_done);
    }
    progress.phase(if report.cancelled {
        "cancelled"
    } else {
        "done"
    });
    Ok(Some(report))
}
