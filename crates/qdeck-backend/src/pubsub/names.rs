//! Queue ids and Google's resource names. A subscription is `PROJECT/SUB`, a topic
//! `PROJECT/topics/TOPIC`: Pub/Sub names hold no `/`, so the two cannot be confused.

use crate::{BackendError, Result};
use qdeck_model::domain::QueueId;

/// The topic pstest (and Pub/Sub) names when a subscription's topic was deleted.
pub const DELETED_TOPIC: &str = "_deleted-topic_";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Subscription { project: String, name: String },
    Topic { project: String, name: String },
}

impl Target {
    pub fn parse(id: &QueueId) -> Result<Target> {
        let parts: Vec<&str> = id.as_str().split('/').collect();
        let bad = || {
            BackendError::NotFound(format!(
                "unknown queue {:?}: Pub/Sub queues are PROJECT/SUBSCRIPTION or PROJECT/topics/TOPIC",
                qdeck_model::sanitize::clean_short(id.as_str(), 120)
            ))
        };
        match parts.as_slice() {
            [p, s] if !p.is_empty() && !s.is_empty() => Ok(Target::Subscription {
                project: (*p).to_string(),
                name: (*s).to_string(),
            }),
            [p, "topics", t] if !p.is_empty() && !t.is_empty() => Ok(Target::Topic {
                project: (*p).to_string(),
                name: (*t).to_string(),
            }),
            _ => Err(bad()),
        }
    }

    pub fn path(&self) -> String {
        match self {
            Target::Subscription { project, name } => sub_path(project, name),
            Target::Topic { project, name } => topic_path(project, name),
        }
    }
}

pub fn sub_path(project: &str, sub: &str) -> String {
    format!("projects/{project}/subscriptions/{sub}")
}

pub fn topic_path(project: &str, topic: &str) -> String {
    format!("projects/{project}/topics/{topic}")
}

/// `projects/P/subscriptions/S` → (P, S).
pub fn split_sub(path: &str) -> Option<(&str, &str)> {
    split(path, "subscriptions")
}

/// `projects/P/topics/T` → (P, T); `None` for `_deleted-topic_` and anything else.
pub fn split_topic(path: &str) -> Option<(&str, &str)> {
    split(path, "topics")
}

fn split<'a>(path: &'a str, kind: &str) -> Option<(&'a str, &'a str)> {
    let rest = path.strip_prefix("projects/")?;
    let (project, rest) = rest.split_once('/')?;
    let name = rest.strip_prefix(kind)?.strip_prefix('/')?;
    (!project.is_empty() && !name.is_empty() && !name.contains('/')).then_some((project, name))
}

pub fn sub_id(path: &str) -> Option<QueueId> {
    split_sub(path).map(|(p, s)| QueueId::new(format!("{p}/{s}")))
}

pub fn topic_id(path: &str) -> Option<QueueId> {
    split_topic(path).map(|(p, t)| QueueId::new(format!("{p}/topics/{t}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_paths_round_trip() {
        let s = Target::parse(&QueueId::new("proj/orders")).unwrap();
        assert_eq!(s.path(), "projects/proj/subscriptions/orders");
        assert_eq!(sub_id(&s.path()), Some(QueueId::new("proj/orders")));
        let t = Target::parse(&QueueId::new("proj/topics/orders")).unwrap();
        assert_eq!(t.path(), "projects/proj/topics/orders");
        assert_eq!(
            topic_id(&t.path()),
            Some(QueueId::new("proj/topics/orders"))
        );
        assert!(Target::parse(&QueueId::new("orders")).is_err());
        assert!(Target::parse(&QueueId::new("p/x/y")).is_err());
        assert_eq!(split_topic(DELETED_TOPIC), None);
        assert_eq!(split_sub("projects/p2/subscriptions/a/b"), None);
    }
}
