//! The broker version (from `/api/overview`) and what it changes: RabbitMQ 4.0 gave every
//! quorum queue a delivery limit of 20 that is neither an argument nor a policy, and until
//! 4.3 a `basic.nack requeue=true` (how browse returns messages) counted toward it.

use serde_json::Value;

use super::figures::QueueRow;
use qdeck_model::domain::QueueKind;

/// Delivery limit of a quorum queue without an explicit one, from RabbitMQ 4.0.
pub const QUORUM_DEFAULT_LIMIT: u32 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// "3.13.7", "4.0.5", "4.1.0-rc.1", "4.2.0+2.g1234" → the numeric part.
    pub fn parse(s: &str) -> Option<Version> {
        let core = s.split(['-', '+']).next()?;
        let mut it = core.split('.').map(|p| p.parse::<u32>().ok());
        Some(Version {
            major: it.next()??,
            minor: it.next().flatten().unwrap_or(0),
            patch: it.next().flatten().unwrap_or(0),
        })
    }

    /// From an `/api/overview` answer.
    pub fn from_overview(v: &Value) -> Option<Version> {
        v.get("rabbitmq_version")
            .or_else(|| v.get("product_version"))
            .and_then(Value::as_str)
            .and_then(Version::parse)
    }

    /// Whether a requeueing nack counts toward a quorum queue's delivery limit (before 4.3).
    pub fn nack_counts_delivery(self) -> bool {
        (self.major, self.minor) < (4, 3)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    Argument,
    Policy,
    /// The 4.x default: not visible in arguments or policies.
    BrokerDefault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryLimit {
    pub limit: u32,
    pub source: LimitSource,
    /// Whether a browse (get + nack requeue) adds one to the delivery count.
    pub browse_counts: bool,
}

impl DeliveryLimit {
    /// "20 (RabbitMQ 4.0.5 default for quorum queues, not set by an argument or policy)".
    pub fn describe(&self, version: Option<Version>) -> String {
        match self.source {
            LimitSource::Argument => format!("{} (x-delivery-limit argument)", self.limit),
            LimitSource::Policy => format!("{} (delivery-limit policy)", self.limit),
            LimitSource::BrokerDefault => format!(
                "{} (RabbitMQ {} default for quorum queues, not set by an argument or policy)",
                self.limit,
                version.map_or_else(|| "4.x".to_string(), |v| v.to_string())
            ),
        }
    }
}

fn as_limit(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
}

/// The delivery limit a queue really has. Only quorum queues enforce one. Where both an
/// argument and a policy set it, the lower wins (as the broker resolves it); a negative
/// value (4.x) disables it. An unknown version is treated as 4.x: refusing a browse that
/// was safe costs a `--force`, allowing one that was not may dead-letter messages.
pub fn effective_delivery_limit(row: &QueueRow, version: Option<Version>) -> Option<DeliveryLimit> {
    if row.kind() != QueueKind::Quorum {
        return None;
    }
    let browse_counts = version.is_none_or(Version::nack_counts_delivery);
    let arg = as_limit(row.arguments.get("x-delivery-limit"));
    let pol = as_limit(
        row.effective_policy_definition
            .as_ref()
            .and_then(|p| p.get("delivery-limit")),
    );
    let explicit = match (arg, pol) {
        (Some(a), Some(p)) if p < a => Some((p, LimitSource::Policy)),
        (Some(a), _) => Some((a, LimitSource::Argument)),
        (None, Some(p)) => Some((p, LimitSource::Policy)),
        (None, None) => None,
    };
    match explicit {
        Some((n, _)) if n < 0 => None,
        Some((n, source)) => Some(DeliveryLimit {
            limit: n.min(u32::MAX as i64) as u32,
            source,
            browse_counts,
        }),
        None if version.is_none_or(|v| v.major >= 4) => Some(DeliveryLimit {
            limit: QUORUM_DEFAULT_LIMIT,
            source: LimitSource::BrokerDefault,
            browse_counts,
        }),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded shapes of `/api/overview` and `/api/queues` (trimmed to the fields qdeck
    /// reads) for a 3.13 and a 4.0 broker.
    const OVERVIEW_3_13: &str =
        include_str!("../../../../tests/fixtures/rabbitmq/overview-3.13.json");
    const OVERVIEW_4_0: &str =
        include_str!("../../../../tests/fixtures/rabbitmq/overview-4.0.json");
    const OVERVIEW_4_3: &str =
        include_str!("../../../../tests/fixtures/rabbitmq/overview-4.3.json");
    const QUEUES_3_13: &str = include_str!("../../../../tests/fixtures/rabbitmq/queues-3.13.json");
    const QUEUES_4_0: &str = include_str!("../../../../tests/fixtures/rabbitmq/queues-4.0.json");

    fn version(json: &str) -> Option<Version> {
        Version::from_overview(&serde_json::from_str(json).expect("overview fixture"))
    }

    fn limits(queues: &str, v: Option<Version>) -> Vec<(String, Option<DeliveryLimit>)> {
        let rows: Vec<QueueRow> = serde_json::from_str(queues).expect("queues fixture");
        rows.iter()
            .map(|r| (r.name.clone(), effective_delivery_limit(r, v)))
            .collect()
    }

    fn get(l: &[(String, Option<DeliveryLimit>)], name: &str) -> Option<DeliveryLimit> {
        l.iter().find(|(n, _)| n == name).and_then(|(_, d)| *d)
    }

    #[test]
    fn versions_parse_from_overview() {
        assert_eq!(version(OVERVIEW_3_13), Version::parse("3.13.7"));
        assert_eq!(version(OVERVIEW_4_0), Version::parse("4.0.5"));
        assert_eq!(Version::parse("4.1.0-rc.1").map(|v| v.minor), Some(1));
        assert_eq!(Version::parse("banana"), None);
    }

    #[test]
    fn quorum_on_3_13_without_a_limit_has_none() {
        let v = version(OVERVIEW_3_13);
        let l = limits(QUEUES_3_13, v);
        assert_eq!(get(&l, "orders"), None);
        assert_eq!(get(&l, "orders.classic"), None);
        let with_arg = get(&l, "payments").expect("x-delivery-limit argument");
        assert_eq!(
            (with_arg.limit, with_arg.source),
            (5, LimitSource::Argument)
        );
        assert!(with_arg.browse_counts);
    }

    #[test]
    fn quorum_on_4_0_without_a_limit_is_limited_to_20() {
        let v = version(OVERVIEW_4_0);
        let l = limits(QUEUES_4_0, v);
        let d = get(&l, "orders").expect("4.x default limit");
        assert_eq!((d.limit, d.source), (20, LimitSource::BrokerDefault));
        assert!(d.browse_counts, "4.0 counts nack requeue");
        assert!(d.describe(v).contains("4.0.5 default"), "{}", d.describe(v));
        // Policy lower than the argument wins; -1 disables; classic and stream have none.
        let p = get(&l, "payments").expect("policy");
        assert_eq!((p.limit, p.source), (3, LimitSource::Policy));
        assert_eq!(get(&l, "unlimited"), None);
        assert_eq!(get(&l, "orders.classic"), None);
        assert_eq!(get(&l, "events"), None);
        // 4.3 stopped counting requeueing nacks: the limit stays, browsing no longer adds up.
        let v43 = version(OVERVIEW_4_3);
        let d = get(&limits(QUEUES_4_0, v43), "orders").expect("limit");
        assert!(!d.browse_counts);
    }
}
