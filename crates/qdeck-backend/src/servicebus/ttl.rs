//! A message's `TimeToLive` between qdeck's typed values and Service Bus's two transports.
//!
//! Service Bus keeps it as a .NET `TimeSpan` (100 ns ticks). REST writes it in
//! `BrokerProperties` as seconds, a JSON number that is a float whenever it is not whole; the
//! default, `TimeSpan.MaxValue`, arrives as 922337203685.4775 and means "not set" (the entity's
//! default applies). AMQP carries it in the header as a `uint` of milliseconds, so it cannot
//! say more than 4294967.295 s (about 49.7 days) nor less than a millisecond.
//!
//! Every conversion here is total: a value that cannot be represented is an error that names
//! the property, never a zero (a TTL of 0 makes Azure refuse the message or expire it at once).

use super::BackendError;
use qdeck_model::domain::Value;

/// `TimeSpan.MaxValue` in seconds as REST reports it; anything from here up is "not set".
/// (The exact figure is 922337203685.4775807; a double reads it as ...4775.)
pub const NOT_SET_FROM_SECS: f64 = 922_337_203_685.0;

/// The longest TTL an AMQP header holds, in milliseconds.
pub const AMQP_MAX_MS: u64 = u32::MAX as u64;

/// A TTL a message can be sent with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ttl {
    /// No TTL of the message's own: the entity's default applies.
    NotSet,
    /// Seconds, as given (whole or not), above zero.
    Secs(f64),
}

fn bad(v: &Value, why: &str) -> BackendError {
    BackendError::Invalid(format!(
        "TimeToLive {:?} ({}) {why}",
        qdeck_model::sanitize::clean(&v.text()),
        v.type_name()
    ))
}

/// The TTL a typed value stands for.
pub fn parse(v: &Value) -> Result<Ttl, BackendError> {
    let secs = match v {
        Value::Null => return Ok(Ttl::NotSet),
        Value::I8(_)
        | Value::U8(_)
        | Value::I16(_)
        | Value::U16(_)
        | Value::I32(_)
        | Value::U32(_)
        | Value::I64(_) => v.as_i64().map(|n| n as f64),
        Value::F32(f) => Some(f64::from(*f)),
        Value::F64(f) => Some(*f),
        Value::Decimal { .. } | Value::String(_) | Value::Number(_) => v.text().trim().parse().ok(),
        Value::Custom { value, .. } => {
            return parse(value).map_err(|_| bad(v, "is not a number of seconds"))
        }
        _ => None,
    };
    let Some(secs) = secs.filter(|s: &f64| s.is_finite()) else {
        return Err(bad(v, "is not a number of seconds"));
    };
    if secs >= NOT_SET_FROM_SECS {
        return Ok(Ttl::NotSet);
    }
    if secs <= 0.0 {
        return Err(bad(
            v,
            "must be above zero (Service Bus refuses or expires such a message)",
        ));
    }
    Ok(Ttl::Secs(secs))
}

/// The `BrokerProperties` value REST sends, or `None` to send none.
pub fn rest_json(v: &Value) -> Result<Option<serde_json::Value>, BackendError> {
    Ok(match parse(v)? {
        Ttl::NotSet => None,
        Ttl::Secs(s) if s.fract() == 0.0 && s < 9.0e15 => Some(serde_json::json!(s as i64)),
        Ttl::Secs(s) => serde_json::Number::from_f64(s).map(serde_json::Value::Number),
    })
}

/// The AMQP header's milliseconds, or `None` for no TTL. AMQP's unit is the millisecond, so a
/// finer TTL (REST keeps 100 ns ticks) is rounded to the nearest one, never to zero; a TTL
/// longer than the header holds is an error rather than a shorter life.
pub fn amqp_millis(v: &Value) -> Result<Option<u32>, BackendError> {
    match parse(v)? {
        Ttl::NotSet => Ok(None),
        Ttl::Secs(s) => {
            let ms = (s * 1000.0).round().max(1.0);
            if ms > AMQP_MAX_MS as f64 {
                return Err(bad(
                    v,
                    "is longer than AMQP can carry (at most 4294967.295 s, about 49.7 days); \
                     send it over the REST transport (transport = \"rest\")",
                ));
            }
            Ok(Some(ms as u32))
        }
    }
}

/// The typed value for a TTL read from an AMQP header: whole seconds as an integer, else
/// seconds with their milliseconds, as REST would report the same TTL.
pub fn from_amqp_millis(ms: u32) -> Value {
    if ms.is_multiple_of(1000) {
        Value::I64(i64::from(ms / 1000))
    } else {
        Value::F64(f64::from(ms) / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_means_not_set_on_both_transports() {
        let default = Value::F64(922_337_203_685.477_5);
        assert_eq!(parse(&default).unwrap(), Ttl::NotSet);
        assert_eq!(rest_json(&default).unwrap(), None);
        assert_eq!(amqp_millis(&default).unwrap(), None);
    }

    #[test]
    fn whole_and_fractional_seconds_keep_their_value() {
        assert_eq!(
            rest_json(&Value::I64(3600)).unwrap(),
            Some(serde_json::json!(3600))
        );
        assert_eq!(
            rest_json(&Value::F64(90.25)).unwrap(),
            Some(serde_json::json!(90.25))
        );
        // A whole float is sent as the integer REST would have given.
        assert_eq!(
            rest_json(&Value::F64(60.0)).unwrap(),
            Some(serde_json::json!(60))
        );
        assert_eq!(amqp_millis(&Value::F64(90.25)).unwrap(), Some(90_250));
        assert_eq!(amqp_millis(&Value::I32(3600)).unwrap(), Some(3_600_000));
        assert_eq!(amqp_millis(&Value::str("1.5")).unwrap(), Some(1_500));
        assert_eq!(from_amqp_millis(90_250), Value::F64(90.25));
        assert_eq!(from_amqp_millis(3_600_000), Value::I64(3600));
    }

    #[test]
    fn what_cannot_be_sent_is_an_error_naming_the_property() {
        for v in [
            Value::I64(0),
            Value::F64(-1.0),
            Value::F64(f64::NAN),
            Value::Bool(true),
            Value::str("soon"),
            Value::Bytes(vec![1]),
        ] {
            let e = rest_json(&v).unwrap_err().to_string();
            assert!(e.contains("TimeToLive"), "{v:?}: {e}");
            assert!(amqp_millis(&v).is_err(), "{v:?}");
        }
        // Sixty days: fine over REST, too long for an AMQP header.
        let long = Value::I64(60 * 86_400);
        assert_eq!(
            rest_json(&long).unwrap(),
            Some(serde_json::json!(5_184_000))
        );
        let e = amqp_millis(&long).unwrap_err().to_string();
        assert!(e.contains("TimeToLive") && e.contains("AMQP"), "{e}");
        // The longest the header holds is still sent as it is.
        assert_eq!(
            amqp_millis(&Value::F64(4_294_967.295)).unwrap(),
            Some(u32::MAX)
        );
    }

    #[test]
    fn a_sub_millisecond_ttl_is_one_millisecond_not_zero() {
        assert_eq!(amqp_millis(&Value::F64(0.0001)).unwrap(), Some(1));
    }
}
