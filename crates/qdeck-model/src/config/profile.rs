//! Profiles: one per broker connection. Secrets are never stored here, only the names of the
//! environment variables (or credential chains) that hold them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::paths;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    #[serde(flatten)]
    pub kind: ProfileKind,
    /// What this profile may do: `stats`, `browse`, `redrive` or `full` (default `full`).
    /// Checked in `config::validate`, so an unknown word is a config error naming the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// Alias for `access = "browse"`: no mutating action at all, in the console or the CLI.
    #[serde(default)]
    pub read_only: bool,
    /// Destructive actions need the queue name typed to confirm.
    #[serde(default)]
    pub protected: bool,
    /// Seconds between refreshes of the queues on screen (default from `[ui] refresh_secs`).
    #[serde(default)]
    pub refresh_secs: Option<f64>,
    /// Most API calls per minute the console's poller may make for this profile (`0`: no
    /// limit); default from [`ProfileKind::default_calls_per_minute`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_minute: Option<u32>,
    /// Header names holding error text on this profile's brokers (e.g. `x-error`), read by
    /// the failure signature before `[triage] reason_headers` and the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_headers: Vec<String>,
    /// The console's bell and desktop notification for this profile's alerts (default: the
    /// global `[notify]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<super::alerts::NotifyConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ProfileKind {
    Local(LocalSettings),
    Rabbitmq(RabbitmqSettings),
    Sqs(SqsSettings),
    Servicebus(ServicebusSettings),
    Redis(RedisSettings),
    Nats(NatsSettings),
    Pubsub(PubsubSettings),
    Kafka(KafkaSettings),
}

impl ProfileKind {
    pub fn name(&self) -> &'static str {
        match self {
            ProfileKind::Local(_) => "local",
            ProfileKind::Rabbitmq(_) => "rabbitmq",
            ProfileKind::Sqs(_) => "sqs",
            ProfileKind::Servicebus(_) => "servicebus",
            ProfileKind::Redis(_) => "redis",
            ProfileKind::Nats(_) => "nats",
            ProfileKind::Pubsub(_) => "pubsub",
            ProfileKind::Kafka(_) => "kafka",
        }
    }

    /// The broker a profile of this kind speaks to.
    pub fn broker_kind(&self) -> crate::domain::BrokerKind {
        use crate::domain::BrokerKind;
        match self {
            ProfileKind::Local(_) => BrokerKind::Local,
            ProfileKind::Rabbitmq(_) => BrokerKind::Rabbitmq,
            ProfileKind::Sqs(_) => BrokerKind::Sqs,
            ProfileKind::Servicebus(_) => BrokerKind::Servicebus,
            ProfileKind::Redis(_) => BrokerKind::Redis,
            ProfileKind::Nats(_) => BrokerKind::Nats,
            ProfileKind::Kafka(_) => BrokerKind::Kafka,
            ProfileKind::Pubsub(_) => BrokerKind::Pubsub,
        }
    }

    /// The call budget when a profile sets none: SQS bills every request (and CloudWatch every
    /// metric), so it gets a modest one (≈ $0.015/h of requests at list price); the others are
    /// not billed per call and their figures come batched, so no limit.
    pub fn default_calls_per_minute(&self) -> Option<u32> {
        match self {
            ProfileKind::Sqs(_) => Some(600),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalSettings {
    /// SQLite file; default `$XDG_DATA_HOME/qdeck/local.db`.
    #[serde(default)]
    pub path: Option<String>,
}

impl LocalSettings {
    pub fn resolved_path(&self) -> PathBuf {
        match &self.path {
            Some(p) => paths::expand_home(p),
            None => paths::data_dir().join("local.db"),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitmqSettings {
    /// AMQP URL without a password, e.g. `amqp://guest@127.0.0.1:5672/%2f` (amqps:// for TLS).
    #[serde(default)]
    pub amqp_url: Option<String>,
    /// Name of an environment variable holding the whole AMQP URL (may include the password).
    #[serde(default)]
    pub amqp_url_env: Option<String>,
    /// Management API base, e.g. `http://127.0.0.1:15672`.
    #[serde(default)]
    pub management_url: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Only queues of this vhost (default: all vhosts the user can see).
    #[serde(default)]
    pub vhost: Option<String>,
    /// Prefer the shovel plugin for redrive when it is enabled (default true).
    #[serde(default)]
    pub use_shovel: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsSettings {
    /// Regions to list queues in (default: the SDK's configured region).
    #[serde(default)]
    pub regions: Vec<String>,
    /// Named profile from the shared AWS config files.
    #[serde(default)]
    pub aws_profile: Option<String>,
    /// Endpoint override for local stand-ins (AWS_ENDPOINT_URL_SQS also works).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Only queues whose names start with this.
    #[serde(default)]
    pub queue_prefix: Option<String>,
    /// Read age of oldest from CloudWatch (billed per metric; default true).
    #[serde(default)]
    pub cloudwatch: Option<bool>,
    /// Seconds between CloudWatch age sweeps (default 120).
    #[serde(default)]
    pub age_interval_secs: Option<u64>,
    /// Ordinary queues per poll whose age is read from CloudWatch, fullest first (default
    /// 50; `0` reads every queue holding messages). DLQs holding messages always are.
    #[serde(default)]
    pub age_worst_n: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServicebusSettings {
    /// Name of the environment variable holding the connection string. With Entra ID auth it
    /// is optional: `namespace` may name the namespace instead, and a connection string's
    /// keys are then ignored (only its Endpoint and `UseDevelopmentEmulator` count).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub connection_string_env: String,
    /// How requests are authorised: `sas` (default: the connection string's key or token),
    /// `azure-cli` (the signed-in Azure CLI's Entra ID token) or `workload-identity`
    /// (Kubernetes workload identity: a federated token exchanged for an Entra ID token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<SbAuth>,
    /// `NAME.servicebus.windows.net`: the namespace, for Entra ID auth without a connection
    /// string (reached over TLS, as Azure serves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Also list topics and their subscriptions (default true).
    #[serde(default)]
    pub topics: Option<bool>,
    /// How messages are read and moved: `amqp` (default: a true peek, sessions, scheduled and
    /// deferred messages) or `rest` (HTTPS only; browsing locks messages). Counts and settings
    /// come from the management API either way.
    #[serde(default)]
    pub transport: Option<SbTransport>,
    /// The management (ATOM) API's base URL when it is not the namespace's own
    /// (`https://HOST/`): Microsoft's emulator and the stand-in serve it on another port.
    #[serde(default)]
    pub management_url: Option<String>,
    /// How long each SAS token qdeck signs from the key lives (`30m`, `1h`; default `1h`, at
    /// least `10s`), for organisations that cap SAS lifetimes. Tokens are put again a sixth of
    /// this before they expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sas_token_ttl: Option<String>,
}

/// An hour, as Microsoft's SDKs sign them.
pub const SAS_TOKEN_TTL_DEFAULT_SECS: u64 = 3600;
/// Shorter would have qdeck re-signing every few seconds and leave no room for clock skew.
pub const SAS_TOKEN_TTL_MIN_SECS: u64 = 10;

impl ServicebusSettings {
    /// `sas_token_ttl` in seconds (the default when unset), or a one-line reason naming the key.
    pub fn sas_token_ttl_secs(&self) -> Result<u64, String> {
        let Some(text) = self.sas_token_ttl.as_deref() else {
            return Ok(SAS_TOKEN_TTL_DEFAULT_SECS);
        };
        let ms = crate::expr::duration_ms(text.trim()).ok_or_else(|| {
            format!("sas_token_ttl = {text:?} is not a duration such as 10m or 1h")
        })?;
        let secs = u64::try_from(ms / 1000).unwrap_or(0);
        if secs < SAS_TOKEN_TTL_MIN_SECS {
            return Err(format!(
                "sas_token_ttl = {text:?} is shorter than the minimum of {SAS_TOKEN_TTL_MIN_SECS}s"
            ));
        }
        Ok(secs)
    }
}

impl ServicebusSettings {
    /// How the profile names its namespace and authorises, checked before anything connects.
    /// `at` is how errors name the profile (`FILE: profiles[2]`, `profile 'prod'`). One line,
    /// naming keys, never values.
    pub fn check(&self, at: &str) -> Result<(), String> {
        let auth = self.auth.unwrap_or_default();
        let cs = !self.connection_string_env.trim().is_empty();
        let ns = self.namespace.as_deref().map(str::trim);
        if auth == SbAuth::Sas {
            if ns.is_some() {
                return Err(format!(
                    "{at}: namespace is only used with auth = \"azure-cli\" or \"workload-identity\"; SAS auth takes the namespace from the connection string (connection_string_env)"
                ));
            }
            if !cs {
                return Err(format!(
                    "{at}: connection_string_env is missing: name the environment variable that holds the connection string (or set auth = \"azure-cli\" or \"workload-identity\" with namespace)"
                ));
            }
            return Ok(());
        }
        let how = auth.as_str();
        match ns {
            Some(_) if cs => Err(format!(
                "{at} (auth = \"{how}\") sets both namespace and connection_string_env: keep one to name the namespace"
            )),
            Some(n) if !is_namespace_host(n) => Err(format!(
                "{at}: namespace must be a host name such as NAME.servicebus.windows.net (no scheme, path or port)"
            )),
            None if !cs => Err(format!(
                "{at} (auth = \"{how}\") needs namespace = \"NAME.servicebus.windows.net\" or connection_string_env to name the namespace"
            )),
            _ => Ok(()),
        }
    }
}

/// A bare DNS name: letters, digits, `-` and `.`, with at least one dot.
fn is_namespace_host(s: &str) -> bool {
    !s.is_empty()
        && s.contains('.')
        && !s.starts_with(['.', '-'])
        && !s.ends_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// Where Service Bus tokens come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SbAuth {
    /// Shared Access Signatures from the connection string's key (or its ready-made token).
    #[default]
    Sas,
    /// Entra ID tokens from `az account get-access-token`.
    AzureCli,
    /// Entra ID tokens for a Kubernetes workload identity (`AZURE_FEDERATED_TOKEN_FILE`).
    WorkloadIdentity,
}

impl SbAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            SbAuth::Sas => "sas",
            SbAuth::AzureCli => "azure-cli",
            SbAuth::WorkloadIdentity => "workload-identity",
        }
    }
}

/// The protocol Service Bus messages travel over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SbTransport {
    #[default]
    Amqp,
    Rest,
}

/// Redis job queues (BullMQ, Sidekiq) in one Redis database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://host:6379` or `rediss://` for TLS, without a password.
    #[serde(default)]
    pub url: Option<String>,
    /// Name of an environment variable holding the whole URL (may include the password).
    #[serde(default)]
    pub url_env: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Database number (default: the URL's, else 0).
    #[serde(default)]
    pub db: Option<i64>,
    /// Job libraries to show: `bullmq`, `sidekiq` (default: detected from the key schema).
    #[serde(default)]
    pub flavors: Option<Vec<String>>,
    /// BullMQ's key prefix (default `bull`).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Sidekiq's redis-namespace, if one is used (keys then start with `NAMESPACE:`).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// NATS JetStream: streams and their durable consumers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsSettings {
    /// `nats://host:4222` (`tls://` for TLS), without credentials; several servers may be
    /// given separated by commas.
    #[serde(default)]
    pub url: Option<String>,
    /// Name of an environment variable holding the whole URL (may carry user and password).
    #[serde(default)]
    pub url_env: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    /// Name of an environment variable holding the password for `username`.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Name of an environment variable holding an authentication token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Name of an environment variable holding an nkey seed (`SU…`).
    #[serde(default)]
    pub nkey_seed_env: Option<String>,
    /// Path of a `.creds` file (user JWT and seed), as `nsc` writes it.
    #[serde(default)]
    pub creds_file: Option<String>,
    /// Require TLS even when the URL says `nats://`.
    #[serde(default)]
    pub tls: Option<bool>,
    /// PEM file of the CA that signed the server's certificate (default: the system's roots).
    #[serde(default)]
    pub tls_ca_file: Option<String>,
    /// JetStream domain (API subjects become `$JS.<domain>.API.…`).
    #[serde(default)]
    pub domain: Option<String>,
    /// Only streams whose names start with this.
    #[serde(default)]
    pub stream_prefix: Option<String>,
    /// The server's monitoring endpoint (`http://host:8222`): push consumers' clients are then
    /// named from `/connz`, which the JetStream API does not give.
    #[serde(default)]
    pub monitor_url: Option<String>,
}

/// Google Cloud Pub/Sub: the subscriptions (and topics) of one or more projects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubsubSettings {
    /// Project ids whose topics and subscriptions are listed (at least one).
    #[serde(default)]
    pub projects: Vec<String>,
    /// `host:port` of an emulator or fake (plain gRPC, no credentials); default
    /// `PUBSUB_EMULATOR_HOST`, else Google's service with Application Default Credentials.
    #[serde(default)]
    pub emulator_host: Option<String>,
    /// Cloud Monitoring's base URL (default `https://monitoring.googleapis.com` on Google's
    /// service; none with an emulator, so depth and age are then unknown).
    #[serde(default)]
    pub monitoring_endpoint: Option<String>,
    /// A Google credentials file for this profile: a service-account key, or an
    /// `external_account` file (workload identity federation). Default:
    /// `GOOGLE_APPLICATION_CREDENTIALS`, else the gcloud ADC file, then the metadata server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<String>,
    /// Pub/Sub's endpoint on Google's service (default `https://pubsub.googleapis.com`): a
    /// regional one (`https://us-east1-pubsub.googleapis.com`) or a Private Service Connect
    /// name. Unlike `emulator_host`, calls carry credentials, so plain `http://` is refused
    /// except on loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// Apache Kafka: topics and the groups reading them (see backend/kafka).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSettings {
    /// `host:port` of one or more brokers, separated by commas.
    #[serde(default)]
    pub bootstrap_servers: String,
    /// The client id requests carry (default `qdeck`), as broker logs and quotas see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Only topics whose names match this regex (default: every topic but Kafka's internal ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<String>,
    /// Only groups whose ids match this regex (default: every group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<String>,
    /// Seconds a connect or one request may take (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// SASL mechanism: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (default: no SASL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<String>,
    /// The SASL user name (needed with `sasl_mechanism`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_username: Option<String>,
    /// Name of an environment variable holding the SASL password (needed with `sasl_mechanism`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_password_env: Option<String>,
    /// Speak TLS to every broker (Kafka's `SSL` / `SASL_SSL`); implied by `tls_ca_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// PEM file of the CA that signed the brokers' certificates (default: the public web roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<String>,
}

impl Profile {
    /// The profile used when no config exists: the embedded broker in the data dir.
    pub fn default_local() -> Profile {
        Profile {
            name: "local".to_string(),
            kind: ProfileKind::Local(LocalSettings::default()),
            access: None,
            read_only: false,
            protected: false,
            refresh_secs: None,
            max_calls_per_minute: None,
            reason_headers: Vec::new(),
            notify: None,
        }
    }

    /// The poller's call budget per minute: the profile's, else its kind's default; `None`
    /// for no limit.
    pub fn calls_per_minute(&self) -> Option<u32> {
        match self.max_calls_per_minute {
            Some(0) => None,
            Some(n) => Some(n),
            None => self.kind.default_calls_per_minute(),
        }
    }

    /// The tier this profile runs at: its `access`, capped at `browse` by `read_only` (from
    /// the file or `--read-only`). Of two settings the stricter wins, so nothing can widen a
    /// read-only profile. An unreadable `access` (only possible if validation was skipped)
    /// counts as `stats`, the narrowest.
    pub fn effective_access(&self) -> Access {
        let set = match &self.access {
            Some(a) => Access::parse(a).unwrap_or(Access::Stats),
            None => Access::Full,
        };
        if self.read_only {
            set.min(Access::Browse)
        } else {
            set
        }
    }
}

/// Permission tiers, each including the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Figures only: queue lists, depths, ages, consumers. No message bodies.
    Stats,
    /// Also message bodies: peek, browse, export, reasons.
    Browse,
    /// Also changes that keep every message: redrive, move, send, import, edit and resend.
    Redrive,
    /// Also changes that remove messages for good: purge, delete.
    Full,
}

impl Access {
    pub const ALL: [Access; 4] = [Access::Stats, Access::Browse, Access::Redrive, Access::Full];

    pub fn as_str(self) -> &'static str {
        match self {
            Access::Stats => "stats",
            Access::Browse => "browse",
            Access::Redrive => "redrive",
            Access::Full => "full",
        }
    }

    pub fn parse(s: &str) -> Option<Access> {
        Access::ALL.into_iter().find(|a| a.as_str() == s)
    }
}
