//! SQS message attributes as typed values and back: `String`, `Number` and `Binary`, each
//! with an optional custom type suffix (`Number.float`) that travels with the value, so a
//! copy, edit or import sends the data type it read.

use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;

use crate::{BackendError, Result};
use qdeck_model::domain::Value;

/// An attribute as a typed value.
pub fn to_value(v: &MessageAttributeValue) -> Value {
    let ty = v.data_type();
    let base = ty.split('.').next().unwrap_or(ty);
    let value = match (base, v.string_value(), v.binary_value()) {
        ("Number", Some(s), _) => Value::Number(s.to_string()),
        ("Binary", _, Some(b)) => Value::Bytes(b.as_ref().to_vec()),
        (_, Some(s), _) => Value::String(s.to_string()),
        (_, None, Some(b)) => Value::Bytes(b.as_ref().to_vec()),
        (_, None, None) => Value::String(String::new()),
    };
    if ty == base && matches!(base, "String" | "Number" | "Binary") {
        value
    } else {
        Value::Custom {
            data_type: ty.to_string(),
            value: Box::new(value),
        }
    }
}

/// The data type and payload a typed value is sent as. Values SQS has no type for go as the
/// nearest one: machine numbers as `Number`, booleans, times, tables and arrays as `String`
/// text (a copy from another broker lists those as changed).
fn wire(v: &Value) -> (String, Payload) {
    match v {
        Value::String(s) => ("String".into(), Payload::Text(s.clone())),
        Value::Number(n) => ("Number".into(), Payload::Text(n.clone())),
        Value::Bytes(b) => ("Binary".into(), Payload::Bytes(b.clone())),
        Value::Custom { data_type, value } => (data_type.clone(), wire(value).1),
        v if v.is_machine_number() || matches!(v, Value::Decimal { .. }) => {
            ("Number".into(), Payload::Text(v.text()))
        }
        other => ("String".into(), Payload::Text(other.text())),
    }
}

enum Payload {
    Text(String),
    Bytes(Vec<u8>),
}

/// The attribute to send, and the bytes it adds to a request (SQS counts name, type and value
/// toward the 256 KiB message limit).
pub fn to_attribute(name: &str, v: &Value) -> Result<(MessageAttributeValue, usize)> {
    let (ty, payload) = wire(v);
    let mut size = name.len() + ty.len();
    let b = MessageAttributeValue::builder().data_type(ty);
    let b = match payload {
        Payload::Text(s) => {
            size += s.len();
            b.string_value(s)
        }
        Payload::Bytes(bytes) => {
            size += bytes.len();
            b.binary_value(Blob::new(bytes))
        }
    };
    let attr = b
        .build()
        .map_err(|e| BackendError::Invalid(format!("attribute {name}: {e}")))?;
    Ok((attr, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: &str, s: Option<&str>, b: Option<&[u8]>) -> MessageAttributeValue {
        let mut a = MessageAttributeValue::builder().data_type(ty);
        if let Some(s) = s {
            a = a.string_value(s);
        }
        if let Some(b) = b {
            a = a.binary_value(Blob::new(b.to_vec()));
        }
        a.build().unwrap()
    }

    #[test]
    fn every_data_type_comes_back_as_it_went() {
        for a in [
            attr("String", Some("acme"), None),
            attr("Number", Some("12345678901234567890.5"), None),
            attr("Binary", None, Some(&[0, 1, 255])),
            attr("Number.float", Some("1.5"), None),
            attr("String.json", Some("{}"), None),
            attr("Binary.png", None, Some(&[137, 80])),
        ] {
            let v = to_value(&a);
            let (back, _) = to_attribute("x", &v).unwrap();
            assert_eq!(back, a, "{v:?}");
        }
    }

    #[test]
    fn machine_numbers_go_as_numbers_and_the_rest_as_text() {
        let (a, _) = to_attribute("n", &Value::I32(7)).unwrap();
        assert_eq!((a.data_type(), a.string_value()), ("Number", Some("7")));
        let (a, _) = to_attribute("b", &Value::Bool(true)).unwrap();
        assert_eq!((a.data_type(), a.string_value()), ("String", Some("true")));
    }
}
