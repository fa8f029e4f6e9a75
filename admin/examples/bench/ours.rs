//! The Shardline admin under load: started as its own process on a fresh database, driven through
//! its REST API and the executor protocol, and judged from its own tables (`fires`, `runs`) and
//! from `/proc`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use sqlx::Connection;

use crate::execs::Observed;
use crate::sys::{self, percentile, r1, CpuWindow, Proc, RssSampler};

pub const ACCESS_TOKEN: &str = "bench-access-token";
pub const API_TOKEN: &str = "bench-api-token";
pub const APPNAME: &str = "bench-app";

/// Which database a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DbKind {
    Sqlite,
    Mysql,
}

impl DbKind {
    pub fn name(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Mysql => "mysql",
        }
    }
}

/// A database made for one admin process: a new SQLite file, or a new MariaDB database that is
/// dropped afterwards.
pub struct BenchDb {
    pub kind: DbKind,
    pub url: String,
    server: String,
    mysql_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl BenchDb {
    pub async fn fresh(kind: DbKind, mysql_server: &str, label: &str) -> anyhow::Result<BenchDb> {
        match kind {
            DbKind::Sqlite => {
                let dir = sys::temp_dir("db", None)?;
                Ok(BenchDb {
                    kind,
                    url: format!("sqlite://{}/bench.db", dir.path().display()),
                    server: String::new(),
                    mysql_name: None,
                    _dir: Some(dir),
                })
            }
            DbKind::Mysql => {
                let name = format!("{}{label}", sys::run_prefix('_'));
                let mut conn = sqlx::MySqlConnection::connect(&format!("{mysql_server}/mysql"))
                    .await
                    .map_err(|e| anyhow::anyhow!("MariaDB at {mysql_server}: {e}"))?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut conn)
                    .await?;
                sqlx::query(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
                    .execute(&mut conn)
                    .await?;
                Ok(BenchDb {
                    kind,
                    url: format!("{mysql_server}/{name}"),
                    server: mysql_server.to_string(),
                    mysql_name: Some(name),
                    _dir: None,
                })
            }
        }
    }

    /// A pool for the harness's own queries (counts and times read back from the admin's tables).
    pub async fn reader(&self) -> anyhow::Result<Reader> {
        Ok(match self.kind {
            DbKind::Sqlite => Reader::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(2)
                    .connect(&self.url)
                    .await?,
            ),
            DbKind::Mysql => Reader::MySql(
                sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(2)
                    .connect(&self.url)
                    .await?,
            ),
        })
    }

    pub async fn drop_db(self) {
        if let Some(name) = &self.mysql_name {
            if let Ok(mut conn) =
                sqlx::MySqlConnection::connect(&format!("{}/mysql", self.server)).await
            {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut conn)
                    .await;
            }
        }
    }
}

/// Which of the harness's MariaDB databases [`drop_dbs`] drops.
pub enum Whose {
    /// This process's: after a run stopped part way (a signal), whose scenarios did not get to
    /// drop their own.
    Own,
    /// Those of runs whose harness has exited without dropping them (killed by SIGKILL).
    Exited,
}

/// Drops the harness's MariaDB databases of `whose`; returns how many. Best effort: a MariaDB
/// that cannot be reached has nothing to drop here.
pub async fn drop_dbs(mysql_server: &str, whose: Whose) -> usize {
    let Ok(mut conn) = sqlx::MySqlConnection::connect(&format!("{mysql_server}/mysql")).await
    else {
        return 0;
    };
    let names: Vec<String> =
        sqlx::query_scalar("SELECT schema_name FROM information_schema.schemata")
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
    let own = sys::run_prefix('_');
    let mut dropped = 0;
    for name in names.iter().filter(|n| match whose {
        Whose::Own => n.starts_with(&own),
        Whose::Exited => sys::made_by_exited_run(n, '_'),
    }) {
        if sqlx::query(&format!("DROP DATABASE IF EXISTS `{name}`"))
            .execute(&mut conn)
            .await
            .is_ok()
        {
            dropped += 1;
        }
    }
    dropped
}

/// Read access to the admin's database.
pub enum Reader {
    Sqlite(sqlx::SqlitePool),
    MySql(sqlx::MySqlPool),
}

impl Reader {
    pub async fn count(&self, sql: &str, binds: &[i64]) -> anyhow::Result<i64> {
        Ok(match self {
            Reader::Sqlite(p) => {
                let mut q = sqlx::query_scalar::<_, i64>(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_one(p).await?
            }
            Reader::MySql(p) => {
                let mut q = sqlx::query_scalar::<_, i64>(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_one(p).await?
            }
        })
    }

    /// Rows of two nullable integers.
    pub async fn pairs(&self, sql: &str, binds: &[i64]) -> anyhow::Result<Vec<(i64, Option<i64>)>> {
        Ok(match self {
            Reader::Sqlite(p) => {
                let mut q = sqlx::query_as::<_, (i64, Option<i64>)>(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_all(p).await?
            }
            Reader::MySql(p) => {
                let mut q = sqlx::query_as::<_, (i64, Option<i64>)>(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                q.fetch_all(p).await?
            }
        })
    }

    pub async fn close(self) {
        match self {
            Reader::Sqlite(p) => p.close().await,
            Reader::MySql(p) => p.close().await,
        }
    }
}

/// Builds the admin binary of the harness's own profile (a no-op when it is current) and returns
/// its path.
pub fn admin_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let profile = sys::profile_dir()?;
    let release = profile.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-q",
        "-p",
        "shardline-admin",
        "--bin",
        "shardline-admin",
    ])
    .arg("--manifest-path")
    .arg(&manifest);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status()?;
    anyhow::ensure!(status.success(), "building shardline-admin failed");
    let bin = profile.join(format!("shardline-admin{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(bin.exists(), "{} is missing after the build", bin.display());
    Ok(bin)
}

/// A Shardline admin process.
pub struct AdminProc {
    pub proc: Proc,
    pub base: String,
    pub http: reqwest::Client,
    log_dir: PathBuf,
}

impl AdminProc {
    pub async fn start(
        bin: &Path,
        db: &BenchDb,
        log_dir: &Path,
        name: &str,
    ) -> anyhow::Result<AdminProc> {
        let port = sys::free_port()?;
        let mut cmd = Command::new(bin);
        cmd.args(["--bind", &format!("127.0.0.1:{port}")])
            .args(["--database-url", &db.url])
            .args(["--access-token", ACCESS_TOKEN])
            .args(["--api-token", API_TOKEN])
            .args(["--admin-password", "bench-admin-password-1"])
            // `BENCH_ADMIN_LOG=warn,sqlx::query=debug` (with `--keep-logs`) logs every statement
            // with its time, for profiling; the default keeps logging out of the figures.
            .env(
                "SHARDLINE_LOG",
                std::env::var("BENCH_ADMIN_LOG").unwrap_or_else(|_| "warn".into()),
            );
        let mut proc = Proc::spawn(name, &mut cmd, log_dir)?;
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .timeout(Duration::from_secs(30))
            .build()?;
        proc.wait_answering(
            &http,
            &format!("{base}/healthz"),
            Duration::from_millis(50),
            log_dir,
        )
        .await?;
        Ok(AdminProc {
            proc,
            base,
            http,
            log_dir: log_dir.to_path_buf(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// The HTTP requests that carried runs to executors so far (a batch of runs is one), from
    /// `/metrics`; `None` from an admin that does not count them.
    pub async fn run_requests(&self) -> Option<u64> {
        sys::metric(&self.http, &self.base, "shardline_dispatch_requests_total")
            .await
            .map(|v| v as u64)
    }

    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        let dir = self.log_dir.clone();
        self.proc.check_alive(&dir)
    }

    /// An authenticated REST call; fails on a non-2xx answer.
    pub async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}/api/v1{path}", self.base))
            .bearer_auth(API_TOKEN);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        anyhow::ensure!(
            status.is_success(),
            "{method} {path}: HTTP {status}: {text}"
        );
        Ok(if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)?
        })
    }

    pub async fn create_group(&self, appname: &str) -> anyhow::Result<i64> {
        let g = self
            .api(
                reqwest::Method::POST,
                "/groups",
                Some(json!({"appname": appname, "title": appname})),
            )
            .await?;
        g["id"]
            .as_i64()
            .ok_or_else(|| anyhow::anyhow!("group without id: {g}"))
    }

    pub async fn live_executors(&self, gid: i64) -> anyhow::Result<Vec<String>> {
        let v = self
            .api(
                reqwest::Method::GET,
                &format!("/groups/{gid}/executors"),
                None,
            )
            .await?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["address"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    pub async fn wait_executors(&self, gid: i64, n: usize) -> anyhow::Result<Vec<String>> {
        let started = Instant::now();
        loop {
            let live = self.live_executors(gid).await?;
            if live.len() >= n {
                return Ok(live);
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "group {gid} has {} of {n} executors after 30 s",
                live.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Creates jobs `first..first + n` of the group with `schedule_conf` (enabled, CRON, handler
    /// `noop`), 32 requests in flight. Returns how many failed.
    pub async fn create_jobs(
        &self,
        gid: i64,
        first: usize,
        n: usize,
        cron: &str,
    ) -> anyhow::Result<u64> {
        let results = futures::stream::iter(first..first + n)
            .map(|i| {
                let body = json!({
                    "group_id": gid, "name": format!("bench-{i}"), "handler": "noop",
                    "schedule_type": "CRON", "schedule_conf": cron,
                    "route_strategy": "ROUND", "misfire_strategy": "DO_NOTHING",
                    "enabled": true,
                });
                async move { self.api(reqwest::Method::POST, "/jobs", Some(body)).await }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
        let failed: Vec<&anyhow::Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        if let Some(e) = failed.first() {
            eprintln!("  {} job creations failed, first: {e:#}", failed.len());
        }
        Ok(failed.len() as u64)
    }

    pub fn stop(mut self) {
        self.proc.terminate(Duration::from_secs(15));
    }
}

/// Idle figures: RSS after settling, CPU over `window`.
pub async fn idle(pid: u32, window: Duration) -> Value {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = CpuWindow::start(pid);
    tokio::time::sleep(window).await;
    json!({
        "rss_mib": sys::rss_mib(pid).map(r1),
        "rss_anon_mib": sys::status_mib(pid, "RssAnon").map(r1),
        "cpu_pct": cpu.percent().map(r1),
        "window_s": window.as_secs_f64(),
    })
}

/// `n` simulated executors beating every `period` through `/api/registry` (spread evenly), for
/// `window`; returns the admin's CPU over the window. `registry_url` is the full registry URL.
pub async fn beats(
    pid: u32,
    http: &reqwest::Client,
    registry_url: &str,
    token: &str,
    n: usize,
    period: Duration,
    window: Duration,
) -> Value {
    let registry_url: Arc<str> = registry_url.into();
    let token: Arc<str> = token.into();
    let beat = |i: usize| {
        let http = http.clone();
        let url = registry_url.clone();
        let token = token.clone();
        async move {
            let body = json!({
                "registryGroup": "EXECUTOR", "registryKey": "beat-app",
                "registryValue": format!("http://127.0.0.2:{}/", 20_000 + i),
            });
            match http
                .post(&*url)
                .header("XXL-JOB-ACCESS-TOKEN", &*token)
                .json(&body)
                .send()
                .await
            {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["code"].as_i64() == Some(200)),
                Err(_) => false,
            }
        }
    };
    // Every simulated executor registers once first, as after a restart of the fleet.
    let first: Vec<bool> = futures::stream::iter(0..n)
        .map(beat)
        .buffer_unordered(16)
        .collect()
        .await;
    let mut failed = first.iter().filter(|ok| !**ok).count() as u64;
    let step = period / n.max(1) as u32;
    let cpu = CpuWindow::start(pid);
    let started = Instant::now();
    let mut tick = tokio::time::interval(step);
    let mut i = 0usize;
    let mut sent = 0u64;
    let mut pending = futures::stream::FuturesUnordered::new();
    while started.elapsed() < window {
        tokio::select! {
            _ = tick.tick() => {
                pending.push(beat(i % n));
                i += 1;
                sent += 1;
            }
            Some(ok) = pending.next(), if !pending.is_empty() => {
                if !ok { failed += 1; }
            }
        }
    }
    while let Some(ok) = pending.next().await {
        if !ok {
            failed += 1;
        }
    }
    json!({
        "executors": n,
        "period_s": period.as_secs_f64(),
        "beats_sent": sent,
        "beats_failed": failed,
        "cpu_pct": cpu.percent().map(r1),
        "window_s": window.as_secs_f64(),
    })
}

/// Steady load: `jobs` jobs firing every second; measured over `window` after `warmup`.
pub struct SteadySpec {
    pub jobs: usize,
    pub warmup: Duration,
    pub window: Duration,
}

/// Measures a steady window of the admin already loaded with `spec.jobs` every-second jobs.
pub async fn steady(
    admin: &mut AdminProc,
    reader: &Reader,
    observed: &Observed,
    spec: &SteadySpec,
) -> anyhow::Result<Value> {
    let pid = admin.pid();
    // The window starts and ends on whole seconds, the fire times of the jobs.
    let now = now_ms();
    let start = (now / 1000 + 1) * 1000 + spec.warmup.as_millis() as i64;
    let end = start + (spec.window.as_millis() as i64 / 1000).max(1) * 1000;
    sleep_until_ms(start).await;
    let mysqld = sys::mysqld_pid().map(CpuWindow::start);
    let cpu = CpuWindow::start(pid);
    // The harness process: its in-process SDK executors share the two cores with the admin.
    let executors = CpuWindow::start(std::process::id());
    let rss = RssSampler::start(pid);
    observed.reset_histogram();
    let executed_before = observed.executed.load(Ordering::Relaxed);
    let requests_before = admin.run_requests().await;
    observed.recording.store(true, Ordering::Relaxed);
    sleep_until_ms(end).await;
    observed.recording.store(false, Ordering::Relaxed);
    let executed = observed.executed.load(Ordering::Relaxed) - executed_before;
    let requests = admin
        .run_requests()
        .await
        .zip(requests_before)
        .map(|(after, before)| after.saturating_sub(before));
    let cpu_pct = cpu.percent();
    let executors_pct = executors.percent();
    let mysqld_pct = mysqld.and_then(|w| w.percent());
    let (rss_mean, rss_max) = rss.finish().await;
    admin.check_alive()?;
    // Results of the last second's runs are written a few milliseconds after the window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let window_s = ((end - start) / 1000) as f64;

    let rows = reader
        .pairs(
            "SELECT planned_at, NULLIF(dispatched_at, 0) FROM fires WHERE planned_at >= ? AND planned_at < ?",
            &[start, end],
        )
        .await?;
    let late = sorted_delays(&rows);
    // The latest sent fire of each second of the window, in order (null: none of its fires went
    // out): a high p99 is either a few bad seconds (a stall) or every second's tail (a steady
    // cost), and these tell which.
    let mut worst_by_second: Vec<Option<i64>> = vec![None; ((end - start) / 1000) as usize];
    for (p, d) in &rows {
        if let (Some(d), Some(slot)) = (d, worst_by_second.get_mut(((p - start) / 1000) as usize)) {
            *slot = Some(slot.unwrap_or(0).max(d - p));
        }
    }
    let expected = spec.jobs as i64 * (end - start) / 1000;
    let finished = reader
        .count(
            "SELECT COUNT(*) FROM runs WHERE finished_at >= ? AND finished_at < ? AND state NOT IN ('triggering', 'running')",
            &[start, end],
        )
        .await?;
    let failed = reader
        .count(
            "SELECT COUNT(*) FROM runs WHERE finished_at >= ? AND finished_at < ? AND state NOT IN ('triggering', 'running', 'succeeded')",
            &[start, end],
        )
        .await?;
    // How long after its planned time each run's end was stored: what a user waits for to see
    // it finished (the executors' start, their results' way back, and the results writer).
    let ends = reader
        .pairs(
            "SELECT f.planned_at, NULLIF(r.finished_at, 0) FROM runs r JOIN fires f ON f.id = r.fire_id WHERE r.finished_at >= ? AND r.finished_at < ? AND r.state NOT IN ('triggering', 'running')",
            &[start, end],
        )
        .await?;
    let stored_after = sorted_delays(&ends);
    let (samples, exec_p50, exec_p99) = observed.lateness();
    Ok(json!({
        "jobs": spec.jobs,
        "window_s": window_s,
        "fires_expected": expected,
        "fires_created": rows.len(),
        "fires_dispatched": late.len(),
        "lateness_p50_ms": percentile(&late, 50.0),
        "lateness_p90_ms": percentile(&late, 90.0),
        "lateness_p99_ms": percentile(&late, 99.0),
        "lateness_max_ms": late.last(),
        "lateness_max_by_second_ms": worst_by_second,
        "runs_completed": finished,
        "runs_failed": failed,
        "runs_per_s": r1(finished as f64 / window_s),
        "executor_runs_per_s": r1(executed as f64 / window_s),
        "run_requests_per_s": requests.map(|n| r1(n as f64 / window_s)),
        "executor_lateness_samples": samples,
        "executor_lateness_p50_ms": exec_p50,
        "executor_lateness_p99_ms": exec_p99,
        "run_end_stored_p50_ms": percentile(&stored_after, 50.0),
        "run_end_stored_p99_ms": percentile(&stored_after, 99.0),
        "cpu_pct": cpu_pct.map(r1),
        "rss_mean_mib": rss_mean.map(r1),
        "rss_max_mib": rss_max.map(r1),
        "mysqld_cpu_pct": mysqld_pct.map(r1),
        "executors_cpu_pct": executors_pct.map(r1),
    }))
}

/// The delays (`at - from`, none below 0) of the pairs whose `at` is set, sorted for
/// [`percentile`].
fn sorted_delays(pairs: &[(i64, Option<i64>)]) -> Vec<i64> {
    let mut delays: Vec<i64> = pairs
        .iter()
        .filter_map(|(from, at)| at.map(|at| (at - from).max(0)))
        .collect();
    delays.sort_unstable();
    delays
}

/// RSS with `n` jobs defined (enabled, firing once a day at 03:00 so none fires while measured).
pub async fn jobs_defined(admin: &mut AdminProc, gid: i64, n: usize) -> anyhow::Result<Value> {
    let pid = admin.pid();
    let rss = RssSampler::start(pid);
    let started = Instant::now();
    let failed = admin.create_jobs(gid, 0, n, "0 0 3 * * ?").await?;
    let took = started.elapsed().as_secs_f64();
    // A few scheduler passes over the full table.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, max) = rss.finish().await;
    admin.check_alive()?;
    Ok(json!({
        "jobs": n,
        "create_failed": failed,
        "create_per_s": r1(n as f64 / took.max(0.001)),
        "rss_mib": sys::rss_mib(pid).map(r1),
        "rss_max_mib": max.map(r1),
    }))
}

/// Starts a child role of this binary and waits for `ready_line` in its output.
pub async fn child(
    role: &str,
    admin: &str,
    appname: &str,
    log_dir: &Path,
    name: &str,
    ready_line: &str,
) -> anyhow::Result<(Proc, String)> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "--role",
        role,
        "--role-admin",
        admin,
        "--role-appname",
        appname,
    ])
    .args(["--role-token", ACCESS_TOKEN])
    .env("RUST_LOG", "warn");
    let mut proc = Proc::spawn(name, &mut cmd, log_dir)?;
    let started = Instant::now();
    loop {
        proc.check_alive(log_dir)?;
        let out = std::fs::read_to_string(log_dir.join(format!("{name}.log"))).unwrap_or_default();
        if out
            .lines()
            .any(|l| l.trim() == ready_line || l.starts_with(ready_line))
        {
            let address = out
                .lines()
                .find_map(|l| l.strip_prefix("listening on "))
                .unwrap_or_default()
                .trim()
                .to_string();
            return Ok((proc, address));
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "{name} not ready after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Memory of an SDK executor process with 100 idle handlers, and of the same binary idle.
pub async fn sdk_rss(admin: &AdminProc, log_dir: &Path) -> anyhow::Result<Value> {
    let gid = admin.create_group("sdk-idle-app").await?;
    let (sdk, _) = child(
        "sdk-idle",
        &admin.base,
        "sdk-idle-app",
        log_dir,
        "sdk-idle",
        "ready",
    )
    .await?;
    let (base, _) = child(
        "baseline",
        &admin.base,
        "none",
        log_dir,
        "sdk-baseline",
        "ready",
    )
    .await?;
    admin.wait_executors(gid, 1).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sdk_rss = sys::rss_mib(sdk.pid());
    let base_rss = sys::rss_mib(base.pid());
    Ok(json!({
        "handlers": 100,
        "rss_mib": sdk_rss.map(r1),
        "rss_anon_mib": sys::status_mib(sdk.pid(), "RssAnon").map(r1),
        "baseline_rss_mib": base_rss.map(r1),
        "overhead_mib": sdk_rss.zip(base_rss).map(|(a, b)| r1(a - b)),
    }))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

async fn sleep_until_ms(t: i64) {
    let d = t - now_ms();
    if d > 0 {
        tokio::time::sleep(Duration::from_millis(d as u64)).await;
    }
}

async fn wait_fire(admin: &AdminProc, fire_id: i64, limit: Duration) -> anyhow::Result<Value> {
    let started = Instant::now();
    loop {
        let f = admin
            .api(reqwest::Method::GET, &format!("/fires/{fire_id}"), None)
            .await?;
        if f["state"] == "succeeded" || f["state"] == "failed" {
            return Ok(f);
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "fire {fire_id} not final after {limit:?}: {f}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn runs_of(fire: &Value) -> Vec<Value> {
    fire["runs"].as_array().cloned().unwrap_or_default()
}

/// The run of `item` at `attempt`.
fn run_at(runs: &[Value], item: i64, attempt: i64) -> Option<&Value> {
    runs.iter()
        .find(|r| r["shard_index"] == item && r["attempt"] == attempt)
}

/// Failover of sharded items with executor processes killed with -9: (a) an executor dead before
/// the fire, still registered, so its dispatches fail; (b) an executor killed while its items run.
pub async fn failover(admin: &AdminProc, log_dir: &Path, items: i64) -> anyhow::Result<Value> {
    let gid = admin.create_group("failover-app").await?;
    let mut procs = Vec::new();
    for i in 0..3 {
        let (p, address) = child(
            "executor",
            &admin.base,
            "failover-app",
            log_dir,
            &format!("failover-exec-{i}"),
            "listening on ",
        )
        .await?;
        procs.push((address, p));
    }
    admin.wait_executors(gid, 3).await?;
    procs.sort_by(|a, b| a.0.cmp(&b.0));
    let job = |name: &str, ms: u64| {
        json!({
            "group_id": gid, "name": name, "handler": "slow", "params": ms.to_string(),
            "schedule_type": "NONE", "sharding_mode": "ITEMS", "sharding_total": items,
            "sharding_strategy": "AVERAGE",
        })
    };

    // (a) Dead before the fire: each of its items fails to dispatch and moves at once.
    let (dead_address, mut dead) = procs.pop().expect("three executors");
    dead.child.kill()?;
    dead.child.wait()?;
    let j = admin
        .api(reqwest::Method::POST, "/jobs", Some(job("failover-a", 300)))
        .await?;
    let jid = j["id"].as_i64().unwrap_or_default();
    let f = admin
        .api(
            reqwest::Method::POST,
            &format!("/jobs/{jid}/trigger"),
            Some(json!({})),
        )
        .await?;
    let fire = wait_fire(
        admin,
        f["fire_id"].as_i64().unwrap_or_default(),
        Duration::from_secs(30),
    )
    .await?;
    let runs = runs_of(&fire);
    let mut dispatch_gaps = Vec::new();
    for r in runs
        .iter()
        .filter(|r| r["attempt"] == 0 && r["executor_address"] == dead_address.as_str())
    {
        let item = r["shard_index"].as_i64().unwrap_or(-1);
        if let (Some(failed_at), Some(again)) = (
            r["finished_at"].as_i64(),
            run_at(&runs, item, 1).and_then(|n| n["dispatched_at"].as_i64()),
        ) {
            dispatch_gaps.push(again - failed_at);
        }
    }
    dispatch_gaps.sort_unstable();
    let a_state = fire["state"].clone();

    // (b) Killed while its items run: the lost-run check finds them and they move.
    let j = admin
        .api(
            reqwest::Method::POST,
            "/jobs",
            Some(job("failover-b", 2_000)),
        )
        .await?;
    let jid = j["id"].as_i64().unwrap_or_default();
    let f = admin
        .api(
            reqwest::Method::POST,
            &format!("/jobs/{jid}/trigger"),
            Some(json!({})),
        )
        .await?;
    let fire_id = f["fire_id"].as_i64().unwrap_or_default();
    let started = Instant::now();
    loop {
        let fire = admin
            .api(reqwest::Method::GET, &format!("/fires/{fire_id}"), None)
            .await?;
        let runs = runs_of(&fire);
        if !runs.is_empty() && runs.iter().all(|r| r["state"] == "running") {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(10),
            "items of fire {fire_id} never all ran: {fire}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (victim_address, mut victim) = procs.pop().expect("two executors left");
    let killed_at = now_ms();
    victim.child.kill()?;
    victim.child.wait()?;
    let fire = wait_fire(admin, fire_id, Duration::from_secs(30)).await?;
    let runs = runs_of(&fire);
    let mut detect = Vec::new();
    let mut moved = Vec::new();
    let mut total = Vec::new();
    for r in runs
        .iter()
        .filter(|r| r["attempt"] == 0 && r["executor_address"] == victim_address.as_str())
    {
        let item = r["shard_index"].as_i64().unwrap_or(-1);
        if let (Some(lost_at), Some(again)) = (
            r["finished_at"].as_i64(),
            run_at(&runs, item, 1).and_then(|n| n["dispatched_at"].as_i64()),
        ) {
            detect.push(lost_at - killed_at);
            moved.push(again - lost_at);
            total.push(again - killed_at);
        }
    }
    for v in [&mut detect, &mut moved, &mut total] {
        v.sort_unstable();
    }
    drop(procs);
    Ok(json!({
        "items": items,
        "failed_dispatch_items": dispatch_gaps.len(),
        "failed_dispatch_to_redispatch_max_ms": dispatch_gaps.last(),
        "failed_dispatch_fire_state": a_state,
        "killed_items": total.len(),
        "kill_to_detect_max_ms": detect.last(),
        "detect_to_redispatch_max_ms": moved.last(),
        "kill_to_redispatch_max_ms": total.last(),
        "killed_fire_state": fire["state"].clone(),
    }))
}
