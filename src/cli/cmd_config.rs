//! `qdeck config path|show|validate` and `qdeck completions`.

use clap::CommandFactory;

use super::args::{Cli, ConfigAction, Format};
use super::exit::{CliError, CliResult, OK, USAGE};
use super::output;
use qdeck_model::config::{self, redact::redact, LoadOptions};

pub fn run(action: &ConfigAction, opts: &LoadOptions, f: Format) -> CliResult {
    match action {
        ConfigAction::Path => {
            let p = opts.file.clone().unwrap_or_else(config::paths::config_file);
            let exists = p.exists();
            output::print(&format!(
                "{}{}\n",
                p.display(),
                if exists {
                    ""
                } else {
                    " (does not exist: built-in defaults apply)"
                }
            ));
            Ok(OK)
        }
        ConfigAction::Show => {
            let loaded = qdeck_engine::config_check::load(opts)?;
            let text = if f == Format::Json {
                serde_json::to_string_pretty(&loaded.config)
                    .map_err(|e| CliError::new(USAGE, e.to_string()))?
            } else {
                toml::to_string_pretty(&loaded.config)
                    .map_err(|e| CliError::new(USAGE, e.to_string()))?
            };
            let mut out = String::new();
            if f != Format::Json {
                out.push_str(&format!(
                    "# from {}; selected profile: {}\n",
                    loaded
                        .file
                        .as_ref()
                        .map_or_else(|| "built-in defaults".into(), |p| p.display().to_string()),
                    loaded.profile.name
                ));
            }
            out.push_str(&redact(&text));
            out.push('\n');
            output::print(&out);
            Ok(OK)
        }
        ConfigAction::Validate { file } => {
            let path = file
                .clone()
                .or_else(|| opts.file.clone())
                .unwrap_or_else(config::paths::config_file);
            if !path.exists() {
                return Err(CliError::new(
                    USAGE,
                    format!("{} does not exist", path.display()),
                ));
            }
            let c = qdeck_engine::config_check::validate_file(&path)?;
            let rules = if c.alerts.is_empty() {
                String::new()
            } else {
                format!(
                    "; {}",
                    if c.alerts.len() == 1 {
                        "1 alert rule".to_string()
                    } else {
                        format!("{} alert rules", c.alerts.len())
                    }
                )
            };
            output::print(&format!(
                "{}: valid, {}{rules}\n",
                path.display(),
                profile_list(&c)
            ));
            Ok(OK)
        }
    }
}

/// "3 profiles: a, b, local (built in)": the count is of the names listed, the built-in local
/// profile included when the file does not define one.
fn profile_list(c: &config::AppConfig) -> String {
    let names: Vec<String> = config::profile_names(c)
        .into_iter()
        .map(|n| {
            if c.profiles.iter().any(|p| p.name == n) {
                n
            } else {
                format!("{n} (built in)")
            }
        })
        .collect();
    let count = match names.len() {
        1 => "1 profile".to_string(),
        n => format!("{n} profiles"),
    };
    format!("{count}: {}", names.join(", "))
}

pub fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "qdeck", &mut std::io::stdout());
    Ok(OK)
}
