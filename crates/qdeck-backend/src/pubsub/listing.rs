//! Subscriptions and topics of the profile's projects, and the dead-letter links between them:
//! a subscription's DLQ is the subscription (or subscriptions) of its dead-letter topic.

use std::collections::{BTreeMap, HashMap};

use super::names::{self, DELETED_TOPIC};
use super::proto::{
    DeadLetterPolicy, ListRequest, ListSubscriptionsResponse, ListTopicsResponse, Subscription,
    Topic,
};
use super::PubsubBackend;
use crate::Result;
use qdeck_model::domain::*;

/// Page size for the list calls (Pub/Sub's maximum).
const PAGE: i32 = 1000;

/// One project's subscriptions and topics as listed now.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// By full path (`projects/P/subscriptions/S`).
    pub subs: BTreeMap<String, Subscription>,
    /// By full path (`projects/P/topics/T`).
    pub topics: BTreeMap<String, Topic>,
}

impl Listing {
    /// The subscriptions attached to topic `topic` (a full path).
    pub fn subs_of_topic(&self, topic: &str) -> Vec<&Subscription> {
        self.subs.values().filter(|s| s.topic == topic).collect()
    }

    /// The subscriptions whose dead-letter policy names topic `topic`.
    pub fn dead_lettering_into(&self, topic: &str) -> Vec<&Subscription> {
        self.subs
            .values()
            .filter(|s| {
                s.dead_letter_policy
                    .as_ref()
                    .is_some_and(|d| d.dead_letter_topic == topic)
            })
            .collect()
    }
}

pub async fn list_project(b: &PubsubBackend, project: &str) -> Result<Listing> {
    let parent = format!("projects/{project}");
    // pstest lists every subscription whose name starts with the parent, so `projects/p` would
    // also list `projects/p2/...`: keep the project's own.
    let own_sub = format!("{parent}/subscriptions/");
    let own_topic = format!("{parent}/topics/");
    let mut out = Listing::default();
    let mut token = String::new();
    loop {
        let r: ListSubscriptionsResponse = b
            .conn
            .unary(
                "Subscriber",
                "ListSubscriptions",
                ListRequest {
                    parent: parent.clone(),
                    page_size: PAGE,
                    page_token: token.clone(),
                },
                None,
            )
            .await?;
        for s in r.subscriptions {
            if s.name.starts_with(&own_sub) {
                out.subs.insert(s.name.clone(), s);
            }
        }
        if r.next_page_token.is_empty() {
            break;
        }
        token = r.next_page_token;
    }
    token.clear();
    loop {
        let r: ListTopicsResponse = b
            .conn
            .unary(
                "Publisher",
                "ListTopics",
                ListRequest {
                    parent: parent.clone(),
                    page_size: PAGE,
                    page_token: token.clone(),
                },
                None,
            )
            .await?;
        for t in r.topics {
            if t.name.starts_with(&own_topic) {
                out.topics.insert(t.name.clone(), t);
            }
        }
        if r.next_page_token.is_empty() {
            break;
        }
        token = r.next_page_token;
    }
    Ok(out)
}

/// Every project's listing, merged (a dead-letter topic may live in another listed project).
pub async fn list_all(b: &PubsubBackend) -> Result<Listing> {
    let mut all = Listing::default();
    for p in &b.projects {
        let l = list_project(b, p).await?;
        all.subs.extend(l.subs);
        all.topics.extend(l.topics);
    }
    b.remember(&all);
    Ok(all)
}

fn secs(d: Option<super::proto::Duration>) -> Option<f64> {
    d.map(|d| d.seconds as f64 + f64::from(d.nanos) / 1e9)
}

/// The rows: subscriptions first, then topics, each with settings and DLQ links.
pub fn rows(l: &Listing) -> Vec<QueueInfo> {
    // Subscriptions that receive a dead-letter topic's messages, by topic.
    let mut dlq_sources: HashMap<&str, Vec<QueueId>> = HashMap::new();
    for s in l.subs.values() {
        if let Some(d) = &s.dead_letter_policy {
            if let Some(id) = names::sub_id(&s.name) {
                dlq_sources
                    .entry(d.dead_letter_topic.as_str())
                    .or_default()
                    .push(id);
            }
        }
    }
    let subs = l.subs.values().filter_map(|s| sub_row(l, s, &dlq_sources));
    let topics = l
        .topics
        .values()
        .filter_map(|t| topic_row(l, t, &dlq_sources));
    subs.chain(topics).collect()
}

fn sub_row(
    l: &Listing,
    s: &Subscription,
    dlq_sources: &HashMap<&str, Vec<QueueId>>,
) -> Option<QueueInfo> {
    let id = names::sub_id(&s.name)?;
    let mut settings = QueueSettings {
        lease_secs: (s.ack_deadline_seconds > 0).then(|| f64::from(s.ack_deadline_seconds)),
        retention_secs: secs(s.message_retention_duration),
        key_policy: s.enable_message_ordering.then(|| "ordered".to_string()),
        ..Default::default()
    };
    let x = &mut settings.extra;
    x.insert(
        "topic".into(),
        if s.topic == DELETED_TOPIC {
            "_deleted-topic_ (its topic was deleted: nothing new arrives)".into()
        } else {
            names::topic_id(&s.topic).map_or_else(|| s.topic.clone(), |t| t.0)
        },
    );
    x.insert(
        "ack deadline".into(),
        format!("{} s", s.ack_deadline_seconds.max(10)),
    );
    x.insert("message ordering".into(), yes_no(s.enable_message_ordering));
    x.insert(
        "exactly-once delivery".into(),
        yes_no(s.enable_exactly_once_delivery),
    );
    if !s.filter.is_empty() {
        x.insert("filter".into(), s.filter.clone());
    }
    if s.detached {
        x.insert("detached".into(), "yes: it receives nothing".into());
    }
    let dlq = s
        .dead_letter_policy
        .as_ref()
        .and_then(|d| dead_letter(l, d, &mut settings));
    let sources = dlq_sources
        .get(s.topic.as_str())
        .cloned()
        .unwrap_or_default();
    Some(QueueInfo {
        id,
        kind: QueueKind::Subscription,
        is_dlq: !sources.is_empty(),
        dlq,
        dlq_sources: sources,
        settings,
    })
}

/// A dead-letter policy's settings on its subscription's row, and the subscription of the
/// dead-letter topic that is the row's DLQ (the first, when there are several).
fn dead_letter(l: &Listing, d: &DeadLetterPolicy, settings: &mut QueueSettings) -> Option<QueueId> {
    let attempts = if d.max_delivery_attempts > 0 {
        d.max_delivery_attempts
    } else {
        5
    };
    settings.max_receives = u32::try_from(attempts).ok();
    let x = &mut settings.extra;
    x.insert("max delivery attempts".into(), attempts.to_string());
    let dl_topic =
        names::topic_id(&d.dead_letter_topic).map_or_else(|| d.dead_letter_topic.clone(), |t| t.0);
    x.insert("dead-letter topic".into(), dl_topic.clone());
    let receivers: Vec<QueueId> = l
        .subs_of_topic(&d.dead_letter_topic)
        .into_iter()
        .filter_map(|r| names::sub_id(&r.name))
        .collect();
    match receivers.as_slice() {
        [] => {
            x.insert(
                "dead letters".into(),
                format!("{dl_topic} has no subscription: forwarded messages are lost"),
            );
            None
        }
        [one] => Some(one.clone()),
        [first, ..] => {
            x.insert(
                "dead-letter subscriptions".into(),
                receivers
                    .iter()
                    .map(|r| r.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            Some(first.clone())
        }
    }
}

fn topic_row(
    l: &Listing,
    t: &Topic,
    dlq_sources: &HashMap<&str, Vec<QueueId>>,
) -> Option<QueueInfo> {
    let id = names::topic_id(&t.name)?;
    let mut settings = QueueSettings {
        retention_secs: secs(t.message_retention_duration),
        ..Default::default()
    };
    let subs = l.subs_of_topic(&t.name);
    settings.extra.insert(
        "subscriptions".into(),
        if subs.is_empty() {
            "none: messages published now reach no one".into()
        } else {
            subs.iter()
                .filter_map(|s| names::sub_id(&s.name))
                .map(|q| q.0)
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    if let Some(src) = dlq_sources.get(t.name.as_str()) {
        settings.extra.insert(
            "dead-letter topic of".into(),
            src.iter()
                .map(|q| q.0.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    Some(QueueInfo {
        id,
        kind: QueueKind::Topic,
        is_dlq: false,
        dlq: None,
        dlq_sources: Vec::new(),
        settings,
    })
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}
