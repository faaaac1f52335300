//! A secret value (password, connection string, URL with credentials) held in a type that
//! cannot be printed or logged by accident: no `Display`, and `Debug` shows only that a value
//! is there. The one way to the text is `expose()`, at the place that sends it to the broker.

use super::ConfigError;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// Read a secret from the environment variable a profile names; the error names the
    /// variable and the key, never a value.
    pub fn from_env(var: &str, key: &str) -> Result<Secret, ConfigError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Secret(v)),
            Ok(_) => Err(ConfigError(format!(
                "environment variable {var} (named by {key}) is empty"
            ))),
            Err(_) => Err(ConfigError(format!(
                "environment variable {var} (named by {key}) is not set"
            ))),
        }
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The password part of a URL's user info, if it has one (`amqp://user:pw@host`).
pub fn url_has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => userinfo.contains(':'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("hunter2-very-secret");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(&s)), "Some(Secret(<redacted>))");
        assert_eq!(s.expose(), "hunter2-very-secret");
    }

    #[test]
    fn passwords_in_urls_are_found() {
        assert!(url_has_password("amqp://guest:guest@127.0.0.1:5672/%2f"));
        assert!(url_has_password("amqps://u:p%40ss@host/vh"));
        assert!(!url_has_password("amqp://guest@127.0.0.1:5672/%2f"));
        assert!(!url_has_password("amqp://127.0.0.1:5672/a:b@c"));
        assert!(!url_has_password("not a url"));
    }
}
