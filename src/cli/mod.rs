//! One-shot commands. They share the engine with the console: same config, same backends,
//! same gate and audit log.

pub mod args;
mod cmd_check;
mod cmd_config;
mod cmd_copy;
mod cmd_edit;
mod cmd_export;
mod cmd_groups;
mod cmd_import;
mod cmd_local;
mod cmd_mutate;
mod cmd_purge_nats;
mod cmd_purge_where;
mod cmd_read;
mod cmd_reasons;
mod cmd_redrive_where;
mod cmd_replay;
mod cmd_scheduled;
mod cmd_serve;
mod cmd_sessions;
mod cmd_watch;
mod cmd_worker_control;
mod confirm;
pub mod exit;
mod exposition;
pub mod fetch;
mod hooks;
pub mod multi;
pub mod output;
mod progress_line;
mod scan;

use std::io::IsTerminal;
use std::sync::Arc;

use args::{Cli, Command};
use exit::{CliError, CliResult};

use qdeck_backend::local::LocalHandle;
use qdeck_backend::{self as backend, Backend};
use qdeck_engine::session::Session;
use qdeck_model::config::{LoadOptions, ProfileKind};
use qdeck_model::domain::{OutgoingMessage, QueueId, RedriveRequest, RedriveTarget, Value};

/// Run one command. With `-o json`, a failure is still JSON on stdout (`error`, `exit_code`)
/// besides the one line on stderr, so a script never parses an empty answer; a failure whose
/// report was printed (it carries `error`) adds nothing, so stdout stays one JSON document.
pub async fn run(cli: Cli) -> CliResult {
    let json = output::resolve(cli.global.output) == args::Format::Json
        && !matches!(cli.command, Some(Command::Check(_)));
    let r = dispatch(cli).await;
    if let (
        true,
        Err(
            e @ CliError {
                reported: false, ..
            },
        ),
    ) = (json, &r)
    {
        output::print_json(&serde_json::json!({
            "error": qdeck_model::sanitize::clean(&qdeck_model::config::redact::redact(&e.message)),
            "exit_code": e.code,
        }))
        .ok();
    }
    r
}

async fn dispatch(cli: Cli) -> CliResult {
    let opts = LoadOptions {
        file: cli.global.config.clone(),
        profile: cli.global.profile.clone(),
        read_only: cli.global.read_only,
    };
    let f = output::resolve(cli.global.output);
    let Some(cmd) = cli.command else {
        return console_for(&cli.global, opts).await;
    };
    match &cmd {
        Command::Config { action } => return cmd_config::run(action, &opts, f),
        Command::Completions { shell } => return cmd_config::completions(*shell),
        _ => {}
    }
    match cmd {
        Command::Watch(a) => return cmd_watch::watch(&cli.global, &opts, a, f).await,
        Command::Serve(a) => return cmd_serve::serve(&cli.global, &opts, a).await,
        _ => {}
    }
    if let Some(sel) = multi::selection(&cli.global) {
        return multi::run(cmd, sel, &cli.global, &opts, f).await;
    }
    // A monitoring check reports every failure as UNKNOWN (exit 3), never as its own code.
    let is_check = matches!(cmd, Command::Check(_));
    let unknown = |e: CliError| {
        output::print(&format!("QDECK UNKNOWN - {}\n", e.message));
        Ok(3)
    };
    let loaded = match qdeck_engine::config_check::load(&opts) {
        Ok(l) => l,
        Err(e) if is_check => return unknown(e.into()),
        Err(e) => return Err(e.into()),
    };
    match cmd {
        Command::Create {
            queue,
            dlq,
            max_receives,
            lease,
            key_policy,
        } => {
            return cmd_local::create(&loaded, &queue, dlq, max_receives, lease, &key_policy).await
        }
        Command::Demo {
            rate,
            workers,
            per_worker,
            duration,
        } => return cmd_local::demo(&loaded, rate, workers, per_worker, duration).await,
        _ => {}
    }
    let session = match Session::open(loaded).await {
        Ok(s) => s,
        Err(e) if is_check => return unknown(e.into()),
        Err(e) => return Err(e.into()),
    };
    on_session(&session, cmd, f).await
}

/// No subcommand. A profile list opens the console on the fleet view with one row per
/// listed profile, on the first of them.
async fn console_for(global: &args::Global, opts: LoadOptions) -> CliResult {
    if let Some(sel) = multi::selection(global) {
        let any = LoadOptions {
            profile: None,
            ..opts.clone()
        };
        let names = multi::resolve(&qdeck_engine::config_check::load(&any)?.config, &sel)?;
        let opts = LoadOptions {
            profile: names.first().cloned(),
            ..opts
        };
        return console(&opts, Some(names)).await;
    }
    console(&opts, global.fleet.then(Vec::new)).await
}

/// The commands that work on an open session of one profile: those that read here, those
/// that change something in `changing`.
async fn on_session(s: &Session, cmd: Command, f: args::Format) -> CliResult {
    match cmd {
        Command::Ls { pattern, sample } => cmd_read::ls(s, pattern.as_deref(), sample, f).await,
        Command::Stats { queue, sample } => cmd_read::stats(s, &queue, sample, f).await,
        Command::Peek {
            queue,
            count,
            force,
            scheduled,
        } => match scheduled {
            true => cmd_scheduled::peek(s, &queue, count, f).await,
            false => cmd_read::peek(s, &queue, count, force, f).await,
        },
        Command::Consumers { queue } => cmd_read::consumers(s, &queue, f).await,
        Command::Sessions { queue, peek, count } => {
            cmd_sessions::sessions(s, &queue, peek.as_deref(), count, f).await
        }
        Command::Reasons {
            dlq,
            live,
            by,
            scan,
        } => cmd_reasons::reasons(s, &dlq, live, &by, &scan, f).await,
        Command::Export {
            queue,
            file,
            filter,
            count,
            scan,
        } => cmd_export::export(s, &queue, &file, filter.as_deref(), count, &scan, f).await,
        Command::Check(a) => cmd_check::check(s, &a).await,
        cmd => changing(s, cmd, f).await,
    }
}

/// The commands that send, move, delete or edit messages.
async fn changing(s: &Session, cmd: Command, f: args::Format) -> CliResult {
    match cmd {
        Command::Send {
            queue,
            body,
            key,
            delay,
            headers,
            properties,
        } => {
            let msg = outgoing(key, delay, headers, properties);
            cmd_mutate::send(s, &queue, body.as_deref(), msg, f).await
        }
        Command::Redrive {
            dlq,
            to,
            max,
            rate,
            window,
            dry_run,
            yes,
            filter,
            scan,
        } => {
            let req = redrive_request(dlq, to, max, rate, window);
            match filter {
                Some(pred) => {
                    cmd_redrive_where::redrive_where(s, req, &pred, &scan, dry_run, yes, f).await
                }
                None => {
                    scan::require_where(&scan)?;
                    cmd_mutate::redrive(s, req, dry_run, yes, f).await
                }
            }
        }
        Command::Import {
            queue,
            file,
            rate,
            dry_run,
            yes,
        } => cmd_import::import(s, &queue, &file, rate, dry_run, yes, f).await,
        Command::Purge {
            queue,
            dry_run,
            yes,
            filter: Some(pred),
            scan,
            ..
        } => cmd_purge_where::purge_where(s, &queue, &pred, &scan, dry_run, yes, f).await,
        Command::Purge {
            queue,
            dry_run,
            yes,
            filter: None,
            subject,
            seq,
            scan,
        } => {
            scan::require_where(&scan)?;
            if let Some(subject) = subject {
                cmd_purge_nats::purge_subject(s, &queue, &subject, dry_run, yes, f).await
            } else if !seq.is_empty() {
                cmd_purge_nats::delete_seqs(s, &queue, &seq, dry_run, yes, f).await
            } else {
                cmd_mutate::purge(s, &queue, dry_run, yes, f).await
            }
        }
        Command::Copy(a) => cmd_copy::transfer(s, &a, false, f).await,
        Command::Move(a) => cmd_copy::transfer(s, &a, true, f).await,
        Command::CreateDlq { queue } => cmd_mutate::create_dlq(s, &queue, f).await,
        Command::ResetOffsets {
            row,
            to,
            to_time,
            shift,
            dry_run,
            yes,
        } => {
            let to = cmd_groups::reset_target(to.as_deref(), to_time.as_deref(), shift)?;
            cmd_groups::reset_offsets(s, &row, to, dry_run, yes, f).await
        }
        Command::DeleteGroup {
            group,
            dry_run,
            yes,
        } => cmd_groups::delete_group(s, &group, dry_run, yes, f).await,
        Command::Replay {
            queue,
            to_time,
            dry_run,
            yes,
        } => cmd_replay::replay(s, &queue, &to_time, dry_run, yes, f).await,
        Command::WorkerControl { cmd, yes } => cmd_worker_control::run(s, cmd, yes, f).await,
        Command::CancelScheduled { queue, id, yes } => {
            cmd_scheduled::cancel(s, &queue, &id, yes, f).await
        }
        Command::Edit { queue, id, to, yes } => {
            cmd_edit::edit(s, &queue, &id, to.as_deref(), yes, f).await
        }
        Command::Ls { .. }
        | Command::Stats { .. }
        | Command::Peek { .. }
        | Command::Consumers { .. }
        | Command::Sessions { .. }
        | Command::Reasons { .. }
        | Command::Export { .. }
        | Command::Check(_)
        | Command::Watch(_)
        | Command::Serve(_)
        | Command::Config { .. }
        | Command::Completions { .. }
        | Command::Create { .. }
        | Command::Demo { .. } => {
            unreachable!("handled above")
        }
    }
}

/// `send`'s message: headers and properties given on the command line are text.
fn outgoing(
    key: Option<String>,
    delay: Option<std::time::Duration>,
    headers: Vec<(String, String)>,
    properties: Vec<(String, String)>,
) -> OutgoingMessage {
    let text = |v: Vec<(String, String)>| -> Vec<(String, Value)> {
        v.into_iter().map(|(k, v)| (k, Value::String(v))).collect()
    };
    OutgoingMessage {
        key,
        delay,
        headers: text(headers),
        properties: text(properties),
        ..OutgoingMessage::default()
    }
}

/// `redrive`'s request: to `--to`, else each message's origin.
fn redrive_request(
    dlq: String,
    to: Option<String>,
    max: Option<u64>,
    rate: Option<qdeck_model::rate::Rate>,
    window: Option<u32>,
) -> RedriveRequest {
    RedriveRequest {
        source: QueueId::new(dlq),
        target: match to {
            Some(t) => RedriveTarget::Queue(QueueId::new(t)),
            None => RedriveTarget::Origin,
        },
        max,
        rate,
        only_ids: None,
        window,
    }
}

/// No subcommand: open the console. With no configuration at all and an empty local
/// broker, start the demo workload so a newcomer sees a moving console at once.
async fn console(opts: &LoadOptions, fleet: Option<Vec<String>>) -> CliResult {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "the console needs a terminal; for scripts use a command such as `qdeck ls` (see qdeck --help)",
        ));
    }
    let loaded = qdeck_engine::config_check::load(opts)?;
    // Said in the status bar as the console opens (why no demo runs).
    let mut start_note: Option<String> = None;
    let (backend, demo): (Arc<dyn Backend>, _) = match &loaded.profile.kind {
        ProfileKind::Local(s) => {
            let local = Arc::new(qdeck_backend::local::LocalBackend::open(
                &s.resolved_path(),
            )?);
            let handle = LocalHandle(local.clone());
            let newcomer = loaded.is_unconfigured()
                && loaded.profile.effective_access() == qdeck_model::config::Access::Full;
            let choice = if newcomer {
                Some(crate::demo::newcomer::choose(&handle).await)
            } else {
                None
            };
            let demo = match choice {
                Some(crate::demo::newcomer::DemoChoice::Start) => {
                    let cfg = crate::demo::DemoConfig::default();
                    let note = serde_json::json!({
                        "produce_rate": cfg.produce_rate,
                        "workers": cfg.workers,
                    });
                    cmd_local::set_up_demo(&cmd_local::gate_for(&loaded, &local), note).await?;
                    Some(
                        crate::demo::DemoHandle::start(local, cfg)
                            .map_err(|e| CliError::new(exit::FAILED, e.to_string()))?,
                    )
                }
                Some(crate::demo::newcomer::DemoChoice::Skip(why)) => {
                    start_note = Some(why);
                    None
                }
                None => None,
            };
            (Arc::new(handle), demo)
        }
        _ => (backend::build(&loaded.profile).await?, None),
    };
    let session = Session::with_backend(loaded, backend);
    let done = crate::tui::run(session, demo, fleet, start_note)
        .await
        .map_err(|e| {
            CliError::new(
                exit::FAILED,
                qdeck_model::config::redact::redact(&format!("{e:#}")),
            )
        })?;
    // Quit during a redrive/purge: its summary on the restored terminal, the CLI's code.
    let Some(s) = done else {
        return Ok(exit::OK);
    };
    println!("{}", s.text);
    Ok(s.exit_code)
}
