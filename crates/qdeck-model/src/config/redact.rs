//! Keep secrets out of everything qdeck prints: URLs with passwords, connection strings,
//! SAS signatures and AWS keys.

use regex::Regex;

use crate::literal::regex;
use std::sync::OnceLock;

fn patterns() -> &'static [(Regex, &'static str)] {
    static P: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    P.get_or_init(|| {
        vec![
            // scheme://user:password@host → scheme://user:***@host
            (
                regex(r"(?i)([a-z][a-z0-9+.-]*://[^:/@\s]*):[^@/\s]*@"),
                "$1:***@",
            ),
            (
                regex(r"(?i)(SharedAccessKey\s*=\s*)[^;\s]+"),
                "${1}***",
            ),
            (regex(r"(?i)(\bsig=)[^&\s;]+"), "${1}***"),
            (
                regex(r"(?i)(SharedAccessSignature\s*=\s*)[^;\s]+"),
                "${1}***",
            ),
            (
                regex(r"(?i)(aws_secret_access_key|secret_access_key|password|passwd|token)(\s*[=:]\s*)[^\s,;]+"),
                "$1$2***",
            ),
            // Entra ID access tokens: an Authorization value, or any JWT (three base64url parts,
            // the first starting `eyJ`, which is `{"` encoded).
            (regex(r"(?i)(\bBearer\s+)[^\s,;]+"), "${1}***"),
            (
                regex(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
                "***",
            ),
        ]
    })
}

/// Replace every secret-looking part of `s` with `***`.
pub fn redact(s: &str) -> String {
    let mut out = s.to_string();
    for (re, rep) in patterns() {
        out = re.replace_all(&out, *rep).into_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn hides_url_passwords() {
        assert_eq!(
            redact("amqp://guest:s3cret@host:5672/%2f"),
            "amqp://guest:***@host:5672/%2f"
        );
        assert_eq!(redact("amqp://host:5672"), "amqp://host:5672");
    }

    #[test]
    fn hides_service_bus_keys_and_signatures() {
        let cs = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abc+/=123";
        let r = redact(cs);
        assert!(!r.contains("abc+/=123"), "{r}");
        assert!(r.contains("SharedAccessKeyName=Root"));
        let tok = "SharedAccessSignature sr=x&sig=ABCDEF%3D&se=1&skn=k";
        assert!(!redact(tok).contains("ABCDEF"));
    }

    #[test]
    fn hides_entra_tokens() {
        let r = redact("Authorization: Bearer abc.def-123 failed");
        assert_eq!(r, "Authorization: Bearer *** failed");
        let jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL3NlcnZpY2VidXMuYXp1cmUubmV0In0.c2ln";
        assert_eq!(redact(&format!("got {jwt} back")), "got *** back");
    }

    #[test]
    fn hides_key_value_secrets() {
        assert!(!redact("aws_secret_access_key = wJalrXUtnFEMI").contains("wJalr"));
        assert!(!redact("password: hunter2").contains("hunter2"));
    }
}
