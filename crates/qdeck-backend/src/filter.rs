//! A queue-name filter the backends can push down to the broker (RabbitMQ `name` +
//! `use_regex`, SQS `QueueNamePrefix`). Whatever the broker does with it, the caller's regex is
//! applied to the queue ids afterwards: the broker only ever narrows the listing to a superset.

use regex::Regex;

#[derive(Debug, Clone)]
pub struct QueueFilter {
    re: Regex,
}

impl QueueFilter {
    pub fn new(re: Regex) -> QueueFilter {
        QueueFilter { re }
    }

    pub fn matches(&self, id: &str) -> bool {
        self.re.is_match(id)
    }

    pub fn pattern(&self) -> &str {
        self.re.as_str()
    }

    /// The literal text every match must start with: `^orders\.` → `orders.`. None when the
    /// pattern is not anchored or has an alternation (`^a|b` matches `xb`).
    pub fn literal_prefix(&self) -> Option<String> {
        let p = self.re.as_str();
        let rest = p.strip_prefix('^')?;
        if p.contains('|') {
            return None;
        }
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            let lit = match c {
                '\\' => match chars.next() {
                    Some(e) if e.is_ascii_punctuation() => e,
                    _ => break,
                },
                '.' | '+' | '*' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '$' | '^' => break,
                c => c,
            };
            // A quantifier after it makes this character optional or repeatable.
            if matches!(chars.peek(), Some('?' | '*' | '{')) {
                break;
            }
            out.push(lit);
        }
        (!out.is_empty()).then_some(out)
    }

    /// The pattern as RabbitMQ's PCRE reads it the same way, when it keeps to the syntax both
    /// dialects share (ASCII, no groups with flags, no Unicode classes).
    pub fn portable_regex(&self) -> Option<&str> {
        let p = self.re.as_str();
        let mut chars = p.chars();
        if !p.is_ascii() || p.contains("(?") {
            return None;
        }
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some(e) if e.is_ascii_punctuation() || "dDwWsS".contains(e) => {}
                    _ => return None,
                }
            }
        }
        Some(p)
    }
}

/// `text` as a regex matching itself (PCRE and Rust agree on escaping ASCII punctuation).
pub fn escape(text: &str) -> String {
    regex::escape(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(p: &str) -> QueueFilter {
        QueueFilter::new(Regex::new(p).unwrap())
    }

    #[test]
    fn literal_prefixes_are_only_what_every_match_starts_with() {
        assert_eq!(f(r"^orders\.").literal_prefix().as_deref(), Some("orders."));
        assert_eq!(
            f("^orders.*dlq$").literal_prefix().as_deref(),
            Some("orders")
        );
        assert_eq!(f("^ordersx?").literal_prefix().as_deref(), Some("orders"));
        assert_eq!(f("^a{2}").literal_prefix(), None);
        assert_eq!(f("orders").literal_prefix(), None);
        assert_eq!(f("^a|b").literal_prefix(), None);
        assert_eq!(f(r"^\d").literal_prefix(), None);
    }

    #[test]
    fn only_shared_syntax_goes_to_pcre() {
        assert_eq!(
            f(r"^bench\.q-\d+$").portable_regex(),
            Some(r"^bench\.q-\d+$")
        );
        assert_eq!(f(r"(?i)orders").portable_regex(), None);
        assert_eq!(f(r"\p{L}").portable_regex(), None);
        assert_eq!(f("é").portable_regex(), None);
    }
}
