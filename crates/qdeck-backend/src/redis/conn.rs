//! One lazily opened, self-reconnecting Redis connection (the redis crate's connection
//! manager), Lua scripts run by SHA with a reload when the server forgot them, and the
//! mapping of Redis failures to `BackendError` by error kind, never by message text.

use ::redis::aio::ConnectionManager;
use ::redis::{ErrorKind, IntoConnectionInfo, RedisError, ServerErrorKind, Value};
use tokio::sync::OnceCell;

use crate::{BackendError, Result};
use qdeck_model::config::secret::{Secret, SecretSource};
use qdeck_model::config::RedisSettings;

pub struct Conn {
    /// The profile's URL (never with a password) or the whole of `url_env`'s variable.
    url: Secret,
    username: Option<String>,
    password: Option<Secret>,
    db: i64,
    /// Host and port for messages (never the password).
    pub display: String,
    cell: OnceCell<ConnectionManager>,
}

fn connection_info(url: &Secret) -> Result<::redis::ConnectionInfo> {
    url.expose()
        .into_connection_info()
        .map_err(|e| BackendError::Invalid(format!("url: {}", e.kind_str())))
}

impl Conn {
    /// Resolve profile `profile`, its variables read from `secrets`.
    pub fn from_settings(
        profile: &str,
        s: &RedisSettings,
        secrets: &dyn SecretSource,
    ) -> Result<Conn> {
        let url = match (&s.url_env, &s.url) {
            (Some(var), _) => secrets.require(profile, "url_env", var)?,
            (None, Some(u)) => Secret::new(u.clone()),
            (None, None) => Secret::new("redis://127.0.0.1:6379"),
        };
        let parsed = ::redis::parse_redis_url(url.expose()).ok_or_else(|| {
            BackendError::Invalid("url is not a redis:// or rediss:// URL".into())
        })?;
        if s.url_env.is_none() && parsed.password().is_some() {
            return Err(BackendError::Invalid(
                "the profile's url carries a password: name it with password_env (or put the whole URL in url_env)".into(),
            ));
        }
        let display = format!(
            "{}://{}:{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or("?"),
            parsed.port().unwrap_or(6379)
        );
        if parsed.scheme() == "rediss" {
            crate::tls::install_provider();
        }
        let password = match &s.password_env {
            Some(var) => Some(secrets.require(profile, "password_env", var)?),
            None => None,
        };
        // Parsed now too, so a bad URL fails the build rather than the first call.
        let db = match s.db {
            Some(db) => db,
            None => connection_info(&url)?.redis_settings().db(),
        };
        Ok(Conn {
            url,
            username: s.username.clone(),
            password,
            db,
            display,
            cell: OnceCell::new(),
        })
    }

    /// What the client library connects with: the one place the password leaves its `Secret`.
    fn connection_info(&self) -> Result<::redis::ConnectionInfo> {
        let info = connection_info(&self.url)?;
        let mut redis = info.redis_settings().clone().set_db(self.db);
        if let Some(user) = &self.username {
            redis = redis.set_username(user);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p.expose());
        }
        Ok(info.set_redis_settings(redis))
    }

    pub fn db(&self) -> i64 {
        self.db
    }

    pub async fn get(&self) -> Result<ConnectionManager> {
        let cm = self
            .cell
            .get_or_try_init(|| async {
                let client = ::redis::Client::open(self.connection_info()?).map_err(map_err)?;
                ConnectionManager::new(client).await.map_err(map_err)
            })
            .await?;
        Ok(cm.clone())
    }
}

impl Conn {
    /// A connection of its own for a blocking read (BRPOP) that must not hold up the shared
    /// one, answering within `wait` plus a margin.
    pub async fn dedicated(
        &self,
        wait: std::time::Duration,
    ) -> Result<::redis::aio::MultiplexedConnection> {
        let client = ::redis::Client::open(self.connection_info()?).map_err(map_err)?;
        let cfg = ::redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_secs(5)))
            .set_response_timeout(Some(wait + std::time::Duration::from_secs(2)));
        client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
            .map_err(map_err)
    }
}

trait KindStr {
    fn kind_str(&self) -> &'static str;
}

impl KindStr for RedisError {
    fn kind_str(&self) -> &'static str {
        match self.kind() {
            ErrorKind::Parse => "cannot parse",
            ErrorKind::InvalidClientConfig => "invalid client configuration",
            _ => "rejected",
        }
    }
}

/// Redis errors by kind. Server text is kept (it never holds the password) but cleaned.
pub fn map_err(e: RedisError) -> BackendError {
    let text = qdeck_model::sanitize::clean_short(&e.to_string(), 300);
    match e.kind() {
        ErrorKind::AuthenticationFailed => BackendError::Auth(text),
        ErrorKind::Io => BackendError::Unreachable(text),
        ErrorKind::Server(ServerErrorKind::NoPerm) => {
            BackendError::forbidden(text, Some("Redis ACL: the command or key"))
        }
        ErrorKind::Server(ServerErrorKind::ReadOnly) => BackendError::forbidden(
            format!("{text} (a replica: connect to the primary)"),
            Some("write on the primary"),
        ),
        ErrorKind::Server(ServerErrorKind::BusyLoading | ServerErrorKind::TryAgain) => {
            BackendError::Throttled {
                msg: text,
                retry_after: None,
            }
        }
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => BackendError::Protocol(text),
        _ if e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() => {
            BackendError::Unreachable(text)
        }
        _ => BackendError::Other(text),
    }
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// A Lua script known by its SHA; the text is sent once (SCRIPT LOAD) and again only when the
/// server answers NOSCRIPT (restart, SCRIPT FLUSH).
pub struct Lua {
    pub script: ::redis::Script,
}

impl Lua {
    pub fn new(src: &str) -> Lua {
        Lua {
            script: ::redis::Script::new(src),
        }
    }

    pub fn sha(&self) -> &str {
        self.script.get_hash()
    }

    /// Append one EVALSHA to a pipeline.
    pub fn add_to(&self, pipe: &mut ::redis::Pipeline, keys: &[String], args: &[String]) {
        let c = pipe.cmd("EVALSHA").arg(self.sha()).arg(keys.len());
        for k in keys {
            c.arg(k);
        }
        for a in args {
            c.arg(a);
        }
    }

    pub async fn load(&self, cm: &mut ConnectionManager) -> Result<()> {
        self.script.load_async(cm).await.map_err(map_err)?;
        Ok(())
    }

    /// Run once, reloading the script if the server lost it.
    pub async fn run(
        &self,
        cm: &mut ConnectionManager,
        keys: &[String],
        args: &[String],
    ) -> Result<Value> {
        let mut pipe = ::redis::pipe();
        self.add_to(&mut pipe, keys, args);
        let first: std::result::Result<Vec<Value>, RedisError> = pipe.query_async(cm).await;
        let out = match first {
            Err(e) if is_noscript(&e) => {
                self.load(cm).await?;
                pipe.query_async::<Vec<Value>>(cm).await.map_err(map_err)?
            }
            other => other.map_err(map_err)?,
        };
        out.into_iter()
            .next()
            .ok_or_else(|| BackendError::Protocol("empty reply to EVALSHA".into()))
    }
}

/// Run a pipeline whose commands include EVALSHAs of `scripts`; on NOSCRIPT load them all and
/// try once more. Results come back per command, errors included, so one bad key does not
/// fail the batch.
pub async fn query_with_scripts(
    cm: &mut ConnectionManager,
    pipe: &::redis::Pipeline,
    scripts: &[&Lua],
) -> Result<Vec<Value>> {
    let first: std::result::Result<Vec<Value>, RedisError> = pipe.query_async(cm).await;
    match first {
        Ok(v) if !v.iter().any(value_is_noscript) => Ok(v),
        Err(e) if !is_noscript(&e) => Err(map_err(e)),
        _ => {
            for s in scripts {
                s.load(cm).await?;
            }
            pipe.query_async(cm).await.map_err(map_err)
        }
    }
}

fn value_is_noscript(v: &Value) -> bool {
    match v {
        Value::ServerError(e) => e.code() == "NOSCRIPT",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::secret::SecretMap;

    #[test]
    fn secrets_come_from_the_source_and_reach_only_the_client_settings() {
        let s = RedisSettings {
            url_env: Some("QDECK_UNIT_REDIS_URL".into()),
            password_env: Some("QDECK_UNIT_REDIS_PW".into()),
            username: Some("ops".into()),
            ..Default::default()
        };
        let secrets = SecretMap::new()
            .with("QDECK_UNIT_REDIS_URL", "redis://u:url-pw@10.0.0.7:6380/4")
            .with("QDECK_UNIT_REDIS_PW", "s3cr3t-unit");
        let c = Conn::from_settings("unit", &s, &secrets).expect("conn");
        assert_eq!(c.display, "redis://10.0.0.7:6380");
        assert_eq!(c.db(), 4, "the URL's database");
        let info = c.connection_info().expect("info");
        assert_eq!(info.redis_settings().password(), Some("s3cr3t-unit"));
        assert_eq!(info.redis_settings().username(), Some("ops"));
        assert_eq!(info.redis_settings().db(), 4);

        let err = Conn::from_settings("unit", &s, &SecretMap::new())
            .err()
            .expect("unset")
            .to_string();
        assert_eq!(
            err,
            "invalid input: profile 'unit': environment variable QDECK_UNIT_REDIS_URL \
             (named by url_env) is not set"
        );
        let db = RedisSettings {
            db: Some(2),
            ..s.clone()
        };
        let c = Conn::from_settings("unit", &db, &secrets).expect("conn");
        assert_eq!(c.db(), 2);
        assert_eq!(c.connection_info().expect("info").redis_settings().db(), 2);
    }
}
