//! High availability on MariaDB: two admin processes share the work; one is killed with SIGKILL
//! while 200 jobs fire every second. Every planned fire must be dispatched exactly once, none lost.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{TestDb, TestExecutor, API_TOKEN};
use serde_json::json;
use shardline_executor::JobResult;
use sqlx::Connection;

const JOBS: usize = 200;
/// The group's own executor token: what the admins send its executors, in the lost-run watch's
/// questions too, and what the executor checks.
const GROUP_TOKEN: &str = "ha-group-token";

/// An admin process, killed when dropped.
struct AdminProcess {
    child: Child,
    base: String,
}

impl AdminProcess {
    fn start(db_url: &str) -> AdminProcess {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        Self::start_on(db_url, port)
    }

    fn start_on(db_url: &str, port: u16) -> AdminProcess {
        let child = Command::new(env!("CARGO_BIN_EXE_shardline-admin"))
            .env("SHARDLINE_DATABASE_URL", db_url)
            .env("SHARDLINE_BIND", format!("127.0.0.1:{port}"))
            // No admin-wide executor token: the test's group has a token of its own (below).
            .env("SHARDLINE_ALLOW_NO_TOKEN", "true")
            .env_remove("SHARDLINE_ACCESS_TOKEN")
            .env("SHARDLINE_API_TOKEN", API_TOKEN)
            .env("SHARDLINE_ADMIN_PASSWORD", "admin-password-1")
            .env("SHARDLINE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("admin binary starts");
        AdminProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn kill9(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// Stops the admin as a service manager does (SIGTERM) and waits up to 20 s for it to exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..400 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the admin did not exit within 20 s of SIGTERM");
    }

    fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }
}

impl Drop for AdminProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_up(http: &reqwest::Client, base: &str) {
    for _ in 0..400 {
        if http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("admin at {base} did not start");
}

async fn api(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let r = http
        .post(format!("{base}/api/v1{path}"))
        .bearer_auth(API_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

/// Creates a group with its own token (`GROUP_TOKEN`) and waits until an executor of it registered.
async fn group_with_executor(http: &reqwest::Client, base: &str, appname: &str) -> i64 {
    let group = api(
        http,
        base,
        "/groups",
        json!({"appname": appname, "title": appname, "access_token": GROUP_TOKEN}),
    )
    .await;
    let gid = group["id"].as_i64().unwrap();
    for _ in 0..100 {
        let v: serde_json::Value = http
            .get(format!("{base}/api/v1/groups/{gid}/executors"))
            .bearer_auth(API_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v.as_array().is_some_and(|x| !x.is_empty()) {
            return gid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no executor of {appname} registered");
}

/// Creates `n` jobs running `tick` every second, through the admins of `bases` in turn.
async fn tick_jobs(http: &reqwest::Client, bases: &[&str], gid: i64, n: usize) {
    for i in 0..n {
        api(
            http,
            bases[i % bases.len()],
            "/jobs",
            json!({"group_id": gid, "name": format!("tick-{i}"), "handler": "tick",
                   "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "enabled": true,
                   "misfire_strategy": "DO_NOTHING"}),
        )
        .await;
    }
}

/// Waits until 700–800 ms into a second: inside the preparation lead of the next second's fires.
async fn inside_preparation_lead() {
    while !(700..800).contains(&(chrono::Utc::now().timestamp_millis() % 1000)) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_one_killed_no_fire_lost_or_doubled() {
    if !common::mysql_enabled() {
        eprintln!("HA test needs MariaDB; skipped because SHARDLINE_TEST_SKIP_MYSQL=1");
        return;
    }
    let db = TestDb::mysql().await;
    let http = reqwest::Client::new();
    let mut a = AdminProcess::start(&db.url);
    wait_up(&http, &a.base).await;
    let b = AdminProcess::start(&db.url);
    wait_up(&http, &b.base).await;

    let runs = Arc::new(AtomicU64::new(0));
    let r2 = runs.clone();
    // The executor reports to whichever admin answers (A first, B once A is gone).
    let exec = TestExecutor::start_with(
        "ha-app",
        &a.base,
        |cfg| {
            cfg.admin_addresses.push(b.base.clone());
            cfg.access_token = GROUP_TOKEN.into();
        },
        move |builder| {
            builder.handler("tick", move |_ctx| {
                let runs = r2.clone();
                async move {
                    runs.fetch_add(1, Ordering::Relaxed);
                    JobResult::success()
                }
            })
        },
    )
    .await;
    let gid = group_with_executor(&http, &a.base, "ha-app").await;
    tick_jobs(&http, &[&a.base, &b.base], gid, JOBS).await;
    let started = chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_secs(12)).await;
    // A is killed inside the preparation lead of the next second's fires, in a second where it
    // holds some of them started (their runs stored) and not yet sent: the two admins' claims
    // take turns, and A may own none of a given second's fires.
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let a_node: String = sqlx::query_scalar("SELECT id FROM admin_nodes WHERE address = ?")
        .bind(a.base.trim_start_matches("http://"))
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let mut started_by_a = 0;
    for _ in 0..10 {
        inside_preparation_lead().await;
        started_by_a = sqlx::query_scalar(
            "SELECT COUNT(*) FROM fires WHERE owner = ? AND state = 'triggering' AND dispatched_at = 0",
        )
        .bind(&a_node)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if started_by_a > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let killed_at = chrono::Utc::now().timestamp_millis();
    a.kill9();
    println!("HA: A killed holding {started_by_a} started fires not yet sent");
    tokio::time::sleep(Duration::from_secs(18)).await;
    let end = chrono::Utc::now().timestamp_millis();
    // Stop scheduling so the tail settles, then let in-flight runs finish.
    sqlx::query("UPDATE jobs SET enabled = 0, next_fire_at = NULL")
        .execute(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Every planned second of every job between start and end (a margin on both sides) has
    // exactly one fire and exactly one current run.
    let from = (started / 1000 + 2) * 1000;
    let to = (end / 1000 - 6) * 1000;
    let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT f.job_id, f.planned_at, COUNT(DISTINCT f.id), CAST(SUM(CASE WHEN r.superseded = 0 THEN 1 ELSE 0 END) AS SIGNED) \
         FROM fires f LEFT JOIN runs r ON r.fire_id = f.id \
         WHERE f.planned_at >= ? AND f.planned_at <= ? AND f.trigger_type = 'CRON' \
         GROUP BY f.job_id, f.planned_at",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let skipped: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM fires WHERE state = 'skipped' AND planned_at >= ? AND planned_at <= ?")
        .bind(from)
        .bind(to)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let seconds = ((to - from) / 1000 + 1) as usize;
    let expected = JOBS * seconds;
    let doubled = rows.iter().filter(|r| r.2 != 1 || r.3 > 1).count();
    let without_run = rows.iter().filter(|r| r.3 == 0).count();
    let lateness: Vec<i64> = sqlx::query_scalar(
        "SELECT CAST(dispatched_at - planned_at AS SIGNED) FROM fires WHERE planned_at >= ? AND planned_at <= ? AND dispatched_at > 0 ORDER BY 1",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let p = |q: f64| lateness[((lateness.len() as f64 - 1.0) * q) as usize];
    println!(
        "HA: {} jobs x {seconds} s = {expected} planned fires; found {} (doubled {doubled}, without run {without_run}, skipped {skipped}); \
         admin A killed at +{} ms; lateness p50 {} ms, p99 {} ms, max {} ms; executor ran {} runs",
        JOBS,
        rows.len(),
        killed_at - started,
        p(0.5),
        p(0.99),
        lateness.last().unwrap(),
        runs.load(Ordering::Relaxed)
    );
    // Nothing A started is left open: what it sent is answered to B, and what it started and
    // did not send is found lost once A counts as gone (15 s without its heartbeat).
    let open: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT r.id, r.state, f.planned_at FROM runs r JOIN fires f ON f.id = r.fire_id \
         WHERE r.state IN ('triggering', 'running') AND f.planned_at <= ?",
    )
    .bind(killed_at + 2_000)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let unsent: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM runs WHERE state = 'lost' AND handle_msg LIKE '%stopped before recording its send%'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    println!("HA: {unsent} runs A started and did not send, found lost");
    assert!(open.is_empty(), "runs left open: {open:?}");
    assert!(
        started_by_a > 0 && unsent > 0,
        "A was killed holding started fires ({started_by_a}), whose runs were found lost ({unsent})"
    );
    assert_eq!(doubled, 0, "no fire dispatched twice");
    assert_eq!(rows.len(), expected, "no planned fire lost");
    assert_eq!(
        skipped, 0,
        "takeover happens within the misfire threshold, so nothing is skipped"
    );
    assert_eq!(without_run, 0, "every fire has its run");

    exec.stop().await;
    drop(b);
    db.cleanup().await;
}

/// A graceful stop (SIGTERM, as in a rolling deploy) inside the preparation lead: the fires the
/// admin had started (their runs stored) are sent before it exits, not left for the lost-run
/// watch, and once an admin is back at its address every run of them has succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_stopped_gracefully_sends_the_fires_it_started() {
    const STOP_JOBS: usize = 50;
    let db = TestDb::sqlite();
    let http = reqwest::Client::new();
    let mut a = AdminProcess::start(&db.url);
    wait_up(&http, &a.base).await;
    let exec = TestExecutor::start_with(
        "stop-app",
        &a.base,
        |cfg| cfg.access_token = GROUP_TOKEN.into(),
        |builder| builder.handler("tick", |_ctx| async { JobResult::success() }),
    )
    .await;
    let gid = group_with_executor(&http, &a.base, "stop-app").await;
    tick_jobs(&http, &[&a.base], gid, STOP_JOBS).await;
    tokio::time::sleep(Duration::from_secs(4)).await;

    // Stopped inside the preparation lead, in a second whose fires it has started.
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    let started_unsent =
        "SELECT COUNT(*) FROM fires WHERE state = 'triggering' AND dispatched_at = 0";
    let mut started = 0;
    for _ in 0..10 {
        inside_preparation_lead().await;
        started = sqlx::query_scalar(started_unsent)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if started > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let stopped_at = chrono::Utc::now().timestamp_millis();
    let status = a.terminate();
    assert!(
        status.success(),
        "the admin exits cleanly on SIGTERM: {status}"
    );
    assert!(
        started > 0,
        "the admin held started fires when it was stopped"
    );
    let unsent: i64 = sqlx::query_scalar(started_unsent)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let unsent_runs: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM runs WHERE state = 'triggering' AND dispatched_at = 0",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    println!("graceful stop: {started} started fires at the stop; left unsent: {unsent} fires, {unsent_runs} runs");
    assert_eq!(
        (unsent, unsent_runs),
        (0, 0),
        "a graceful stop sends what it started"
    );

    // Back at the same address, the executor's spooled results reach it.
    let b = AdminProcess::start_on(&db.url, a.port());
    wait_up(&http, &b.base).await;
    let mut left: Vec<(i64, String, String)> = Vec::new();
    for _ in 0..100 {
        left = sqlx::query_as(
            "SELECT r.id, r.state, r.handle_msg FROM runs r JOIN fires f ON f.id = r.fire_id \
             WHERE f.planned_at <= ? AND r.state <> 'succeeded'",
        )
        // The fires of the second it was stopped in, which it had started, included.
        .bind(stopped_at + 1_000)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        left.is_empty(),
        "every run of a fire planned before the stop succeeded: {left:?}"
    );
    exec.stop().await;
    drop(b);
    drop(conn);
    db.cleanup().await;
}
