//! A qdeck command sealed off from the caller: its own HOME and XDG directories in a temporary
//! folder, nothing from the environment but PATH, and the local broker file it uses.

use std::path::PathBuf;
use std::time::Duration;

use assert_cmd::Command;
use qdeck_backend::local::LocalBackend;

pub struct CliEnv {
    pub dir: tempfile::TempDir,
}

impl CliEnv {
    pub fn new() -> CliEnv {
        CliEnv {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn qdeck(&self) -> Command {
        let mut c = Command::from_std(self.process());
        c.timeout(Duration::from_secs(120));
        c
    }

    /// The same command as a process to spawn and talk to while it runs.
    pub fn process(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("qdeck"));
        let d = self.dir.path();
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", d)
            .env("USER", "tester")
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_STATE_HOME", d.join("state"));
        c
    }

    /// The local broker file the default profile uses.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("data/qdeck/local.db")
    }

    /// That broker, opened directly (its folder made first).
    pub fn local(&self) -> LocalBackend {
        std::fs::create_dir_all(self.db().parent().unwrap()).unwrap();
        LocalBackend::open(&self.db()).unwrap()
    }
}
