//! Reading and deleting one stored message by sequence (`STREAM.MSG.GET`, `STREAM.MSG.DELETE`):
//! no consumer is made and nothing is acked, so reading changes nothing in the stream.

use serde_json::{json, Value as Json};

use super::conn::{
    api_error, err_code, ERR_MSG_DELETE_FAILED, ERR_NO_MESSAGE, ERR_SEQUENCE_NOT_FOUND,
};
use super::model::StoredMsg;
use super::NatsBackend;
use crate::{BackendError, Result};

/// The message at `seq`, or with `next_by` the first at or after `seq` whose subject matches
/// that filter (`>` for any). `None` when there is none (deleted, or past the end).
pub async fn get(
    b: &NatsBackend,
    stream: &str,
    seq: u64,
    next_by: Option<&str>,
) -> Result<Option<StoredMsg>> {
    let body = match next_by {
        Some(f) => json!({"seq": seq.max(1), "next_by_subj": f}),
        None => json!({"seq": seq}),
    };
    match b
        .conn
        .api_coded(&format!("STREAM.MSG.GET.{stream}"), &body)
        .await?
    {
        Ok(v) => {
            let m = v.get("message").cloned().unwrap_or(Json::Null);
            serde_json::from_value(m)
                .map(Some)
                .map_err(|e| BackendError::Protocol(format!("STREAM.MSG.GET answer: {e}")))
        }
        // Deleted, acked off a work queue, or past the last sequence.
        Err(e) if err_code(&e) == ERR_NO_MESSAGE => Ok(None),
        Err(e) => Err(api_error(&e)),
    }
}

/// Delete the message at `seq`. `Ok(false)` when it was already gone.
pub async fn delete(b: &NatsBackend, stream: &str, seq: u64) -> Result<bool> {
    // `no_erase`: mark deleted without overwriting the bytes on disk, the cheap way.
    let answer = b
        .conn
        .api_coded(
            &format!("STREAM.MSG.DELETE.{stream}"),
            &json!({"seq": seq, "no_erase": true}),
        )
        .await?;
    match answer {
        Ok(v) => Ok(v.get("success").and_then(Json::as_bool).unwrap_or(false)),
        // A deleted sequence inside the stream's range has a code of its own; past the ends
        // (or already gone from an older store) the server gives the code it gives every
        // failed delete, and a read tells "already gone" from the others.
        Err(e) if err_code(&e) == ERR_SEQUENCE_NOT_FOUND => Ok(false),
        Err(e) if err_code(&e) == ERR_MSG_DELETE_FAILED => match get(b, stream, seq, None).await? {
            None => Ok(false),
            Some(_) => Err(api_error(&e)),
        },
        Err(e) => Err(api_error(&e)),
    }
}

/// A NATS/1.0 header block → (name, value) pairs in order; the status line is dropped.
pub fn parse_headers(block: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(block);
    text.split("\r\n")
        .skip(1)
        .filter_map(|line| {
            let (k, v) = line.split_once(':')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_blocks_parse_in_order_with_repeats() {
        let h = parse_headers(b"NATS/1.0\r\nX-A: 1\r\nNats-Msg-Id: m1\r\nX-A: 2\r\n\r\n");
        assert_eq!(
            h,
            vec![
                ("X-A".to_string(), "1".to_string()),
                ("Nats-Msg-Id".to_string(), "m1".to_string()),
                ("X-A".to_string(), "2".to_string())
            ]
        );
        assert!(parse_headers(b"").is_empty());
    }
}
