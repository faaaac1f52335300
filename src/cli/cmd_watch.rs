//! `qdeck watch`: the alert rules evaluated headless, one line per transition.

use tokio::sync::mpsc;

use super::args::{Format, Global, HookFormat, WatchArgs};
use super::exit::{CliError, CliResult, OK, USAGE};
use super::hooks::{self, Hooks, Settings, Target};
use super::{multi, output};
use qdeck_backend::BackendError;
use qdeck_engine::alerts::{self, Monitor, Tracker, Transition};
use qdeck_engine::fleet::{self, Polled};
use qdeck_engine::multi_poller::{self, Answer, Timeout};
use qdeck_model::config::{self, LoadOptions};
use qdeck_model::domain::now_ms;

/// The profiles a headless poller watches: `-p a,b`, `-p a`, `--all-profiles`, else every
/// configured profile (the local broker when there is none).
pub(super) fn profiles(c: &config::AppConfig, global: &Global) -> Result<Vec<String>, CliError> {
    if let Some(sel) = multi::selection(global) {
        return multi::resolve(c, &sel);
    }
    match &global.profile {
        Some(p) => multi::resolve(c, &multi::Selection::Named(vec![p.clone()])),
        None => Ok(fleet::profiles_to_poll(c, &[])),
    }
}

pub(super) async fn watch(
    global: &Global,
    opts: &LoadOptions,
    a: WatchArgs,
    f: Format,
) -> CliResult {
    let any = LoadOptions {
        profile: None,
        ..opts.clone()
    };
    let base = qdeck_engine::config_check::load(&any)?;
    let rules = alerts::rules(&base.config).map_err(|e| CliError::new(USAGE, e))?;
    if rules.is_empty() {
        return Err(CliError::usage(
            "no alert rules: add [[alerts]] tables to the config (see config.example.toml)",
        ));
    }
    let names = profiles(&base.config, global)?;
    let hooks = hook_settings(&a)?
        .map(Hooks::new)
        .transpose()
        .map_err(|e| CliError::new(USAGE, e))?;
    let state = a
        .state
        .clone()
        .unwrap_or_else(|| config::paths::state_dir().join("watch-state.json"));
    let tracker = Tracker::load(&state).map_err(|e| CliError::new(USAGE, e))?;
    let mut monitor = Monitor::new(rules, tracker);
    eprintln!(
        "qdeck watch: {} rule(s) over {} profile(s): {}; state in {}",
        monitor.rules.len(),
        names.len(),
        names.join(", "),
        state.display()
    );
    let (_polling, rx) = poll(&base, &names);
    let mut hooks = hooks;
    run(&mut monitor, rx, &state, a.duration, &mut |t| {
        print(t, f);
        if let Some(h) = hooks.as_mut() {
            h.send(t);
        }
    })
    .await;
    if let Some(h) = hooks {
        h.finish().await;
    }
    Ok(OK)
}

/// Every profile in `names` polled for its queues and figures, each at its own refresh
/// period and call budget (the fleet view's poller); `watch` and `serve` read the answers.
pub(super) fn poll(
    base: &config::Loaded,
    names: &[String],
) -> (
    multi_poller::PollHandle,
    mpsc::Receiver<Answer<Polled, BackendError>>,
) {
    let (tx, rx) = mpsc::channel(64);
    let base = base.clone();
    let handle = multi_poller::spawn(
        move |n| base.options_for(n),
        names,
        Timeout::FromRefresh,
        fleet::read,
        tx,
    );
    (handle, rx)
}

/// Answers in, transitions out, the state saved after each answer, until interrupted (or
/// `duration` has passed).
async fn run(
    monitor: &mut Monitor,
    mut rx: mpsc::Receiver<Answer<Polled, BackendError>>,
    state: &std::path::Path,
    duration: Option<std::time::Duration>,
    on: &mut dyn FnMut(&Transition),
) {
    let until = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until);
    let mut warned = false;
    let mut clock = tokio::time::interval(qdeck_engine::alerts::monitor::HEALTH_TICK);
    loop {
        let answer = tokio::select! {
            a = rx.recv() => match a { Some(a) => Some(a), None => return },
            _ = clock.tick() => None,
            _ = tokio::signal::ctrl_c() => return,
            () = &mut until => return,
        };
        let on_clock = answer.is_none();
        let changes = match answer {
            Some(a) => monitor.apply(a, now_ms()),
            None => monitor.evaluate_health(now_ms()),
        };
        // The state is saved after every answer, and after a tick only when it changed.
        if on_clock && changes.is_empty() {
            continue;
        }
        for t in &changes {
            on(t);
        }
        match monitor.book.read(|t| t.save(state)) {
            Ok(()) => warned = false,
            // Said once until it works again: a full disk must not flood the terminal.
            Err(e) if !warned => {
                eprintln!("qdeck watch: cannot save the alert state: {e}");
                warned = true;
            }
            Err(_) => {}
        }
    }
}

fn print(t: &Transition, f: Format) {
    if f == Format::Json {
        output::print(&format!("{}\n", hooks::json(t)));
        return;
    }
    let at = chrono::DateTime::from_timestamp_millis(t.at_ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    output::print(&format!(
        "{at} {} {} {} {}: {}\n",
        t.change.as_str().to_uppercase(),
        t.severity.as_str(),
        qdeck_model::sanitize::clean(&t.rule),
        qdeck_model::sanitize::clean(&hooks::place(t)),
        qdeck_model::sanitize::clean(&t.summary)
    ));
}

fn hook_settings(a: &WatchArgs) -> Result<Option<Settings>, CliError> {
    let target = match (&a.hook_cmd, &a.hook_url_env) {
        (Some(cmd), _) => Target::Command(cmd.clone()),
        (None, Some(var)) => {
            use qdeck_model::config::secret::{Environment, SecretSource};
            let url = Environment.get(var).ok_or_else(|| {
                CliError::usage(format!("--hook-url-env {var}: the variable is not set"))
            })?;
            Target::Http {
                url,
                slack: a.hook_format == HookFormat::Slack,
            }
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(Settings {
        target,
        timeout: a.hook_timeout,
        tries: a.hook_tries,
    }))
}
