//! The local broker's SQLite schema. WAL lets readers work while one writer commits; every
//! write is a short `BEGIN IMMEDIATE` transaction, so several processes can share one file.

use rusqlite::Connection;

pub const SCHEMA_VERSION: i64 = 1;

/// Why an existing SQLite file must not be used as a qdeck broker, if it must not: it holds
/// another application's tables, or a newer qdeck's schema. Checked before anything is
/// written, so such a file is left exactly as it was.
pub fn refuse_reason(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let (tables, has_meta): (i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(name = 'meta'), 0) FROM sqlite_master WHERE type = 'table'",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if tables == 0 {
        return Ok(None);
    }
    if has_meta == 0 {
        return Ok(Some(
            "is a SQLite database of another application (no qdeck schema); refusing to change it"
                .to_string(),
        ));
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .ok();
    match version.and_then(|v| v.parse::<i64>().ok()) {
        Some(v) if v > SCHEMA_VERSION => Ok(Some(format!(
            "was written by a newer qdeck (schema {v}, this one knows {SCHEMA_VERSION}); upgrade qdeck"
        ))),
        Some(_) => Ok(None),
        None => Ok(Some(
            "has a meta table but no qdeck schema version; refusing to change it".to_string(),
        )),
    }
}

/// Tables and indexes `init` creates; a file holding all of them needs no write at open.
const OBJECTS: &[&str] = &[
    "meta",
    "queues",
    "messages",
    "workers",
    "messages_ready",
    "messages_key",
    "messages_lease",
    "messages_age",
    "messages_queue",
];

/// True when the file already has this version's schema in WAL mode, found by reading only:
/// opening such a file must take no write lock, so `ls` and `peek` work while another process
/// holds one (WAL lets readers proceed) and on a file qdeck may not write.
pub fn is_current(conn: &Connection) -> rusqlite::Result<bool> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Ok(false);
    }
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !OBJECTS.iter().all(|o| names.iter().any(|n| n == o)) {
        return Ok(false);
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .ok();
    Ok(version.and_then(|v| v.parse::<i64>().ok()) == Some(SCHEMA_VERSION))
}

/// Per-connection settings: no write, needed on every connection.
pub fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    Ok(())
}

pub fn init(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    conn.execute_batch(
        r#"
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS queues(
            name TEXT PRIMARY KEY,
            lease_secs REAL NOT NULL DEFAULT 30,
            max_receives INTEGER,
            dlq TEXT,
            key_policy TEXT NOT NULL DEFAULT 'parallel',
            enqueued_total INTEGER NOT NULL DEFAULT 0,
            completed_total INTEGER NOT NULL DEFAULT 0,
            dead_lettered_total INTEGER NOT NULL DEFAULT 0,
            created_ms INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS messages(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            queue TEXT NOT NULL,
            key TEXT,
            body BLOB NOT NULL,
            headers TEXT,
            enqueued_ms INTEGER NOT NULL,
            visible_ms INTEGER NOT NULL,
            leased_by TEXT,
            receive_count INTEGER NOT NULL DEFAULT 0,
            dl_reason TEXT,
            dl_origin TEXT,
            dl_ms INTEGER,
            dl_count INTEGER
        );
        CREATE INDEX IF NOT EXISTS messages_ready ON messages(queue, visible_ms, id);
        CREATE INDEX IF NOT EXISTS messages_key ON messages(queue, key, id) WHERE key IS NOT NULL;
        CREATE INDEX IF NOT EXISTS messages_lease ON messages(leased_by) WHERE leased_by IS NOT NULL;
        CREATE INDEX IF NOT EXISTS messages_age ON messages(queue, enqueued_ms);
        -- (queue, rowid): browse, redrive and purge walk a queue in id order without a sort.
        CREATE INDEX IF NOT EXISTS messages_queue ON messages(queue);
        CREATE TABLE IF NOT EXISTS workers(
            worker TEXT NOT NULL,
            queue TEXT NOT NULL,
            processed INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            last_seen_ms INTEGER NOT NULL,
            win_start_ms INTEGER NOT NULL,
            win_count INTEGER NOT NULL DEFAULT 0,
            rate REAL,
            PRIMARY KEY(worker, queue)
        );
        "#,
    )?;
    conn.execute(
        "INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?1)",
        [SCHEMA_VERSION.to_string()],
    )?;
    Ok(())
}
