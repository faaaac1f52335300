//! A secret value (password, connection string, URL with credentials) held in a type that
//! cannot be printed or logged by accident: no `Display`, and `Debug` shows only that a value
//! is there. The one way to the text is `expose()`, at the place that sends it to the broker.
//!
//! Profiles name the variables that hold secrets; a [`SecretSource`] answers for them. The
//! process environment is the source of every real run; tests hand a [`SecretMap`] to
//! `backend::build_with` instead of changing the environment of a multi-threaded process.

use std::collections::HashMap;

use super::ConfigError;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
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

/// Where the secrets a profile names come from.
pub trait SecretSource: Send + Sync {
    /// The value of variable `var`, if it has one: a `Secret`, since the source cannot know
    /// which of its variables hold secrets; a caller that knows one does not exposes it.
    fn get(&self, var: &str) -> Option<Secret>;

    /// The secret in `var`, which profile `profile` names with its key `key`. Every backend
    /// resolves its secrets here, so a missing one reads the same everywhere: the profile,
    /// the key and the variable, never a value.
    fn require(&self, profile: &str, key: &str, var: &str) -> Result<Secret, ConfigError> {
        let problem = match self.get(var) {
            Some(v) if !v.expose().trim().is_empty() => return Ok(v),
            Some(_) => "is empty",
            None => "is not set",
        };
        Err(ConfigError(format!(
            "profile '{profile}': environment variable {var} (named by {key}) {problem}"
        )))
    }

    /// Static AWS keys for SQS, from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN`; `None` leaves credentials to the AWS SDK's chain.
    fn aws_keys(&self) -> Option<AwsKeys> {
        let filled = |var: &str| self.get(var).filter(|v| !v.expose().trim().is_empty());
        Some(AwsKeys {
            access_key_id: filled("AWS_ACCESS_KEY_ID")?.expose().to_string(),
            secret_access_key: filled("AWS_SECRET_ACCESS_KEY")?,
            session_token: filled("AWS_SESSION_TOKEN"),
        })
    }
}

/// Static AWS credentials. The key id is not secret (it shows in request signatures).
#[derive(Debug, Clone)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// The process environment: the source of every real run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Environment;

impl SecretSource for Environment {
    fn get(&self, var: &str) -> Option<Secret> {
        std::env::var(var).ok().map(Secret)
    }

    /// The AWS SDK's own chain reads these variables first, with its own rules (blank values,
    /// the `SECRET_ACCESS_KEY` alias, `AWS_ACCOUNT_ID`) and then files, SSO and instance
    /// roles: it stays the one reader of AWS credentials from the environment.
    fn aws_keys(&self) -> Option<AwsKeys> {
        None
    }
}

/// Secrets from a map, for tests and for callers that hold the values already.
#[derive(Clone, Default)]
pub struct SecretMap(HashMap<String, String>);

impl SecretMap {
    pub fn new() -> SecretMap {
        SecretMap::default()
    }

    /// This map with `var` holding `value`.
    pub fn with(mut self, var: impl Into<String>, value: impl Into<String>) -> SecretMap {
        self.insert(var, value);
        self
    }

    pub fn insert(&mut self, var: impl Into<String>, value: impl Into<String>) {
        self.0.insert(var.into(), value.into());
    }
}

impl std::fmt::Debug for SecretMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.0.keys().map(String::as_str).collect();
        names.sort_unstable();
        write!(f, "SecretMap({names:?})")
    }
}

impl SecretSource for SecretMap {
    fn get(&self, var: &str) -> Option<Secret> {
        self.0.get(var).cloned().map(Secret)
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
        let m = SecretMap::new().with("PW", "hunter2-very-secret");
        assert_eq!(format!("{m:?}"), "SecretMap([\"PW\"])");
        let keys = m
            .with("AWS_ACCESS_KEY_ID", "AKID")
            .with("AWS_SECRET_ACCESS_KEY", "hunter2-aws")
            .aws_keys()
            .expect("keys");
        assert!(!format!("{keys:?}").contains("hunter2"), "{keys:?}");
    }

    #[test]
    fn missing_and_empty_secrets_name_profile_key_and_variable() {
        let m = SecretMap::new().with("BLANK", "  ").with("SET", "hunter2");
        assert_eq!(
            m.require("p", "password_env", "SET").expect("set").expose(),
            "hunter2"
        );
        let e = m.require("p", "password_env", "UNSET").unwrap_err();
        assert_eq!(
            e.to_string(),
            "profile 'p': environment variable UNSET (named by password_env) is not set"
        );
        let e = m.require("p", "url_env", "BLANK").unwrap_err();
        assert_eq!(
            e.to_string(),
            "profile 'p': environment variable BLANK (named by url_env) is empty"
        );
    }

    #[test]
    fn aws_keys_need_both_halves() {
        let half = SecretMap::new().with("AWS_ACCESS_KEY_ID", "AKID");
        assert!(half.aws_keys().is_none());
        let both = half.with("AWS_SECRET_ACCESS_KEY", "s");
        let k = both.aws_keys().expect("keys");
        assert_eq!(k.access_key_id, "AKID");
        assert_eq!(k.secret_access_key.expose(), "s");
        assert!(k.session_token.is_none());
        assert!(Environment.aws_keys().is_none());
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
