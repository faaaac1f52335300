//! The `/` filter of a table: a regex, smart-cased, or the text literally when it is not one.

use regex::Regex;

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub text: String,
    pub invert: bool,
    pub re: Option<Regex>,
    /// The text was not a valid regex; matched literally.
    pub literal: bool,
}

impl Filter {
    pub fn new(text: &str) -> Filter {
        let (invert, pat) = match text.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, text),
        };
        if pat.is_empty() {
            return Filter::default();
        }
        // Smart case, as in vim and less: a pattern with a capital letter matches case,
        // so `/NaN` finds the literal NaN and not every `tenant`.
        let flags = if pat.chars().any(char::is_uppercase) {
            ""
        } else {
            "(?i)"
        };
        let (re, literal) = match Regex::new(&format!("{flags}{pat}")) {
            Ok(r) => (Some(r), false),
            Err(_) => (
                Regex::new(&format!("{flags}{}", regex::escape(pat))).ok(),
                true,
            ),
        };
        Filter {
            text: text.to_string(),
            invert,
            re,
            literal,
        }
    }
    pub fn is_active(&self) -> bool {
        self.re.is_some()
    }
    pub fn matches(&self, s: &str) -> bool {
        match &self.re {
            Some(r) => r.is_match(s) != self.invert,
            None => true,
        }
    }
}
