//! A small predicate language to select messages:
//!
//! ```text
//! reason = "rejected" and header.x-tenant = "acme"
//! signature ~ "timeout" or (json.order.total > 100 and age > 10m)
//! not body ~ "^\{" and receives >= 3 and origin = "orders"
//! ```
//!
//! Fields: `reason` (any recorded reason or error text), `signature` (the normalised text
//! `qdeck reasons` shows), `origin`, `key`, `id`, `task` (a Celery task's name: the `task`
//! header of protocol 2, else protocol 1's body field), `header.NAME` (case-insensitive; SQS
//! attributes match without their `attr.` prefix), `body`, `json.a.b` (a path into a JSON body;
//! numeric segments index arrays), `age` (since enqueue), `receives` (receive/delivery count).
//! Operators: `=`, `!=`, `~` (regex), `!~`, and `<`, `<=`, `>`, `>=` for `age`, `receives` and
//! numbers in `json`. Values: "quoted strings" (`\"` and `\\` escape), numbers, durations
//! (`500ms`, `30s`, `10m`, `2h`, `1d`), and `true`/`false`/`null` for `json`. Combine with
//! `and`, `or`, `not` and parentheses; `and` binds tighter than `or`. A missing header, path
//! or figure matches no comparison except `!=`/`!~`.

use std::fmt;

use regex::Regex;

pub use qdeck_model::expr::PredicateError;
use qdeck_model::expr::{self, err, Expr, Op, Tok, Token, Vocabulary};

use super::signature::{self, SignatureConfig};
use qdeck_model::domain::Message;

const FIELDS: &str = "reason, signature, origin, key, session, group, id, task, header.NAME, \
                      body, json.PATH, age, receives";

#[derive(Debug, Clone)]
enum Field {
    Reason,
    Signature,
    Origin,
    Key,
    /// Service Bus `SessionId` (a property, not the partition key `key` may also be).
    Session,
    Id,
    Task,
    Header(String),
    Body,
    Json(Vec<String>),
    Age,
    Receives,
}

#[derive(Debug, Clone)]
enum Value {
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
    /// Milliseconds.
    Duration(i64),
    Regex(Regex),
}

/// A parsed predicate, ready to test messages.
#[derive(Debug, Clone)]
pub struct Predicate {
    source: String,
    expr: Expr<(Field, Op, Value)>,
}

/// The fields of a message.
struct MessageFields;

impl Vocabulary for MessageFields {
    type Field = Field;
    type Cmp = (Field, Op, Value);

    fn fields(&self) -> &'static str {
        FIELDS
    }

    fn field(&self, word: &str, col: usize) -> Result<Field, PredicateError> {
        field(word, col)
    }

    fn compare(
        &self,
        f: Field,
        word: &str,
        op: Op,
        v: &Token,
    ) -> Result<(Field, Op, Value), PredicateError> {
        let value = value(&f, word, op, v)?;
        Ok((f, op, value))
    }
}

/// What evaluation needs besides the message.
#[derive(Debug, Clone, Default)]
pub struct EvalContext {
    /// "Now" for `age`, Unix ms.
    pub now_ms: i64,
    pub signature: SignatureConfig,
}

impl EvalContext {
    pub fn now(signature: SignatureConfig) -> EvalContext {
        EvalContext {
            now_ms: qdeck_model::domain::now_ms(),
            signature,
        }
    }
}

impl Predicate {
    pub fn parse(text: &str) -> Result<Predicate, PredicateError> {
        let expr = expr::parse(text, &MessageFields)?;
        Ok(Predicate {
            source: text.trim().to_string(),
            expr,
        })
    }

    /// The text it was parsed from (for the audit log and reports).
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn matches(&self, m: &Message, ctx: &EvalContext) -> bool {
        let mut json = None;
        self.expr
            .eval(&mut |(f, op, v)| compare(f, *op, v, m, ctx, &mut json))
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn field(word: &str, col: usize) -> Result<Field, PredicateError> {
    let (head, rest) = match word.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (word, None),
    };
    let head_l = head.to_ascii_lowercase();
    let simple = |f: Field| match rest {
        None => Ok(f),
        Some(_) => Err(err(col, format!("{head:?} has no sub-fields"))),
    };
    match head_l.as_str() {
        "reason" => simple(Field::Reason),
        "signature" => simple(Field::Signature),
        "origin" => simple(Field::Origin),
        "key" | "group" => simple(Field::Key),
        "session" => simple(Field::Session),
        "id" => simple(Field::Id),
        "task" => simple(Field::Task),
        "body" => simple(Field::Body),
        "age" => simple(Field::Age),
        "receives" => simple(Field::Receives),
        "header" | "headers" => match rest {
            Some(n) if !n.is_empty() => Ok(Field::Header(n.to_string())),
            _ => Err(err(col, "header needs a name: header.NAME")),
        },
        "json" => match rest {
            Some(p) if !p.is_empty() && p.split('.').all(|s| !s.is_empty()) => {
                Ok(Field::Json(p.split('.').map(str::to_string).collect()))
            }
            _ => Err(err(col, "json needs a path: json.a.b")),
        },
        _ => Err(err(
            col,
            format!("unknown field {word:?} (fields: {FIELDS})"),
        )),
    }
}

fn value(field: &Field, name: &str, op: Op, v: &Token) -> Result<Value, PredicateError> {
    let col = v.col;
    let bad = |what: &str| {
        err(
            col,
            format!(
                "{name} {} needs {what}, found {}",
                op.text(),
                v.kind.describe()
            ),
        )
    };
    let regex = |s: &str| {
        Regex::new(s).map(Value::Regex).map_err(|e| {
            let first = e.to_string();
            let last = first.lines().last().unwrap_or("").trim().to_string();
            err(col, format!("bad regex {s:?}: {last}"))
        })
    };
    let ordering = matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge);
    let matching = matches!(op, Op::Match | Op::NotMatch);
    match field {
        Field::Age => match (&v.kind, ordering) {
            (Tok::Duration(ms), true) => Ok(Value::Duration(*ms)),
            (Tok::Num(n), true) => Ok(Value::Duration((n * 1000.0).round() as i64)),
            (_, false) => Err(err(
                col - 1,
                format!("age compares with < <= > >=, not {}", op.text()),
            )),
            _ => Err(bad("a duration such as 10m")),
        },
        Field::Receives => match (&v.kind, matching) {
            (Tok::Num(n), false) => Ok(Value::Num(*n)),
            (_, true) => Err(err(col - 1, "receives compares numbers: = != < <= > >=")),
            _ => Err(bad("a number")),
        },
        Field::Json(_) => match (&v.kind, matching, ordering) {
            (Tok::Str(s), true, _) => regex(s),
            (Tok::Num(n), false, _) => Ok(Value::Num(*n)),
            (Tok::Str(s), false, false) => Ok(Value::Str(s.clone())),
            (Tok::Word(w), false, false) if w == "true" || w == "false" => {
                Ok(Value::Bool(w == "true"))
            }
            (Tok::Word(w), false, false) if w == "null" => Ok(Value::Null),
            _ if ordering => Err(bad("a number")),
            _ => Err(bad("a quoted string, a number, true, false or null")),
        },
        _ => match (&v.kind, ordering) {
            (_, true) => Err(err(col - 1, format!("{name} compares text: = != ~ !~"))),
            (Tok::Str(s), false) if matching => regex(s),
            (Tok::Str(s), false) => Ok(Value::Str(s.clone())),
            _ => Err(bad("a quoted string")),
        },
    }
}

// ---- evaluation ----

/// Text fields: `=`/`~` hold when any candidate text matches; `!=`/`!~` when none does.
fn texts(op: Op, v: &Value, candidates: &[&str]) -> bool {
    let any = candidates.iter().any(|c| match v {
        Value::Str(s) => c == s,
        Value::Regex(r) => r.is_match(c),
        _ => false,
    });
    if op.negated() {
        !any
    } else {
        any
    }
}

fn compare(
    f: &Field,
    op: Op,
    v: &Value,
    m: &Message,
    ctx: &EvalContext,
    json: &mut Option<Option<serde_json::Value>>,
) -> bool {
    match f {
        Field::Reason => {
            let r = signature::reason_texts(m, &ctx.signature);
            texts(
                op,
                v,
                &r.iter()
                    .map(std::convert::AsRef::as_ref)
                    .collect::<Vec<_>>(),
            )
        }
        Field::Signature => texts(op, v, &[&signature::signature(m, &ctx.signature).text]),
        Field::Origin => {
            let o = signature::origin(m);
            texts(op, v, &o.as_deref().into_iter().collect::<Vec<_>>())
        }
        Field::Key => texts(op, v, &m.key.as_deref().into_iter().collect::<Vec<_>>()),
        Field::Session => {
            let s = m
                .properties
                .iter()
                .find(|(k, _)| k == "SessionId")
                .map(|(_, v)| v.text());
            texts(op, v, &s.as_deref().into_iter().collect::<Vec<_>>())
        }
        Field::Id => texts(op, v, &[m.id.as_str()]),
        Field::Task => {
            let t = qdeck_backend::celery::task_name(m);
            texts(op, v, &t.as_deref().into_iter().collect::<Vec<_>>())
        }
        Field::Header(n) => texts(
            op,
            v,
            &signature::header(m, n)
                .as_deref()
                .into_iter()
                .collect::<Vec<_>>(),
        ),
        Field::Body => {
            let body = String::from_utf8_lossy(&m.body);
            texts(op, v, &[&body])
        }
        Field::Age => {
            let (Some(at), Value::Duration(d)) = (m.enqueued_ms, v) else {
                return false;
            };
            op.order((ctx.now_ms - at).cmp(d))
        }
        Field::Receives => {
            let (Some(n), Value::Num(x)) = (m.receive_count, v) else {
                return false;
            };
            (n as f64).partial_cmp(x).is_some_and(|o| op.order(o))
        }
        Field::Json(path) => {
            let doc = json.get_or_insert_with(|| serde_json::from_slice(&m.body).ok());
            let found = doc.as_ref().and_then(|d| lookup(d, path));
            if let Value::Num(x) = v {
                // A missing path or a value that is no number only satisfies `!=`.
                return match found
                    .and_then(serde_json::Value::as_f64)
                    .and_then(|n| n.partial_cmp(x))
                {
                    Some(o) => op.order(o),
                    None => op == Op::Ne,
                };
            }
            let hit = found.is_some_and(|j| match v {
                Value::Str(s) => j.as_str() == Some(s.as_str()),
                Value::Bool(b) => j.as_bool() == Some(*b),
                Value::Null => j.is_null(),
                Value::Regex(r) => match j {
                    serde_json::Value::String(s) => r.is_match(s),
                    other => r.is_match(&other.to_string()),
                },
                Value::Num(_) | Value::Duration(_) => false,
            });
            hit != op.negated()
        }
    }
}

fn lookup<'a>(v: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(v, |cur, seg| match cur {
        serde_json::Value::Object(o) => o.get(seg),
        serde_json::Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::domain::{DeadLetterInfo, QueueId};

    fn msg() -> Message {
        Message {
            id: "m-1".into(),
            enqueued_ms: Some(1_000_000 - 15 * 60_000),
            receive_count: Some(4),
            key: Some("cust-7".into()),
            headers: vec![
                ("x-tenant".into(), "acme".into()),
                ("Region".into(), "eu".into()),
                ("n".into(), qdeck_model::domain::Value::I32(7)),
                ("x-exception-message".into(), "order 42 failed: timeout".into()),
            ],
            body: br#"{"order":{"id":"o-9","total":120.5,"paid":false,"lines":[{"sku":"A1"}]},"note":null}"#
                .to_vec(),
            dead_letter: Some(DeadLetterInfo {
                reason: Some("rejected".into()),
                origin: Some(QueueId::new("orders")),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ctx() -> EvalContext {
        EvalContext {
            now_ms: 1_000_000,
            signature: SignatureConfig::default(),
        }
    }

    fn t(src: &str) -> bool {
        Predicate::parse(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .matches(&msg(), &ctx())
    }

    fn e(src: &str) -> PredicateError {
        Predicate::parse(src).expect_err(src)
    }

    #[test]
    fn text_fields() {
        assert!(t(r#"reason = "rejected""#));
        assert!(t(r#"reason = "order 42 failed: timeout""#));
        assert!(!t(r#"reason = "expired""#));
        assert!(t(r#"reason != "expired""#));
        assert!(t(r#"signature ~ "order <n> failed""#));
        assert!(t(r#"signature = "rejected: order <n> failed: timeout""#));
        assert!(t(r#"origin = "orders" and key = "cust-7" and id = "m-1""#));
        assert!(t(r#"key ~ "^cust-\d+$""#));
        // The key under the name SQS FIFO gives it.
        assert!(t(r#"group = "cust-7" and group != "cust-8""#));
        assert!(e("group.id = \"x\"")
            .to_string()
            .contains("has no sub-fields"));
    }

    #[test]
    fn session_is_the_service_bus_session_id() {
        let mut m = msg();
        let p = |src: &str, m: &Message| Predicate::parse(src).unwrap().matches(m, &ctx());
        assert!(!p(r#"session = "cust-7""#, &m), "the key is not a session");
        assert!(p(r#"session != "s-1""#, &m));
        m.properties.push(("SessionId".into(), "s-1".into()));
        assert!(p(r#"session = "s-1""#, &m));
        assert!(p(r#"session ~ "^s-""#, &m));
    }

    #[test]
    fn headers_ignore_case_and_sqs_prefix_and_missing_ones_only_satisfy_negations() {
        assert!(t(r#"header.x-tenant = "acme""#));
        assert!(t(r#"header.X-Tenant = "acme""#));
        assert!(t(r#"header.region = "eu""#));
        // The prefix earlier versions showed SQS attributes under still finds them.
        assert!(t(r#"header.attr.Region = "eu""#));
        // A typed value compares as its text.
        assert!(t(r#"header.n = "7""#));
        assert!(!t(r#"header.x-missing = "x""#));
        assert!(t(r#"header.x-missing != "x""#));
        assert!(!t(r#"header.x-missing ~ ".*""#));
        assert!(t(r#"header.x-missing !~ ".*""#));
    }

    #[test]
    fn body_and_json() {
        assert!(t(r#"body ~ "\"sku\":\"A1\"""#));
        assert!(!t(r#"body = "x""#));
        assert!(t(r#"json.order.id = "o-9""#));
        assert!(t("json.order.total > 100"));
        assert!(t("json.order.total = 120.5"));
        assert!(!t("json.order.total < 100"));
        assert!(t("json.order.paid = false"));
        assert!(t("json.note = null"));
        assert!(t(r#"json.order.lines.0.sku = "A1""#));
        assert!(t(r#"json.order.id ~ "^o-""#));
        assert!(!t("json.order.missing = 1"));
        assert!(t("json.order.missing != 1"));
        assert!(t(r#"json.order.id != "o-1""#));
        // A body that is not JSON matches no path.
        let mut m = msg();
        m.body = b"\xff\x00 not json".to_vec();
        let p = Predicate::parse(r#"json.a = "b""#).unwrap();
        assert!(!p.matches(&m, &ctx()));
        let p = Predicate::parse(r#"body ~ "not json""#).unwrap();
        assert!(p.matches(&m, &ctx()));
    }

    #[test]
    fn age_and_receives() {
        assert!(t("age > 10m"));
        assert!(t("age < 1h"));
        assert!(!t("age > 2h"));
        assert!(t("age >= 900s"));
        assert!(t("age > 899999ms"));
        assert!(t("receives >= 3"));
        assert!(t("receives = 4"));
        assert!(!t("receives > 4"));
        let mut m = msg();
        m.enqueued_ms = None;
        m.receive_count = None;
        assert!(!Predicate::parse("age > 0s").unwrap().matches(&m, &ctx()));
        assert!(!Predicate::parse("receives >= 0")
            .unwrap()
            .matches(&m, &ctx()));
    }

    #[test]
    fn boolean_logic_and_precedence() {
        assert!(t(r#"reason = "x" or reason = "rejected" and receives = 4"#));
        // `and` binds tighter: false or (true and false) = false.
        assert!(!t(
            r#"reason = "x" or reason = "rejected" and receives = 5"#
        ));
        assert!(t(
            r#"(reason = "x" or reason = "rejected") and not receives = 5"#
        ));
        assert!(t(r#"not not reason = "rejected""#));
        assert!(t(r#"NOT (header.x-tenant = "other") AND receives > 1"#));
        assert!(t(r#"reason = 'rejected'"#));
        assert!(t(r#"body ~ "\\{""#));
    }

    #[test]
    fn errors_name_the_column() {
        let x = e(r#"reason = "a" and foo = "b""#);
        assert_eq!(x.column, 18);
        assert!(x.message.contains("unknown field \"foo\""), "{x}");
        assert!(x.message.contains("header.NAME"), "{x}");
        let x = e(r#"reason = "a" and"#);
        assert_eq!(x.column, 17);
        assert!(x.message.contains("expected a field at the end"), "{x}");
        let x = e(r#"reason "a""#);
        assert_eq!(x.column, 8);
        let x = e(r#"reason = "unclosed"#);
        assert_eq!((x.column, x.message.as_str()), (10, "string is not closed"));
        let x = e(r#"(reason = "a""#);
        assert_eq!(x.column, 1);
        assert!(x.message.contains("not closed"));
        let x = e(r#"reason = "a")"#);
        assert_eq!(x.column, 13);
        let x = e(r#"body ~ "(""#);
        assert_eq!(x.column, 8);
        assert!(x.message.starts_with("bad regex"), "{x}");
        let x = e("age = 10m");
        assert!(x.message.contains("< <= > >="), "{x}");
        let x = e("age > 10y");
        assert_eq!(x.column, 9);
        assert!(x.message.contains("unknown unit"), "{x}");
        let x = e(r#"receives > "3""#);
        assert!(x.message.contains("needs a number"), "{x}");
        let x = e("reason = 3");
        assert!(x.message.contains("quoted string"), "{x}");
        assert!(e("header = \"x\"").message.contains("header.NAME"));
        assert!(e("json = 1").message.contains("json.a.b"));
        assert!(e("reason.x = \"y\"").message.contains("no sub-fields"));
        assert_eq!(e("reason = \"a\" # b").column, 14);
        assert_eq!(e("").message, "expected a field at the end");
        assert_eq!(
            e("reason = \"a\" and foo = \"b\"").to_string(),
            "column 18: unknown field \"foo\" (fields: reason, signature, origin, key, session, group, id, task, header.NAME, body, json.PATH, age, receives)"
        );
    }

    #[test]
    fn task_reads_the_celery_header_then_the_protocol_1_body() {
        let mut m = msg();
        m.headers.push(("task".into(), "billing.charge".into()));
        let p = Predicate::parse(r#"task = "billing.charge""#).unwrap();
        assert!(p.matches(&m, &ctx()));
        assert!(!p.matches(&msg(), &ctx()));
        assert!(Predicate::parse(r#"task != "billing.charge""#)
            .unwrap()
            .matches(&msg(), &ctx()));
        let mut v1 = msg();
        v1.headers.clear();
        v1.body = br#"{"task":"billing.charge","id":"1","args":[]}"#.to_vec();
        assert!(p.matches(&v1, &ctx()));
        assert!(Predicate::parse(r#"task ~ "^billing\.""#)
            .unwrap()
            .matches(&v1, &ctx()));
    }

    #[test]
    fn source_is_kept_for_the_audit_log() {
        let p = Predicate::parse("  receives >= 3 ").unwrap();
        assert_eq!(p.source(), "receives >= 3");
        assert_eq!(p.to_string(), "receives >= 3");
    }
}
