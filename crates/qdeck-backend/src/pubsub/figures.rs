//! Live figures: depth = `num_undelivered_messages`, age of oldest =
//! `oldest_unacked_message_age`, and the messages forwarded to the dead-letter topic
//! (`dead_letter_message_count` summed over the window), all from Cloud Monitoring, fetched
//! once per metric per project for every subscription asked about. Topics hold no messages of
//! their own.

use std::collections::{BTreeMap, HashMap};

use super::monitoring::{Point, FORWARDED, OLDEST_UNACKED, UNDELIVERED, WINDOW_SECS};
use super::names::Target;
use super::PubsubBackend;
use crate::Result;
use qdeck_model::domain::*;

/// Seconds between two points of the subscription metrics: Google documents them as "sampled
/// every 60 seconds; after sampling, data is not visible for up to 120 seconds".
pub const SAMPLE_SECS: u32 = 60;

pub const TOPIC_NOTE: &str =
    "a topic holds no messages of its own: its subscriptions do (depth and age are theirs)";

pub async fn stats(b: &PubsubBackend, queues: &[QueueId]) -> Result<StatsBatch> {
    let now = now_ms();
    let mut batch = StatsBatch::default();
    // Subscriptions asked about, by project.
    let mut by_project: BTreeMap<String, Vec<(QueueId, String)>> = BTreeMap::new();
    for q in queues {
        match Target::parse(q) {
            Ok(Target::Subscription { project, name }) => {
                by_project
                    .entry(project)
                    .or_default()
                    .push((q.clone(), name));
            }
            Ok(Target::Topic { .. }) => batch.stats.push(QueueStats {
                id: q.clone(),
                at_ms: now,
                age_note: Some(TOPIC_NOTE.into()),
                ..Default::default()
            }),
            Err(e) => batch.errors.push((q.clone(), e.into())),
        }
    }
    // Subscriptions the listing does not hold get an error, never figures; the DLQ links
    // come from the same listing.
    let paths: Vec<String> = by_project
        .iter()
        .flat_map(|(p, subs)| subs.iter().map(move |(_, n)| super::names::sub_path(p, n)))
        .collect();
    let listing = b.listing_covering(&paths).await;
    if let Some(l) = &listing {
        for (project, subs) in &mut by_project {
            subs.retain(|(q, name)| {
                let known = l.subs.contains_key(&super::names::sub_path(project, name));
                if !known {
                    batch.errors.push((
                        q.clone(),
                        QueueError::not_found(format!("unknown subscription {q}")),
                    ));
                }
                known
            });
        }
    }
    let dlq_of: HashMap<QueueId, QueueId> = listing
        .as_ref()
        .map(|l| {
            super::listing::rows(l)
                .into_iter()
                .filter_map(|q| q.dlq.map(|d| (q.id, d)))
                .collect()
        })
        .unwrap_or_default();
    let Some(mon) = &b.monitoring else {
        for (q, _) in by_project.into_values().flatten() {
            batch.stats.push(QueueStats {
                id: q,
                at_ms: now,
                age_note: Some(b.no_monitoring.clone()),
                ..Default::default()
            });
        }
        return Ok(batch);
    };
    for (project, subs) in by_project {
        let depth = mon.latest(&project, UNDELIVERED).await;
        let age = mon.latest(&project, OLDEST_UNACKED).await;
        let forwarded = mon.summed(&project, FORWARDED).await;
        let (depth, age, forwarded) = match (depth, age, forwarded) {
            (Ok(d), Ok(a), Ok(f)) => (d, a, f),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                // One project's Monitoring failing is that project's rows' error; when every
                // project fails alike the poller sees it on each row.
                for (q, _) in subs {
                    batch.errors.push((q, QueueError::from(&e)));
                }
                continue;
            }
        };
        for (q, name) in subs {
            let mut st = row(&q, &name, &depth, &age, &dlq_of, now);
            // Only a subscription with a dead-letter policy forwards; no point in the window
            // there means none were forwarded in it.
            if dlq_of.contains_key(&q) {
                st.forwarded = Some(Forwarded {
                    count: forwarded.get(&name).map_or(0, |p| p.value.max(0.0) as u64),
                    window_secs: WINDOW_SECS as u32,
                });
            }
            batch.stats.push(st);
        }
    }
    Ok(batch)
}

fn row(
    q: &QueueId,
    name: &str,
    depth: &HashMap<String, Point>,
    age: &HashMap<String, Point>,
    dlq_of: &HashMap<QueueId, QueueId>,
    now: i64,
) -> QueueStats {
    let d = depth.get(name);
    let a = age.get(name);
    let dlq_depth = dlq_of.get(q).and_then(|dlq| {
        let Ok(Target::Subscription { name, .. }) = Target::parse(dlq) else {
            return None;
        };
        depth.get(&name).map(|p| p.value as u64)
    });
    let oldest_point = d.into_iter().chain(a).map(|p| p.at_ms).min();
    let age_note = match oldest_point {
        Some(at) => Some(format!(
            "Cloud Monitoring, figure {} old",
            age_words(now - at)
        )),
        None => Some(
            "no Cloud Monitoring point in the last 10 minutes (a new subscription, or metrics not yet written)"
                .into(),
        ),
    };
    QueueStats {
        id: q.clone(),
        at_ms: now,
        depth: d.map(|p| p.value as u64),
        oldest_age_secs: a.map(|p| p.value),
        age_note,
        dlq_depth,
        // The older of the two points: what the row's figures are as of.
        sampled: oldest_point.map(|at_ms| Sampled {
            at_ms,
            every_secs: SAMPLE_SECS,
        }),
        ..Default::default()
    }
}

/// `45 s`, `3 min`: how old a Monitoring point is.
pub fn age_words(ms: i64) -> String {
    let secs = (ms.max(0) + 500) / 1000;
    if secs < 120 {
        format!("{secs} s")
    } else {
        format!("{} min", secs / 60)
    }
}
