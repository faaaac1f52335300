//! What every library's job turns into when browsed: the shared pieces of a `Message` built
//! from a job (timestamps, hash fields, the head of a trace).

use std::collections::HashMap;

use qdeck_model::domain::*;

/// Lines of a stack trace shown in the list view; the detail has them all.
pub(super) const TRACE_HEAD: usize = 3;

pub(super) fn iso(ms: i64) -> String {
    ms_to_datetime(ms).map_or_else(
        || ms.to_string(),
        |d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

pub(super) fn text(h: &HashMap<String, Vec<u8>>, k: &str) -> Option<String> {
    h.get(k).map(|v| String::from_utf8_lossy(v).into_owned())
}

pub(super) fn num(h: &HashMap<String, Vec<u8>>, k: &str) -> Option<i64> {
    text(h, k)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .map(|f| f as i64)
}
