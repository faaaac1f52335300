//! Configuration: embedded defaults → config file → `QDECK_*` environment → command-line flags.
//!
//! The `config` crate lowercases map keys, so names users choose (profiles, queues, key
//! strings) live in values, never in keys.

pub mod alerts;
pub mod paths;
pub mod profile;
pub mod redact;
pub mod secret;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use profile::{
    Access, KafkaSettings, LocalSettings, NatsSettings, Profile, ProfileKind, PubsubSettings,
    RabbitmqSettings, RedisSettings, SbAuth, SbTransport, ServicebusSettings, SqsSettings,
    SAS_TOKEN_TTL_DEFAULT_SECS, SAS_TOKEN_TTL_MIN_SECS,
};

const DEFAULTS: &str = include_str!("defaults.toml");

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    /// Profile used when `--profile` is not given (default: the first profile, else local).
    #[serde(default)]
    pub default_profile: Option<String>,
    pub ui: UiConfig,
    /// Keymap overrides: action name → keys, e.g. `purge = ["P"]`.
    #[serde(default)]
    pub keys: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub profiles: Vec<Profile>,
    /// Audit log file (default `$XDG_STATE_HOME/qdeck/audit.log`).
    #[serde(default)]
    pub audit_log: Option<String>,
    /// Incident triage: how far `reasons` and `--where` scan, extra reason headers.
    #[serde(default)]
    pub triage: TriageConfig,
    /// The on-fire view's thresholds.
    #[serde(default)]
    pub fire: FireConfig,
    /// Alert rules (`[[alerts]]`), read by the console, `qdeck watch` and `qdeck serve`.
    #[serde(default)]
    pub alerts: Vec<alerts::AlertRuleConfig>,
    /// What the console does when an alert starts firing.
    #[serde(default)]
    pub notify: alerts::NotifyConfig,
}

/// `[fire]`: what the on-fire view counts as late.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FireConfig {
    /// An oldest message this old scores half the age term; twice as old scores it all.
    pub max_age_secs: f64,
}

impl Default for FireConfig {
    fn default() -> Self {
        FireConfig {
            max_age_secs: 300.0,
        }
    }
}

/// `[triage]`: bounds of the scans behind `qdeck reasons` and `--where`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TriageConfig {
    /// Scan at most this many messages (`--limit` overrides).
    pub scan_limit: u64,
    /// Scan for at most this many seconds (`--scan-time` overrides).
    pub scan_secs: f64,
    /// Extra header names holding error text, read before the built-in ones
    /// (x-exception-message, DeadLetterErrorDescription).
    pub reason_headers: Vec<String>,
}

impl Default for TriageConfig {
    fn default() -> Self {
        TriageConfig {
            scan_limit: 5_000,
            scan_secs: 30.0,
            reason_headers: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiConfig {
    pub theme: String,
    pub refresh_secs: f64,
    /// Target used for "workers needed to drain within …".
    pub drain_target_secs: f64,
    /// How much history each queue keeps for charts and rates.
    pub history_secs: u64,
}

/// A configuration problem, phrased for the user: which file, which key, what was expected.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--config FILE`: must exist.
    pub file: Option<PathBuf>,
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// `--read-only`: caps the selected profile (and any switched to) at `browse`.
    pub read_only: bool,
}

#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: AppConfig,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    pub profile: Profile,
    /// `--read-only` was given: it binds the whole run, whatever profile is switched to.
    pub cli_read_only: bool,
}

impl Loaded {
    /// Options that load another profile of the same run: same file, and `--read-only`
    /// carried over (a switch re-derives the gate and can never weaken it).
    pub fn options_for(&self, profile: &str) -> LoadOptions {
        LoadOptions {
            file: self.file.clone(),
            profile: Some(profile.to_string()),
            read_only: self.cli_read_only,
        }
    }

    /// True when the user has written no configuration at all (the newcomer case: the
    /// console may start the demo workload).
    pub fn is_unconfigured(&self) -> bool {
        self.file.is_none() && self.config.profiles.is_empty()
    }

    pub fn audit_log_path(&self) -> PathBuf {
        match &self.config.audit_log {
            Some(p) => paths::expand_home(p),
            None => paths::audit_log(),
        }
    }
}

pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    let (file, required) = match &opts.file {
        Some(f) => (f.clone(), true),
        None => (paths::config_file(), false),
    };
    if required && !file.exists() {
        return Err(ConfigError(format!(
            "config file {} does not exist",
            file.display()
        )));
    }
    let used = file.exists().then(|| file.clone());
    let config = load_from(DEFAULTS, used.as_deref())?;
    validate(&config, used.as_deref())?;
    let mut profile = select_profile(&config, opts.profile.as_deref())?;
    if opts.read_only {
        profile.read_only = true;
    }
    Ok(Loaded {
        config,
        file: used,
        profile,
        cli_read_only: opts.read_only,
    })
}

fn load_from(defaults: &str, file: Option<&Path>) -> Result<AppConfig, ConfigError> {
    let mut b = config::Config::builder()
        .add_source(config::File::from_str(defaults, config::FileFormat::Toml));
    if let Some(f) = file {
        let text = std::fs::read_to_string(f)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", f.display())))?;
        // Parse once with `toml` first: its errors carry line and column.
        if let Err(e) = text.parse::<toml::Table>() {
            let msg = e.to_string().replace('\n', " ");
            return Err(ConfigError(format!(
                "{}: not valid TOML: {}",
                f.display(),
                msg.split_whitespace().collect::<Vec<_>>().join(" ")
            )));
        }
        b = b.add_source(config::File::from_str(&text, config::FileFormat::Toml));
    }
    b = b.add_source(
        config::Environment::with_prefix("QDECK")
            .prefix_separator("_")
            .separator("__")
            .try_parsing(true)
            .source(Some(config_env())),
    );
    let where_ = file.map_or_else(|| "configuration".to_string(), |f| f.display().to_string());
    let built = b
        .build()
        .map_err(|e| ConfigError(format!("{where_}: {e}")))?;
    built
        .try_deserialize::<AppConfig>()
        .map_err(|e| ConfigError(format!("{where_}: {e}")))
}

/// The `QDECK_*` variables that are configuration keys. Others (`QDECK_PROFILE`,
/// `QDECK_CONFIG`, `QDECK_LOG`, test endpoints) belong to flags or tools, not to the file.
fn config_env() -> std::collections::HashMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| {
            matches!(k.as_str(), "QDECK_DEFAULT_PROFILE" | "QDECK_AUDIT_LOG")
                || k.starts_with("QDECK_UI__")
        })
        .collect()
}

fn validate(c: &AppConfig, file: Option<&Path>) -> Result<(), ConfigError> {
    let where_ = file.map_or_else(|| "configuration".to_string(), |f| f.display().to_string());
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in c.profiles.iter().enumerate() {
        if p.name.trim().is_empty() {
            return Err(ConfigError(format!(
                "{where_}: profiles[{i}].name is empty; every profile needs a name"
            )));
        }
        if let Some(a) = &p.access {
            if Access::parse(a).is_none() {
                return Err(ConfigError(format!(
                    "{where_}: profiles[{i}].access = {a:?} is not one of stats, browse, redrive, full"
                )));
            }
        }
        if let ProfileKind::Rabbitmq(r) = &p.kind {
            if r.amqp_url.as_deref().is_some_and(secret::url_has_password) {
                return Err(ConfigError(format!(
                    "{where_}: profiles[{i}].amqp_url holds a password; keep it out of the file: \
                     put the URL without it and name a variable with password_env (or the whole \
                     URL with amqp_url_env)"
                )));
            }
        }
        if let ProfileKind::Servicebus(sb) = &p.kind {
            sb.sas_token_ttl_secs()
                .map_err(|e| ConfigError(format!("{where_}: profiles[{i}].{e}")))?;
            sb.check(&format!("{where_}: profiles[{i}]"))
                .map_err(ConfigError)?;
        }
        // Settings without which the profile cannot reach its broker are named here, at load,
        // not later as a connection error.
        if let ProfileKind::Kafka(k) = &p.kind {
            if k.bootstrap_servers.trim().is_empty() {
                return Err(ConfigError(format!(
                    "{where_}: profiles[{i}] ({:?}) needs bootstrap_servers = \"host:port[,host:port]\"",
                    p.name
                )));
            }
        }
        if let ProfileKind::Pubsub(ps) = &p.kind {
            if ps.projects.iter().all(|id| id.trim().is_empty()) {
                return Err(ConfigError(format!(
                    "{where_}: profiles[{i}] ({:?}) needs projects = [\"PROJECT_ID\", …]",
                    p.name
                )));
            }
        }
        if !seen.insert(p.name.as_str()) {
            return Err(ConfigError(format!(
                "{where_}: profile name {:?} is used twice",
                p.name
            )));
        }
    }
    if c.ui.refresh_secs.is_nan() || c.ui.refresh_secs < 0.1 {
        return Err(ConfigError(format!(
            "{where_}: ui.refresh_secs must be at least 0.1, got {}",
            c.ui.refresh_secs
        )));
    }
    if c.triage.scan_limit == 0 || !(c.triage.scan_secs > 0.0 && c.triage.scan_secs.is_finite()) {
        return Err(ConfigError(format!(
            "{where_}: triage.scan_limit must be at least 1 and triage.scan_secs above 0"
        )));
    }
    if !(c.fire.max_age_secs > 0.0 && c.fire.max_age_secs.is_finite()) {
        return Err(ConfigError(format!(
            "{where_}: fire.max_age_secs must be above 0, got {}",
            c.fire.max_age_secs
        )));
    }
    if let Some(d) = &c.default_profile {
        if !c.profiles.iter().any(|p| &p.name == d) && d != "local" {
            return Err(ConfigError(format!(
                "{where_}: default_profile {d:?} names no profile"
            )));
        }
    }
    Ok(())
}

fn select_profile(c: &AppConfig, wanted: Option<&str>) -> Result<Profile, ConfigError> {
    let wanted = wanted.or(c.default_profile.as_deref());
    match wanted {
        Some(name) => match c.profiles.iter().find(|p| p.name == name) {
            Some(p) => Ok(p.clone()),
            None if name == "local" => Ok(Profile::default_local()),
            None => Err(ConfigError(format!(
                "unknown profile {name:?}; known: {}",
                profile_names(c).join(", ")
            ))),
        },
        None => Ok(c
            .profiles
            .first()
            .cloned()
            .unwrap_or_else(Profile::default_local)),
    }
}

pub fn profile_names(c: &AppConfig) -> Vec<String> {
    let mut v: Vec<String> = c.profiles.iter().map(|p| p.name.clone()).collect();
    if !v.iter().any(|n| n == "local") {
        v.push("local".to_string());
    }
    v
}

/// Read and check one config file (used by `config validate`).
pub fn validate_file(path: &Path) -> Result<AppConfig, ConfigError> {
    let c = load_from(DEFAULTS, Some(path))?;
    validate(&c, Some(path))?;
    Ok(c)
}

/// Parse a configuration text (used by `config validate` and the example-config test).
pub fn parse_str(text: &str) -> Result<AppConfig, ConfigError> {
    // One directory per call: tests parse in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("qdeck-parse-{}-{n}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let f = dir.join("config.toml");
    std::fs::write(&f, text).map_err(|e| ConfigError(e.to_string()))?;
    let r = load_from(DEFAULTS, Some(&f)).and_then(|c| validate(&c, Some(&f)).map(|_| c));
    let _ = std::fs::remove_dir_all(&dir);
    r
}
