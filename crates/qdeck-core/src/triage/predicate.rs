//! A small predicate language to select messages:
//!
//! ```text
//! reason = "rejected" and header.x-tenant = "acme"
//! signature ~ "timeout" or (json.order.total > 100 and age > 10m)
//! not body ~ "^\{" and receives >= 3 and origin = "orders"
//! ```
//!
//! Fields: `reason` (any recorded reason or error text), `signature` (the normalised text
//! `qdeck reasons` shows), `origin`, `key`, `id`, `header.NAME` (case-insensitive; SQS
//! attributes match without their `attr.` prefix), `body`, `json.a.b` (a path into a JSON body;
//! numeric segments index arrays), `age` (since enqueue), `receives` (receive/delivery count).
//! Operators: `=`, `!=`, `~` (regex), `!~`, and `<`, `<=`, `>`, `>=` for `age`, `receives` and
//! numbers in `json`. Values: "quoted strings" (`\"` and `\\` escape), numbers, durations
//! (`500ms`, `30s`, `10m`, `2h`, `1d`), and `true`/`false`/`null` for `json`. Combine with
//! `and`, `or`, `not` and parentheses; `and` binds tighter than `or`. A missing header, path
//! or figure matches no comparison except `!=`/`!~`.

use std::fmt;

use regex::Regex;

use super::signature::{self, SignatureConfig};
use crate::domain::Message;

/// A parse error at a column (1-based, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for PredicateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for PredicateError {}

const FIELDS: &str =
    "reason, signature, origin, key, id, header.NAME, body, json.PATH, age, receives";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Match,
    NotMatch,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Match => "~",
            Op::NotMatch => "!~",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    fn negated(self) -> bool {
        matches!(self, Op::Ne | Op::NotMatch)
    }

    fn order(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => o == Equal,
            Op::Ne => o != Equal,
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
            Op::Match | Op::NotMatch => false,
        }
    }
}

#[derive(Debug, Clone)]
enum Field {
    Reason,
    Signature,
    Origin,
    Key,
    Id,
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

#[derive(Debug, Clone)]
enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(Field, Op, Value),
}

/// A parsed predicate, ready to test messages.
#[derive(Debug, Clone)]
pub struct Predicate {
    source: String,
    expr: Expr,
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
            now_ms: crate::domain::now_ms(),
            signature,
        }
    }
}

impl Predicate {
    pub fn parse(text: &str) -> Result<Predicate, PredicateError> {
        let tokens = lex(text)?;
        let mut p = Parser {
            tokens,
            pos: 0,
            end: text.chars().count() + 1,
        };
        let expr = p.or()?;
        if let Some(t) = p.peek() {
            return Err(err(t.col, format!("unexpected {}", t.kind.describe())));
        }
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
        eval(&self.expr, m, ctx, &mut None)
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn err(column: usize, message: impl Into<String>) -> PredicateError {
    PredicateError {
        column,
        message: message.into(),
    }
}

// ---- lexer ----

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Num(f64),
    Duration(i64),
    Op(Op),
    LParen,
    RParen,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("{w:?}"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Num(n) => format!("number {n}"),
            Tok::Duration(_) => "a duration".to_string(),
            Tok::Op(o) => format!("operator {:?}", o.text()),
            Tok::LParen => "\"(\"".to_string(),
            Tok::RParen => "\")\"".to_string(),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Tok,
    col: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '$' | '/')
}

fn lex(text: &str) -> Result<Vec<Token>, PredicateError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if let Some((op, n)) = operator_at(&chars, i) {
            out.push(Token {
                kind: Tok::Op(op),
                col,
            });
            i += n;
            continue;
        }
        let (kind, next) = match c {
            '(' => (Tok::LParen, i + 1),
            ')' => (Tok::RParen, i + 1),
            '"' | '\'' => {
                let (s, next) = string_at(&chars, i)?;
                (Tok::Str(s), next)
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                number_at(&chars, i)?
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut end = i;
                while end < chars.len() && is_word_char(chars[end]) {
                    end += 1;
                }
                (Tok::Word(chars[i..end].iter().collect()), end)
            }
            other => return Err(err(col, format!("unexpected character {other:?}"))),
        };
        out.push(Token { kind, col });
        i = next;
    }
    Ok(out)
}

/// The operator at `chars[i]` and its length in characters.
fn operator_at(chars: &[char], i: usize) -> Option<(Op, usize)> {
    let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
    match two.as_str() {
        "!=" => Some((Op::Ne, 2)),
        "!~" => Some((Op::NotMatch, 2)),
        "<=" => Some((Op::Le, 2)),
        ">=" => Some((Op::Ge, 2)),
        "==" => Some((Op::Eq, 2)),
        _ => match chars[i] {
            '=' => Some((Op::Eq, 1)),
            '~' => Some((Op::Match, 1)),
            '<' => Some((Op::Lt, 1)),
            '>' => Some((Op::Gt, 1)),
            _ => None,
        },
    }
}

/// The string quoted at `chars[start]` (a backslash escapes the quote and itself), and the
/// index past its closing quote.
fn string_at(chars: &[char], start: usize) -> Result<(String, usize), PredicateError> {
    let quote = chars[start];
    let mut s = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err(err(start + 1, "string is not closed")),
            Some('\\') if matches!(chars.get(i + 1), Some(&q) if q == quote || q == '\\') => {
                s.push(chars[i + 1]);
                i += 2;
            }
            Some(&q) if q == quote => return Ok((s, i + 1)),
            Some(&ch) => {
                s.push(ch);
                i += 1;
            }
        }
    }
}

/// The number at `chars[start]`, a duration when a unit follows it, and the index past it.
fn number_at(chars: &[char], start: usize) -> Result<(Tok, usize), PredicateError> {
    let col = start + 1;
    let mut i = start + 1;
    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
        i += 1;
    }
    let num: String = chars[start..i].iter().collect();
    let ustart = i;
    while i < chars.len() && chars[i].is_ascii_alphabetic() {
        i += 1;
    }
    let unit: String = chars[ustart..i].iter().collect();
    let n: f64 = num
        .parse()
        .map_err(|_| err(col, format!("{num:?} is not a number")))?;
    if unit.is_empty() {
        return Ok((Tok::Num(n), i));
    }
    let per = match unit.as_str() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => {
            return Err(err(
                ustart + 1,
                format!("unknown unit {unit:?} (use ms, s, m, h or d)"),
            ))
        }
    };
    Ok((Tok::Duration((n * per).round() as i64), i))
}

// ---- parser ----

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Column just past the end, for "expected … at the end".
    end: usize,
}

fn is_keyword(t: &Token, k: &str) -> bool {
    matches!(&t.kind, Tok::Word(w) if w.eq_ignore_ascii_case(k))
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self, what: &str) -> Result<Token, PredicateError> {
        let t = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or_else(|| err(self.end, format!("expected {what} at the end")))?;
        self.pos += 1;
        Ok(t)
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        if self.peek().is_some_and(|t| is_keyword(t, k)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, PredicateError> {
        let mut e = self.and()?;
        while self.eat_keyword("or") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, PredicateError> {
        let mut e = self.unary()?;
        while self.eat_keyword("and") {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, PredicateError> {
        if self.eat_keyword("not") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.peek().is_some_and(|t| t.kind == Tok::LParen) {
            let open = self.next("(")?;
            let e = self.or()?;
            match self.peek() {
                Some(t) if t.kind == Tok::RParen => {
                    self.pos += 1;
                    Ok(e)
                }
                Some(t) => Err(err(
                    t.col,
                    format!("expected \")\" but found {}", t.kind.describe()),
                )),
                None => Err(err(open.col, "this \"(\" is not closed")),
            }
        } else {
            self.comparison()
        }
    }

    fn comparison(&mut self) -> Result<Expr, PredicateError> {
        let t = self.next("a field")?;
        let Tok::Word(word) = &t.kind else {
            return Err(err(
                t.col,
                format!(
                    "expected a field ({FIELDS}) but found {}",
                    t.kind.describe()
                ),
            ));
        };
        let field = field(word, t.col)?;
        let o = self.next("an operator")?;
        let Tok::Op(op) = o.kind else {
            return Err(err(
                o.col,
                format!(
                    "expected an operator (= != ~ !~ < <= > >=) after {word:?} but found {}",
                    o.kind.describe()
                ),
            ));
        };
        let v = self.next("a value")?;
        let value = value(&field, word, op, v)?;
        Ok(Expr::Cmp(field, op, value))
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
        "key" => simple(Field::Key),
        "id" => simple(Field::Id),
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

fn value(field: &Field, name: &str, op: Op, v: Token) -> Result<Value, PredicateError> {
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

fn eval(
    e: &Expr,
    m: &Message,
    ctx: &EvalContext,
    json: &mut Option<Option<serde_json::Value>>,
) -> bool {
    match e {
        Expr::And(a, b) => eval(a, m, ctx, json) && eval(b, m, ctx, json),
        Expr::Or(a, b) => eval(a, m, ctx, json) || eval(b, m, ctx, json),
        Expr::Not(a) => !eval(a, m, ctx, json),
        Expr::Cmp(f, op, v) => compare(f, *op, v, m, ctx, json),
    }
}

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
        Field::Id => texts(op, v, &[m.id.as_str()]),
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
    use crate::domain::{DeadLetterInfo, QueueId};

    fn msg() -> Message {
        Message {
            id: "m-1".into(),
            enqueued_ms: Some(1_000_000 - 15 * 60_000),
            receive_count: Some(4),
            key: Some("cust-7".into()),
            headers: vec![
                ("x-tenant".into(), "acme".into()),
                ("Region".into(), "eu".into()),
                ("n".into(), crate::domain::Value::I32(7)),
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
            "column 18: unknown field \"foo\" (fields: reason, signature, origin, key, id, header.NAME, body, json.PATH, age, receives)"
        );
    }

    #[test]
    fn source_is_kept_for_the_audit_log() {
        let p = Predicate::parse("  receives >= 3 ").unwrap();
        assert_eq!(p.source(), "receives >= 3");
        assert_eq!(p.to_string(), "receives >= 3");
    }
}
