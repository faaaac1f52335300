//! kombu's Redis envelope as a `Message`. kombu stores each message as the JSON text
//! `{"body", "content-encoding", "content-type", "headers", "properties": {"delivery_info",
//! "delivery_tag", "priority", "body_encoding", …}}`; the body is base64 when
//! `body_encoding` says so. Every field is kept under the name kombu gives it, so nothing the
//! sender set is lost; an envelope that does not parse is shown as it is, with a note.

use base64::Engine;
use serde_json::Value as Json;

use crate::celery::json_to_value;
use qdeck_model::domain::{Message, Value};

/// The message at position `index` of `list` (0 = the next one a worker takes).
pub fn message(raw: &[u8], list: &str, index: usize) -> Message {
    let mut m = Message {
        id: format!("#{index}"),
        ..Default::default()
    };
    m.meta.push(("redis list".into(), Value::str(list)));
    let Ok(Json::Object(env)) = serde_json::from_slice::<Json>(raw) else {
        return malformed(m, raw, "not a JSON object");
    };
    let Some(body) = env.get("body").and_then(Json::as_str) else {
        return malformed(m, raw, "no body text");
    };
    let props = env.get("properties").and_then(Json::as_object);
    let encoding = props
        .and_then(|p| p.get("body_encoding"))
        .and_then(Json::as_str);
    m.body = match encoding {
        Some("base64") => match base64::engine::general_purpose::STANDARD.decode(body) {
            Ok(b) => b,
            Err(_) => return malformed(m, raw, "body_encoding is base64 but the body is not"),
        },
        _ => body.as_bytes().to_vec(),
    };
    for k in ["content-type", "content-encoding"] {
        if let Some(v) = env.get(k) {
            m.properties.push((k.to_string(), json_to_value(v)));
        }
    }
    if let Some(p) = props {
        for (k, v) in p {
            if k == "delivery_info" {
                if let Some(info) = v.as_object() {
                    for (ik, iv) in info {
                        m.meta.push((ik.clone(), json_to_value(iv)));
                    }
                }
                continue;
            }
            m.properties.push((k.clone(), json_to_value(v)));
        }
    }
    if let Some(Json::Object(h)) = env.get("headers") {
        m.headers = h
            .iter()
            .map(|(k, v)| (k.clone(), json_to_value(v)))
            .collect();
    }
    // The task id names the message where Celery wrote one; else kombu's delivery tag.
    let id = m
        .headers
        .iter()
        .find(|(k, _)| k == "id")
        .and_then(|(_, v)| v.as_str().map(str::to_string))
        .or_else(|| {
            props
                .and_then(|p| p.get("correlation_id").or_else(|| p.get("delivery_tag")))
                .and_then(Json::as_str)
                .map(str::to_string)
        });
    if let Some(id) = id {
        m.id = id;
    }
    m
}

fn malformed(mut m: Message, raw: &[u8], why: &str) -> Message {
    m.meta.push((
        "note".into(),
        Value::str(format!(
            "malformed kombu envelope ({why}): shown as stored, {} bytes",
            raw.len()
        )),
    ));
    m.body = raw.to_vec();
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_unpacked_and_bad_ones_get_a_note() {
        let raw = br#"{"body": "W1sxXSwge30sIHt9XQ==", "content-encoding": "utf-8", "content-type": "application/json", "headers": {"task": "a.b", "id": "t-1", "retries": 0}, "properties": {"delivery_info": {"exchange": "", "routing_key": "q"}, "priority": 3, "body_encoding": "base64", "delivery_tag": "d-1"}}"#;
        let m = message(raw, "q", 0);
        assert_eq!(m.id, "t-1");
        assert_eq!(m.body, b"[[1], {}, {}]".to_vec());
        assert!(m
            .properties
            .iter()
            .any(|(k, v)| k == "priority" && v.as_i64() == Some(3)));
        assert!(m
            .meta
            .iter()
            .any(|(k, v)| k == "routing_key" && v.as_str() == Some("q")));
        assert_eq!(crate::celery::task_name(&m).as_deref(), Some("a.b"));
        for bad in [
            &b"not json"[..],
            b"[1]",
            br#"{"body": 1}"#,
            br#"{"body": "***", "properties": {"body_encoding": "base64"}}"#,
        ] {
            let m = message(bad, "q", 4);
            assert_eq!(m.id, "#4");
            assert_eq!(m.body, bad.to_vec());
            assert!(m.meta.iter().any(|(k, _)| k == "note"), "{bad:?}");
        }
    }
}
