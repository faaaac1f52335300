//! What leaves the console for the user: the clipboard (OSC 52) and saved files.

use std::io::Write;

use base64::Engine;

use qdeck_model::domain::{Message, QueueId};

/// OSC 52 payloads larger than this are refused by most terminals.
const COPY_LIMIT: usize = 100_000;

/// Copy through the terminal (works over SSH): OSC 52 with base64, so nothing from the body
/// reaches the terminal raw.
pub(super) fn osc52(text: &str) -> Result<String, String> {
    if text.len() > COPY_LIMIT {
        return Err(format!(
            "body is {} bytes; terminals take at most {COPY_LIMIT} through OSC 52 — save it instead",
            text.len()
        ));
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = std::io::stdout();
    out.write_all(format!("\x1b]52;c;{b64}\x07").as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("copy failed: {e}"))?;
    Ok(format!("copied {} bytes (OSC 52)", text.len()))
}

/// The terminal bell and a desktop notification (OSC 9, which iTerm2, WezTerm, kitty and
/// Windows Terminal show, and OSC 777, which foot, rxvt and VTE terminals show). Both are
/// escape sequences on the console's own output, so they reach a local terminal through SSH
/// and tmux passes them on with `allow-passthrough`. Broker text is cleaned of control
/// characters and of the `;` that separates OSC 777's fields.
pub(super) fn notify(bell: bool, text: Option<&str>) -> std::io::Result<()> {
    let mut out = std::io::stdout();
    if let Some(t) = text {
        let body: String = qdeck_model::sanitize::clean(t)
            .chars()
            .map(|c| if c == ';' { ',' } else { c })
            .take(200)
            .collect();
        out.write_all(format!("\x1b]9;{body}\x07\x1b]777;notify;qdeck;{body}\x07").as_bytes())?;
    }
    if bell {
        out.write_all(b"\x07")?;
    }
    out.flush()
}

/// File-system-safe form of a queue name.
fn file_part(q: &QueueId) -> String {
    let s: String = q
        .as_str()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    if s.is_empty() {
        "queue".into()
    } else {
        s
    }
}

/// Save messages in the `qdeck export` format (`triage::transfer::Record` lines), so a saved
/// file imports exactly as an exported one.
pub fn save_jsonl(
    dir: &std::path::Path,
    kind: qdeck_model::domain::BrokerKind,
    queue: &QueueId,
    msgs: &[Message],
) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ts = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let path = dir.join(format!("{}-{ts}.jsonl", file_part(queue)));
    let mut buf = Vec::new();
    for m in msgs {
        let rec = qdeck_engine::triage::transfer::Record::from_message(m, kind, queue.as_str());
        serde_json::to_writer(&mut buf, &rec).map_err(|e| format!("cannot encode: {e}"))?;
        buf.push(b'\n');
    }
    std::fs::write(&path, buf).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!(
        "saved {} messages to {}",
        msgs.len(),
        path.display()
    ))
}
