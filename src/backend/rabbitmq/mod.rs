//! Placeholder until this backend is built: connecting says so plainly.

use std::sync::Arc;

use super::{Backend, BackendError, Result};
use crate::config::{Profile, RabbitmqSettings};

pub async fn connect(_profile: &Profile, _settings: &RabbitmqSettings) -> Result<Arc<dyn Backend>> {
    Err(BackendError::Unsupported(
        "the rabbitmq backend is not built yet".to_string(),
    ))
}
