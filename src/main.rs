//! qdeck's entry point: parse the command line, set up logging and the panic hook, run.

use std::process::ExitCode;

use clap::Parser;
use qdeck::cli::{self, args::Cli};

fn init_logging() {
    let dir = qdeck_model::config::paths::state_dir();
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("qdeck.log"))
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("QDECK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(std::string::ToString::to_string)
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_string());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!("panic: {msg}{at}");
        say(&format!(
            "qdeck: internal error: {msg}{at} (this is a bug; details in {})",
            qdeck_model::config::paths::state_dir()
                .join("qdeck.log")
                .display()
        ));
    }));
}

/// Every line qdeck writes to stderr passes the sanitizer: an error may quote the user's own
/// arguments (an invalid regex, an unknown flag), and those can hold escape sequences.
fn say(line: &str) {
    eprintln!(
        "{}",
        qdeck_model::sanitize::clean(&qdeck_model::config::redact::redact(line))
    );
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            let text = e.render().to_string();
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{text}");
                return ExitCode::SUCCESS;
            }
            for line in text.trim_end().lines() {
                say(line);
            }
            return ExitCode::from(cli::exit::USAGE);
        }
    };
    install_panic_hook();
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say(&format!("qdeck: error: cannot start the runtime: {e}"));
            return ExitCode::from(cli::exit::FAILED);
        }
    };
    let code = match rt.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            say(&format!("qdeck: error: {}", e.message));
            e.code
        }
    };
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    ExitCode::from(code)
}
