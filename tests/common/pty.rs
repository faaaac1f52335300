//! The real `qdeck` binary in a pseudo-terminal, its screen read back through a terminal
//! emulator (vt100): what a user would see, keys as a user would type them.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

pub struct Console {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    out: Arc<Mutex<Vec<u8>>>,
    // Dropping the master hangs up the terminal: it lives as long as the console.
    _master: Box<dyn MasterPty + Send>,
    pub cols: u16,
    pub rows: u16,
}

impl Console {
    /// `qdeck ARGS` in a `cols`×`rows` terminal, its XDG directories under `dir`.
    pub fn spawn(dir: &Path, args: &[&str], env: &[(&str, &str)], cols: u16, rows: u16) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_qdeck"));
        for a in args {
            cmd.arg(a);
        }
        for (k, sub) in [
            ("XDG_CONFIG_HOME", "c"),
            ("XDG_DATA_HOME", "d"),
            ("XDG_STATE_HOME", "s"),
        ] {
            cmd.env(k, dir.join(sub));
        }
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let o2 = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                o2.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Console {
            child,
            writer,
            out,
            _master: pair.master,
            cols,
            rows,
        }
    }

    /// Everything written to the terminal so far, escape sequences included.
    pub fn raw(&self) -> Vec<u8> {
        self.out.lock().unwrap().clone()
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        let mut p = vt100::Parser::new(self.rows, self.cols, 0);
        p.process(&self.out.lock().unwrap());
        p.screen().contents()
    }

    fn write(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
    }

    /// Sends `keys` in one write, then gives the console a moment (a lone Esc followed at
    /// once by another byte would read as Alt and that key).
    pub fn send(&mut self, keys: &[u8]) {
        self.write(keys);
        std::thread::sleep(Duration::from_millis(150));
    }

    /// Types `keys` one at a time, as a person would (a paste would arrive as one read).
    pub fn type_keys(&mut self, keys: &str) {
        for k in keys.chars() {
            self.write(k.to_string().as_bytes());
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// The first screen for which `ok` holds, or `None` after `within`.
    pub fn poll_until(&self, within: Duration, ok: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let s = self.screen();
            if ok(&s) {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The first screen that contains `needle`; fails the test after 20 s.
    pub fn wait_for(&self, needle: &str) -> String {
        self.poll_until(Duration::from_secs(20), |s| s.contains(needle))
            .unwrap_or_else(|| {
                panic!(
                    "timed out waiting for {needle:?}; screen so far:\n{}",
                    self.screen()
                )
            })
    }

    /// Waits for the process to end (after a quit key); its exit code.
    pub fn wait_exit(&mut self, within: Duration) -> u32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.exit_code();
            }
            assert!(Instant::now() < deadline, "qdeck did not quit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Quits with `q` (the queue list's quit key) and waits for the process to end.
    pub fn quit(mut self) {
        self.send(b"q");
        let _ = self.child.wait();
    }
}

/// Every control in `raw` (what a terminal received) that is not one the console's terminal
/// library writes for itself: a CSI sequence for cursor moves, colours and attributes,
/// clearing, scrolling, screen and input modes, cursor shape; ESC 7 / ESC 8; CR and LF.
/// Anything else (an OSC such as a title change, DCS, a lone ESC, BEL, C1 controls) can only
/// have come from broker text written raw. A CSI of an allowed kind from broker text (a
/// body's `ESC[2J`) passes this check: a test looks for it next to its own text.
pub fn foreign_controls(raw: &[u8]) -> Vec<String> {
    let s = String::from_utf8_lossy(raw);
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\x1b' {
            match c.get(i + 1) {
                Some('[') => {
                    let mut j = i + 2;
                    while c.get(j).is_some_and(|ch| ('\x30'..='\x3f').contains(ch)) {
                        j += 1;
                    }
                    while c.get(j).is_some_and(|ch| ('\x20'..='\x2f').contains(ch)) {
                        j += 1;
                    }
                    let seq: String = c[i..(j + 1).min(c.len())].iter().collect();
                    match c.get(j) {
                        Some(f) if "ABCDEFGHJKSTdfmhlqrstun".contains(*f) => {}
                        _ => out.push(format!("{seq:?} at char {i}")),
                    }
                    i = j + 1;
                }
                Some('7' | '8') => i += 2,
                other => {
                    out.push(format!("ESC followed by {other:?} at char {i}"));
                    i += 2;
                }
            }
            continue;
        }
        if c[i].is_control() && c[i] != '\r' && c[i] != '\n' {
            out.push(format!("{:?} at char {i}", c[i]));
        }
        i += 1;
    }
    out
}

impl Drop for Console {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
    }
}
