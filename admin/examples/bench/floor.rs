//! Floors: what this machine does without any scheduler logic, so the report can say how close the
//! admin comes. Loopback HTTP requests/s of a trivial axum handler, and rows/s of batched inserts
//! into the store's `runs` table.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::QueryBuilder;

use crate::ours::{BenchDb, DbKind};
use crate::sys::r1;

/// A trivial axum handler taking a trigger-sized POST, driven by `connections` keep-alive clients
/// for `duration`. Server and clients share the machine's cores, as admin and executors do.
pub async fn axum_rps(duration: Duration, connections: usize) -> anyhow::Result<Value> {
    let app = trivial_app();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/run", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    // The body of a run request as the admin sends it.
    let body = json!({
        "jobId": 1, "executorHandler": "noop", "executorParams": "", "executorBlockStrategy": "SERIAL_EXECUTION",
        "executorTimeout": 0, "logId": 123456, "logDateTime": 1_700_000_000_000i64, "glueType": "BEAN",
        "glueSource": "", "glueUpdatetime": 0, "broadcastIndex": 0, "broadcastTotal": 1,
        "idempotencyKey": "1:123:0"
    })
    .to_string();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .tcp_nodelay(true)
        .build()?;
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (client, url, body, done, errors) = (
            client.clone(),
            url.clone(),
            body.clone(),
            done.clone(),
            errors.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while started.elapsed() < duration {
                let ok = match client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                {
                    Ok(r) => r.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if ok {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = started.elapsed().as_secs_f64();
    server.abort();
    Ok(json!({
        "requests_per_s": r1(done.load(Ordering::Relaxed) as f64 / secs),
        "errors": errors.load(Ordering::Relaxed),
        "connections": connections,
        "window_s": r1(secs),
    }))
}

/// A handler that answers every POST (any path) with a success envelope and does nothing else.
pub fn trivial_app() -> axum::Router {
    axum::Router::new().fallback(axum::routing::post(|body: axum::body::Bytes| async move {
        axum::Json(json!({"code": 200, "msg": null, "len": body.len()}))
    }))
}

/// CPU of the trivial handler in its own process, taking registry-sized POSTs at the rate of
/// `executors` beating every `period` (the beats scenario without any admin logic): the floor of
/// that row on this machine.
pub async fn beat_rate_cpu(
    log_dir: &std::path::Path,
    executors: usize,
    period: Duration,
    window: Duration,
) -> anyhow::Result<Value> {
    let (server, address) = crate::ours::child(
        "floor-server",
        "-",
        "-",
        log_dir,
        "floor-server",
        "listening on ",
    )
    .await?;
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let url = format!("{address}api/registry");
    Ok(crate::ours::beats(server.pid(), &http, &url, "-", executors, period, window).await)
}

/// Rows/s of multi-row inserts into the store's `runs` table (schema from the admin's own
/// migrations), `batch` rows per statement and transaction, `rows` rows in all.
pub async fn inserts(
    kind: DbKind,
    mysql_server: &str,
    rows: usize,
    batch: usize,
) -> anyhow::Result<Value> {
    let db = BenchDb::fresh(kind, mysql_server, "floor").await?;
    // The migrations give the real table and indexes.
    let store = shardline_admin::store::Store::connect(&db.url).await?;
    store.close().await;
    let result = match kind {
        DbKind::Sqlite => {
            // The admin's own connection settings (WAL, synchronous NORMAL).
            let opts = db
                .url
                .parse::<sqlx::sqlite::SqliteConnectOptions>()?
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
            let pool = sqlx::sqlite::SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(opts)
                .await?;
            let started = Instant::now();
            let mut done = 0;
            while done < rows {
                let n = batch.min(rows - done);
                let mut tx = pool.begin().await?;
                insert_runs(done, n).build().execute(&mut *tx).await?;
                tx.commit().await?;
                done += n;
            }
            let secs = started.elapsed().as_secs_f64();
            pool.close().await;
            secs
        }
        DbKind::Mysql => {
            let pool = sqlx::mysql::MySqlPoolOptions::new()
                .max_connections(1)
                .connect(&db.url)
                .await?;
            let started = Instant::now();
            let mut done = 0;
            while done < rows {
                let n = batch.min(rows - done);
                let mut tx = pool.begin().await?;
                insert_runs(done, n).build().execute(&mut *tx).await?;
                tx.commit().await?;
                done += n;
            }
            let secs = started.elapsed().as_secs_f64();
            pool.close().await;
            secs
        }
    };
    db.drop_db().await;
    Ok(json!({
        "rows": rows,
        "batch": batch,
        "rows_per_s": r1(rows as f64 / result),
    }))
}

fn insert_runs<'a, DB: sqlx::Database>(first: usize, n: usize) -> QueryBuilder<'a, DB>
where
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut qb = QueryBuilder::new(
        "INSERT INTO runs (fire_id, job_id, group_id, shard_index, shard_total, attempt, superseded, executor_address, handler, params, state, trigger_msg, handle_msg, log_date_time, created_at) ",
    );
    let now = chrono::Utc::now().timestamp_millis();
    qb.push_values(first..first + n, |mut b, i| {
        b.push_bind(i as i64)
            .push_bind((i % 10_000) as i64)
            .push_bind(1i64)
            .push_bind(0i64)
            .push_bind(1i64)
            .push_bind(0i64)
            .push_bind(0i64)
            .push_bind("http://127.0.0.1:9999/")
            .push_bind("noop")
            .push_bind("")
            .push_bind("triggering")
            .push_bind("")
            .push_bind("")
            .push_bind(now)
            .push_bind(now);
    });
    qb
}
