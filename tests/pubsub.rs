//! Pub/Sub broker tests (being written).
