//! A session: the loaded configuration, the selected profile's backend and its gate. The
//! console and every one-shot command start from one.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::gate::Gate;
use qdeck_backend::{self as backend, Backend, BackendError};
use qdeck_model::config::{Loaded, Profile};

#[derive(Clone)]
pub struct Session {
    pub loaded: Loaded,
    pub backend: Arc<dyn Backend>,
    pub gate: Gate,
}

impl Session {
    pub async fn open(loaded: Loaded) -> Result<Session, BackendError> {
        let backend = backend::build(&loaded.profile).await?;
        Ok(Self::with_backend(loaded, backend))
    }

    pub fn with_backend(loaded: Loaded, backend: Arc<dyn Backend>) -> Session {
        let gate = Gate::new(
            backend.clone(),
            &loaded.profile,
            AuditLog::new(loaded.audit_log_path()),
        );
        Session {
            loaded,
            backend,
            gate,
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.loaded.profile
    }

    /// Another profile of the same configuration, opened with this session's command-line
    /// options (so `--read-only` holds there too), or this session for its own name or `None`.
    pub async fn for_profile(&self, profile: Option<&str>) -> Result<Session, OpenError> {
        match profile {
            Some(p) if p != self.profile().name => {
                let loaded = crate::config_check::load(&self.loaded.options_for(p))?;
                Ok(Session::open(loaded).await?)
            }
            _ => Ok(self.clone()),
        }
    }
}

/// Why another profile could not be opened: its configuration, or its broker.
#[derive(Debug)]
pub enum OpenError {
    Config(qdeck_model::config::ConfigError),
    Backend(BackendError),
}

impl From<qdeck_model::config::ConfigError> for OpenError {
    fn from(e: qdeck_model::config::ConfigError) -> Self {
        OpenError::Config(e)
    }
}

impl From<BackendError> for OpenError {
    fn from(e: BackendError) -> Self {
        OpenError::Backend(e)
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Config(e) => write!(f, "{}", e.0),
            OpenError::Backend(e) => write!(f, "{e}"),
        }
    }
}
