//! The AMQP Service Bus stand-in (`scripts/sb_standin.sh`) started with any extra arguments
//! (`--entra-token TOKEN=CLAIMS`, ...) and fault switches, and Microsoft's client run against
//! it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value as Json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python the stand-in and Microsoft's client run on; skips (visibly) without it.
pub fn python() -> String {
    super::broker_var(
        "QDECK_TEST_SB_AMQP",
        "set it to 1 to run the AMQP stand-in tests",
    );
    let py = super::broker_var(
        "QDECK_TEST_PYTHON",
        "a Python with azure-servicebus and python-qpid-proton",
    );
    let ok = Command::new(&py)
        .args(["-c", "import azure.servicebus, proton"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        super::skip(&format!(
            "{py} cannot import azure.servicebus and proton (pip install azure-servicebus python-qpid-proton)"
        ));
    }
    py
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One stand-in process, killed when dropped.
pub struct SbStandin {
    child: Child,
    /// Line 1: the connection string (emulator form, with the root key).
    pub conn: String,
    /// Line 2: the management API's base URL.
    pub mgmt: String,
}

impl SbStandin {
    /// Start with these `--queue` specs and `extra` arguments after them.
    pub fn start(queues: &[&str], extra: &[&str]) -> SbStandin {
        Self::launch(queues, extra, "")
    }

    /// As `start`, with QDECK_SB_STANDIN_FAULT set to `faults` (see faults.py; "" for none).
    /// A port found free can be taken by a test running beside this one before the stand-in
    /// binds it; a stand-in that prints no connection string is started again on other ports
    /// (at most three tries).
    pub fn launch(queues: &[&str], extra: &[&str], faults: &str) -> SbStandin {
        let py = python();
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_launch(&py, queues, extra, faults) {
                Ok(s) => return s,
                Err(first) => last = first,
            }
        }
        panic!("the stand-in did not start in three tries; its first line: {last:?}");
    }

    fn try_launch(
        py: &str,
        queues: &[&str],
        extra: &[&str],
        faults: &str,
    ) -> Result<SbStandin, String> {
        let mut cmd = Command::new("bash");
        cmd.arg(root().join("scripts/sb_standin.sh"))
            .arg(free_port().to_string())
            .args(["--management-port", &free_port().to_string()])
            .env("QDECK_TEST_PYTHON", py)
            .env("QDECK_SB_STANDIN_FAULT", faults)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for q in queues {
            cmd.args(["--queue", q]);
        }
        cmd.args(extra);
        let mut child = cmd.spawn().expect("start scripts/sb_standin.sh");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(Result::ok).unwrap_or_default();
            let second = lines.next().and_then(Result::ok).unwrap_or_default();
            let _ = tx.send((first, second));
            // Keep reading so the stand-in never blocks on a full pipe.
            for _ in lines {}
        });
        let (conn, mgmt) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the stand-in printed its connection string within 30 s");
        if !conn.starts_with("Endpoint=sb://") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(conn);
        }
        let mgmt = mgmt
            .strip_prefix("management=")
            .unwrap_or_else(|| panic!("second line: {mgmt:?}"))
            .to_string();
        Ok(SbStandin { child, conn, mgmt })
    }

    /// The connection string's `Endpoint=…;UseDevelopmentEmulator=true` alone, without a key.
    pub fn endpoint_only(&self) -> String {
        self.conn
            .split(';')
            .filter(|p| {
                let p = p.trim().to_ascii_lowercase();
                p.starts_with("endpoint=") || p.starts_with("usedevelopmentemulator=")
            })
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Run one command of Microsoft's client (sb_client.py) with the root key; its JSON answer.
    pub fn client(&self, args: &[&str]) -> Json {
        let out = Command::new(python())
            .arg(root().join("tests/fixtures/sb_amqp_client/sb_client.py"))
            .arg(args[0])
            .arg(&self.conn)
            .args(&args[1..])
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "sb_client.py {args:?} failed: {}",
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
}

impl Drop for SbStandin {
    fn drop(&mut self) {
        // The script `exec`s the stand-in: this process is the stand-in itself.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
