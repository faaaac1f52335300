//! NATS JetStream test set-up shared by tests/nats*.rs and the console test: the nats-py peer
//! (tests/fixtures/python/nats_peer.py), a scene of streams deleted when dropped, qdeck
//! profiles and backends on the shared server, and nats-servers of a test's own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use qdeck_backend::{build, Backend};
use qdeck_model::config::{NatsSettings, Profile, ProfileKind};
use qdeck_model::domain::{QueueId, QueueStats};
use serde_json::Value as Json;

use super::peer::{run_json, spawn_on_free_port, KillOnDrop};

pub fn nats_url() -> String {
    super::broker_var(
        "QDECK_TEST_NATS_URL",
        "e.g. nats://127.0.0.1:4222 with JetStream",
    )
}

pub fn python() -> String {
    super::broker_var(
        "QDECK_TEST_PYTHON",
        "a Python with nats-py (pip install nats-py nkeys)",
    )
}

pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python/nats_peer.py")
}

/// One nats-py command against the shared server; its JSON answer.
pub fn peer(args: &[&str]) -> Json {
    peer_at(&nats_url(), args)
}

/// One nats-py command against the server at `url`.
pub fn peer_at(url: &str, args: &[&str]) -> Json {
    let mut all = vec![url];
    all.extend_from_slice(args);
    run_json(&python(), &script(), &all)
}

/// A prefix no other test (nor another helper's run) uses: `qdeck-test-nats-` and 8 hex.
pub fn unique_prefix() -> String {
    format!(
        "qdeck-test-nats-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// A test's streams, all named from `p` (`P_WQ`, `P_LIM`, `DLQ_P_WQ_worker`, …), deleted on
/// drop from the server at `url`, also when the test fails.
pub struct Scene {
    pub p: String,
    pub url: String,
}

impl Scene {
    /// Streams yet to be made (by a peer command of the test's choosing).
    pub fn empty() -> Scene {
        Scene {
            p: unique_prefix(),
            url: nats_url(),
        }
    }

    /// The standard scene (`setup`): a work queue and a limits stream, their consumers and
    /// messages, with `extra` more poison messages on the work queue.
    pub fn with_poison(extra: usize) -> Scene {
        let s = Scene::empty();
        peer(&["setup", &s.p, &extra.to_string()]);
        s
    }

    pub fn new() -> Scene {
        Scene::with_poison(0)
    }

    pub fn wq(&self) -> String {
        format!("{}_WQ", self.p)
    }

    pub fn lim(&self) -> String {
        format!("{}_LIM", self.p)
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = Command::new(python())
            .arg(script())
            .args([&self.url, "cleanup", &self.p])
            .output();
    }
}

pub fn profile(settings: NatsSettings) -> Profile {
    Profile {
        name: "nats-test".into(),
        kind: ProfileKind::Nats(settings),
        access: None,
        read_only: false,
        protected: false,
        refresh_secs: None,
        max_calls_per_minute: None,
        reason_headers: Vec::new(),
        notify: None,
    }
}

/// qdeck's backend on the shared server.
pub async fn backend() -> Arc<dyn Backend> {
    build(&profile(NatsSettings {
        url: Some(nats_url()),
        ..Default::default()
    }))
    .await
    .expect("build nats backend")
}

/// `key` of a JSON object as a number.
pub fn n(v: &Json, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

pub async fn stats_of(b: &dyn Backend, ids: &[String]) -> Vec<QueueStats> {
    let ids: Vec<QueueId> = ids.iter().map(QueueId::new).collect();
    let batch = b.stats(&ids).await.expect("stats");
    assert!(batch.errors.is_empty(), "{:?}", batch.errors);
    batch.stats
}

/// `dir/config.toml` with one NATS profile `n` on the shared server; `extra` adds lines.
pub fn write_config(dir: &Path, extra: &str) {
    super::write_config(
        dir,
        "n",
        &[format!(
            "name = \"n\"\nkind = \"nats\"\nurl = \"{}\"\n{extra}\n",
            nats_url()
        )],
    );
}

/// A nats-server of the test's own on a free port, killed when dropped.
pub struct OwnServer {
    _child: KillOnDrop,
    pub url: String,
    pub port: u16,
}

impl OwnServer {
    /// Started with these command-line flags (listening on 127.0.0.1 and the port added).
    pub fn start(args: &[&str]) -> OwnServer {
        OwnServer::on_a_free_port("nats", |port| {
            let mut cmd = Command::new("nats-server");
            cmd.args(["-a", "127.0.0.1", "-p", &port.to_string()])
                .args(args);
            cmd
        })
    }

    /// Started from a config file whose text `conf` gets `port` to listen on.
    pub fn with_config(dir: &Path, conf: impl Fn(u16) -> String, scheme: &str) -> OwnServer {
        OwnServer::on_a_free_port(scheme, |port| {
            let path = dir.join(format!("nats-{port}.conf"));
            std::fs::write(&path, conf(port)).unwrap();
            let mut cmd = Command::new("nats-server");
            cmd.arg("-c").arg(&path);
            cmd
        })
    }

    /// nats-server on a port found free (`spawn_on_free_port` retries a port taken meanwhile).
    fn on_a_free_port(scheme: &str, command: impl Fn(u16) -> Command) -> OwnServer {
        let (child, port) = spawn_on_free_port("nats-server", command);
        OwnServer {
            _child: child,
            url: format!("{scheme}://127.0.0.1:{port}"),
            port,
        }
    }
}
