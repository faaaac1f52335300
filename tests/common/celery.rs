//! Celery set-up shared by tests/celery*.rs: the Python that has Celery, the brokers as kombu
//! and as a qdeck profile see them, and real `celery worker` processes that are killed when
//! the test ends.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value as Json;

/// The Python with `celery[redis]` (QDECK_TEST_PYTHON); the test is skipped without it.
pub fn python() -> String {
    let py = super::broker_var("QDECK_TEST_PYTHON", "a Python with celery[redis] installed");
    let ok = Command::new(&py)
        .args(["-c", "import celery, kombu"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        super::skip(&format!(
            "{py} cannot import celery (pip install 'celery[redis]>=5,<6')"
        ));
    }
    py
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/celery")
}

/// QDECK_TEST_REDIS_URL without a trailing slash.
pub fn redis_url() -> String {
    super::broker_var("QDECK_TEST_REDIS_URL", "e.g. redis://127.0.0.1:6379")
        .trim_end_matches('/')
        .to_string()
}

/// Run `script` in the fixtures with `args`; its last JSON line.
pub fn run_script(script: &str, args: &[&str]) -> Json {
    let out = Command::new(python())
        .arg(fixtures().join(script))
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| panic!("no JSON answer in {text:?}"))
}

/// The RabbitMQ under test, as kombu and as a qdeck profile see it.
pub struct Rmq {
    pub kombu_url: String,
    pub bare: String,
    pub mgmt: String,
    pub user: String,
    pub password: String,
}

impl Rmq {
    pub fn from_env() -> Rmq {
        let url = super::broker_var("QDECK_TEST_AMQP_URL", "RabbitMQ's AMQP URL");
        let mgmt = super::broker_var("QDECK_TEST_RABBITMQ_MGMT", "http://127.0.0.1:15672");
        let uri: lapin::uri::AMQPUri = url.parse().expect("AMQP URL");
        let user = uri.authority.userinfo.username.clone();
        let password = uri.authority.userinfo.password.clone();
        let bare = format!(
            "amqp://{}@{}:{}/{}",
            user,
            uri.authority.host,
            uri.authority.port,
            urlencoding::encode(&uri.vhost)
        );
        // kombu takes the vhost from the path as written: "//" is "/".
        let kombu_url = format!(
            "amqp://{}:{}@{}:{}/{}",
            user, password, uri.authority.host, uri.authority.port, uri.vhost
        );
        Rmq {
            kombu_url,
            bare,
            mgmt,
            user,
            password,
        }
    }

    /// A profile table's lines (the password from QDECK_TEST_CELERY_RMQ_PASSWORD).
    pub fn profile(&self) -> String {
        format!(
            "kind = \"rabbitmq\"\namqp_url = \"{}\"\nmanagement_url = \"{}\"\nusername = \"{}\"\npassword_env = \"QDECK_TEST_CELERY_RMQ_PASSWORD\"\n",
            self.bare, self.mgmt, self.user
        )
    }
}

/// A `celery worker` process running tests/fixtures/celery/celery_workers.py; killed (with
/// its pool) when dropped.
pub struct Worker {
    pub hostname: String,
    child: Child,
}

impl Worker {
    /// `pool` is solo or threads; `queues` comma-separated.
    pub fn start(
        broker: &str,
        hostname: &str,
        pool: &str,
        concurrency: u32,
        queues: &str,
    ) -> Worker {
        Worker::start_with(broker, None, hostname, pool, concurrency, queues)
    }

    /// As `start`, storing results in `backend` (a Redis URL) when given.
    pub fn start_with(
        broker: &str,
        backend: Option<&str>,
        hostname: &str,
        pool: &str,
        concurrency: u32,
        queues: &str,
    ) -> Worker {
        let env: Vec<(&str, &str)> = backend
            .map(|b| ("QDECK_CELERY_BACKEND", b))
            .into_iter()
            .collect();
        Worker::start_env(broker, hostname, pool, concurrency, queues, &env)
    }

    /// As `start`, with variables for the app (tests/fixtures/celery/celery_workers.py reads
    /// QDECK_CELERY_BACKEND, QDECK_CELERY_DLX_QUEUE and QDECK_CELERY_RECORD[_KEY]).
    pub fn start_env(
        broker: &str,
        hostname: &str,
        pool: &str,
        concurrency: u32,
        queues: &str,
        env: &[(&str, &str)],
    ) -> Worker {
        let log = std::fs::File::create(std::env::temp_dir().join(format!(
            "qdeck-celery-worker-{}.log",
            hostname.replace(['@', '/'], "_")
        )))
        .expect("worker log");
        let child = Command::new(python())
            .envs(env.iter().copied())
            .args(["-m", "celery", "-A", "celery_workers", "worker"])
            .args(["--pool", pool, "-c", &concurrency.to_string()])
            .args(["-Q", queues, "-n", hostname])
            .args([
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ])
            .args(["-l", "warning"])
            .current_dir(fixtures())
            .env("QDECK_CELERY_BROKER", broker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start celery worker");
        Worker {
            hostname: hostname.to_string(),
            child,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What Celery's own `inspect()` answers (stats, active, reserved, scheduled, active_queues).
pub fn inspect(broker: &str) -> Json {
    run_script("celery_workers.py", &["inspect", broker])
}

/// Wait until Celery's inspect sees every one of `hosts` answering stats, and `check` holds.
pub fn wait_for(broker: &str, hosts: &[&str], check: impl Fn(&Json) -> bool) -> Json {
    let mut last = Json::Null;
    for _ in 0..40 {
        last = inspect(broker);
        let all = hosts.iter().all(|h| last["stats"].get(*h).is_some());
        if all && check(&last) {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    panic!("celery workers {hosts:?} never reached the state wanted: {last}");
}

/// Flower 2.x (`celery flower`) on a free local port against `broker`; killed when dropped.
/// Its REST API is opened without auth (FLOWER_UNAUTHENTICATED_API), for the test only.
pub struct Flower {
    pub base: String,
    child: Child,
}

impl Flower {
    /// `broker_api`: RabbitMQ's management API, which Flower reads queue lengths from.
    pub async fn start(broker: &str, broker_api: Option<&str>) -> Flower {
        let ok = Command::new(python())
            .args(["-c", "import flower"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            super::skip("QDECK_TEST_PYTHON cannot import flower (pip install 'flower>=2,<3')");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log =
            std::fs::File::create(std::env::temp_dir().join(format!("qdeck-flower-{port}.log")))
                .expect("flower log");
        let mut cmd = Command::new(python());
        cmd.args(["-m", "celery", "-A", "celery_workers", "flower"])
            .arg("--address=127.0.0.1")
            .arg(format!("--port={port}"));
        if let Some(api) = broker_api {
            cmd.arg(format!("--broker_api={api}"));
        }
        let child = cmd
            .current_dir(fixtures())
            .env("QDECK_CELERY_BROKER", broker)
            .env("FLOWER_UNAUTHENTICATED_API", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start flower");
        let f = Flower {
            base: format!("http://127.0.0.1:{port}"),
            child,
        };
        for _ in 0..80 {
            if f.get("/api/workers").await.is_some() {
                return f;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        panic!("flower did not answer on {}", f.base);
    }

    /// GET `path` of Flower's REST API as JSON; `None` until it answers.
    pub async fn get(&self, path: &str) -> Option<Json> {
        qdeck_backend::tls::install_provider();
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .timeout(std::time::Duration::from_secs(20))
            .send()
            .await
            .ok()?;
        if !r.status().is_success() {
            return None;
        }
        serde_json::from_str(&r.text().await.ok()?).ok()
    }
}

impl Drop for Flower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
