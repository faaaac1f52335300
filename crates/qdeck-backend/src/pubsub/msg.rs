//! A pulled message as qdeck shows it, and the attributes a redriven copy carries.

use std::collections::BTreeMap;

use super::names;
use super::proto::ReceivedMessage;
use qdeck_model::domain::*;

/// The attributes Google's service adds to a dead-lettered message, and what a redrive renames
/// each to: on the copy they would claim it was dead-lettered already.
pub const DEAD_LETTER_ATTRS: &[(&str, &str)] = &[
    (
        "CloudPubSubDeadLetterSourceDeliveryCount",
        "x-qdeck-dead-letter-source-delivery-count",
    ),
    (
        "CloudPubSubDeadLetterSourceSubscription",
        "x-qdeck-dead-letter-source-subscription",
    ),
    (
        "CloudPubSubDeadLetterSourceSubscriptionProject",
        "x-qdeck-dead-letter-source-subscription-project",
    ),
    (
        "CloudPubSubDeadLetterSourceTopicPublishTime",
        "x-qdeck-dead-letter-source-topic-publish-time",
    ),
];

/// The subscription the service names as a dead letter's source, as a full path:
/// `CloudPubSubDeadLetterSourceSubscription` (a bare id, or already a path) in the project of
/// `CloudPubSubDeadLetterSourceSubscriptionProject`, else in `default_project`.
pub fn source_subscription(
    attrs: &BTreeMap<String, String>,
    default_project: &str,
) -> Option<String> {
    let sub = attrs.get("CloudPubSubDeadLetterSourceSubscription")?.trim();
    if sub.is_empty() {
        return None;
    }
    if names::split_sub(sub).is_some() {
        return Some(sub.to_string());
    }
    let project = attrs
        .get("CloudPubSubDeadLetterSourceSubscriptionProject")
        .map(String::as_str)
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or(default_project);
    Some(names::sub_path(project, sub))
}

/// The copy's attributes: the original's byte for byte, except the dead-letter ones, which
/// become `x-qdeck-*`; the names renamed.
pub fn copy_attributes(
    attrs: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut renamed = Vec::new();
    for (k, v) in attrs {
        match DEAD_LETTER_ATTRS.iter().find(|(from, _)| from == k) {
            Some((from, to)) => {
                out.insert((*to).to_string(), v.clone());
                renamed.push(format!("{from} → {to}"));
            }
            None => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    (out, renamed)
}

/// A pulled message as browse shows it. `origin` is the source subscription the dead-letter
/// policies name, used when the message carries no `CloudPubSubDeadLetter*` attribute.
pub fn to_message(r: &ReceivedMessage, project: &str, origin: Option<&QueueId>) -> Message {
    let m = r.message.clone().unwrap_or_default();
    let mut meta = Vec::new();
    let published = m.publish_time.map(super::proto::Timestamp::to_ms);
    if let Some(ms) = published.and_then(ms_to_datetime) {
        meta.push(("publish_time".to_string(), Value::str(ms.to_rfc3339())));
    }
    if r.delivery_attempt > 0 {
        meta.push((
            "delivery_attempt".to_string(),
            Value::str(r.delivery_attempt.to_string()),
        ));
    }
    let from_attr = source_subscription(&m.attributes, project).and_then(|p| names::sub_id(&p));
    let dead_letter = match (from_attr, origin) {
        (Some(o), _) => Some(DeadLetterInfo {
            reason: Some(crate::no_failure_text::DELIVERIES_RAN_OUT.into()),
            origin: Some(o),
            count: m
                .attributes
                .get("CloudPubSubDeadLetterSourceDeliveryCount")
                .and_then(|c| c.trim().parse().ok()),
            ..Default::default()
        }),
        (None, Some(o)) => {
            // Where the origin came from is broker metadata, not a failure text: as the
            // description it would read as the reason and split the reasons view's groups.
            meta.push((
                "dead_letter_source".to_string(),
                Value::str("from the dead-letter policies (the message names none)"),
            ));
            Some(DeadLetterInfo {
                reason: Some(crate::no_failure_text::DELIVERIES_RAN_OUT.into()),
                origin: Some(o.clone()),
                ..Default::default()
            })
        }
        (None, None) => None,
    };
    Message {
        id: m.message_id.clone(),
        seq: None,
        enqueued_ms: published,
        receive_count: (r.delivery_attempt > 0)
            .then(|| u64::try_from(r.delivery_attempt).unwrap_or(0)),
        key: (!m.ordering_key.is_empty()).then(|| m.ordering_key.clone()),
        properties: Vec::new(),
        headers: m
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), Value::str(v.clone())))
            .collect(),
        meta,
        body: m.data,
        body_null: false,
        dead_letter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_source_comes_from_the_services_attributes() {
        let a = attrs(&[
            ("CloudPubSubDeadLetterSourceSubscription", "orders-sub"),
            ("CloudPubSubDeadLetterSourceSubscriptionProject", "other"),
        ]);
        assert_eq!(
            source_subscription(&a, "mine").as_deref(),
            Some("projects/other/subscriptions/orders-sub")
        );
        let a = attrs(&[("CloudPubSubDeadLetterSourceSubscription", "orders-sub")]);
        assert_eq!(
            source_subscription(&a, "mine").as_deref(),
            Some("projects/mine/subscriptions/orders-sub")
        );
        let a = attrs(&[(
            "CloudPubSubDeadLetterSourceSubscription",
            "projects/x/subscriptions/y",
        )]);
        assert_eq!(
            source_subscription(&a, "mine").as_deref(),
            Some("projects/x/subscriptions/y")
        );
        assert_eq!(source_subscription(&attrs(&[("a", "b")]), "mine"), None);
    }

    #[test]
    fn a_copy_keeps_attributes_and_renames_the_dead_letter_ones() {
        let a = attrs(&[
            ("tenant", "acme ✗"),
            ("CloudPubSubDeadLetterSourceDeliveryCount", "5"),
            ("CloudPubSubDeadLetterSourceSubscription", "s"),
        ]);
        let (copy, renamed) = copy_attributes(&a);
        assert_eq!(copy.get("tenant").map(String::as_str), Some("acme ✗"));
        assert!(!copy.keys().any(|k| k.starts_with("CloudPubSub")));
        assert_eq!(
            copy.get("x-qdeck-dead-letter-source-delivery-count")
                .map(String::as_str),
            Some("5")
        );
        assert_eq!(renamed.len(), 2);
    }

    #[test]
    fn a_browsed_dead_letter_names_its_origin_and_count() {
        let r = ReceivedMessage {
            ack_id: "a".into(),
            message: Some(super::super::proto::PubsubMessage {
                data: b"x".to_vec(),
                attributes: attrs(&[
                    ("CloudPubSubDeadLetterSourceSubscription", "orders"),
                    ("CloudPubSubDeadLetterSourceDeliveryCount", "5"),
                ]),
                message_id: "m1".into(),
                publish_time: None,
                ordering_key: "k".into(),
            }),
            delivery_attempt: 0,
        };
        let m = to_message(&r, "p", None);
        let dl = m.dead_letter.unwrap();
        assert_eq!(dl.origin, Some(QueueId::new("p/orders")));
        assert_eq!(dl.count, Some(5));
        assert_eq!(m.key.as_deref(), Some("k"));
        assert_eq!(m.receive_count, None);
    }
}
