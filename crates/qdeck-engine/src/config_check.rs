//! The configuration, loaded with every check. `qdeck_model::config` reads the file and checks
//! what it can judge alone; the `[[alerts]]` rules compile against the figures the engine
//! derives (`alerts::rules`), which the model crate cannot see, so they are checked here. The
//! application loads through these functions, so a bad rule is still a config error that names
//! its key, as it was when the check sat inside `config::load`.

use std::path::Path;

use qdeck_model::config::{self, AppConfig, ConfigError, LoadOptions, Loaded};

/// `config::load`, then the alert rules.
pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    let loaded = config::load(opts)?;
    check_alerts(&loaded.config, loaded.file.as_deref())?;
    Ok(loaded)
}

/// `config::validate_file` (`qdeck config validate`), then the alert rules.
pub fn validate_file(path: &Path) -> Result<AppConfig, ConfigError> {
    let c = config::validate_file(path)?;
    check_alerts(&c, Some(path))?;
    Ok(c)
}

fn check_alerts(c: &AppConfig, file: Option<&Path>) -> Result<(), ConfigError> {
    let where_ = file.map_or_else(|| "configuration".to_string(), |f| f.display().to_string());
    crate::alerts::rules(c).map_err(|e| ConfigError(format!("{where_}: {e}")))?;
    Ok(())
}
