//! A typed property or header value, broker-neutral: AMQP field values (every integer width,
//! decimals, timestamps, byte arrays, nested tables), SQS typed attributes (with custom type
//! suffixes) and Service Bus custom properties all map into it and back out of it unchanged.
//!
//! One serde encoding serves the export file (JSON) and the edit file (TOML), so a user reads
//! the same thing in both: strings, booleans, 64-bit integers, doubles, arrays and tables are
//! written as themselves; every other type is a one-key table whose key is `$` and the type
//! name (`{"$i32": 7}`, `{"$bytes": "aGk="}`, `{"$timestamp": 1700000000}`), so nothing is
//! flattened into text and an untyped hand-written value still reads as the obvious type.

use std::fmt;

use base64::Engine;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// AMQP void.
    Null,
    Bool(bool),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    /// AMQP decimal: `value × 10^-scale`.
    Decimal {
        scale: u8,
        value: u32,
    },
    String(String),
    Bytes(Vec<u8>),
    /// AMQP timestamp: seconds since the Unix epoch.
    Timestamp(u64),
    Array(Vec<Value>),
    Table(Vec<(String, Value)>),
    /// SQS `Number`: kept as the decimal text it was sent as (up to 38 digits, more than any
    /// machine number holds).
    Number(String),
    /// A value under an application-defined type name (SQS `Number.float`, `String.json`,
    /// `Binary.png`): the name travels with it so the target gets the same data type.
    Custom {
        data_type: String,
        value: Box<Value>,
    },
}

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// The value as display text (views, predicates, reason signatures). Broker text passes
    /// through unchanged: the views escape it. Byte arrays show as hex.
    pub fn text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::I8(n) => n.to_string(),
            Value::U8(n) => n.to_string(),
            Value::I16(n) => n.to_string(),
            Value::U16(n) => n.to_string(),
            Value::I32(n) => n.to_string(),
            Value::U32(n) => n.to_string(),
            Value::I64(n) => n.to_string(),
            Value::F32(n) => n.to_string(),
            Value::F64(n) => n.to_string(),
            Value::Decimal { scale, value } => decimal_text(*scale, *value),
            Value::String(s) | Value::Number(s) => s.clone(),
            Value::Bytes(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
            Value::Timestamp(t) => {
                chrono::DateTime::from_timestamp(i64::try_from(*t).unwrap_or(i64::MAX), 0)
                    .map_or_else(|| t.to_string(), |d| d.to_rfc3339())
            }
            Value::Array(a) => {
                let parts: Vec<String> = a.iter().map(Value::text).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Table(t) => {
                let parts: Vec<String> = t
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.text()))
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
            Value::Custom { value, .. } => value.text(),
        }
    }

    /// The type's name as the export and edit files write it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::I8(_) => "i8",
            Value::U8(_) => "u8",
            Value::I16(_) => "i16",
            Value::U16(_) => "u16",
            Value::I32(_) => "i32",
            Value::U32(_) => "u32",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Decimal { .. } => "decimal",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Timestamp(_) => "timestamp",
            Value::Array(_) => "array",
            Value::Table(_) => "table",
            Value::Number(_) => "number",
            Value::Custom { .. } => "custom",
        }
    }

    /// The value as an integer, whatever its width (for counts kept in headers).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I8(n) => Some(i64::from(*n)),
            Value::U8(n) => Some(i64::from(*n)),
            Value::I16(n) => Some(i64::from(*n)),
            Value::U16(n) => Some(i64::from(*n)),
            Value::I32(n) => Some(i64::from(*n)),
            Value::U32(n) => Some(i64::from(*n)),
            Value::I64(n) => Some(*n),
            Value::Timestamp(n) => i64::try_from(*n).ok(),
            Value::String(s) | Value::Number(s) => s.trim().parse().ok(),
            Value::Custom { value, .. } => value.as_i64(),
            _ => None,
        }
    }

    /// A machine number: an integer of any width or a float (not a decimal or a number kept
    /// as text).
    pub fn is_machine_number(&self) -> bool {
        matches!(
            self,
            Value::I8(_)
                | Value::U8(_)
                | Value::I16(_)
                | Value::U16(_)
                | Value::I32(_)
                | Value::U32(_)
                | Value::I64(_)
                | Value::F32(_)
                | Value::F64(_)
        )
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::Custom { value, .. } => value.as_str(),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

fn decimal_text(scale: u8, value: u32) -> String {
    if scale == 0 {
        return value.to_string();
    }
    let digits = format!("{value:0>width$}", width = usize::from(scale) + 1);
    let (int, frac) = digits.split_at(digits.len() - usize::from(scale));
    format!("{int}.{frac}")
}

fn parse_decimal(s: &str) -> Option<(u8, u32)> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let scale = u8::try_from(frac.len()).ok()?;
    let value = format!("{int}{frac}").parse::<u32>().ok()?;
    Some((scale, value))
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A one-key map `{"$TAG": payload}`.
fn tagged<S: Serializer, T: Serialize + ?Sized>(s: S, tag: &str, v: &T) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(1))?;
    m.serialize_entry(&format!("${tag}"), v)?;
    m.end()
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::String(v) => s.serialize_str(v),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::I64(v) => s.serialize_i64(*v),
            Value::F64(v) if v.is_finite() => s.serialize_f64(*v),
            Value::F64(v) => tagged(s, "f64", &v.to_string()),
            Value::Array(a) => {
                let mut q = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    q.serialize_element(v)?;
                }
                q.end()
            }
            // A table whose own keys look like a tag is wrapped, so it reads back as a table.
            Value::Table(t) if t.iter().any(|(k, _)| k.starts_with('$')) => {
                tagged(s, "table", &TableRef(t))
            }
            Value::Table(t) => TableRef(t).serialize(s),
            Value::Null => tagged(s, "null", &true),
            Value::I8(v) => tagged(s, "i8", v),
            Value::U8(v) => tagged(s, "u8", v),
            Value::I16(v) => tagged(s, "i16", v),
            Value::U16(v) => tagged(s, "u16", v),
            Value::I32(v) => tagged(s, "i32", v),
            Value::U32(v) => tagged(s, "u32", v),
            Value::F32(v) if v.is_finite() => tagged(s, "f32", v),
            Value::F32(v) => tagged(s, "f32", &v.to_string()),
            Value::Decimal { scale, value } => tagged(s, "decimal", &decimal_text(*scale, *value)),
            Value::Bytes(b) => tagged(s, "bytes", &b64().encode(b)),
            Value::Timestamp(t) => tagged(s, "timestamp", t),
            Value::Number(n) => tagged(s, "number", n),
            Value::Custom { data_type, value } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("$custom", data_type)?;
                m.serialize_entry("value", value)?;
                m.end()
            }
        }
    }
}

struct TableRef<'a>(&'a [(String, Value)]);

impl Serialize for TableRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a header value: text, number, boolean, array, table or {\"$type\": value}")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        i64::try_from(v)
            .map(Value::I64)
            .map_err(|_| E::custom(format!("{v} is too large for a 64-bit integer; write {{\"$u64\"…}} as {{\"$number\": \"{v}\"}}")))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::F64(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = a.next_element::<Value>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let Some(first) = m.next_key::<String>()? else {
            return Ok(Value::Table(Vec::new()));
        };
        if let Some(tag) = first.strip_prefix('$') {
            return tagged_value(tag, &mut m);
        }
        let mut out = vec![(first, m.next_value::<Value>()?)];
        while let Some((k, v)) = m.next_entry::<String, Value>()? {
            out.push((k, v));
        }
        Ok(Value::Table(out))
    }
}

/// A table read as it stands: its keys are names, even those that look like a tag.
struct RawTable(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for RawTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawTable, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTable;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RawTable, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(RawTable(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn tagged_value<'de, A: MapAccess<'de>>(tag: &str, m: &mut A) -> Result<Value, A::Error> {
    use de::Error;
    let bad = |what: &str| A::Error::custom(format!("\"${tag}\": {what}"));
    let int = |v: Value| v.as_i64().ok_or_else(|| bad("expected an integer"));
    let v = match tag {
        "custom" => {
            let data_type: String = m.next_value()?;
            let Some((_, value)) = m.next_entry::<String, Value>()? else {
                return Err(bad("a custom type needs its \"value\""));
            };
            return Ok(Value::Custom {
                data_type,
                value: Box::new(value),
            });
        }
        "null" => {
            m.next_value::<de::IgnoredAny>()?;
            Value::Null
        }
        "i8" => Value::I8(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "u8" => Value::U8(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "i16" => Value::I16(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "u16" => Value::U16(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "i32" => Value::I32(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "u32" => Value::U32(int(m.next_value()?)?.try_into().map_err(|_| bad("out of range"))?),
        "i64" => Value::I64(int(m.next_value()?)?),
        "f32" | "f64" => {
            let x = match m.next_value::<Value>()? {
                Value::F64(x) => x,
                Value::I64(n) => n as f64,
                Value::String(s) => s.parse().map_err(|_| bad("expected a number"))?,
                _ => return Err(bad("expected a number")),
            };
            if tag == "f32" {
                Value::F32(x as f32)
            } else {
                Value::F64(x)
            }
        }
        "decimal" => {
            let s: String = m.next_value()?;
            let (scale, value) = parse_decimal(&s).ok_or_else(|| bad("expected digits like \"12.50\""))?;
            Value::Decimal { scale, value }
        }
        "bytes" => {
            let s: String = m.next_value()?;
            Value::Bytes(b64().decode(s).map_err(|_| bad("expected base64"))?)
        }
        "timestamp" => Value::Timestamp(
            u64::try_from(int(m.next_value()?)?).map_err(|_| bad("before 1970"))?,
        ),
        "number" => Value::Number(match m.next_value::<Value>()? {
            Value::String(s) => s,
            Value::I64(n) => n.to_string(),
            Value::F64(x) => x.to_string(),
            _ => return Err(bad("expected a number or its text")),
        }),
        "table" => Value::Table(m.next_value::<RawTable>()?.0),
        "string" => Value::String(m.next_value()?),
        other => {
            return Err(A::Error::custom(format!(
                "unknown value type \"${other}\" (known: $i8 $u8 $i16 $u16 $i32 $u32 $i64 $f32 $f64 $decimal $bytes $timestamp $number $custom $table $null)"
            )))
        }
    };
    if m.next_key::<de::IgnoredAny>()?.is_some() {
        return Err(bad("a typed value is a table with that one key"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_type() -> Vec<(String, Value)> {
        let nested = Value::Table(vec![
            ("a".into(), Value::I32(1)),
            ("b".into(), Value::str("two")),
            (
                "deep".into(),
                Value::Table(vec![("$odd".into(), Value::Bool(false))]),
            ),
        ]);
        vec![
            ("s".into(), Value::str("text")),
            ("b".into(), Value::Bool(true)),
            ("n".into(), Value::I64(-7)),
            ("x".into(), Value::F64(1.5)),
            ("null".into(), Value::Null),
            ("i8".into(), Value::I8(-8)),
            ("u8".into(), Value::U8(250)),
            ("i16".into(), Value::I16(-300)),
            ("u16".into(), Value::U16(65000)),
            ("i32".into(), Value::I32(7)),
            ("u32".into(), Value::U32(4_000_000_000)),
            ("f32".into(), Value::F32(0.25)),
            (
                "dec".into(),
                Value::Decimal {
                    scale: 2,
                    value: 1250,
                },
            ),
            ("bytes".into(), Value::Bytes(vec![0, 255, 10])),
            ("ts".into(), Value::Timestamp(1_700_000_000)),
            (
                "arr".into(),
                Value::Array(vec![Value::I32(1), Value::str("x")]),
            ),
            ("table".into(), nested),
            (
                "num".into(),
                Value::Number("12345678901234567890123".into()),
            ),
            (
                "custom".into(),
                Value::Custom {
                    data_type: "Number.float".into(),
                    value: Box::new(Value::Number("1.5".into())),
                },
            ),
        ]
    }

    #[test]
    fn every_type_round_trips_through_json_and_toml() {
        let t = Value::Table(every_type());
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), t, "{json}");
        // Inline, as the edit file writes each field on its line.
        let text = format!("h = {}\n", toml::Value::try_from(&t).unwrap());
        let back: std::collections::BTreeMap<String, Value> = toml::from_str(&text).unwrap();
        let Value::Table(mut got) = back["h"].clone() else {
            panic!("{text}")
        };
        let mut want = every_type();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want, "{text}");
    }

    #[test]
    fn plain_values_are_written_as_themselves() {
        let v = Value::Table(vec![
            ("n".into(), Value::I64(7)),
            ("flag".into(), Value::Bool(true)),
            ("w".into(), Value::I32(7)),
        ]);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"n":7,"flag":true,"w":{"$i32":7}}"#
        );
    }

    #[test]
    fn bad_typed_values_are_errors_naming_the_type() {
        for (json, want) in [
            (r#"{"$u8": 300}"#, "out of range"),
            (r#"{"$bytes": "!!"}"#, "base64"),
            (r#"{"$decimal": "1.2.3"}"#, "digits"),
            (r#"{"$nope": 1}"#, "unknown value type"),
            (r#"{"$i32": 1, "x": 2}"#, "one key"),
        ] {
            let e = serde_json::from_str::<Value>(json).unwrap_err().to_string();
            assert!(e.contains(want), "{json}: {e}");
        }
    }

    #[test]
    fn text_is_what_the_views_show() {
        assert_eq!(Value::Decimal { scale: 2, value: 5 }.text(), "0.05");
        assert_eq!(Value::Bytes(vec![0xab, 1]).text(), "ab01");
        assert_eq!(
            Value::Table(vec![
                ("a".into(), Value::I32(1)),
                ("b".into(), Value::str("two"))
            ])
            .text(),
            "{a: 1, b: two}"
        );
    }
}
