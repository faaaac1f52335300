//! Request/response over a pair of links, as Service Bus speaks it on `$cbs` (put-token) and on
//! `ENTITY/$management` (peek-message, renew-lock, schedule-message, ...): the request carries
//! its operation in the application properties, a message-id and a reply-to address; the
//! answer comes back on the reply link with that id as its correlation-id and its status in
//! `statusCode` (`status-code` on `$cbs`).

use std::time::Duration;

use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::messaging::{
    AmqpValue, ApplicationProperties, Body, Message, MessageId, Properties,
};
use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Value};
use fe2o3_amqp::{Receiver, Sender};

use super::errors::link_error;
use crate::{BackendError, Result};

/// How long one request waits for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

pub struct RequestLink {
    node: String,
    sender: Sender,
    receiver: Receiver,
    reply_to: String,
    next_id: u64,
}

/// A response: its status, description and body (an AMQP map for `$management`).
#[derive(Debug)]
pub struct Answer {
    pub status: i32,
    pub description: Option<String>,
    pub body: Value,
}

fn status_of(v: &SimpleValue) -> Option<i32> {
    match v {
        SimpleValue::Int(n) => Some(*n),
        SimpleValue::Uint(n) => i32::try_from(*n).ok(),
        SimpleValue::Long(n) => i32::try_from(*n).ok(),
        SimpleValue::Ulong(n) => i32::try_from(*n).ok(),
        SimpleValue::Short(n) => Some(i32::from(*n)),
        SimpleValue::Ushort(n) => Some(i32::from(*n)),
        SimpleValue::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl RequestLink {
    /// Attach the request sender and the reply receiver for `node`.
    pub async fn attach(session: &mut SessionHandle<()>, node: &str) -> Result<RequestLink> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let reply_to = format!("qdeck-reply-{id}");
        let what = format!("opening {}", qdeck_model::sanitize::clean(node));
        let sender = Sender::builder()
            .name(format!("{node}-qdeck-req-{id}"))
            .target(node)
            .attach(session)
            .await
            .map_err(|e| link_error(e, &what))?;
        let receiver = Receiver::builder()
            .name(format!("{node}-qdeck-reply-{id}"))
            .source(node)
            .target(reply_to.as_str())
            .credit_mode(fe2o3_amqp::link::receiver::CreditMode::Auto(16))
            .attach(session)
            .await
            .map_err(|e| link_error(e, &what))?;
        Ok(RequestLink {
            node: node.to_string(),
            sender,
            receiver,
            reply_to,
            next_id: 1,
        })
    }

    /// Send one request and wait for its answer. Transport failures are errors; a status
    /// the broker answered with is the caller's to judge.
    pub async fn call(&mut self, props: Vec<(&str, SimpleValue)>, body: Value) -> Result<Answer> {
        let id = self.next_id;
        self.next_id += 1;
        let mut app = OrderedMap::new();
        for (k, v) in props {
            app.insert(k.to_string(), v);
        }
        let message = Message {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: Some(Properties {
                message_id: Some(MessageId::Ulong(id)),
                reply_to: Some(self.reply_to.clone()),
                ..Default::default()
            }),
            application_properties: Some(ApplicationProperties(app)),
            body: Body::Value(AmqpValue(body)),
            footer: None,
        };
        let what = format!("request on {}", qdeck_model::sanitize::clean(&self.node));
        self.sender
            .send(message)
            .await
            .map_err(|e| link_error(e, &what))?;
        let wait = async {
            loop {
                let d = self
                    .receiver
                    .recv::<Body<Value>>()
                    .await
                    .map_err(|e| link_error(e, &what))?;
                self.receiver
                    .accept(&d)
                    .await
                    .map_err(|e| link_error(e, &what))?;
                let m = d.into_message();
                let corr = m.properties.as_ref().and_then(|p| p.correlation_id.clone());
                // An answer to an earlier request that timed out: not ours.
                if corr.is_some() && corr != Some(MessageId::Ulong(id)) {
                    continue;
                }
                return Ok::<_, BackendError>(answer_of(m));
            }
        };
        tokio::time::timeout(ANSWER_TIMEOUT, wait)
            .await
            .map_err(|_| BackendError::Unreachable(format!("{what}: no answer within 60 s")))?
    }
}

fn answer_of(m: Message<Body<Value>>) -> Answer {
    let app = m.application_properties.map(|a| a.0).unwrap_or_default();
    let get = |names: &[&str]| {
        app.iter()
            .find(|(k, _)| names.iter().any(|n| k.eq_ignore_ascii_case(n)))
            .map(|(_, v)| v.clone())
    };
    let status = get(&["statusCode", "status-code"])
        .as_ref()
        .and_then(status_of)
        .unwrap_or(0);
    let description = get(&["statusDescription", "status-description"]).and_then(|v| match v {
        SimpleValue::String(s) => Some(s),
        SimpleValue::Symbol(s) => Some(s.0),
        _ => None,
    });
    let body = match m.body {
        Body::Value(AmqpValue(v)) => v,
        _ => Value::Null,
    };
    Answer {
        status,
        description,
        body,
    }
}
