//! RQ (Python) on Redis, read and changed through its own key schema (`rq:queue:`, `rq:job:`,
//! registries): listing, figures, browse, workers, requeue and purge, one concern a file.

pub mod browse;
pub mod figures;
pub mod jobs;
pub mod listing;
pub mod mutate;
pub mod scripts;
pub mod workers;
