//! One lazily opened, self-reconnecting Redis connection (the redis crate's connection
//! manager), Lua scripts run by SHA with a reload when the server forgot them, and the
//! mapping of Redis failures to `BackendError` by error kind, never by message text.

use ::redis::aio::ConnectionManager;
use ::redis::{ErrorKind, IntoConnectionInfo, RedisError, ServerErrorKind, Value};
use tokio::sync::OnceCell;

use crate::backend::{BackendError, Result};
use crate::config::RedisSettings;

pub struct Conn {
    info: ::redis::ConnectionInfo,
    /// Host and port for messages (never the password).
    pub display: String,
    cell: OnceCell<ConnectionManager>,
}

fn env_var(name: &str, what: &str) -> Result<String> {
    std::env::var(name).map_err(|_| {
        BackendError::Invalid(format!("{what}: environment variable {name} is not set"))
    })
}

impl Conn {
    pub fn from_settings(s: &RedisSettings) -> Result<Conn> {
        let url = match (&s.url_env, &s.url) {
            (Some(var), _) => env_var(var, "url_env")?,
            (None, Some(u)) => u.clone(),
            (None, None) => "redis://127.0.0.1:6379".to_string(),
        };
        let parsed = ::redis::parse_redis_url(&url).ok_or_else(|| {
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
        let info = url
            .as_str()
            .into_connection_info()
            .map_err(|e| BackendError::Invalid(format!("url: {}", e.kind_str())))?;
        let mut redis = info.redis_settings().clone();
        if let Some(user) = &s.username {
            redis = redis.set_username(user);
        }
        if let Some(var) = &s.password_env {
            redis = redis.set_password(env_var(var, "password_env")?);
        }
        if let Some(db) = s.db {
            redis = redis.set_db(db);
        }
        let info = info.set_redis_settings(redis);
        Ok(Conn {
            info,
            display,
            cell: OnceCell::new(),
        })
    }

    pub fn db(&self) -> i64 {
        self.info.redis_settings().db()
    }

    pub async fn get(&self) -> Result<ConnectionManager> {
        let cm = self
            .cell
            .get_or_try_init(|| async {
                let client = ::redis::Client::open(self.info.clone()).map_err(map_err)?;
                ConnectionManager::new(client).await.map_err(map_err)
            })
            .await?;
        Ok(cm.clone())
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
    let text = crate::sanitize::clean_short(&e.to_string(), 300);
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
        ErrorKind::Server(ServerErrorKind::BusyLoading)
        | ErrorKind::Server(ServerErrorKind::TryAgain) => BackendError::Throttled {
            msg: text,
            retry_after: None,
        },
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
