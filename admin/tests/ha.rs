//! High availability on MariaDB: two admin processes share the work; one is killed with SIGKILL
//! while 200 jobs fire every second. Every planned fire must be dispatched exactly once, none lost.

mod common;

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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

    /// Freezes the admin (SIGSTOP, as a paused VM), or thaws it (SIGCONT).
    fn freeze(&self, frozen: bool) {
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        unsafe { libc::kill(self.child.id() as i32, signal) };
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

/// The keys (job, fire and item) the executor ran more than once.
fn ran_twice(keys: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut twice: Vec<String> = keys.iter().filter(|k| !seen.insert(*k)).cloned().collect();
    twice.dedup();
    twice
}

/// Runs stored and not yet recorded as sent.
const UNSENT_RUNS: &str =
    "SELECT COUNT(*) FROM runs WHERE state = 'triggering' AND dispatched_at = 0";

/// Fires started (their runs stored) and not yet recorded as sent.
const STARTED_UNSENT: &str =
    "SELECT COUNT(*) FROM fires WHERE state = 'triggering' AND dispatched_at = 0";

/// Waits until 700–800 ms into a second in which the SQLite admin holds started fires not yet
/// sent (up to ten seconds), and returns how many it holds.
async fn started_fires_inside_lead(conn: &mut sqlx::SqliteConnection) -> i64 {
    let mut started = 0;
    for _ in 0..10 {
        inside_preparation_lead().await;
        started = sqlx::query_scalar(STARTED_UNSENT)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        if started > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    started
}

/// The runs of fires planned up to `until` that have not succeeded, polled for up to `wait`
/// until there are none: the current runs only (`current`), or every run, replaced ones included.
async fn runs_not_succeeded(
    conn: &mut sqlx::SqliteConnection,
    until: i64,
    wait: Duration,
    current: bool,
) -> Vec<(i64, String, String)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT r.id, r.state, r.handle_msg FROM runs r JOIN fires f ON f.id = r.fire_id \
             WHERE f.planned_at <= ? AND r.state <> 'succeeded' AND (r.superseded = 0 OR ? = 0)",
        )
        .bind(until)
        .bind(current)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        if left.is_empty() || tokio::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An executor of `appname` with the group's token, reporting to whichever of `admins` answers
/// (in order), whose `tick` handler records what it ran by job, fire and item (the idempotency
/// key the admins send).
async fn recording_executor(
    appname: &str,
    admins: &[&str],
) -> (TestExecutor, Arc<Mutex<Vec<String>>>) {
    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = ran.clone();
    let exec = TestExecutor::start_with(
        appname,
        admins[0],
        |cfg| {
            cfg.admin_addresses
                .extend(admins[1..].iter().map(|a| a.to_string()));
            cfg.access_token = GROUP_TOKEN.into();
        },
        move |builder| {
            builder.handler("tick", move |ctx| {
                let key = ctx.idempotency_key().unwrap_or_default().to_string();
                log.lock().unwrap().push(key);
                async { JobResult::success() }
            })
        },
    )
    .await;
    (exec, ran)
}

/// One admin process on a new SQLite database, a [`recording_executor`], and 50 jobs ticking
/// every second, running for 4 s.
struct Single {
    admin: AdminProcess,
    exec: TestExecutor,
    ran: Arc<Mutex<Vec<String>>>,
    conn: sqlx::SqliteConnection,
    db: TestDb,
}

impl Single {
    /// Starts an admin again at the address of the one that stopped (where the executor's
    /// spooled results go), in its place.
    async fn restart(&mut self, http: &reqwest::Client) {
        self.admin = AdminProcess::start_on(&self.db.url, self.admin.port());
        wait_up(http, &self.admin.base).await;
    }

    /// The keys the executor ran more than once so far.
    fn ran_twice(&self) -> Vec<String> {
        ran_twice(&self.ran.lock().unwrap())
    }

    async fn finish(self) {
        self.exec.stop().await;
        drop((self.admin, self.conn));
        self.db.cleanup().await;
    }
}

async fn one_admin_ticking(http: &reqwest::Client, appname: &str) -> Single {
    let db = TestDb::sqlite();
    let admin = AdminProcess::start(&db.url);
    wait_up(http, &admin.base).await;
    let (exec, ran) = recording_executor(appname, &[&admin.base]).await;
    let gid = group_with_executor(http, &admin.base, appname).await;
    tick_jobs(http, &[&admin.base], gid, 50).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    Single {
        admin,
        exec,
        ran,
        conn,
        db,
    }
}

/// Two admin processes on one MariaDB database, an executor, and [`JOBS`] jobs ticking every
/// second ([`two_admins_ticking`]).
struct Pair {
    admins: [AdminProcess; 2],
    /// Their node ids, in the same order.
    nodes: [String; 2],
    exec: TestExecutor,
    /// What the executor ran, by job, fire and item (the idempotency key the admins send).
    ran: Arc<Mutex<Vec<String>>>,
    conn: sqlx::MySqlConnection,
}

/// Starts two admins on `db`, an executor of `appname` that reports to whichever answers (the
/// first, the second when the first does not) and records what it ran, and [`JOBS`] jobs created
/// through both.
async fn two_admins_ticking(db: &TestDb, http: &reqwest::Client, appname: &str) -> Pair {
    let a = AdminProcess::start(&db.url);
    wait_up(http, &a.base).await;
    let b = AdminProcess::start(&db.url);
    wait_up(http, &b.base).await;
    let (exec, ran) = recording_executor(appname, &[&a.base, &b.base]).await;
    let gid = group_with_executor(http, &a.base, appname).await;
    tick_jobs(http, &[&a.base, &b.base], gid, JOBS).await;
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut nodes = Vec::new();
    for admin in [&a, &b] {
        let node: String = sqlx::query_scalar("SELECT id FROM admin_nodes WHERE address = ?")
            .bind(admin.base.trim_start_matches("http://"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        nodes.push(node);
    }
    Pair {
        admins: [a, b],
        nodes: nodes.try_into().unwrap(),
        exec,
        ran,
        conn,
    }
}

/// Waits until 700–800 ms into a second in which one of the admins `nodes` holds started fires
/// (their runs stored) not yet sent, up to twenty seconds, and returns which one (the one holding
/// more) and how many it holds (0 if neither ever did). The admins' claims take turns, and one
/// may own none of many seconds' fires.
async fn holder_inside_lead(conn: &mut sqlx::MySqlConnection, nodes: &[String; 2]) -> (usize, i64) {
    for _ in 0..20 {
        inside_preparation_lead().await;
        let held: Vec<(String, i64)> = sqlx::query_as(
            "SELECT owner, COUNT(*) FROM fires WHERE state = 'triggering' AND dispatched_at = 0 GROUP BY owner",
        )
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        let count = |i: usize| held.iter().find(|h| h.0 == nodes[i]).map_or(0, |h| h.1);
        let i = if count(1) > count(0) { 1 } else { 0 };
        if count(i) > 0 {
            return (i, count(i));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    (0, 0)
}

/// Runs lost because an admin stopped before recording their send, and sent again.
const SENT_AGAIN: &str = "SELECT COUNT(*) FROM runs WHERE state = 'lost' AND superseded = 1 \
     AND handle_msg LIKE '%stopped before recording its send%'";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_one_killed_no_fire_lost_or_doubled() {
    if !common::mysql_enabled() {
        eprintln!("HA test needs MariaDB; skipped because SHARDLINE_TEST_SKIP_MYSQL=1");
        return;
    }
    let db = TestDb::mysql().await;
    let http = reqwest::Client::new();
    let Pair {
        mut admins,
        nodes,
        exec,
        ran,
        mut conn,
    } = two_admins_ticking(&db, &http, "ha-app").await;
    let started = chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_secs(12)).await;
    // An admin (A) is killed inside the preparation lead of the next second's fires, in a second
    // where it holds some of them started (their runs stored) and not yet sent.
    let (victim, started_by_a) = holder_inside_lead(&mut conn, &nodes).await;
    let killed_at = chrono::Utc::now().timestamp_millis();
    admins[victim].kill9();
    println!("HA: admin {victim} (A) killed holding {started_by_a} started fires not yet sent");
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
        ran.lock().unwrap().len()
    );
    // Nothing A started is left open: what it sent is answered to B, and what it started and
    // did not send is found lost once A counts as gone (15 s without its heartbeat), and sent
    // again.
    let open: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT r.id, r.state, f.planned_at FROM runs r JOIN fires f ON f.id = r.fire_id \
         WHERE r.state IN ('triggering', 'running') AND f.planned_at <= ?",
    )
    .bind(killed_at + 2_000)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let unsent: i64 = sqlx::query_scalar(SENT_AGAIN)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    // Every fire ran: its current run succeeded (the ones A did not send, on their second
    // attempt).
    let not_succeeded: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT r.id, r.state, r.handle_msg FROM runs r JOIN fires f ON f.id = r.fire_id \
         WHERE f.planned_at >= ? AND f.planned_at <= ? AND r.superseded = 0 AND r.state <> 'succeeded'",
    )
    .bind(from)
    .bind(to)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    println!("HA: {unsent} runs A started and did not send, found lost and sent again");
    assert!(open.is_empty(), "runs left open: {open:?}");
    assert!(
        started_by_a > 0 && unsent > 0,
        "A was killed holding started fires ({started_by_a}), whose runs were found lost ({unsent})"
    );
    assert!(
        not_succeeded.is_empty(),
        "every fire's current run succeeded: {not_succeeded:?}"
    );
    assert_eq!(doubled, 0, "no fire dispatched twice");
    let twice = ran_twice(&ran.lock().unwrap());
    assert!(twice.is_empty(), "no fire's item ran twice: {twice:?}");
    assert_eq!(rows.len(), expected, "no planned fire lost");
    assert_eq!(
        skipped, 0,
        "takeover happens within the misfire threshold, so nothing is skipped"
    );
    assert_eq!(without_run, 0, "every fire has its run");

    exec.stop().await;
    drop(admins);
    db.cleanup().await;
}

/// A graceful stop (SIGTERM, as in a rolling deploy) inside the preparation lead: the fires the
/// admin had started (their runs stored) are sent before it exits, not left for the lost-run
/// watch, and once an admin is back at its address every run of them has succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_stopped_gracefully_sends_the_fires_it_started() {
    let http = reqwest::Client::new();
    let mut s = one_admin_ticking(&http, "stop-app").await;
    // Stopped inside the preparation lead, in a second whose fires it has started.
    let started = started_fires_inside_lead(&mut s.conn).await;
    let stopped_at = chrono::Utc::now().timestamp_millis();
    let status = s.admin.terminate();
    assert!(
        status.success(),
        "the admin exits cleanly on SIGTERM: {status}"
    );
    assert!(
        started > 0,
        "the admin held started fires when it was stopped"
    );
    let unsent: i64 = sqlx::query_scalar(STARTED_UNSENT)
        .fetch_one(&mut s.conn)
        .await
        .unwrap();
    let unsent_runs: i64 = sqlx::query_scalar(UNSENT_RUNS)
        .fetch_one(&mut s.conn)
        .await
        .unwrap();
    println!("graceful stop: {started} started fires at the stop; left unsent: {unsent} fires, {unsent_runs} runs");
    assert_eq!(
        (unsent, unsent_runs),
        (0, 0),
        "a graceful stop sends what it started"
    );

    // Back at the same address, the executor's spooled results reach it.
    s.restart(&http).await;
    // The fires of the second it was stopped in, which it had started, included.
    let left = runs_not_succeeded(
        &mut s.conn,
        stopped_at + 1_000,
        Duration::from_secs(10),
        false,
    )
    .await;
    assert!(
        left.is_empty(),
        "every run of a fire planned before the stop succeeded: {left:?}"
    );
    let twice = s.ran_twice();
    assert!(twice.is_empty(), "no fire's item ran twice: {twice:?}");
    s.finish().await;
}

/// An admin killed with SIGKILL inside the preparation lead, holding fires it had started (their
/// runs stored) and not sent. The admin started in its place finds those runs (their executor is
/// not running the job, and no result came for them) and sends them again, so every fire planned
/// up to the kill ran, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_killed_holding_started_fires_they_are_sent_again() {
    let http = reqwest::Client::new();
    let mut s = one_admin_ticking(&http, "kill-app").await;
    let started = started_fires_inside_lead(&mut s.conn).await;
    let killed_at = chrono::Utc::now().timestamp_millis();
    s.admin.kill9();
    let unsent: i64 = sqlx::query_scalar(UNSENT_RUNS)
        .fetch_one(&mut s.conn)
        .await
        .unwrap();
    println!("kill: {started} started fires at the kill; {unsent} runs left unsent");
    assert!(
        started > 0 && unsent > 0,
        "the admin was killed holding started fires ({started}) with unsent runs ({unsent})"
    );

    // Started again at once at the same address (where the executor's spooled results go): the
    // killed admin's row, which still looks live, is the predecessor's, not a second admin's.
    s.restart(&http).await;
    let until = killed_at + 1_000;
    // The runs left unsent are judged once the new admin has been up for the executors' spool
    // period (35 s): a result of a run the killed admin did send may wait in a spool until then.
    let left = runs_not_succeeded(&mut s.conn, until, Duration::from_secs(50), true).await;
    assert!(
        left.is_empty(),
        "every fire planned up to the kill ran and succeeded: {left:?}"
    );
    let resent: i64 = sqlx::query_scalar(SENT_AGAIN)
        .fetch_one(&mut s.conn)
        .await
        .unwrap();
    let twice = s.ran_twice();
    println!(
        "kill: {resent} runs found unsent and sent again; the executor ran {} runs",
        s.ran.lock().unwrap().len()
    );
    assert!(twice.is_empty(), "no fire's item ran twice: {twice:?}");
    // Runs whose acceptance the killed admin held unwritten count as unsent above; they ran,
    // and only the others are sent again.
    assert!(
        resent > 0 && resent <= unsent,
        "runs left unsent were sent again ({resent} of {unsent})"
    );
    s.finish().await;
}

/// Admin A frozen (SIGSTOP, as a paused VM) inside the preparation lead, holding fires it had
/// started and not sent, until B counted it gone and sent those runs again. Thawed, A finds its
/// sends more than 10 s late, reads the runs first, and does not send them a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_frozen_holding_started_fires_does_not_send_them_twice() {
    if !common::mysql_enabled() {
        eprintln!("HA test needs MariaDB; skipped because SHARDLINE_TEST_SKIP_MYSQL=1");
        return;
    }
    let db = TestDb::mysql().await;
    let http = reqwest::Client::new();
    let Pair {
        admins,
        nodes,
        exec,
        ran,
        mut conn,
    } = two_admins_ticking(&db, &http, "freeze-app").await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let (frozen, held) = holder_inside_lead(&mut conn, &nodes).await;
    let frozen_at = chrono::Utc::now().timestamp_millis();
    admins[frozen].freeze(true);
    // B sends A's unsent runs again once A counts as gone (15 s without its heartbeat).
    let mut sent_again = 0;
    for _ in 0..300 {
        sent_again = sqlx::query_scalar(SENT_AGAIN)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if sent_again > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admins[frozen].freeze(false);
    println!(
        "freeze: admin {frozen} (A) frozen holding {held} started fires; B sent {sent_again} of their runs again {} ms after the freeze",
        chrono::Utc::now().timestamp_millis() - frozen_at
    );
    // A, thawed, sends what it still holds; then scheduling stops and the tail settles.
    tokio::time::sleep(Duration::from_secs(4)).await;
    sqlx::query("UPDATE jobs SET enabled = 0, next_fire_at = NULL")
        .execute(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        held > 0 && sent_again > 0,
        "A was frozen holding started fires ({held}), whose runs B sent again ({sent_again})"
    );
    let twice = ran_twice(&ran.lock().unwrap());
    assert!(twice.is_empty(), "no fire's item ran twice: {twice:?}");
    let not_succeeded: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT r.id, r.state, r.handle_msg FROM runs r JOIN fires f ON f.id = r.fire_id \
         WHERE f.planned_at <= ? AND r.superseded = 0 AND r.state <> 'succeeded'",
    )
    .bind(frozen_at + 1_000)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(
        not_succeeded.is_empty(),
        "every fire planned up to the freeze ran: {not_succeeded:?}"
    );
    exec.stop().await;
    drop((admins, conn));
    db.cleanup().await;
}
