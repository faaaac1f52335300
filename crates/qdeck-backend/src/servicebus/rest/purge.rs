//! Purge: Service Bus has no REST purge, so receive-and-delete with bounded parallelism until
//! several empty receives in a row (as Service Bus Explorer does), with progress and cancel.

use std::sync::{Arc, Mutex};

use super::runtime;
use crate::servicebus::http::Rest;
use crate::{BackendError, OpProgress, Result};
use qdeck_model::domain::PurgeReport;

const WORKERS: usize = 8;
const EMPTY_STOP: u32 = 3;
const ERR_STOP: u32 = 5;

#[derive(Default)]
struct State {
    purged: u64,
    empty_streak: u32,
    err_streak: u32,
    stop: bool,
    error: Option<BackendError>,
}

pub async fn purge(rest: Arc<Rest>, entity: &str, progress: &OpProgress) -> Result<PurgeReport> {
    progress.phase("receiving and deleting");
    let st = Arc::new(Mutex::new(State::default()));
    let handles: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (rest, st, progress, entity) = (
                rest.clone(),
                st.clone(),
                progress.clone(),
                entity.to_string(),
            );
            tokio::spawn(async move {
                loop {
                    {
                        let s = st.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        if s.stop || progress.cancelled() {
                            return;
                        }
                    }
                    let r = runtime::receive_delete(&rest, &entity, 1).await;
                    let mut s = st.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    match r {
                        Ok(Some(_)) => {
                            s.purged += 1;
                            s.empty_streak = 0;
                            s.err_streak = 0;
                            progress.add_done(1);
                        }
                        Ok(None) => {
                            s.empty_streak += 1;
                            if s.empty_streak >= EMPTY_STOP {
                                s.stop = true;
                            }
                        }
                        Err(e) => {
                            s.err_streak += 1;
                            if !e.is_transient() || s.err_streak >= ERR_STOP {
                                s.stop = true;
                                s.error.get_or_insert(e);
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.await;
    }
    progress.phase("done");
    let mut s = st.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let cancelled = progress.cancelled();
    match s.error.take() {
        Some(e) if s.purged == 0 => Err(e),
        Some(e) => Ok(PurgeReport {
            purged: Some(s.purged),
            note: Some(format!("stopped early after {} messages: {e}", s.purged)),
        }),
        None => Ok(PurgeReport {
            purged: Some(s.purged),
            note: Some(if cancelled {
                "cancelled; messages received so far were deleted".to_string()
            } else {
                "received and deleted until the queue answered empty; messages locked by other receivers or scheduled were not purged".to_string()
            }),
        }),
    }
}
