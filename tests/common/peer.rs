//! Running the independent clients and servers broker tests compare qdeck with: a Python
//! peer script whose last line of output is its JSON answer, a free port for a server of the
//! test's own, and a child process that dies with the test.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value as Json;

/// A port nothing listens on now (the listener is closed before the server binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Run `python script args…`; the JSON of the last line starting with `{` it printed.
pub fn run_json(python: &str, script: &Path, args: &[&str]) -> Json {
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run python");
    let name = script.file_name().unwrap_or_default().to_string_lossy();
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("{name} {args:?} printed no JSON: {text:?}"));
    serde_json::from_str(line).expect("json answer")
}

/// A child process killed and reaped when the test ends, passed or failed.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Wait until something accepts connections on 127.0.0.1:`port` (at most 5 s).
pub fn wait_for_port(port: u16) -> bool {
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// A server of the test's own on a port found free. The port can be taken by a test running
/// beside this one before the server binds it: the server then exits, and it is started again
/// on another port (at most three tries). A port that answers while the server has exited is
/// someone else's, so the child must still be running once the port answers.
pub fn spawn_on_free_port(what: &str, command: impl Fn(u16) -> Command) -> (KillOnDrop, u16) {
    for _ in 0..3 {
        let port = free_port();
        let child = command(port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| super::skip(&format!("cannot run {what}: {e}")));
        let mut child = KillOnDrop(child);
        let up = wait_for_port(port);
        // A server that lost the race exits right after failing to bind.
        std::thread::sleep(std::time::Duration::from_millis(150));
        if up && child.0.try_wait().is_ok_and(|s| s.is_none()) {
            return (child, port);
        }
    }
    panic!("{what} did not start on a free port in three tries");
}
