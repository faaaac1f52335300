//! Edit and resend, shared by `qdeck edit` and the console: the message becomes a small TOML
//! block (key, properties and typed headers; the broker's metadata as comments) followed by
//! its body, the user edits it in `$VISUAL`/`$EDITOR`,
//! and the edited copy is sent before the original is deleted — only once the broker has
//! confirmed the copy, so a failure can leave both versions but never neither.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::gate::{Gate, Mutation};
use super::ops::{Outcome, Verdict};
use qdeck_backend::{BackendError, OpProgress};
use qdeck_model::domain::{BrokerKind, Message, OutgoingMessage, QueueId, RedriveTarget, Value};

/// The line between the header block and the body. Everything after it is the body.
pub const BODY_MARKER: &str = "+++ body below this line +++";

/// A message as the user left it in the editor.
#[derive(Debug, Clone, PartialEq)]
pub struct Edited {
    pub key: Option<String>,
    pub properties: Vec<(String, Value)>,
    pub headers: Vec<(String, Value)>,
    pub body: Vec<u8>,
}

impl Edited {
    pub fn into_outgoing(self) -> OutgoingMessage {
        OutgoingMessage {
            body: self.body,
            key: self.key,
            delay: None,
            properties: self.properties,
            headers: self.headers,
        }
    }
}

/// What came back from the editor.
#[derive(Debug, Clone, PartialEq)]
pub enum EditorOutcome {
    Changed(Edited),
    /// Saved as it was, or not saved: nothing to send.
    Unchanged,
}

/// A TOML section with one `name = value` line per field, each value inline (a nested table
/// stays on its line, so deleting the line removes the whole field).
fn section(name: &str, fields: &[(String, Value)]) -> Result<String, String> {
    let mut out = format!("\n[{name}]\n");
    for (k, v) in fields {
        let value = toml::Value::try_from(v).map_err(|e| format!("{k}: {e}"))?;
        let bare = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let key = if bare {
            k.clone()
        } else {
            toml::Value::String(k.clone()).to_string()
        };
        out.push_str(&format!("{key} = {value}\n"));
    }
    Ok(out)
}

/// The file the editor opens: the key, `[properties]` and `[headers]` as TOML tables with
/// their types, the broker's metadata as read-only comments, then the body. Bodies that are
/// not UTF-8 cannot be edited as text.
pub fn render(_kind: BrokerKind, queue: &QueueId, msg: &Message) -> Result<String, String> {
    let body = std::str::from_utf8(&msg.body).map_err(|_| {
        format!(
            "message {} has a binary body; edit works on text bodies only",
            msg.id
        )
    })?;
    let mut block = String::new();
    if let Some(k) = &msg.key {
        block.push_str(&format!("key = {}\n", toml::Value::String(k.clone())));
    }
    block.push_str(&section("properties", &msg.properties)?);
    block.push_str(&section("headers", &msg.headers)?);
    let mut meta = String::new();
    if !msg.meta.is_empty() {
        meta.push_str("# Set by the broker (not sent again):\n");
        for (k, v) in &msg.meta {
            meta.push_str(&format!(
                "#   {} = {}\n",
                qdeck_model::sanitize::clean_short(k, 60),
                qdeck_model::sanitize::clean_short(&v.text(), 200).replace(['\n', '\r'], " ")
            ));
        }
    }
    // The editor may add a final newline; `parse` takes exactly one off again.
    Ok(format!(
        "# qdeck edit: message {id} of {queue}\n\
         # Change the key, the properties, the headers (delete a line to remove one) and the body.\n\
         # Values keep their types: 7, true and \"text\" as written; {{ \"$i32\" = 7 }} or\n\
         # {{ \"$bytes\" = \"base64\" }} for the types TOML lacks.\n\
         {meta}\
         # Save and quit to go on; quit without saving, or with an error, to send nothing.\n\
         {block}{BODY_MARKER}\n{body}\n",
        id = qdeck_model::sanitize::clean(&msg.id),
        queue = qdeck_model::sanitize::clean(queue.as_str()),
    ))
}

fn fields_of(name: &str, v: toml::Value) -> Result<Vec<(String, Value)>, String> {
    let toml::Value::Table(t) = v else {
        return Err(format!("{name} must be a table ([{name}])"));
    };
    t.into_iter()
        .map(|(k, v)| {
            let typed: Value = v
                .try_into()
                .map_err(|e: toml::de::Error| format!("{name}.{k}: {}", e.message()))?;
            Ok((k, typed))
        })
        .collect()
}

/// Read the edited file back.
pub fn parse(text: &str) -> Result<Edited, String> {
    let mut offset = 0;
    let mut body_start = None;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == BODY_MARKER {
            body_start = Some(offset + line.len());
            break;
        }
        offset += line.len();
    }
    let Some(start) = body_start else {
        return Err(format!(
            "the line {BODY_MARKER:?} is missing: it separates the headers from the body"
        ));
    };
    let table: toml::Table = text[..offset].parse().map_err(|e: toml::de::Error| {
        format!(
            "the header block is not valid TOML: {}",
            e.message().replace('\n', " ")
        )
    })?;
    let mut key = None;
    let mut properties = Vec::new();
    let mut headers = Vec::new();
    for (k, v) in table {
        match (k.as_str(), v) {
            ("key", toml::Value::String(s)) => key = Some(s),
            ("key", _) => return Err("key must be a string".into()),
            ("properties", v) => properties = fields_of("properties", v)?,
            ("headers", v) => headers = fields_of("headers", v)?,
            (other, _) => {
                return Err(format!(
                    "unknown field {other:?} in the header block (known: key, properties, headers)"
                ))
            }
        }
    }
    let body = &text[start..];
    let body = body.strip_suffix('\n').unwrap_or(body);
    Ok(Edited {
        key,
        properties,
        headers,
        body: body.as_bytes().to_vec(),
    })
}

/// Why nothing will be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    /// The editor could not be started, or the scratch file not written or read.
    #[error("{0}")]
    Io(String),
    /// The editor exited with an error (`:cq` in vim): the user gave up.
    #[error("{0}")]
    Aborted(String),
    /// The file came back in a shape that cannot be read.
    #[error("{0}; nothing was sent")]
    Malformed(String),
}

/// `$VISUAL`, then `$EDITOR`, then `vi`.
pub fn editor_command() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".to_string())
}

/// Write `draft` to a private file, run the editor on it (through `sh`, so `EDITOR="code
/// -w"` works), and read it back. The caller owns the terminal: it must have left raw mode
/// and the alternate screen first.
pub fn run_editor(draft: &str) -> Result<EditorOutcome, EditorError> {
    run_editor_keeping(draft).map_err(|(e, _)| e)
}

/// `run_editor`, and with a `Malformed` error the text the user left in the file, so the
/// console can open it again rather than lose the edit.
pub fn run_editor_keeping(draft: &str) -> Result<EditorOutcome, (EditorError, Option<String>)> {
    let path = scratch_path();
    write_private(&path, draft).map_err(|e| {
        (
            EditorError::Io(format!("cannot write {}: {e}", path.display())),
            None,
        )
    })?;
    let result = run_on(&path, draft);
    let _ = std::fs::remove_file(&path);
    result
}

fn run_on(path: &Path, draft: &str) -> Result<EditorOutcome, (EditorError, Option<String>)> {
    let text = edited_text(path).map_err(|e| (e, None))?;
    outcome(draft, &text).map_err(|e| (e, Some(text)))
}

/// What the user saved, compared with the draft: a draft that did not parse (an edit opened
/// again) and came back as it was is still `Malformed`, never "unchanged".
fn outcome(draft: &str, text: &str) -> Result<EditorOutcome, EditorError> {
    let edited = parse(text).map_err(EditorError::Malformed)?;
    if text == draft || parse(draft).is_ok_and(|d| d == edited) {
        return Ok(EditorOutcome::Unchanged);
    }
    Ok(EditorOutcome::Changed(edited))
}

fn edited_text(path: &Path) -> Result<String, EditorError> {
    let editor = editor_command();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("qdeck-editor")
        .arg(path)
        .status()
        .map_err(|e| EditorError::Io(format!("cannot run the editor {editor:?}: {e}")))?;
    if !status.success() {
        return Err(EditorError::Aborted(format!(
            "the editor {editor:?} exited with {status}; nothing was sent"
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| EditorError::Io(format!("cannot read the edited file back: {e}")))
}

fn scratch_path() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("qdeck-edit-{}-{nanos}.toml", std::process::id()))
}

/// Bodies may hold personal data: the scratch file is readable by its owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(text.as_bytes())
}

/// The message `id` of `queue`, read through the gate (a browse: nothing changes). Pages
/// through the queue until found.
pub async fn find_message(gate: &Gate, queue: &QueueId, id: &str) -> Result<Message, BackendError> {
    let mut cursor = None;
    loop {
        let page = gate
            .browse(
                queue,
                &qdeck_model::domain::BrowseRequest {
                    cursor: cursor.clone(),
                    max: 500,
                    force: false,
                },
            )
            .await?;
        let got = page.messages.len();
        if let Some(m) = page.messages.into_iter().find(|m| m.id == id) {
            return Ok(m);
        }
        match page.next {
            Some(c) if got > 0 => cursor = Some(c),
            _ => {
                return Err(BackendError::NotFound(format!(
                    "no message {id:?} in {:?}",
                    queue.as_str()
                )))
            }
        }
    }
}

/// Where the edited copy goes: the named queue, or for "origin" the queue the message was
/// dead-lettered from, else the queue it sits in (an edit in place).
pub fn resolve_target(source: &QueueId, msg: &Message, target: &RedriveTarget) -> QueueId {
    match target {
        RedriveTarget::Queue(q) => q.clone(),
        RedriveTarget::Origin => msg
            .dead_letter
            .as_ref()
            .and_then(|d| d.origin.clone())
            .unwrap_or_else(|| source.clone()),
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EditReport {
    pub source: QueueId,
    pub original_id: String,
    pub target: QueueId,
    pub new_id: Option<String>,
    /// The original is gone. False: the copy was sent but the original is still there (a
    /// worker holds it, or the delete failed) — both versions exist, say so.
    pub deleted: bool,
    pub note: Option<String>,
}

impl EditReport {
    pub fn line(&self) -> String {
        let new = self.new_id.as_deref().unwrap_or("(no id)");
        let mut s = format!(
            "sent the edited copy of {} to {} as {new}",
            self.original_id, self.target
        );
        if self.deleted {
            s.push_str(&format!("; deleted the original from {}", self.source));
        } else {
            s.push_str(&format!(
                "; the original is still in {}: {}",
                self.source,
                self.note.as_deref().unwrap_or("not deleted")
            ));
        }
        qdeck_model::sanitize::clean(&s).into_owned()
    }
}

/// Send the edited copy, then delete the original. Checks first, so that a refusal, a
/// broker without delete-by-id or an unknown target sends nothing.
pub async fn resend(
    gate: &Gate,
    source: &QueueId,
    original: &Message,
    edited: Edited,
    target: &RedriveTarget,
) -> Result<EditReport, BackendError> {
    gate.require(Mutation::Edit, source)?;
    let backend = gate.backend().clone();
    let to = resolve_target(source, original, target);
    let audit = |verdict: Verdict, counts: serde_json::Value, err: Option<String>| {
        gate.record(
            Mutation::Edit,
            source,
            Some(to.to_string()),
            counts,
            verdict,
            err,
        );
    };
    let deleter = backend.deleter();
    let checks = async {
        let Some(deleter) = deleter else {
            return Err(BackendError::Unsupported(format!(
                "edit and resend deletes the original by id, which the {} backend cannot do; \
                 nothing was sent",
                backend.kind().as_str()
            )));
        };
        let info = backend.describe(source).await?;
        if let Some(why) = deleter.delete_refusal(&info) {
            return Err(BackendError::Refused(format!("{why}; nothing was sent")));
        }
        backend.describe(&to).await?;
        qdeck_backend::sender_of(backend.as_ref())
    };
    let sender = match checks.await {
        Ok(sender) => sender,
        Err(e) => {
            audit(
                Verdict::Failed,
                json!({"original_id": original.id}),
                Some(e.to_string()),
            );
            return Err(e);
        }
    };
    let mut out = edited.into_outgoing();
    backend.header_rules().drop_identity(&mut out);
    let new_id = match sender.send(&to, out).await {
        Ok(id) => id,
        Err(e) => {
            audit(
                Verdict::Failed,
                json!({"original_id": original.id}),
                Some(e.to_string()),
            );
            return Err(e);
        }
    };
    // The copy is confirmed: only now may the original go.
    // `checks` returned early without a deleter.
    let Some(deleter) = deleter else {
        return Err(BackendError::Other("no deleter".into()));
    };
    let deleted = deleter
        .delete_ids(
            source,
            std::slice::from_ref(&original.id),
            &OpProgress::detached(),
        )
        .await;
    let (deleted, note) = match deleted {
        Ok(r) if r.deleted == 1 => (true, None),
        Ok(_) => (
            false,
            Some("it was consumed, moved or leased meanwhile; check for a duplicate".to_string()),
        ),
        Err(e) => (false, Some(format!("delete failed: {e}"))),
    };
    let report = EditReport {
        source: source.clone(),
        original_id: original.id.clone(),
        target: to.clone(),
        new_id,
        deleted,
        note,
    };
    audit(
        Outcome::Edit(report.clone()).verdict(),
        json!({"original_id": original.id, "new_id": report.new_id, "sent": 1, "deleted": u8::from(deleted)}),
        report.note.clone(),
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: &[u8]) -> Message {
        Message {
            id: "7".into(),
            seq: Some(7),
            enqueued_ms: None,
            receive_count: None,
            key: Some("k1".into()),
            properties: vec![("content_type".into(), Value::str("application/json"))],
            headers: vec![
                ("x-tenant".into(), Value::str("acme")),
                ("n".into(), Value::I32(7)),
                ("flag".into(), Value::Bool(true)),
                (
                    "nested".into(),
                    Value::Table(vec![
                        ("a".into(), Value::I64(1)),
                        ("b".into(), Value::str("two")),
                    ]),
                ),
            ],
            meta: vec![
                ("state".into(), Value::str("ready")),
                (
                    "x-death".into(),
                    Value::Array(vec![Value::str("line\nbreak")]),
                ),
            ],
            body: body.to_vec(),
            body_null: false,
            dead_letter: None,
        }
    }

    #[test]
    fn render_then_parse_gives_the_message_back() {
        for body in [&b"{\"a\": 1}"[..], b"two\nlines\n", b"", b"+++ body below"] {
            let m = msg(body);
            let text = render(BrokerKind::Local, &QueueId::new("q"), &m).unwrap();
            let e = parse(&text).unwrap();
            assert_eq!(e.body, body, "{text}");
            assert_eq!(e.key.as_deref(), Some("k1"));
            assert_eq!(e.properties, m.properties);
            // Every header with its type; the broker's metadata is not offered for sending.
            let mut got = e.headers.clone();
            let mut want = m.headers.clone();
            got.sort_by(|a, b| a.0.cmp(&b.0));
            want.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(got, want, "{text}");
            assert!(text.contains("#   x-death = [line␊break]"), "{text}");
            assert!(text.contains("n = { \"$i32\" = 7 }\n"), "{text}");
        }
    }

    #[test]
    fn removed_headers_are_gone_and_bad_files_say_why() {
        let text = render(BrokerKind::Local, &QueueId::new("q"), &msg(b"x")).unwrap();
        let cut: String = text
            .lines()
            .filter(|l| !l.starts_with("x-tenant"))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = parse(&cut).unwrap();
        assert!(!e.headers.iter().any(|h| h.0 == "x-tenant"));
        assert!(parse("key = 1\n").unwrap_err().contains("missing"));
        let bad = format!("key = [\n{BODY_MARKER}\nbody\n");
        assert!(parse(&bad).unwrap_err().contains("not valid TOML"));
        let unknown = format!("delay = \"5s\"\n{BODY_MARKER}\nbody\n");
        assert!(parse(&unknown).unwrap_err().contains("delay"));
    }

    /// An edit opened again on text that did not parse is never "unchanged": saved as it was,
    /// it is still unreadable (and kept for another try); fixed, it is a change.
    #[test]
    fn a_reopened_unreadable_edit_stays_unreadable_until_fixed() {
        let draft = render(BrokerKind::Local, &QueueId::new("q"), &msg(b"hello")).unwrap();
        assert_eq!(outcome(&draft, &draft), Ok(EditorOutcome::Unchanged));
        let broken = draft.replace("[headers]", "[headers");
        assert!(matches!(
            outcome(&draft, &broken),
            Err(EditorError::Malformed(_))
        ));
        assert!(matches!(
            outcome(&broken, &broken),
            Err(EditorError::Malformed(_))
        ));
        let fixed = draft.replace("hello", "HELLO");
        assert!(matches!(
            outcome(&broken, &fixed),
            Ok(EditorOutcome::Changed(e)) if e.body == b"HELLO"
        ));
    }

    #[test]
    fn binary_bodies_are_not_edited() {
        let e = render(BrokerKind::Local, &QueueId::new("q"), &msg(&[0xff, 0xfe])).unwrap_err();
        assert!(e.contains("binary"), "{e}");
    }
}
