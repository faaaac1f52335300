//! Placeholder until this backend is built: connecting says so plainly.

use std::sync::Arc;

use super::{Backend, BackendError, Result};
use crate::config::{Profile, ServicebusSettings};

pub async fn connect(
    _profile: &Profile,
    _settings: &ServicebusSettings,
) -> Result<Arc<dyn Backend>> {
    Err(BackendError::Unsupported(
        "the servicebus backend is not built yet".to_string(),
    ))
}
