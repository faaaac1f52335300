//! `qdeck watch`'s hooks: each alert transition goes to a command (the transition as JSON on
//! its standard input) or to an HTTP POST, with a timeout and retries. Each rule has its own
//! queue and runs one hook at a time, so a slow hook of one rule delays no other rule and
//! never runs twice at once; a failed hook is logged and the next transition still goes.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use qdeck_engine::alerts::Transition;
use qdeck_model::config::secret::Secret;

/// What a transition is sent to.
#[derive(Debug, Clone)]
pub enum Target {
    /// Run with `sh -c`; the transition as one JSON line on stdin.
    Command(String),
    /// POST to this URL (read from an environment variable, never from the command line). A
    /// webhook URL is a bearer credential (Slack's carries its token in the path).
    Http { url: Secret, slack: bool },
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub target: Target,
    pub timeout: Duration,
    pub tries: u32,
}

pub struct Hooks {
    settings: Settings,
    queues: HashMap<String, (mpsc::UnboundedSender<Transition>, JoinHandle<()>)>,
    client: reqwest::Client,
}

impl Hooks {
    pub fn new(settings: Settings) -> Result<Hooks, String> {
        qdeck_backend::tls::install_provider();
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| format!("cannot set up the webhook client: {e}"))?;
        Ok(Hooks {
            settings,
            queues: HashMap::new(),
            client,
        })
    }

    /// Queues `t` behind the earlier transitions of its rule.
    pub fn send(&mut self, t: &Transition) {
        let (settings, client) = (self.settings.clone(), self.client.clone());
        let (tx, _) = self.queues.entry(t.rule.clone()).or_insert_with(|| {
            let (tx, mut rx) = mpsc::unbounded_channel::<Transition>();
            let task = tokio::spawn(async move {
                while let Some(t) = rx.recv().await {
                    deliver(&settings, &client, &t).await;
                }
            });
            (tx, task)
        });
        let _ = tx.send(t.clone());
    }

    /// Waits for the queued hooks to finish (each is bounded by its timeout and tries).
    pub async fn finish(self) {
        for (_, (tx, task)) in self.queues {
            drop(tx);
            let _ = task.await;
        }
    }
}

async fn deliver(s: &Settings, client: &reqwest::Client, t: &Transition) {
    let tries = s.tries.max(1);
    for attempt in 1..=tries {
        let result = match &s.target {
            Target::Command(cmd) => run_command(cmd, t, s.timeout).await,
            Target::Http { url, slack } => post(client, url, *slack, t).await,
        };
        match result {
            Ok(()) => return,
            Err(e) => {
                eprintln!(
                    "qdeck watch: hook for {} ({} on {}) failed, try {attempt} of {tries}: {}",
                    qdeck_model::sanitize::clean(&t.rule),
                    t.change.as_str(),
                    qdeck_model::sanitize::clean(&place(t)),
                    qdeck_model::sanitize::one_line(&e)
                );
                if attempt < tries {
                    tokio::time::sleep(Duration::from_millis(500 * 2u64.pow(attempt - 1))).await;
                }
            }
        }
    }
}

/// `profile/queue`, or the profile alone for a rule on its health.
pub fn place(t: &Transition) -> String {
    if t.queue.is_empty() {
        t.profile.clone()
    } else {
        format!("{}/{}", t.profile, t.queue)
    }
}

/// The JSON a hook receives (and `watch -o json` prints).
pub fn json(t: &Transition) -> serde_json::Value {
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    serde_json::json!({
        "state": t.change.as_str(),
        "rule": t.rule,
        "severity": t.severity.as_str(),
        "profile": t.profile,
        "queue": t.queue,
        "summary": t.summary,
        "at": iso(t.at_ms),
        "firing_since": iso(t.firing_since_ms),
    })
}

async fn run_command(cmd: &str, t: &Transition, timeout: Duration) -> Result<(), String> {
    // Its own process group, so that a timeout kills what the shell started too (a child
    // left running would hold our standard error open and outlive the hook).
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the hook command: {e}"))?;
    let pid = child.id();
    let run = async {
        if let Some(mut stdin) = child.stdin.take() {
            let mut line = json(t).to_string();
            line.push('\n');
            // A hook that does not read its input still runs; its exit status decides.
            let _ = stdin.write_all(line.as_bytes()).await;
        }
        child.wait().await.map_err(|e| e.to_string())
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("the hook command exited with {status}")),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            if let Some(pid) = pid {
                let _ = tokio::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{pid}")])
                    .status()
                    .await;
            }
            Err(format!(
                "the hook command did not finish within {}s (killed)",
                timeout.as_secs_f64()
            ))
        }
    }
}

async fn post(
    client: &reqwest::Client,
    url: &Secret,
    slack: bool,
    t: &Transition,
) -> Result<(), String> {
    let body = if slack {
        serde_json::json!({
            "text": format!(
                "[{}] {} {} {}: {}",
                t.change.as_str().to_uppercase(),
                t.severity.as_str(),
                t.rule,
                place(t),
                t.summary
            )
        })
    } else {
        json(t)
    };
    // reqwest's errors name the URL they were for: taken out before one is said anywhere.
    let r = client
        .post(url.expose())
        .json(&body)
        .send()
        .await
        .map_err(|e| {
            format!(
                "POST failed: {}",
                qdeck_backend::net_error::cause(&e.without_url())
            )
        })?;
    if r.status().is_success() {
        Ok(())
    } else {
        Err(format!("POST answered {}", r.status()))
    }
}
