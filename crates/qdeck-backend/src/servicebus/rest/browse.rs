//! DLQ browse over REST: peek-lock a page, read it, unlock every message at once.
//! REST has no true peek, so each browsed message's DeliveryCount rises by one (declared in
//! capabilities). A DLQ cannot dead-letter, so this is safe there; on an active queue it would
//! push messages toward MaxDeliveryCount, so it is refused unless forced.

use futures::future::join_all;
use serde_json::Value;

use super::runtime::{self, Received};
use crate::servicebus::dlq_parent;
use crate::servicebus::http::Rest;
use crate::{BackendError, Result};
use qdeck_model::domain::*;

/// Deepest message a browse may reach: every message up to it is locked for the page.
const MAX_DEPTH: usize = 500;

pub async fn browse(rest: &Rest, entity: &str, req: &BrowseRequest) -> Result<Page> {
    if dlq_parent(entity).is_none() && !req.force {
        return Err(BackendError::RefusedUnlessForced(format!(
            "browsing active queue {entity} over REST would lock and unlock each message, raising its DeliveryCount \
             toward MaxDeliveryCount and dead-lettering messages at the limit; browse {entity}/$DeadLetterQueue instead"
        )));
    }
    let skip: usize = match req.cursor.as_deref() {
        None | Some("") => 0,
        Some(c) => c.parse().map_err(|_| {
            BackendError::Invalid("browse cursor is not valid for Service Bus".into())
        })?,
    };
    if req.max == 0 {
        return Ok(Page::default());
    }
    // A large page (a scan asks for 1,000) is clamped to what a browse can reach, as the
    // other backends clamp theirs; only a cursor already past the depth is an error.
    let want = skip.saturating_add(req.max).min(MAX_DEPTH);
    if skip >= MAX_DEPTH {
        return Err(BackendError::Invalid(format!(
            "Service Bus REST can only browse the first {MAX_DEPTH} messages (each one up to the page is locked while it is read)"
        )));
    }
    let mut locked: Vec<Received> = Vec::new();
    let mut failure = None;
    while locked.len() < want {
        match runtime::peek_lock(rest, entity, 1).await {
            Ok(Some(m)) => locked.push(m),
            Ok(None) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // Unlock everything we hold, at once, whatever happened above.
    let results = join_all(locked.iter().map(|m| runtime::unlock(rest, m))).await;
    let unlock_failed = results.iter().filter(|r| r.is_err()).count();
    if let Some(e) = failure {
        if locked.is_empty() {
            return Err(e);
        }
    }
    let full = locked.len() == want && want < MAX_DEPTH;
    let mut note = format!(
        "{} message(s) were locked and unlocked to read them: their DeliveryCount went up by one",
        locked.len()
    );
    if locked.len() == MAX_DEPTH {
        note.push_str(&format!(
            "; the REST browse stops at the first {MAX_DEPTH} messages"
        ));
    }
    if unlock_failed > 0 {
        note.push_str(&format!(
            "; {unlock_failed} could not be unlocked and stay locked until their lock expires (LockDuration)"
        ));
    }
    let messages = locked
        .iter()
        .skip(skip)
        .map(|m| to_message(m, entity))
        .collect();
    Ok(Page {
        messages,
        next: full.then(|| want.to_string()),
        effect_note: Some(note),
    })
}

/// Custom properties the broker sets when it dead-letters a message: metadata.
fn is_broker_custom(name: &str) -> bool {
    ["DeadLetterReason", "DeadLetterErrorDescription"]
        .iter()
        .any(|b| b.eq_ignore_ascii_case(name))
}

/// A `BrokerProperties` field as a typed value.
fn json_value(v: &Value) -> qdeck_model::domain::Value {
    use qdeck_model::domain::Value as V;
    match v {
        Value::String(s) => V::String(s.clone()),
        Value::Bool(b) => V::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => V::I64(i),
            // A .NET ulong past i64: its digits, not the nearest double.
            (None, Some(_)) => V::Number(n.to_string()),
            (None, None) => n.as_f64().map_or_else(|| V::Number(n.to_string()), V::F64),
        },
        Value::Null => V::Null,
        other => V::String(other.to_string()),
    }
}

/// A custom property's header value (JSON: strings quoted, numbers and booleans bare) as a
/// typed value; a value that is not JSON is its text.
pub fn custom_value(raw: &str) -> qdeck_model::domain::Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ (Value::String(_) | Value::Bool(_) | Value::Number(_))) => json_value(&v),
        _ => qdeck_model::domain::Value::str(raw),
    }
}

/// A typed value as a custom property's header value: what `custom_value` reads back.
pub fn custom_header(v: &qdeck_model::domain::Value) -> String {
    use qdeck_model::domain::Value as V;
    match v {
        V::Bool(b) => b.to_string(),
        // JSON has no NaN or infinity: those go as text.
        n if n.is_machine_number() && n.text().parse::<f64>().is_ok_and(f64::is_finite) => n.text(),
        // An unsigned 64-bit value past i64 (read from Service Bus as its digits) goes back as
        // the same bare number; other numbers kept as text stay text, as before.
        V::Number(d) if d.parse::<u64>().is_ok() && d.parse::<i64>().is_err() => d.clone(),
        V::Custom { value, .. } => custom_header(value),
        other => Value::String(other.text()).to_string(),
    }
}

/// Custom property values are JSON in headers (strings quoted); show strings without quotes.
pub fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        if let Ok(s) = serde_json::from_str::<String>(v) {
            return s;
        }
    }
    v.to_string()
}

fn rfc2822_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc2822(s.trim())
        .ok()
        .map(|d| d.timestamp_millis())
}

pub fn to_message(m: &Received, entity: &str) -> Message {
    let custom = |k: &str| {
        m.custom
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| unquote(v))
    };
    let seq = m.sequence_number();
    let mut properties = Vec::new();
    let mut meta = Vec::new();
    if let Some(ct) = &m.content_type {
        properties.push((
            "ContentType".to_string(),
            qdeck_model::domain::Value::str(ct.as_str()),
        ));
    }
    for (k, v) in &m.props {
        let typed = json_value(v);
        if runtime::SETTABLE.contains(&k.as_str()) || k == "TimeToLive" {
            properties.push((k.clone(), typed));
        } else {
            meta.push((k.clone(), typed));
        }
    }
    let mut headers = Vec::new();
    for (k, v) in &m.custom {
        let typed = custom_value(v);
        if is_broker_custom(k) {
            meta.push((k.clone(), typed));
        } else {
            headers.push((k.clone(), typed));
        }
    }
    let reason = custom("DeadLetterReason").or_else(|| m.prop_str("DeadLetterReason"));
    let description =
        custom("DeadLetterErrorDescription").or_else(|| m.prop_str("DeadLetterErrorDescription"));
    let origin = m
        .prop_str("DeadLetterSource")
        .or_else(|| dlq_parent(entity).map(str::to_string))
        .map(QueueId::new);
    let dead_letter = dlq_parent(entity).map(|_| DeadLetterInfo {
        reason,
        why: description.clone().filter(|d| !d.trim().is_empty()),
        description,
        origin,
        count: None,
        at_ms: None,
    });
    Message {
        id: m
            .message_id()
            .or_else(|| seq.map(|s| s.to_string()))
            .unwrap_or_default(),
        seq,
        enqueued_ms: m.prop_str("EnqueuedTimeUtc").and_then(|s| rfc2822_ms(&s)),
        receive_count: m
            .prop_i64("DeliveryCount")
            .and_then(|n| u64::try_from(n).ok()),
        key: m
            .prop_str("SessionId")
            .or_else(|| m.prop_str("PartitionKey")),
        properties,
        headers,
        meta,
        body: m.body.clone(),
        body_null: false,
        dead_letter,
    }
}

#[cfg(test)]
mod tests {
    use super::{custom_header, custom_value};
    use qdeck_model::domain::Value;

    #[test]
    fn custom_properties_keep_their_json_type_both_ways() {
        for (v, wire) in [
            (Value::str("acme"), r#""acme""#),
            (Value::str("7"), r#""7""#),
            (Value::I64(7), "7"),
            (Value::F64(0.25), "0.25"),
            (Value::Bool(true), "true"),
        ] {
            assert_eq!(custom_header(&v), wire);
            assert_eq!(custom_value(wire), v, "{wire}");
        }
        // Narrower integers go as numbers and come back as 64-bit ones; types Service Bus
        // lacks go as text.
        assert_eq!(
            custom_value(&custom_header(&Value::I32(-3))),
            Value::I64(-3)
        );
        let t = Value::Table(vec![("a".into(), Value::I32(1))]);
        assert_eq!(custom_value(&custom_header(&t)), Value::str("{a: 1}"));
        // A value that is not JSON (another client's raw header) is its text.
        assert_eq!(custom_value("plain"), Value::str("plain"));
        // An unsigned 64-bit value past i64 keeps its digits both ways, not a double's.
        let big = "18446744073709551615";
        assert_eq!(custom_value(big), Value::Number(big.into()));
        assert_eq!(custom_header(&custom_value(big)), big);
    }
}
