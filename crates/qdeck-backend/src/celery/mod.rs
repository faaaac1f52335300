//! Celery's task messages read from any broker's `Message`: protocol 2 keeps the task's
//! identity in the headers (`task`, `id`, `retries`, `eta`, …) and `[args, kwargs, embed]` in
//! a JSON body; protocol 1 (Celery 3 and `task_protocol = 1`) keeps all of it in a JSON body
//! object. Nothing here unpickles: a pickled or binary body leaves args/kwargs unknown with a
//! note, the headers still name the task.
//! `workers` speaks Celery's remote control (pidbox) over those brokers.

pub mod workers;

use serde::Serialize;

use qdeck_model::domain::{Message, Value};

/// Longest args/kwargs preview kept; the body has them all.
const PREVIEW: usize = 160;

/// The Celery fields of one task message.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CeleryTask {
    /// 1 or 2: where the fields were found.
    pub protocol: u8,
    pub task: String,
    pub id: Option<String>,
    /// Preview of the positional arguments (Celery's own `argsrepr` where the sender set it).
    pub args: Option<String>,
    pub kwargs: Option<String>,
    pub retries: Option<i64>,
    /// ISO 8601 time the task is due, as Celery wrote it.
    pub eta: Option<String>,
    pub expires: Option<String>,
    pub root_id: Option<String>,
    pub parent_id: Option<String>,
    /// Sending host (`pid@host`).
    pub origin: Option<String>,
    /// What could not be read, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl CeleryTask {
    /// The eta as Unix ms, when it parses.
    pub fn eta_ms(&self) -> Option<i64> {
        self.eta.as_deref().and_then(iso_ms)
    }
}

/// Celery's ISO 8601 times (`2026-12-06T04:28:00.123456+00:00`, or naive UTC) as Unix ms.
pub fn iso_ms(s: &str) -> Option<i64> {
    let t = s.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(d.timestamp_millis());
    }
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|d| d.and_utc().timestamp_millis())
}

fn header<'a>(m: &'a Message, name: &str) -> Option<&'a Value> {
    m.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .filter(|v| !matches!(v, Value::Null))
}

fn header_text(m: &Message, name: &str) -> Option<String> {
    header(m, name).map(|v| match v.as_str() {
        Some(s) => s.to_string(),
        None => v.text(),
    })
}

fn cut(s: &str) -> String {
    if s.chars().count() <= PREVIEW {
        return s.to_string();
    }
    let head: String = s.chars().take(PREVIEW).collect();
    format!("{head}…")
}

fn json_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The task name alone (what `--where task = …` compares): the `task` header, else protocol
/// 1's body field.
pub fn task_name(m: &Message) -> Option<String> {
    if let Some(t) = header_text(m, "task") {
        return Some(t);
    }
    protocol1(m).map(|t| t.task)
}

/// The task name of a message that is surely a Celery task (protocol 2's `task` and `id`
/// headers, or protocol 1's body): what the reasons view groups by, with the failure.
pub fn task_of(m: &Message) -> Option<String> {
    match (header_text(m, "task"), header(m, "id")) {
        (Some(task), Some(_)) => Some(task),
        _ => protocol1(m).map(|t| t.task),
    }
}

/// The Celery view of a message, or `None` when it is no Celery task message.
pub fn decode(m: &Message) -> Option<CeleryTask> {
    match (header_text(m, "task"), header_text(m, "id")) {
        (Some(task), Some(id)) => Some(protocol2(m, task, id)),
        _ => protocol1(m),
    }
}

fn protocol2(m: &Message, task: String, id: String) -> CeleryTask {
    let mut t = CeleryTask {
        protocol: 2,
        task,
        id: Some(id),
        args: header_text(m, "argsrepr").map(|s| cut(&s)),
        kwargs: header_text(m, "kwargsrepr").map(|s| cut(&s)),
        retries: header(m, "retries").and_then(Value::as_i64),
        eta: header_text(m, "eta"),
        expires: header_text(m, "expires"),
        root_id: header_text(m, "root_id"),
        parent_id: header_text(m, "parent_id"),
        origin: header_text(m, "origin"),
        notes: Vec::new(),
    };
    if t.args.is_none() || t.kwargs.is_none() {
        match serde_json::from_slice::<serde_json::Value>(&m.body) {
            Ok(serde_json::Value::Array(parts)) => {
                if t.args.is_none() {
                    t.args = parts.first().and_then(json_text).map(|s| cut(&s));
                }
                if t.kwargs.is_none() {
                    t.kwargs = parts.get(1).and_then(json_text).map(|s| cut(&s));
                }
            }
            Ok(_) => t
                .notes
                .push("body is JSON but not Celery's [args, kwargs, embed]".into()),
            Err(_) => t.notes.push(format!(
                "body is not JSON ({} bytes, e.g. pickle): args not decoded",
                m.body.len()
            )),
        }
    }
    t
}

fn protocol1(m: &Message) -> Option<CeleryTask> {
    let doc: serde_json::Value = serde_json::from_slice(&m.body).ok()?;
    let o = doc.as_object()?;
    let task = o.get("task")?.as_str()?.to_string();
    let id = o.get("id")?.as_str()?.to_string();
    let s = |k: &str| o.get(k).and_then(json_text);
    Some(CeleryTask {
        protocol: 1,
        task,
        id: Some(id),
        args: o.get("args").and_then(json_text).map(|s| cut(&s)),
        kwargs: o.get("kwargs").and_then(json_text).map(|s| cut(&s)),
        retries: o.get("retries").and_then(serde_json::Value::as_i64),
        eta: s("eta"),
        expires: s("expires"),
        root_id: None,
        parent_id: None,
        origin: None,
        notes: Vec::new(),
    })
}

/// A JSON value as a header value (kombu's Redis envelope keeps headers as JSON).
pub fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::Array(a.iter().map(json_to_value).collect()),
        serde_json::Value::Object(o) => Value::Table(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p2() -> Message {
        Message {
            id: "t".into(),
            headers: vec![
                ("lang".into(), "py".into()),
                ("task".into(), "billing.charge".into()),
                ("id".into(), "abc".into()),
                ("eta".into(), Value::Null),
                ("retries".into(), Value::I64(2)),
                ("origin".into(), "1@host".into()),
            ],
            body: br#"[[100, "EUR"], {"customer": "c-1"}, {"callbacks": null}]"#.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn protocol2_reads_headers_and_falls_back_to_the_body_for_args() {
        let t = decode(&p2()).unwrap();
        assert_eq!(t.protocol, 2);
        assert_eq!(t.task, "billing.charge");
        assert_eq!(t.retries, Some(2));
        assert_eq!(t.eta, None);
        assert_eq!(t.args.as_deref(), Some(r#"[100,"EUR"]"#));
        assert_eq!(t.kwargs.as_deref(), Some(r#"{"customer":"c-1"}"#));
        let mut m = p2();
        m.body = b"\x80\x04pickle".to_vec();
        let t = decode(&m).unwrap();
        assert!(t.args.is_none() && t.notes[0].contains("not JSON"), "{t:?}");
    }

    #[test]
    fn protocol1_is_found_in_the_body_and_others_are_not_celery() {
        let m = Message {
            body: br#"{"task":"mail.send","id":"x1","args":[1],"kwargs":{},"retries":1,"eta":"2026-01-01T00:00:00+00:00"}"#.to_vec(),
            ..Default::default()
        };
        let t = decode(&m).unwrap();
        assert_eq!((t.protocol, t.task.as_str()), (1, "mail.send"));
        assert_eq!(t.eta_ms(), Some(1_767_225_600_000));
        assert_eq!(task_name(&m).as_deref(), Some("mail.send"));
        let plain = Message {
            body: br#"{"order": 1}"#.to_vec(),
            ..Default::default()
        };
        assert!(decode(&plain).is_none());
        assert!(task_name(&plain).is_none());
    }
}
