//! A session: the loaded configuration, the selected profile's backend and its gate. The
//! console and every one-shot command start from one.

use std::sync::Arc;

use crate::backend::{self, Backend, BackendError};
use crate::config::{Loaded, Profile};
use crate::engine::audit::AuditLog;
use crate::engine::gate::Gate;

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
}
