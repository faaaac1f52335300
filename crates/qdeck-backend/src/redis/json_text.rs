//! Job payloads laid out for reading without being decoded and encoded again. A round trip
//! through `serde_json::Value` sorts object keys and turns an integer past 64 bits (a Ruby
//! Bignum in Sidekiq args) into a float; the browsed body, and so `export` and the editor,
//! would then hold data the job library never wrote. Here the stored text is kept token for
//! token (key order, number spelling, string escapes) and only whitespace changes.

/// Valid JSON re-indented as `serde_json::to_vec_pretty` would (two spaces, `": "`, empty
/// `{}`/`[]` on one line), every token as stored. Anything else: the bytes as they are.
pub fn pretty_or_raw(raw: &[u8]) -> Vec<u8> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_err() {
        return raw.to_vec();
    }
    pretty(raw)
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.extend(std::iter::repeat_n(b' ', depth * 2));
}

/// The end (exclusive) of the string starting at `raw[start] == b'"'`.
fn string_end(raw: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    raw.len()
}

/// Re-indent JSON text that is known to be valid.
fn pretty(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        match b {
            b'"' => {
                let end = string_end(raw, i);
                out.extend_from_slice(&raw[i..end]);
                i = end;
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let mut j = i + 1;
                while j < raw.len() && is_ws(raw[j]) {
                    j += 1;
                }
                if raw.get(j) == Some(&close) {
                    out.extend_from_slice(&[b, close]);
                    i = j + 1;
                    continue;
                }
                out.push(b);
                depth += 1;
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ if is_ws(b) => {}
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// The stored text of member `key` of the top-level JSON object `raw` (the last one when the
/// key repeats, as a JSON decoder keeps it), or None.
pub fn member<'a>(raw: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut depth = 0usize;
    let mut i = 0;
    let mut found = None;
    // At depth 1, whether the next string is a key (after `{` or `,`) and the key just read.
    let mut expect_key = false;
    let mut this_key: Option<String> = None;
    let mut value_start: Option<usize> = None;
    while i < raw.len() {
        let b = raw[i];
        match b {
            b'"' => {
                let end = string_end(raw, i);
                if depth == 1 && expect_key {
                    this_key = serde_json::from_slice::<String>(&raw[i..end]).ok();
                    expect_key = false;
                }
                i = end;
                continue;
            }
            b':' if depth == 1 => value_start = Some(i + 1),
            b',' if depth == 1 => {
                take(raw, key, &mut this_key, &mut value_start, i, &mut found);
                expect_key = true;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth == 1 {
                    expect_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if depth == 1 {
                    take(raw, key, &mut this_key, &mut value_start, i, &mut found);
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// At the end (`end`, exclusive) of a depth-1 member: keep its value's text if its key is
/// the one wanted.
fn take<'a>(
    raw: &'a [u8],
    key: &str,
    this_key: &mut Option<String>,
    value_start: &mut Option<usize>,
    end: usize,
    found: &mut Option<&'a [u8]>,
) {
    if let (Some(k), Some(s)) = (this_key.take(), value_start.take()) {
        if k == key {
            let v = &raw[s..end];
            let a = v.iter().position(|b| !is_ws(*b)).unwrap_or(v.len());
            let z = v.iter().rposition(|b| !is_ws(*b)).map_or(a, |p| p + 1);
            *found = Some(&v[a..z]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_serde_pretty_when_nothing_is_reordered() {
        let raw = br#"{"a":1,"b":[true,null,{"c":"x, y: [z]"}],"d":{},"e":[ ],"f":"\"\\"}"#;
        let v: serde_json::Value = serde_json::from_slice(raw).unwrap();
        assert_eq!(
            String::from_utf8(pretty_or_raw(raw)).unwrap(),
            String::from_utf8(serde_json::to_vec_pretty(&v).unwrap()).unwrap()
        );
    }

    #[test]
    fn keeps_key_order_number_spelling_and_escapes() {
        let raw = br#"{"z":12345678901234567890123,"a":1.0,"e":1e400,"u":"\u00fc\/"}"#;
        let p = String::from_utf8(pretty_or_raw(raw)).unwrap();
        assert_eq!(
            p,
            "{\n  \"z\": 12345678901234567890123,\n  \"a\": 1.0,\n  \"e\": 1e400,\n  \"u\": \"\\u00fc\\/\"\n}"
        );
    }

    #[test]
    fn not_json_is_left_as_stored() {
        for raw in [&b"\x80\x04pickle"[..], b"{\"a\":", b"[1,]", b""] {
            assert_eq!(pretty_or_raw(raw), raw);
        }
    }

    #[test]
    fn member_is_the_stored_text_of_a_top_level_key() {
        let raw = br#"{"class":"J","args":[1, {"args":2}, 12345678901234567890123] ,"x":{"args":3},"q":"a,b"}"#;
        assert_eq!(
            member(raw, "args"),
            Some(&br#"[1, {"args":2}, 12345678901234567890123]"#[..])
        );
        assert_eq!(member(raw, "q"), Some(&br#""a,b""#[..]));
        assert_eq!(member(raw, "missing"), None);
        assert_eq!(member(br#"{"a":1,"a":[2]}"#, "a"), Some(&b"[2]"[..]));
        assert_eq!(member(br#"{"\u0061rgs":true}"#, "args"), Some(&b"true"[..]));
        assert_eq!(member(br#"[{"args":1}]"#, "args"), None);
    }
}
