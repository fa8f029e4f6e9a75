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

    /// Runs `statements` on the test database through a connection of its own, behind the
    /// admin's back: to set up what no API call makes, or to break what a test needs broken.
    pub async fn exec(&self, statements: &[impl AsRef<str>]) {
        if self.kind() == "mysql" {
            let mut c = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
            for sql in statements {
                sqlx::query(sql.as_ref()).execute(&mut c).await.unwrap();
            }
        } else {
            let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            for sql in statements {
                sqlx::query(sql.as_ref()).execute(&mut c).await.unwrap();
            }
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

/// Token executors and the admin share in tests.
pub const ACCESS_TOKEN: &str = "test-access-token";
/// Bearer token accepted as the admin user in tests.
pub const API_TOKEN: &str = "test-api-token";

/// An admin server running in this test process on a random port.
pub struct TestAdmin {
    pub base: String,
    pub http: reqwest::Client,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl TestAdmin {
    pub async fn start(db: &TestDb) -> TestAdmin {
        Self::start_with(db, &[]).await
    }

    /// Starts an admin; `extra` are additional command-line flags.
    pub async fn start_with(db: &TestDb, extra: &[&str]) -> TestAdmin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::start_on(db, extra, listener).await
    }

    /// Stops this admin, keeping its address for [`StoppedAdmin::start_again`]: executors
    /// configured with it find the next admin there.
    pub async fn stop_keeping_address(self) -> StoppedAdmin {
        let addr = self.base.trim_start_matches("http://").to_string();
        self.stop().await;
        StoppedAdmin { addr }
    }

    async fn start_on(db: &TestDb, extra: &[&str], listener: tokio::net::TcpListener) -> TestAdmin {
        use clap::Parser;
        let mut args = vec![
            "shardline-admin",
            "--database-url",
            &db.url,
            "--access-token",
            ACCESS_TOKEN,
            "--api-token",
            API_TOKEN,
            "--admin-password",
            "admin-password-1",
            "--registry-sweep-s",
            "1",
            "--dispatch-timeout-ms",
            "1000",
        ];
        args.extend_from_slice(extra);
        let cli = shardline_admin::config::Cli::parse_from(args);
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = tokio_util::sync::CancellationToken::new();
        let s2 = stop.clone();
        let task = tokio::spawn(async move {
            shardline_admin::app::run(cli.settings, listener, async move { s2.cancelled().await })
                .await
        });
        let http = reqwest::Client::new();
        // Wait until it answers.
        for _ in 0..200 {
            if let Ok(r) = http.get(format!("{base}/healthz")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            if task.is_finished() {
                let err = task.await.unwrap().unwrap_err();
                panic!("admin did not start: {err:#}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        TestAdmin {
            base,
            http,
            stop,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// An authenticated REST call; returns status and JSON body (Null when empty).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self
            .http
            .request(method, self.url(&format!("/api/v1{path}")))
            .bearer_auth(API_TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("admin reachable");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let json = if text.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
        };
        (status, json)
    }

    pub async fn get(&self, path: &str) -> serde_json::Value {
        let (s, v) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    pub async fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let (s, v) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert!(s == 200 || s == 201, "POST {path}: {s} {v}");
        v
    }

    pub async fn put(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let (s, v) = self.call(reqwest::Method::PUT, path, Some(body)).await;
        assert_eq!(s, 200, "PUT {path}: {v}");
        v
    }

    /// A call an executor makes (`/api/callback`, `/api/registry`, ...), with the access token;
    /// returns the envelope after checking its code is 200.
    pub async fn executor_call(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let v: serde_json::Value = self
            .http
            .post(self.url(path))
            .header("XXL-JOB-ACCESS-TOKEN", ACCESS_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("admin reachable")
            .json()
            .await
            .expect("a JSON envelope");
        assert_eq!(v["code"], 200, "{path}: {v}");
        v
    }

    /// Waits until the group has `n` live executors.
    pub async fn wait_executors(&self, group_id: i64, n: usize) {
        for _ in 0..400 {
            let v = self.get(&format!("/groups/{group_id}/executors")).await;
            if v.as_array().map_or(0, Vec::len) == n {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("group {group_id} never had {n} executors");
    }

    /// Waits until a fire is final and returns it.
    pub async fn wait_fire(&self, fire_id: i64) -> serde_json::Value {
        for _ in 0..600 {
            let v = self.get(&format!("/fires/{fire_id}")).await;
            if v["state"] == "succeeded" || v["state"] == "failed" {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!(
            "fire {fire_id} never finished: {}",
            self.get(&format!("/fires/{fire_id}")).await
        );
    }

    pub async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(15), self.task).await;
    }
}

/// The address of an admin that was stopped.
pub struct StoppedAdmin {
    addr: String,
}

impl StoppedAdmin {
    /// Starts an admin on `db` at the stopped one's address.
    pub async fn start_again(self, db: &TestDb) -> TestAdmin {
        for _ in 0..100 {
            if let Ok(listener) = tokio::net::TcpListener::bind(&self.addr).await {
                return TestAdmin::start_on(db, &[], listener).await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{} stays taken", self.addr);
    }
}

/// An SDK executor running in this test process.
pub struct TestExecutor {
    pub address: String,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _logs: tempfile::TempDir,
}

impl TestExecutor {
    /// Starts an executor of `appname` registering every 200 ms with `admin`, with handlers added
    /// by `build`.
    pub async fn start(
        appname: &str,
        admin: &str,
        build: impl FnOnce(shardline_executor::ExecutorBuilder) -> shardline_executor::ExecutorBuilder,
    ) -> TestExecutor {
        Self::start_with(appname, admin, |_| {}, build).await
    }

    pub async fn start_with(
        appname: &str,
        admin: &str,
        configure: impl FnOnce(&mut shardline_executor::ExecutorConfig),
        build: impl FnOnce(shardline_executor::ExecutorBuilder) -> shardline_executor::ExecutorBuilder,
    ) -> TestExecutor {
        let logs = tempfile::tempdir().unwrap();
        let mut cfg = shardline_executor::ExecutorConfig::new(appname, vec![admin.to_string()]);
        cfg.access_token = ACCESS_TOKEN.to_string();
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.log_path = logs.path().to_path_buf();
        cfg.beat_interval = std::time::Duration::from_millis(200);
        cfg.callback_retry_interval = std::time::Duration::from_millis(200);
        cfg.shutdown_grace = std::time::Duration::from_millis(100);
        configure(&mut cfg);
        let executor = build(shardline_executor::Executor::builder(cfg))
            .build()
            .expect("executor builds");
        let bound = executor.bind().await.expect("bind");
        let address = format!("http://{}/", bound.local_addr());
        let stop = tokio_util::sync::CancellationToken::new();
        let s2 = stop.clone();
        let task = tokio::spawn(async move {
            let _ = bound.serve(async move { s2.cancelled().await }).await;
        });
        TestExecutor {
            address,
            stop,
            task,
            _logs: logs,
        }
    }

    pub async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), self.task).await;
    }
}

/// An alarm webhook on a free port of this process: the alarms it took, and how many requests
/// it had.
pub struct Webhook {
    pub url: String,
    took: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Webhook {
    /// `refuse(body, n)` says whether the `n`th request (from 0), carrying `body`, is answered
    /// with HTTP 500 instead of taken.
    pub async fn start(
        refuse: impl Fn(&serde_json::Value, usize) -> bool + Send + Sync + 'static,
    ) -> Webhook {
        let took = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let refuse = std::sync::Arc::new(refuse);
        let (keep, count) = (took.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/alarm",
            axum::routing::post(move |axum::Json(v): axum::Json<serde_json::Value>| {
                let (keep, count, refuse) = (keep.clone(), count.clone(), refuse.clone());
                async move {
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    if refuse(&v, n) {
                        return axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    keep.lock().unwrap().push(v);
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/alarm", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Webhook {
            url,
            took,
            requests,
        }
    }

    /// The alarms taken so far, in the order they came.
    pub fn took(&self) -> Vec<serde_json::Value> {
        self.took.lock().unwrap().clone()
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}
