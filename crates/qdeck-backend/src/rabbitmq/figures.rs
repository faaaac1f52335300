//! Queue list and live figures from the management API: one paginated `/api/queues` request
//! per page (`columns=` keeps it light), DLQ links from arguments and effective policy,
//! resolved through the exchange's bindings, in both directions.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

use qdeck_model::domain::*;

/// Columns read for both list and stats: one request per page answers both.
pub const QUEUE_COLUMNS: &str =
    "name,vhost,type,state,arguments,policy,effective_policy_definition,\
messages_ready,messages_unacknowledged,consumers,head_message_timestamp,\
message_stats.publish,message_stats.publish_details.rate,\
message_stats.ack,message_stats.ack_details.rate,\
message_stats.deliver_no_ack,message_stats.deliver_no_ack_details.rate,\
message_stats.get_no_ack,message_stats.get_no_ack_details.rate,\
message_stats.get_details.rate,\
message_stats.deliver_get,message_stats.deliver_get_details.rate,\
message_stats.redeliver,message_stats.redeliver_details.rate";

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Rate {
    #[serde(default)]
    pub rate: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MsgStats {
    pub publish: Option<u64>,
    pub publish_details: Option<Rate>,
    pub ack: Option<u64>,
    pub ack_details: Option<Rate>,
    pub deliver_no_ack: Option<u64>,
    pub deliver_no_ack_details: Option<Rate>,
    pub get_no_ack: Option<u64>,
    pub get_no_ack_details: Option<Rate>,
    /// Gets in ack mode: qdeck's browse is one (see `own_gets`).
    #[serde(default)]
    pub get_details: Option<Rate>,
    pub deliver_get: Option<u64>,
    pub deliver_get_details: Option<Rate>,
    pub redeliver: Option<u64>,
    pub redeliver_details: Option<Rate>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct QueueRow {
    pub name: String,
    #[serde(default)]
    pub vhost: String,
    #[serde(default, rename = "type")]
    pub qtype: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub arguments: BTreeMap<String, Value>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub effective_policy_definition: Option<Value>,
    #[serde(default)]
    pub messages_ready: Option<u64>,
    #[serde(default)]
    pub messages_unacknowledged: Option<u64>,
    #[serde(default)]
    pub consumers: Option<u32>,
    #[serde(default)]
    pub head_message_timestamp: Option<Value>,
    #[serde(default)]
    pub message_stats: Option<MsgStats>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExchangeRow {
    pub name: String,
    #[serde(default)]
    pub vhost: String,
    #[serde(default, rename = "type")]
    pub etype: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BindingRow {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub vhost: String,
    #[serde(default)]
    pub destination: String,
    #[serde(default)]
    pub destination_type: String,
    #[serde(default)]
    pub routing_key: String,
}

/// Exchanges and bindings, read with `list_queues` and reused by `stats`.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// (vhost, exchange) → type
    pub exchanges: HashMap<(String, String), String>,
    /// (vhost, exchange) → [(queue, routing key)]
    pub bindings: HashMap<(String, String), Vec<(String, String)>>,
    /// (vhost, queue) → routing keys it is bound with
    pub queue_keys: HashMap<(String, String), Vec<String>>,
}

impl Topology {
    pub fn new(ex: Vec<ExchangeRow>, b: Vec<BindingRow>) -> Topology {
        let mut t = Topology::default();
        for e in ex {
            t.exchanges.insert((e.vhost, e.name), e.etype);
        }
        for b in b {
            if b.destination_type != "queue" {
                continue;
            }
            t.queue_keys
                .entry((b.vhost.clone(), b.destination.clone()))
                .or_default()
                .push(b.routing_key.clone());
            t.bindings
                .entry((b.vhost, b.source))
                .or_default()
                .push((b.destination, b.routing_key));
        }
        t
    }
}

impl QueueRow {
    /// A setting from the queue's arguments (`x-…`), else from its effective policy
    /// (same key without `x-`). Arguments win, as in RabbitMQ for dead-lettering keys.
    pub fn setting(&self, key: &str) -> Option<&Value> {
        if let Some(v) = self.arguments.get(&format!("x-{key}")) {
            return Some(v);
        }
        self.effective_policy_definition
            .as_ref()
            .and_then(|p| p.get(key))
    }

    pub fn kind(&self) -> QueueKind {
        match self.qtype.as_deref() {
            Some("quorum") => QueueKind::Quorum,
            Some("stream") => QueueKind::Stream,
            _ => QueueKind::Classic,
        }
    }

    /// The dead-letter exchange and routing key, and where they came from.
    pub fn dead_letter(&self) -> Option<(String, Option<String>, &'static str)> {
        let from_args = self.arguments.contains_key("x-dead-letter-exchange");
        let dlx = self.setting("dead-letter-exchange")?.as_str()?.to_string();
        let dlrk = self
            .setting("dead-letter-routing-key")
            .and_then(Value::as_str)
            .map(str::to_string);
        Some((dlx, dlrk, if from_args { "arguments" } else { "policy" }))
    }

    pub fn head_timestamp(&self) -> Option<i64> {
        match self.head_message_timestamp.as_ref()? {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }
}

/// The queues (in the same vhost) a queue's dead letters are routed to.
pub fn resolve_dlq(row: &QueueRow, topo: &Topology) -> Vec<String> {
    let Some((dlx, dlrk, _)) = row.dead_letter() else {
        return Vec::new();
    };
    // Without a dead-letter routing key the message keeps its own routing keys: the queue's
    // binding keys and its name (default-exchange publishes) are the best guess.
    let keys: Vec<String> = match &dlrk {
        Some(k) => vec![k.clone()],
        None => {
            let mut k = topo
                .queue_keys
                .get(&(row.vhost.clone(), row.name.clone()))
                .cloned()
                .unwrap_or_default();
            k.push(row.name.clone());
            k
        }
    };
    if dlx.is_empty() {
        return match dlrk {
            Some(k) => vec![k],
            None => Vec::new(),
        };
    }
    let ekey = (row.vhost.clone(), dlx);
    let etype = topo.exchanges.get(&ekey).map_or("", String::as_str);
    let mut out: Vec<String> = Vec::new();
    for (q, rk) in topo.bindings.get(&ekey).map_or(&[][..], Vec::as_slice) {
        let hit = match etype {
            "direct" => keys.iter().any(|k| k == rk),
            "topic" => keys.iter().any(|k| topic_match(rk, k)),
            // fanout, headers (arguments not checked), plugin types: every bound queue.
            _ => true,
        };
        if hit && !out.contains(q) {
            out.push(q.clone());
        }
    }
    out
}

/// AMQP topic matching: `*` one word, `#` zero or more words.
pub fn topic_match(pattern: &str, key: &str) -> bool {
    fn go(p: &[&str], k: &[&str]) -> bool {
        match p.split_first() {
            None => k.is_empty(),
            Some((&"#", rest)) => (0..=k.len()).any(|i| go(rest, &k[i..])),
            Some((w, rest)) => match k.split_first() {
                Some((kw, krest)) => (*w == "*" || w == kw) && go(rest, krest),
                None => false,
            },
        }
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = key.split('.').collect();
    go(&p, &k)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An exchange name for people: the default exchange's name is empty, an empty value reads
/// as nothing, so it shows as `""` and says which exchange that is.
pub fn exchange_text(name: &str) -> String {
    if name.is_empty() {
        "\"\" (default exchange)".to_string()
    } else {
        name.to_string()
    }
}

/// An argument or policy value, the empty name of an exchange shown as `exchange_text` does.
fn setting_text(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) if key.ends_with("exchange") => exchange_text(s),
        other => value_text(other),
    }
}

/// Static settings for the detail panel.
pub fn settings_of(row: &QueueRow) -> QueueSettings {
    let mut s = QueueSettings {
        // Filled by the caller, which knows the broker version (4.x quorum default).
        max_receives: None,
        retention_secs: row
            .setting("message-ttl")
            .and_then(Value::as_f64)
            .map(|ms| ms / 1000.0),
        ..Default::default()
    };
    for (k, v) in &row.arguments {
        s.extra.insert(format!("argument {k}"), setting_text(k, v));
    }
    if let Some(p) = &row.policy {
        s.extra.insert("policy".into(), p.clone());
    }
    if let Some(Value::Object(m)) = &row.effective_policy_definition {
        for (k, v) in m {
            s.extra.insert(format!("policy {k}"), setting_text(k, v));
        }
    }
    if let Some(st) = &row.state {
        s.extra.insert("state".into(), st.clone());
    }
    s.extra.insert("vhost".into(), row.vhost.clone());
    if let Some((dlx, dlrk, from)) = row.dead_letter() {
        let rk = dlrk.unwrap_or_else(|| "the message's own".into());
        s.extra.insert(
            "dead-lettering".into(),
            format!(
                "exchange {}, routing key {rk}, from {from}",
                exchange_text(&dlx)
            ),
        );
    }
    s
}

/// Live figures from one row. `dlq_depth` is filled by the caller.
pub fn stats_of(id: QueueId, row: &QueueRow, at_ms: i64) -> QueueStats {
    let ready = row.messages_ready;
    let unacked = row.messages_unacknowledged;
    let (oldest_age_secs, age_note) = match (row.head_timestamp(), row.kind()) {
        (Some(ts), _) => (
            Some(((at_ms as f64 / 1000.0) - ts as f64).max(0.0)),
            Some("from the head message's timestamp property (1 s resolution)".to_string()),
        ),
        (None, QueueKind::Quorum) => (
            None,
            Some("quorum queues do not report the head message's timestamp".to_string()),
        ),
        (None, QueueKind::Stream) => (
            None,
            Some("streams do not report the head message's timestamp".to_string()),
        ),
        (None, _) => {
            if ready.unwrap_or(0) + unacked.unwrap_or(0) == 0 && ready.is_some() {
                (None, Some("queue is empty".to_string()))
            } else {
                (
                    None,
                    Some(
                        "head message has no timestamp property (publishers do not set it) or is paged out"
                            .to_string(),
                    ),
                )
            }
        }
    };
    let ms = row.message_stats.clone().unwrap_or_default();
    let rate = |r: &Option<Rate>| r.as_ref().and_then(|r| r.rate);
    // Work done by consumers is every message they took, whatever they answered: first
    // deliveries (all deliveries less redeliveries) count a rejected or dead-lettered message
    // too, which acks alone miss. Without delivery figures, acks and auto-acked deliveries.
    let completed_total = match (ms.deliver_get, ms.redeliver) {
        (Some(d), r) => Some(d.saturating_sub(r.unwrap_or(0))),
        (None, _) => match (ms.ack, ms.deliver_no_ack, ms.get_no_ack) {
            (None, None, None) => None,
            (a, b, c) => Some(a.unwrap_or(0) + b.unwrap_or(0) + c.unwrap_or(0)),
        },
    };
    let out_rate = match (rate(&ms.deliver_get_details), rate(&ms.redeliver_details)) {
        (Some(d), r) => Some((d - r.unwrap_or(0.0)).max(0.0)),
        (None, _) => match (
            rate(&ms.ack_details),
            rate(&ms.deliver_no_ack_details),
            rate(&ms.get_no_ack_details),
        ) {
            (None, None, None) => None,
            (a, b, c) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0) + c.unwrap_or(0.0)),
        },
    };
    // A stream queue keeps what its consumers read (they track their own offsets): its
    // message count is retention, not backlog.
    let (depth, retained) = if row.kind() == QueueKind::Stream {
        (None, ready)
    } else {
        (ready, None)
    };
    QueueStats {
        id,
        at_ms,
        depth,
        in_flight: unacked,
        delayed: None,
        dlq_depth: None,
        oldest_age_secs,
        age_note,
        consumers: row.consumers,
        enqueued_total: ms.publish,
        completed_total,
        dead_lettered_total: None,
        in_rate: rate(&ms.publish_details),
        out_rate,
        lost: None,
        retained,
        retained_age_secs: None,
        sampled: None,
        forwarded: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_patterns() {
        assert!(topic_match("a.*.c", "a.b.c"));
        assert!(topic_match("a.#", "a"));
        assert!(topic_match("#", "x.y"));
        assert!(!topic_match("a.*", "a.b.c"));
    }

    #[test]
    fn dlq_from_policy_and_args() {
        let row: QueueRow = serde_json::from_str(
            r#"{"name":"src","vhost":"/","arguments":{},"effective_policy_definition":{"dead-letter-exchange":"","dead-letter-routing-key":"dlq"}}"#,
        )
        .unwrap();
        assert_eq!(resolve_dlq(&row, &Topology::default()), vec!["dlq"]);
        let row: QueueRow = serde_json::from_str(
            r#"{"name":"src","vhost":"/","arguments":{"x-dead-letter-exchange":"dlx"},"effective_policy_definition":{"dead-letter-exchange":"other"}}"#,
        )
        .unwrap();
        let topo = Topology::new(
            vec![ExchangeRow {
                name: "dlx".into(),
                vhost: "/".into(),
                etype: "direct".into(),
            }],
            vec![BindingRow {
                source: "dlx".into(),
                vhost: "/".into(),
                destination: "dead".into(),
                destination_type: "queue".into(),
                routing_key: "src".into(),
            }],
        );
        assert_eq!(resolve_dlq(&row, &topo), vec!["dead"]);
    }

    #[test]
    fn the_default_exchange_shows_as_empty_quotes_and_says_so() {
        let row: QueueRow = serde_json::from_str(
            r#"{"name":"src","vhost":"/","arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}}"#,
        )
        .unwrap();
        let s = settings_of(&row);
        assert_eq!(
            s.extra["argument x-dead-letter-exchange"],
            "\"\" (default exchange)"
        );
        assert_eq!(s.extra["argument x-dead-letter-routing-key"], "dlq");
        let how = &s.extra["dead-lettering"];
        assert!(
            how.starts_with("exchange \"\" (default exchange), routing key dlq"),
            "{how}"
        );
        assert_eq!(exchange_text("dlx"), "dlx");
    }

    #[test]
    fn missing_figures_stay_none() {
        let row: QueueRow =
            serde_json::from_str(r#"{"name":"q","vhost":"/","type":"quorum","messages_ready":3}"#)
                .unwrap();
        let s = stats_of(QueueId::new("q"), &row, 1000);
        assert_eq!(s.depth, Some(3));
        assert_eq!(s.in_flight, None);
        assert_eq!(s.oldest_age_secs, None);
        assert!(s.age_note.unwrap().contains("quorum"));
        assert_eq!(s.in_rate, None);
    }

    /// A consumer that acks 90 % and rejects 10 % (requeue=false, to the DLX) does the work
    /// of all of them; acks alone would undercount its rate and overstate workers needed.
    #[test]
    fn rejected_messages_count_as_work() {
        let row: QueueRow = serde_json::from_str(
            r#"{"name":"q","vhost":"/","messages_ready":0,"message_stats":{
                "ack":900,"ack_details":{"rate":9.0},
                "deliver_get":1050,"deliver_get_details":{"rate":10.5},
                "redeliver":50,"redeliver_details":{"rate":0.5}}}"#,
        )
        .unwrap();
        let s = stats_of(QueueId::new("q"), &row, 1000);
        assert_eq!(s.completed_total, Some(1000));
        assert_eq!(s.out_rate, Some(10.0));
        let acks_only: QueueRow = serde_json::from_str(
            r#"{"name":"q","vhost":"/","message_stats":{"ack":900,"ack_details":{"rate":9.0}}}"#,
        )
        .unwrap();
        let s = stats_of(QueueId::new("q"), &acks_only, 1000);
        assert_eq!((s.completed_total, s.out_rate), (Some(900), Some(9.0)));
    }
}
