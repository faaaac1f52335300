//! One message sent over REST: its properties as the BrokerProperties header, its custom
//! headers as HTTP headers.

use serde_json::{Map, Value};

use super::{browse, runtime};
use crate::servicebus::http::Rest;
use crate::servicebus::ttl;
use crate::Result;
use qdeck_model::domain::*;

pub async fn send(rest: &Rest, queue: &QueueId, msg: OutgoingMessage) -> Result<Option<String>> {
    let id = uuid::Uuid::new_v4().to_string();
    let mut props = Map::new();
    props.insert("MessageId".into(), Value::String(id.clone()));
    if let Some(k) = &msg.key {
        props.insert("SessionId".into(), Value::String(k.clone()));
    }
    if let Some(d) = msg.delay {
        let at = chrono::Utc::now() + chrono::Duration::milliseconds(d.as_millis() as i64);
        props.insert(
            "ScheduledEnqueueTimeUtc".into(),
            Value::String(at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()),
        );
    }
    // A MessageId given here is sent (`qdeck send -P MessageId=…`); the paths that send a
    // browsed message again take its id out first (`HeaderRules::drop_identity`).
    let mut content_type = None;
    for (k, v) in msg.properties {
        if k == "ContentType" {
            content_type = Some(v.text());
        } else if k == "TimeToLive" {
            if let Some(ttl) = ttl::rest_json(&v)? {
                props.insert(k, ttl);
            }
        } else if runtime::SETTABLE.contains(&k.as_str()) {
            props.insert(k, Value::String(v.text()));
        }
    }
    let mut custom = Vec::new();
    for (k, v) in msg.headers {
        custom.push((k, browse::custom_header(&v)));
    }
    let out = runtime::Outgoing {
        body: msg.body,
        content_type,
        props,
        custom,
    };
    runtime::send(rest, queue.as_str(), &out).await?;
    Ok(Some(id))
}
