//! The one store layer over SQLite (embedded default) and MySQL/MariaDB.
//!
//! Every query is written once, in the SQL both databases understand (`?` placeholders, epoch-ms
//! BIGINTs), and run through [`with_pool!`], which expands the same code for each pool type so
//! each expansion is type-checked against its own driver. The few real dialect differences
//! (upsert, `INSERT IGNORE`, locking, `RETURNING`) are the methods of [`Dialect`], and nowhere
//! else.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::refusal::{Reason, Refusal};

mod audit;
mod fires;
mod groups;
mod jobs;
mod misc;
mod sched;
pub mod sessions;
mod users;

pub use audit::AuditFilter;
pub use fires::{
    CallbackOutcome, FireEnded, FireRuns, HistoryFilter, NewRun, Replacing, RunUpdate,
};
pub use groups::{Beat, GroupInput};
pub use jobs::{GlueVersion, JobFilter};
pub use misc::ClearCut;
pub use sched::{sched_key, ClaimedFire, JobPlan, OpenRun, OpenRunsCursor, PlannedFire};

/// The database behind a [`Store`].
///
/// SQLite has one writer connection and a few readers. SQLite runs one write at a time anyway,
/// and a connection whose last transaction was not its own finds its page cache stale (WAL) and
/// reads every page again: with writes spread over four connections in turn, every transaction
/// started cold, and each connection held a page cache of its own. Readers keep the console and
/// the scheduler's checks from waiting behind a long write (WAL readers never wait for it).
#[derive(Clone)]
pub(crate) enum Db {
    Sqlite { write: SqlitePool, read: SqlitePool },
    MySql(MySqlPool),
}

/// Runs `$body` with `$pool` bound to the concrete pool, once per database type. On SQLite this is
/// the writer connection; statements that only read may use [`with_read_pool!`] instead.
macro_rules! with_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.db {
            $crate::store::Db::Sqlite { write: $pool, .. } => $body,
            $crate::store::Db::MySql($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// [`with_pool!`] for statements that only read and need no transaction: on SQLite they run on a
/// reader connection, so they do not queue behind the writer.
macro_rules! with_read_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.db {
            $crate::store::Db::Sqlite { read: $pool, .. } => $body,
            $crate::store::Db::MySql($pool) => $body,
        }
    };
}
pub(crate) use with_read_pool;

/// One page of `$row`s from `$table` (newest first) and the total count of matches, with the
/// filter written once by `$push_where(&mut QueryBuilder, $filter)`.
macro_rules! list_page {
    ($store:expr, $row:ty, $cols:expr, $table:literal, $push_where:ident, $filter:expr, $offset:expr, $limit:expr) => {
        with_read_pool!($store, pool => {
            let mut qb = sqlx::QueryBuilder::new(format!("SELECT {} FROM {}", $cols, $table));
            $push_where(&mut qb, $filter);
            qb.push(" ORDER BY id DESC LIMIT ").push_bind($limit).push(" OFFSET ").push_bind($offset);
            let rows = qb.build_query_as::<$row>().fetch_all(pool).await?;
            let mut cq = sqlx::QueryBuilder::new(concat!("SELECT COUNT(*) FROM ", $table));
            $push_where(&mut cq, $filter);
            let total: i64 = cq.build_query_scalar().fetch_one(pool).await?;
            (rows, total)
        })
    };
}
pub(crate) use list_page;

/// The SQL that differs between the two databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    MySql,
}

impl Dialect {
    /// `INSERT` that silently skips rows violating a unique key.
    pub fn insert_ignore(self) -> &'static str {
        match self {
            Dialect::Sqlite => "INSERT OR IGNORE",
            Dialect::MySql => "INSERT IGNORE",
        }
    }

    /// Suffix of an upsert: `conflict` lists the unique columns, `updates` the `col = new value`
    /// assignments written with `NEW(col)` for the inserted value.
    pub fn upsert(self, conflict: &str, updates: &[&str]) -> String {
        match self {
            Dialect::Sqlite => {
                let sets: Vec<String> = updates
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect();
                format!(
                    " ON CONFLICT ({conflict}) DO UPDATE SET {}",
                    sets.join(", ")
                )
            }
            Dialect::MySql => {
                let sets: Vec<String> = updates
                    .iter()
                    .map(|c| format!("{c} = VALUES({c})"))
                    .collect();
                format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", "))
            }
        }
    }

    /// Whether an `UPDATE` can return the rows it wrote (`UPDATE … RETURNING`). SQLite can; MySQL
    /// and MariaDB cannot, so there the hot paths lock and read the rows first. (For `INSERT`,
    /// see [`Store::insert_returning`].)
    pub(crate) fn update_returning(self) -> bool {
        self == Dialect::Sqlite
    }

    /// What a read inside a write transaction ([`Store::begin_write`]) adds to lock the rows it
    /// returns: nothing on SQLite, whose `BEGIN IMMEDIATE` holds the database's write lock.
    pub(crate) fn row_lock(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::MySql => " FOR UPDATE",
        }
    }

    /// The runs table as read by a list of fire ids (a batch's fires). MariaDB judges a list
    /// longer than 200 (`eq_range_index_dive_limit`) by its index statistics, and with
    /// statistics taken while the table was small it read the whole table instead of the fires'
    /// runs: in one run at 1 000 jobs a second 14 000 rows examined per batch on average, the
    /// whole table (50 000) at the end, growing with the history kept. So the index is forced
    /// there; SQLite picks it by itself.
    pub(crate) fn runs_by_fire(self) -> &'static str {
        match self {
            Dialect::Sqlite => "runs",
            Dialect::MySql => "runs FORCE INDEX (idx_runs_fire)",
        }
    }

    /// The statement that counts one job edit (see [`Store::job_edits`]).
    pub(crate) fn count_job_edit(self) -> &'static str {
        match self {
            Dialect::Sqlite => "INSERT INTO counters (name, value) VALUES ('job_edits', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1",
            Dialect::MySql => "INSERT INTO counters (name, value) VALUES ('job_edits', 1) ON DUPLICATE KEY UPDATE value = value + 1",
        }
    }
}

/// The most rows (or listed ids) one statement of the store takes. A power of two, for
/// [`cached_chunks`] and [`cached_len`].
pub(crate) const ROWS_PER_STATEMENT: usize = 512;

/// The length a list of `n` rows or ids (at most [`ROWS_PER_STATEMENT`]) is padded to: the next
/// power of two.
///
/// A statement with a `?` per row or id has a text of its own for every length, and a text
/// the connection has not seen is compiled anew (on MySQL, prepared on the server and closed
/// again): a batch of arbitrary length did that every time, and the new texts pushed the
/// fixed ones out of the statement cache. With lengths from a set of ten, each text is compiled
/// once and then found in the cache.
pub(crate) fn cached_len(n: usize) -> usize {
    n.next_power_of_two()
}

/// `items` followed by `fill` up to [`cached_len`] of them: the values of a list statement of a
/// cached length.
pub(crate) fn padded<'i, T>(items: &'i [T], fill: &'i T) -> impl Iterator<Item = &'i T> {
    items
        .iter()
        .chain(std::iter::repeat(fill))
        .take(cached_len(items.len()))
}

/// Cuts `items` into pieces of [`ROWS_PER_STATEMENT`] and powers of two below it, largest first,
/// for multi-row statements that cannot be padded (inserts); see [`cached_len`].
pub(crate) fn cached_chunks<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = rest.len().min(ROWS_PER_STATEMENT);
        let take = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        let (head, tail) = rest.split_at(take);
        rest = tail;
        Some(head)
    })
}

/// One `UPDATE` of many rows of `table`, each with its own values: `rows` are joined to the table
/// as `v` (`v.column1` is the row's id, `v.column2`… its values), `set` pushes the assignments
/// (which may read `v.columnK` and bind constants) and `cond` adds conditions (` AND …`). A
/// `CASE id WHEN …` per column did the same with a cost quadratic in the rows.
///
/// SQLite joins a `VALUES` list (`UPDATE … FROM`); MySQL and MariaDB join a derived table of
/// `UNION ALL` selects. In a joined `UPDATE` MySQL does not promise the order of assignments, so
/// no assignment may read a column another one writes (an assignment may read its own column).
pub(crate) fn update_joined<'a, DB: sqlx::Database, const N: usize>(
    dialect: Dialect,
    table: &str,
    rows: &'a [[Option<i64>; N]],
    set: impl FnOnce(&mut sqlx::QueryBuilder<'a, DB>),
    cond: &str,
) -> sqlx::QueryBuilder<'a, DB>
where
    Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    // Padded to a cached length with rows whose id is NULL, which join no row.
    let no_row = [None; N];
    let padded = padded(rows, &no_row);
    let push_rows = |qb: &mut sqlx::QueryBuilder<'a, DB>| match dialect {
        Dialect::Sqlite => {
            qb.push("(VALUES ");
            for (i, row) in padded.enumerate() {
                qb.push(if i == 0 { "(" } else { ", (" });
                let mut sep = qb.separated(", ");
                for v in row {
                    sep.push_bind(*v);
                }
                qb.push(")");
            }
            qb.push(") AS v");
        }
        Dialect::MySql => {
            qb.push("(");
            for (i, row) in padded.enumerate() {
                qb.push(if i == 0 {
                    "SELECT "
                } else {
                    " UNION ALL SELECT "
                });
                for (k, v) in row.iter().enumerate() {
                    if k > 0 {
                        qb.push(", ");
                    }
                    qb.push_bind(*v);
                    if i == 0 {
                        qb.push(format!(" AS column{}", k + 1));
                    }
                }
            }
            qb.push(") AS v");
        }
    };
    let mut qb = sqlx::QueryBuilder::new(format!("UPDATE {table} "));
    match dialect {
        Dialect::Sqlite => {
            qb.push("SET ");
            set(&mut qb);
            qb.push(" FROM ");
            push_rows(&mut qb);
            qb.push(format!(" WHERE {table}.id = v.column1{cond}"));
        }
        Dialect::MySql => {
            qb.push("JOIN ");
            push_rows(&mut qb);
            qb.push(format!(" ON {table}.id = v.column1 SET "));
            set(&mut qb);
            qb.push(format!(" WHERE 1 = 1{cond}"));
        }
    }
    qb
}

/// Errors of the store that callers branch on; everything else is a plain database error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}", .0.en())]
    NotFound(Reason),
    #[error("{0}")]
    Conflict(Refusal),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// A write handed to a background writer was given up (the database kept failing) or the
    /// writer has stopped.
    #[error("{0}")]
    NotStored(&'static str),
}

impl StoreError {
    /// Maps a unique-key violation to a conflict with a readable message.
    pub(crate) fn unique(e: sqlx::Error, what: impl FnOnce() -> Refusal) -> StoreError {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(what()),
            _ => StoreError::Db(e),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Runs a write again when the database aborted it for a lock conflict: a MySQL deadlock (the
/// scheduler's `FOR UPDATE SKIP LOCKED` claims lock index ranges that a job insert may need) or
/// lock wait timeout, or a busy SQLite. The statement itself was fine; a second try succeeds.
pub(crate) async fn retry_on_conflict<T, F, Fut>(mut write: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 0u64;
    loop {
        match write().await {
            Err(sqlx::Error::Database(d)) if attempt < 5 && is_lock_conflict(d.as_ref()) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(5 * attempt)).await;
            }
            other => return other,
        }
    }
}

fn is_lock_conflict(e: &dyn sqlx::error::DatabaseError) -> bool {
    let code = e.code();
    // 40001: MySQL deadlock (1213); 1205 lock wait timeout reports HY000; SQLite 5/6 = BUSY/LOCKED.
    matches!(
        code.as_deref(),
        Some("40001") | Some("5") | Some("6") | Some("517")
    ) || e.message().contains("Lock wait timeout")
}

/// What a statement did, the same for both databases (their result types differ).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows: u64,
    id: i64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows
    }

    /// The id of the row an `INSERT` created.
    pub(crate) fn insert_id(&self) -> i64 {
        self.id
    }
}

impl From<sqlx::sqlite::SqliteQueryResult> for Done {
    fn from(r: sqlx::sqlite::SqliteQueryResult) -> Self {
        Done {
            rows: r.rows_affected(),
            id: r.last_insert_rowid(),
        }
    }
}

impl From<sqlx::mysql::MySqlQueryResult> for Done {
    fn from(r: sqlx::mysql::MySqlQueryResult) -> Self {
        Done {
            rows: r.rows_affected(),
            id: r.last_insert_id() as i64,
        }
    }
}

/// Most rows one list returns; callers page through more. A larger page is a slow query and a
/// large answer for the console.
const MAX_PAGE: i64 = 1000;

/// The rows a list returns for a requested `limit`: at least one, at most [`MAX_PAGE`]. Every
/// list of the store applies it, and the API reports the page size it gives.
pub fn page_limit(limit: i64) -> i64 {
    limit.clamp(1, MAX_PAGE)
}

/// A handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(crate) db: Db,
    /// Whether an `INSERT` can return the rows it wrote: SQLite and MariaDB 10.5+ can, MySQL
    /// cannot (it reads them back in a second statement).
    insert_returning: bool,
}

static SQLITE_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static MYSQL_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/mysql");

impl Store {
    /// Opens the database named by `url` (`sqlite://path` or `mysql://…`), creating an SQLite file
    /// and its folder when missing, and applies the embedded migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Store> {
        let store = if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let url = url.replacen("mariadb://", "mysql://", 1);
            let pool = MySqlPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                // READ COMMITTED: locking reads lock the rows they return, not the gaps between
                // index entries, so the scheduler's claims (`FOR UPDATE SKIP LOCKED` over due
                // jobs) do not deadlock with jobs being created or edited. Every write that must
                // be exclusive is a compare-and-set or hits a unique key, which RC keeps exact.
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                            .execute(conn)
                            .await
                            .map(|_| ())
                    })
                })
                .connect(&url)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to MySQL at {}: {e}", redact(&url)))?;
            MYSQL_MIGRATOR
                .run(&pool)
                .await
                .map_err(|e| anyhow::anyhow!("MySQL migrations failed: {e}"))?;
            let version: String = sqlx::query_scalar("SELECT VERSION()")
                .fetch_one(&pool)
                .await
                .map_err(|e| anyhow::anyhow!("cannot read the MySQL server's version: {e}"))?;
            Store {
                db: Db::MySql(pool),
                insert_returning: mariadb_returns_inserts(&version),
            }
        } else if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or(path);
            if path != ":memory:" {
                if let Some(parent) = Path::new(path).parent() {
                    if !parent.as_os_str().is_empty() {
                        std::fs::create_dir_all(parent).map_err(|e| {
                            anyhow::anyhow!("cannot create folder {}: {e}", parent.display())
                        })?;
                    }
                }
            }
            let opts = SqliteConnectOptions::from_str(url)
                .map_err(|e| anyhow::anyhow!("bad SQLite URL {url}: {e}"))?
                .create_if_missing(true)
                // WAL lets the console read while the scheduler writes; NORMAL sync is durable
                // against process crashes, which is what a scheduler restart needs.
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(false)
                // A statement that changes many rows keeps a copy of the pages it changes
                // (its statement journal), to undo itself alone; past 64 KiB SQLite spills
                // that copy to a temporary file. Every multi-row write of the hot path passes
                // that, and the spill's writes were 3–4 % of the admin's CPU at 1 000 runs a
                // second. In memory it stays as big as one statement's pages. Sorts and
                // temporary tables are kept in memory too; the admin's reads are paged and
                // mostly ordered by an index, so theirs stay small.
                .pragma("temp_store", "memory")
                // sqlx's row buffer (50 rows back from the connection's thread at a time) is
                // kept: 1 024 measured no better (docs/benchmarks.md, sixteenth round). The
                // cache holds every statement of the hot path, each multi-row one in its ten
                // lengths (`cached_len`); at 20 they pushed each other out and were compiled
                // again.
                .statement_cache_capacity(128);
            disable_sqlite_memstatus();
            // sqlx pings a connection on every acquire by default, to find network connections
            // that died while idle; a SQLite connection is a file handle that cannot, and the
            // ping is one more hand-off to the connection's thread per statement.
            let write = SqlitePoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(30))
                .test_before_acquire(false)
                .connect_with(opts.clone())
                .await
                .map_err(|e| anyhow::anyhow!("cannot open SQLite database {path}: {e}"))?;
            SQLITE_MIGRATOR
                .run(&write)
                .await
                .map_err(|e| anyhow::anyhow!("SQLite migrations failed: {e}"))?;
            // An in-memory database exists once per connection: it has only the writer.
            let read = if path == ":memory:" {
                write.clone()
            } else {
                SqlitePoolOptions::new()
                    .max_connections(3)
                    .test_before_acquire(false)
                    .connect_with(opts.read_only(true))
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot open SQLite database {path}: {e}"))?
            };
            Store {
                db: Db::Sqlite { write, read },
                insert_returning: true,
            }
        } else {
            anyhow::bail!(
                "unsupported database URL {:?}: use sqlite://path/to/file.db or mysql://user:pass@host/db",
                redact(url)
            );
        };
        Ok(store)
    }

    /// Whether an `INSERT` returns the rows it wrote (`INSERT … RETURNING`): read-backs of new
    /// rows were 5 % of MariaDB's CPU per fire at 10 000 fires a second, and on SQLite a quarter
    /// of the statement time per fire.
    pub(crate) fn insert_returning(&self) -> bool {
        self.insert_returning
    }

    /// This store with new rows read back after an `INSERT`, as on MySQL: the tests run that
    /// path against MariaDB, which would otherwise return the rows.
    #[doc(hidden)]
    pub fn reading_back_inserts(mut self) -> Store {
        self.insert_returning = false;
        self
    }

    pub fn dialect(&self) -> Dialect {
        match self.db {
            Db::Sqlite { .. } => Dialect::Sqlite,
            Db::MySql(_) => Dialect::MySql,
        }
    }

    /// The statement that begins a transaction which reads and then writes. On SQLite it takes
    /// the write lock at once: a deferred transaction that read first cannot upgrade once another
    /// writer committed (`SQLITE_BUSY_SNAPSHOT`, which the busy timeout does not retry). MySQL
    /// locks the rows it reads with `FOR UPDATE` instead.
    pub(crate) fn begin_write(&self) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::MySql => "BEGIN",
        }
    }

    /// Whether the store can take several admins at once (SQLite cannot).
    pub fn supports_cluster(&self) -> bool {
        self.dialect() == Dialect::MySql
    }

    /// A cheap round trip, for `/readyz`.
    pub async fn ping(&self) -> StoreResult<()> {
        with_pool!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await?;
        });
        Ok(())
    }

    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite { write, read } => {
                read.close().await;
                write.close().await;
            }
            Db::MySql(pool) => pool.close().await,
        }
    }
}

/// Turns off SQLite's memory statistics, process-wide, before its first connection. With them on,
/// every allocation SQLite makes takes one global mutex, and the connections' threads queued on it
/// (a tenth of the admin's CPU at 1 000 runs per second went to that lock). Nothing reads them.
fn disable_sqlite_memstatus() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: a configuration call with one int argument, as documented for
        // SQLITE_CONFIG_MEMSTATUS; SQLite refuses it (SQLITE_MISUSE, harmless) once initialised.
        let rc = unsafe {
            libsqlite3_sys::sqlite3_config(
                libsqlite3_sys::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            )
        };
        if rc != libsqlite3_sys::SQLITE_OK {
            tracing::debug!(rc, "SQLite memory statistics stay on (already initialised)");
        }
    });
}

/// Hides the password of a database URL in messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Whether a server of this `VERSION()` is MariaDB 10.5 or later, the first with
/// `INSERT … RETURNING` (MySQL has none).
fn mariadb_returns_inserts(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    // Older clients' handshake form puts a fake 5.5.5 first.
    let version = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (10, 5)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cached_chunks_are_powers_of_two_in_order() {
        let mut lengths = std::collections::BTreeSet::new();
        for n in 0..2_000usize {
            let items: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = super::cached_chunks(&items).collect();
            assert_eq!(chunks.concat(), items, "{n}: every item once, in order");
            for c in &chunks {
                assert!(c.len().is_power_of_two() && c.len() <= super::ROWS_PER_STATEMENT);
                assert_eq!(super::cached_len(c.len()), c.len());
                lengths.insert(c.len());
            }
        }
        assert_eq!(lengths.len(), 10, "ten lengths: 1 to 512");
        assert_eq!(super::cached_len(3), 4);
        assert_eq!(super::cached_len(500), 512);
    }

    #[test]
    fn redacts_password() {
        assert_eq!(
            super::redact("mysql://root:secret@127.0.0.1/test"),
            "mysql://root:***@127.0.0.1/test"
        );
        assert_eq!(super::redact("sqlite://data/x.db"), "sqlite://data/x.db");
    }

    #[test]
    fn insert_returning_by_server_version() {
        use super::mariadb_returns_inserts;
        assert!(mariadb_returns_inserts("10.11.19-MariaDB-0+deb12u1"));
        assert!(mariadb_returns_inserts("11.4.2-MariaDB"));
        assert!(mariadb_returns_inserts("10.5.0-MariaDB-log"));
        assert!(mariadb_returns_inserts("5.5.5-10.6.1-MariaDB"));
        assert!(!mariadb_returns_inserts("10.4.34-MariaDB"));
        assert!(!mariadb_returns_inserts("8.0.36"));
        assert!(!mariadb_returns_inserts("8.4.0-0ubuntu0.24.04.1"));
    }
}
