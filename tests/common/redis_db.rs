//! A real Redis for the Redis-backed tests (BullMQ, Sidekiq, RQ): the server from
//! `QDECK_TEST_REDIS_URL`, one database per test, flushed only by its owner.

/// `QDECK_TEST_REDIS_URL` without a trailing slash (the test is skipped when it is unset).
pub fn redis_url() -> String {
    super::broker_var("QDECK_TEST_REDIS_URL", "e.g. redis://127.0.0.1:6379")
        .trim_end_matches('/')
        .to_string()
}

/// The URL of database `db` on the test server.
pub fn db_url(db: u32) -> String {
    format!("{}/{db}", redis_url())
}

/// A plain connection to database `db`, to set up and to read back past qdeck.
pub async fn raw(db: u32) -> redis::aio::MultiplexedConnection {
    redis::Client::open(db_url(db))
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to QDECK_TEST_REDIS_URL")
}

/// Empties database `db` (and only that one).
pub async fn flush(db: u32) {
    let _: () = redis::cmd("FLUSHDB")
        .query_async(&mut raw(db).await)
        .await
        .expect("flushdb");
}
