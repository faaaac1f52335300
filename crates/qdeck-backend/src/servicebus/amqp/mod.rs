//! Service Bus message operations over AMQP 1.0, as Microsoft's SDKs do them: a true peek
//! (`com.microsoft:peek-message` on `ENTITY/$management`, from a sequence number, changing
//! nothing), sends, peek-lock receives settled by disposition (accepted = complete, modified =
//! abandon), receive-and-delete, scheduled messages (`schedule-message`,
//! `cancel-scheduled-message`), lock renewal and settlement by lock token, sessions
//! (`com.microsoft:session-filter`, `get-message-sessions`) and deferred messages
//! (`receive-by-sequence-number`). Counts and settings stay with the management API (`mgmt`).
//!
//! One connection per backend, opened on first use and again after it breaks; links are opened
//! per operation (and `$management` links kept per entity), each after a CBS token for the
//! entity was put (`conn`). `transport` is how the backend reaches all this.

mod conn;
pub mod convert;
pub mod errors;
mod failure;
mod lock_keeper;
pub mod peek;
pub mod purge;
pub mod receive;
pub mod redrive;
mod request;
pub mod scheduled;
pub mod send;
pub mod sessions;
mod transport;

use std::sync::Arc;

use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp::types::messaging::Source;
use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Symbol, Value};
use fe2o3_amqp::{Receiver, Sender};
use tokio::sync::Mutex;

use super::connstr::ConnInfo;
use crate::{ApiCalls, BackendError, Result};
use conn::Live;
use qdeck_model::sanitize;

pub const SESSION_FILTER: &str = "com.microsoft:session-filter";

/// How a receiver settles what it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Locked until completed (accepted), abandoned (modified) or the lock expires.
    PeekLock,
    /// Removed as it is sent.
    ReceiveAndDelete,
}

pub struct Amqp {
    pub info: ConnInfo,
    live: Mutex<Option<Live>>,
    /// The REST side, whose call counter counts AMQP operations too (one figure per backend).
    rest: Arc<super::http::Rest>,
}

impl Amqp {
    pub fn new(info: ConnInfo, rest: Arc<super::http::Rest>) -> Amqp {
        Amqp {
            info,
            live: Mutex::new(None),
            rest,
        }
    }

    pub fn bump(&self, op: &str, n: u64) {
        self.calls().bump_by(op, n);
    }

    pub fn calls(&self) -> &ApiCalls {
        &self.rest.calls
    }

    /// How often a long operation should call `keep_authorised` so that its links never
    /// outlive their token: twice within the refresh margin.
    pub fn token_check_every(&self) -> std::time::Duration {
        let margin = super::token_life::refresh_margin(self.info.token_ttl_secs);
        std::time::Duration::from_millis(margin * 500)
    }

    /// The live connection (opened now if there is none or it broke), with a token for
    /// `entity` put on it.
    async fn live_for<'a>(
        &'a self,
        entity: &str,
    ) -> Result<tokio::sync::MutexGuard<'a, Option<Live>>> {
        let mut g = self.live.lock().await;
        if g.as_ref().is_none_or(Live::is_broken) {
            *g = None;
            self.bump("amqp.connect", 1);
            *g = Some(conn::open(&self.info).await?);
        }
        if let Some(live) = g.as_mut() {
            if let Err(e) = conn::ensure_token(live, &self.info, entity).await {
                // A broken `$cbs` link is a broken connection: the next call opens a new one.
                if matches!(e, BackendError::Unreachable(_)) {
                    *g = None;
                }
                return Err(e);
            }
        }
        Ok(g)
    }

    /// Put the token for `entity` again if it is close to expiring (long operations call this
    /// between batches, as their links outlive a token).
    pub async fn keep_authorised(&self, entity: &str) -> Result<()> {
        self.live_for(entity).await.map(|_| ())
    }

    /// A sending link to `entity`.
    pub async fn sender(&self, entity: &str) -> Result<Sender> {
        let mut g = self.live_for(entity).await?;
        let live = g.as_mut().ok_or_else(no_connection)?;
        let what = format!("opening a sender to {}", sanitize::clean(entity));
        Sender::builder()
            .name(format!("qdeck-send-{}", uuid::Uuid::new_v4().simple()))
            .target(entity)
            .sender_settle_mode(SenderSettleMode::Unsettled)
            .attach(&mut live.session)
            .await
            .map_err(|e| errors::link_error(e, &what))
    }

    /// A receiving link on `entity`, optionally for one session (`session`: `Some(id)`). With
    /// `auto_credit`, the link keeps that many messages asked for; without, the caller grants
    /// credit batch by batch, so nothing is locked before it is wanted.
    pub async fn receiver(
        &self,
        entity: &str,
        mode: Mode,
        session: Option<&str>,
        auto_credit: Option<u32>,
    ) -> Result<Receiver> {
        let mut g = self.live_for(entity).await?;
        let live = g.as_mut().ok_or_else(no_connection)?;
        let what = format!("opening a receiver on {}", sanitize::clean(entity));
        let mut source = Source::builder().address(entity);
        if let Some(id) = session {
            let mut filter = OrderedMap::new();
            // The session id as a plain string under the filter's name, as Microsoft's
            // clients send it (not a described value).
            filter.insert(Symbol::from(SESSION_FILTER), Value::String(id.to_string()));
            source = source.filter(filter);
        }
        let (snd, rcv) = match mode {
            Mode::PeekLock => (SenderSettleMode::Unsettled, ReceiverSettleMode::Second),
            Mode::ReceiveAndDelete => (SenderSettleMode::Settled, ReceiverSettleMode::First),
        };
        Receiver::builder()
            .name(format!("qdeck-recv-{}", uuid::Uuid::new_v4().simple()))
            .source(source.build())
            .target(format!(
                "qdeck-recv-target-{}",
                uuid::Uuid::new_v4().simple()
            ))
            .sender_settle_mode(snd)
            .receiver_settle_mode(rcv)
            .credit_mode(auto_credit.map_or(CreditMode::Manual, |n| CreditMode::Auto(n.max(1))))
            .auto_accept(false)
            .attach(&mut live.session)
            .await
            .map_err(|e| errors::link_error(e, &what))
    }

    /// One `$management` request on `entity` (`operation` = `com.microsoft:…`). A status other
    /// than 200 (or 204 where `empty_ok`) is an error; 204 gives `Value::Null`.
    pub async fn request(
        &self,
        entity: &str,
        operation: &str,
        body: Vec<(&str, Value)>,
        what: &str,
    ) -> Result<Value> {
        let link = {
            let mut g = self.live_for(entity).await?;
            let live = g.as_mut().ok_or_else(no_connection)?;
            match live.mgmt.get(entity) {
                Some(l) => l.clone(),
                None => {
                    let node = format!("{entity}/$management");
                    let l = Arc::new(Mutex::new(
                        request::RequestLink::attach(&mut live.session, &node).await?,
                    ));
                    live.mgmt.insert(entity.to_string(), l.clone());
                    l
                }
            }
        };
        self.bump(&format!("amqp.{}", short_op(operation)), 1);
        let mut map = OrderedMap::new();
        for (k, v) in body {
            map.insert(Value::String(k.to_string()), v);
        }
        let props = vec![
            ("operation", SimpleValue::String(operation.to_string())),
            ("com.microsoft:server-timeout", SimpleValue::Uint(60_000)),
        ];
        let answer = link.lock().await.call(props, Value::Map(map)).await;
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                // The link (or the connection) is gone: open new ones next time.
                let mut g = self.live.lock().await;
                if let Some(live) = g.as_mut() {
                    live.mgmt.remove(entity);
                }
                return Err(e);
            }
        };
        match answer.status {
            200 => Ok(answer.body),
            204 => Ok(Value::Null),
            s => Err(errors::classify(s, &answer.description, what)),
        }
    }
}

fn no_connection() -> BackendError {
    BackendError::Unreachable("the Service Bus AMQP connection closed".into())
}

/// `com.microsoft:peek-message` → `peek-message`, for the call counter.
fn short_op(op: &str) -> &str {
    op.rsplit(':').next().unwrap_or(op)
}

/// A field of an AMQP map body by its (string or symbol) key.
pub fn field<'a>(map: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Map(m) = map else {
        return None;
    };
    m.iter()
        .find(|(k, _)| match k {
            Value::String(s) => s == key,
            Value::Symbol(s) => s.as_str() == key,
            _ => false,
        })
        .map(|(_, v)| v)
}

/// An integer of any AMQP width.
pub fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Long(n) => Some(*n),
        Value::Int(n) => Some(i64::from(*n)),
        Value::Short(n) => Some(i64::from(*n)),
        Value::Byte(n) => Some(i64::from(*n)),
        Value::Ulong(n) => i64::try_from(*n).ok(),
        Value::Uint(n) => Some(i64::from(*n)),
        Value::Ushort(n) => Some(i64::from(*n)),
        Value::Ubyte(n) => Some(i64::from(*n)),
        _ => None,
    }
}

/// The items of an AMQP list or array.
pub fn items(v: &Value) -> Vec<&Value> {
    match v {
        Value::List(l) => l.iter().collect(),
        Value::Array(a) => a.0.iter().collect(),
        _ => Vec::new(),
    }
}
