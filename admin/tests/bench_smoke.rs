//! Smoke test of the load harness: `--quick` on SQLite must run every scenario and write a complete
//! JSON report. No figure is asserted (CI machines vary); only that each one was measured.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn number_at(v: &Value, path: &[&str]) -> Option<f64> {
    let mut n = v;
    for p in path {
        n = n.get(*p)?;
    }
    n.as_f64()
}

/// The test binary's profile folder, `target/<profile>` (it lives in `target/<profile>/deps`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// `cargo <sub>` of the harness example, in the profile this test was built in.
fn cargo_bench(sub: &str) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args([sub, "-q", "-p", "shardline-admin", "--example", "bench"])
        .arg("--manifest-path")
        .arg(&manifest);
    if profile_dir().file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    cmd
}

/// Builds the harness binary (cargo does nothing when it is current).
fn build_harness() {
    let built = cargo_bench("build").status().expect("cargo runs");
    assert!(built.success(), "cannot build the harness");
}

/// A command that runs the harness binary [`build_harness`] built.
fn harness() -> Command {
    Command::new(profile_dir().join("examples").join("bench"))
}

/// Runs that start processes take turns: one run's clearing up would otherwise remove what
/// another test's killed run left before that test has looked, and runs measured side by side
/// take each other's cores.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn quick_run_writes_a_complete_report() {
    let _one = ONE_RUN_AT_A_TIME.lock();
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("report.json");
    let mut cmd = cargo_bench("run");
    cmd.args(["--", "--quick", "--db", "sqlite", "--out"])
        .arg(&out);
    let output = cmd.output().expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "harness failed ({}):\n{stdout}\n{stderr}",
        output.status
    );

    let text = std::fs::read_to_string(&out).expect("report written");
    let report: Value = serde_json::from_str(&text).expect("report is JSON");
    assert_eq!(report["errors"], serde_json::json!([]), "{text}");
    assert_eq!(report["harness"]["mode"], "quick");
    assert!(report["harness"]["machine"]["cores"].as_u64().unwrap_or(0) >= 1);

    let s = &report["systems"]["shardline_sqlite"];
    let required: &[&[&str]] = &[
        &["idle", "rss_mib"],
        &["idle", "cpu_pct"],
        &["beats", "cpu_pct"],
        &["low_rate", "cpu_pct"],
        &["low_rate", "rss_max_mib"],
        &["low_rate", "runs_per_s"],
        &["high_rate", "lateness_p50_ms"],
        &["high_rate", "lateness_p99_ms"],
        &["high_rate", "runs_per_s"],
        &["high_rate", "executor_runs_per_s"],
        &["high_rate", "fires_expected"],
        &["high_rate", "fires_dispatched"],
        &["many_jobs", "rss_max_mib"],
        &["sdk", "rss_mib"],
        &["sdk", "baseline_rss_mib"],
        &["failover", "failed_dispatch_to_redispatch_max_ms"],
        &["failover", "detect_to_redispatch_max_ms"],
        &["failover", "kill_to_redispatch_max_ms"],
    ];
    for path in required {
        assert!(
            number_at(s, path).is_some(),
            "shardline_sqlite.{} missing from the report:\n{text}",
            path.join(".")
        );
    }
    assert!(number_at(&report, &["floors", "axum_loopback", "requests_per_s"]).is_some());
    assert!(number_at(&report, &["floors", "sqlite_batched_inserts", "rows_per_s"]).is_some());
    // Every target has its check, each with a value.
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.len() >= 10, "{text}");
    assert!(
        checks.iter().all(|c| c["value"].is_number()),
        "a check without a value:\n{text}"
    );
    // The checks and the report's targets are one list: each check names a target and holds its
    // fixed limit, and each fixed target (not one against a peer, absent here) is checked.
    let targets = report["targets"].as_object().expect("targets");
    for c in checks {
        let name = c["figure"].as_str().expect("a check's figure");
        let target = targets
            .get(name)
            .unwrap_or_else(|| panic!("check {name} has no target"));
        // A peer's target has its limit in the peer's figure, not in the target.
        let fixed = &target[c["kind"].as_str().expect("kind")];
        if fixed.is_number() {
            assert_eq!(fixed, &c["limit"], "{name}");
        }
    }
    for (name, t) in targets {
        if t["max"].is_number() || t["min"].is_number() {
            assert!(
                checks.iter().any(|c| c["figure"] == name.as_str()),
                "target {name} is not checked:\n{text}"
            );
        }
    }
}

/// The processes a process started that are still its children.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether `pid` is a process that has not exited (a zombie has exited).
fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// MariaDB's address for the harness runs of these tests.
fn mysql_url() -> String {
    std::env::var("SHARDLINE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
}

/// How many MariaDB databases the harness process `pid` made are there.
fn dbs_of(pid: u32) -> usize {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::MySqlConnection::connect(&format!("{}/mysql", mysql_url()))
            .await
            .expect("MariaDB");
        let names: Vec<String> =
            sqlx::query_scalar("SELECT schema_name FROM information_schema.schemata")
                .fetch_all(&mut conn)
                .await
                .expect("schemata");
        let prefix = format!("shardline_bench_{pid}_");
        names.into_iter().filter(|n| n.starts_with(&prefix)).count()
    })
}

/// A harness measuring on MariaDB with one-minute windows, caught while its admin runs.
struct LongRun {
    harness: std::process::Child,
    pid: u32,
    admin: u32,
    /// The run's folder of logs.
    logs: PathBuf,
    /// Holds the report and what the harness printed (`stdout.txt`, `stderr.txt`).
    out: tempfile::TempDir,
}

impl LongRun {
    fn start() -> LongRun {
        build_harness();
        let out = tempfile::tempdir().expect("tempdir");
        let stdout = out.path().join("stdout.txt");
        let mut harness = harness()
            .args([
                "--quick",
                "--db",
                "mysql",
                "--only",
                "rate",
                "--window-s",
                "60",
            ])
            .args(["--mysql-url", &mysql_url(), "--out"])
            .arg(out.path().join("report.json"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(out.path().join("stderr.txt")).expect("stderr file"))
            .spawn()
            .expect("harness starts");
        let pid = harness.id();
        let deadline = Instant::now() + Duration::from_secs(300);
        let admin = loop {
            let admin = children_of(pid).into_iter().find(|c| {
                std::fs::read(format!("/proc/{c}/cmdline"))
                    .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains("--bind"))
            });
            if let Some(admin) = admin {
                break admin;
            }
            assert!(
                harness.try_wait().expect("wait").is_none(),
                "the harness ended early"
            );
            assert!(Instant::now() < deadline, "no admin started within 300 s");
            std::thread::sleep(Duration::from_millis(100));
        };
        let text = std::fs::read_to_string(&stdout).expect("harness output");
        let logs = text
            .lines()
            .find_map(|l| l.strip_prefix("logs of started processes: "))
            .map(PathBuf::from)
            .expect("the harness names its folder");
        assert_eq!(dbs_of(pid), 1, "the run's database exists while it runs");
        assert!(logs.is_dir());
        LongRun {
            harness,
            pid,
            admin,
            logs,
            out,
        }
    }

    /// What the harness printed, for a failure's message.
    fn output(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self.out.path().join(name)).unwrap_or_default();
        format!(
            "stdout:\n{}\nstderr:\n{}",
            read("stdout.txt"),
            read("stderr.txt")
        )
    }

    /// Sends `signal` to the harness and waits (up to a minute) for it to end.
    fn stop(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: signals the harness this test started and has not reaped.
        unsafe {
            libc::kill(self.pid as i32, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.harness.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the harness did not stop within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Waits up to `limit` for `pid` to end; whether it did.
fn ends_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while is_running(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A harness stopped part way (SIGTERM, or Ctrl-C) kills the admin it started, removes its
/// temporary folders and drops its MariaDB database, instead of leaving the admin running.
#[test]
fn a_stopped_run_leaves_nothing_behind() {
    let _one = ONE_RUN_AT_A_TIME.lock();
    let mut run = LongRun::start();
    let status = run.stop(libc::SIGTERM);
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "{status}\n{}",
        run.output()
    );
    assert!(
        !is_running(run.admin),
        "the admin {} is still running",
        run.admin
    );
    assert!(!run.logs.exists(), "{} is left", run.logs.display());
    assert_eq!(dbs_of(run.pid), 0, "the run's database is left");
}

/// A harness killed outright (SIGKILL, which no handler sees) takes the admin it started with it,
/// and the next run removes the folder and the database it could not.
#[test]
fn a_killed_run_takes_its_admin_with_it_and_the_next_run_clears_up() {
    let _one = ONE_RUN_AT_A_TIME.lock();
    let mut run = LongRun::start();
    let status = run.stop(libc::SIGKILL);
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{status}\n{}",
        run.output()
    );
    assert!(
        ends_within(run.admin, Duration::from_secs(10)),
        "the admin {} is still running",
        run.admin
    );
    assert!(
        run.logs.is_dir(),
        "a killed harness cannot remove its folder"
    );
    assert_eq!(
        dbs_of(run.pid),
        1,
        "a killed harness cannot drop its database"
    );

    // The next run, of anything on MariaDB, clears up before it measures.
    let out = tempfile::tempdir().expect("tempdir");
    let next = harness()
        .args(["--quick", "--db", "mysql", "--only", "floor"])
        .args(["--mysql-url", &mysql_url(), "--out"])
        .arg(out.path().join("report.json"))
        .output()
        .expect("harness runs");
    let stdout = String::from_utf8_lossy(&next.stdout);
    assert!(next.status.success(), "{}\n{stdout}", next.status);
    assert!(stdout.contains("removed what killed runs left"), "{stdout}");
    assert!(!run.logs.exists(), "{} is left", run.logs.display());
    assert_eq!(dbs_of(run.pid), 0, "the killed run's database is left");
}

/// A count of nothing (no jobs, no seconds, no executors) would measure nothing: it is refused
/// before anything starts, naming the flag.
#[test]
fn zero_counts_are_refused() {
    build_harness();
    for flag in ["--jobs", "--window-s", "--executors"] {
        let out = harness()
            .args(["--quick", flag, "0"])
            .output()
            .expect("harness runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} 0: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("must be at least 1"),
            "{flag} 0: {stderr}"
        );
    }
}

/// Paths the run would fail on late (a report file that cannot be written, an admin or peer
/// binary that is not there) are refused before any scenario runs, naming the path, instead of
/// after minutes of measuring.
#[test]
fn bad_paths_are_refused_before_the_run() {
    build_harness();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("file");
    let report_under_a_file = file.join("report.json");
    let missing_peer = dir.path().join("no-ratchjob");
    let missing_admin = dir.path().join("no-admin");
    let fine_report = dir.path().join("report.json");
    let cases: [(&[&Path], &str); 3] = [
        (
            &[Path::new("--out"), &report_under_a_file],
            "cannot write the report to",
        ),
        (
            &[
                Path::new("--out"),
                &fine_report,
                Path::new("--peer"),
                Path::new("ratchjob"),
                Path::new("--ratchjob-bin"),
                &missing_peer,
            ],
            "no-ratchjob: no such file",
        ),
        (
            &[
                Path::new("--out"),
                &fine_report,
                Path::new("--admin-bin"),
                &missing_admin,
            ],
            "no-admin: no such file",
        ),
    ];
    for (args, expected) in cases {
        let out = harness()
            .args(["--quick", "--only", "idle"])
            .args(args)
            .output()
            .expect("harness runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stdout.contains("logs of started processes"),
            "{args:?}: a scenario ran:\n{stdout}"
        );
    }
    assert!(!fine_report.exists(), "the check left a file behind");
}

/// A peer binary given by a relative path is started: the peer runs in its own data folder, where
/// the relative path named nothing, and the run failed there after Shardline's scenarios.
#[test]
fn a_peer_given_by_a_relative_path_is_started() {
    let _one = ONE_RUN_AT_A_TIME.lock();
    build_harness();
    let dir = tempfile::tempdir().expect("tempdir");
    // Not a peer: it shows that it was started, then exits, which fails the peer's scenario.
    let script = dir.path().join("peer.sh");
    std::fs::write(&script, "#!/bin/sh\ntouch \"$PEER_STARTED\"\nexit 3\n").expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let started = dir.path().join("started");
    let out = harness()
        .current_dir(dir.path())
        .args(["--quick", "--db", "sqlite", "--only", "idle"])
        .args(["--peer", "ratchjob", "--ratchjob-bin", "peer.sh"])
        .args(["--out", "report.json"])
        .env("PEER_STARTED", &started)
        .output()
        .expect("harness runs");
    // The failed scenario's logs are kept for a look; not wanted here.
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(kept) = stderr.lines().find_map(|l| l.split_once("logs kept in ")) {
        let _ = std::fs::remove_dir_all(kept.1.trim());
    }
    let text = std::fs::read_to_string(dir.path().join("report.json")).expect("report written");
    assert!(started.exists(), "the peer was not started: {text}");
    let report: Value = serde_json::from_str(&text).expect("report is JSON");
    let errors = report["errors"].as_array().expect("errors");
    assert!(
        !errors.is_empty()
            && errors
                .iter()
                .all(|e| e.as_str().is_some_and(|e| e.contains("exited"))),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        report["systems"]["shardline_sqlite"]["idle"]["rss_mib"].is_number(),
        "{text}"
    );
}
