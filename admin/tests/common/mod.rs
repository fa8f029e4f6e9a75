//! Test support: a fresh database per test, on SQLite (a new file) and on MariaDB (a new database).
//!
//! MariaDB is reached at `SHARDLINE_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306`). Tests
//! that use it fail when it is down, unless `SHARDLINE_TEST_SKIP_MYSQL=1` says to run SQLite only.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Connection;

/// A database created for one test.
pub struct TestDb {
    pub url: String,
    mysql_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn mysql_server() -> String {
    std::env::var("SHARDLINE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
}

pub fn mysql_enabled() -> bool {
    std::env::var("SHARDLINE_TEST_SKIP_MYSQL").map_or(true, |v| v != "1")
}

impl TestDb {
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}/shardline.db", dir.path().display());
        TestDb {
            url,
            mysql_name: None,
            _dir: Some(dir),
        }
    }

    pub async fn mysql() -> TestDb {
        let server = mysql_server();
        let name = format!(
            "sl_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            rand_suffix()
        );
        let mut conn = sqlx::MySqlConnection::connect(&format!("{server}/mysql"))
            .await
            .unwrap_or_else(|e| {
                panic!("MariaDB is not reachable at {server} ({e}); start it or set SHARDLINE_TEST_SKIP_MYSQL=1")
            });
        sqlx::query(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
            .execute(&mut conn)
            .await
            .expect("create test database");
        TestDb {
            url: format!("{server}/{name}"),
            mysql_name: Some(name),
            _dir: None,
        }
    }

    /// Both kinds, for tests that must pass on each.
    pub async fn all() -> Vec<TestDb> {
        let mut v = vec![TestDb::sqlite()];
        if mysql_enabled() {
            v.push(TestDb::mysql().await);
        }
        v
    }

    pub fn kind(&self) -> &'static str {
        if self.mysql_name.is_some() {
            "mysql"
        } else {
            "sqlite"
        }
    }

    /// Drops the MariaDB database (SQLite files go with their temp folder).
    pub async fn cleanup(self) {
        if let Some(name) = &self.mysql_name {
            if let Ok(mut conn) =
                sqlx::MySqlConnection::connect(&format!("{}/mysql", mysql_server())).await
            {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut conn)
                    .await;
            }
        }
    }
}

fn rand_suffix() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}
