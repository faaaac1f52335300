//! Set-up shared by integration tests: a qdeck command sealed off from the caller's own config
//! and state, config files with several profiles, and Service Bus profiles and backends.

// Each test crate compiles this whole module and uses only its part.
#![allow(dead_code)]

pub mod celery;
pub mod cli_env;
pub mod console;
pub mod nats;
pub mod peer;
pub mod pty;
pub mod redis_db;
pub mod sb_standin;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use qdeck_backend::{build_with, Backend, BackendError};
use qdeck_model::config::secret::SecretMap;
use qdeck_model::config::{Profile, ProfileKind, ServicebusSettings};

/// The start of the line a broker test prints when its broker is missing. `.ci/run` greps
/// the test log for it (`^skipping:`) and fails the run; a test in tests/rabbitmq.rs checks
/// that the two agree.
pub const SKIP_NOTICE: &str = "skipping:";

/// The value of a broker test's variable (`QDECK_TEST_AMQP_URL`, ...). Broker tests are
/// `#[ignore]`d, so this runs only when they were asked for; a variable missing then is a
/// skipped broker test: see `skip`.
pub fn broker_var(name: &str, hint: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v,
        _ => skip(&format!("{name} is not set ({hint})")),
    }
}

/// A broker test that cannot run here: prints the skip notice and fails the test. The notice
/// is written to the process's stderr directly, past the test harness's capture, so it is in
/// the log even where the failure is not (a panic in a spawned task, a harness that only
/// shows failures with --nocapture); the leading newline puts it at the start of a line
/// after the harness's "test NAME ... ".
pub fn skip(why: &str) -> ! {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .unwrap_or("a broker test")
        .to_string();
    let line = format!("{SKIP_NOTICE} {test}: {why}");
    let _ = std::io::stderr().write_all(format!("\n{line}\n").as_bytes());
    panic!("{line}");
}

/// `qdeck` reading and writing only under `dir`: the config at `dir/config.toml`, HOME and the
/// XDG directories below `dir`, nothing from the caller's environment but PATH.
pub fn qdeck(dir: &Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("qdeck").unwrap();
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("USER", "tester")
        .env("QDECK_CONFIG", dir.join("config.toml"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .timeout(Duration::from_secs(120));
    c
}

/// Write `dir/config.toml` with `default` as the default profile and one `[[profiles]]` table
/// per entry of `profiles` (as made by `local_profile` or `servicebus_profile`).
pub fn write_config(dir: &Path, default: &str, profiles: &[String]) {
    let mut toml = format!("default_profile = \"{default}\"\n");
    for p in profiles {
        toml.push_str("[[profiles]]\n");
        toml.push_str(p);
    }
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// A local broker profile at `db`; `extra` adds lines to its table (e.g. an access tier).
pub fn local_profile(name: &str, db: &Path, extra: &str) -> String {
    format!(
        "name = \"{name}\"\nkind = \"local\"\npath = \"{}\"\n{extra}\n",
        db.display()
    )
}

/// A Service Bus profile whose connection string is in the environment variable `env`.
pub fn servicebus_profile(name: &str, env: &str) -> String {
    format!("name = \"{name}\"\nkind = \"servicebus\"\nconnection_string_env = \"{env}\"\ntransport = \"rest\"\n")
}

/// The `Profile` a config gives a Service Bus namespace: every setting at its default but the
/// connection string's variable and `topics`.
pub fn servicebus(name: &str, connection_string_env: &str, topics: Option<bool>) -> Profile {
    Profile {
        name: name.into(),
        kind: ProfileKind::Servicebus(ServicebusSettings {
            connection_string_env: connection_string_env.into(),
            topics,
            // The in-process stand-in speaks REST; tests/servicebus_amqp.rs has the AMQP one.
            transport: Some(qdeck_model::config::SbTransport::Rest),
            management_url: None,
            ..Default::default()
        }),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    }
}

/// A Service Bus backend on connection string `cs`, handed over in a secret map of its own
/// (the process environment is shared by the tests running in parallel).
pub async fn servicebus_backend(
    name: &str,
    cs: &str,
    topics: Option<bool>,
) -> Result<Arc<dyn Backend>, BackendError> {
    let var = "QDECK_TEST_SB_CONNECTION_STRING";
    let secrets = SecretMap::new().with(var, cs);
    build_with(&servicebus(name, var, topics), &secrets).await
}
