//! The engine: what the console and the one-shot commands share.

pub mod alerts;
pub mod audit;
pub mod budget;
pub mod derive;
pub mod edit;
pub mod fleet;
pub mod gate;
pub mod multi_poller;
pub mod ops;
pub mod poller;
pub mod rate;
pub mod ring;
pub mod schedule;
pub mod session;
pub mod severity;
pub mod store;
#[cfg(test)]
pub(crate) mod testing;
