//! Smoke test of the load harness: `--quick` on SQLite must run every scenario and write a complete
//! JSON report. No figure is asserted (CI machines vary); only that each one was measured.

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

#[test]
fn quick_run_writes_a_complete_report() {
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

/// A harness stopped part way (SIGTERM, or Ctrl-C) kills the admin it started, removes its
/// temporary folders and drops its MariaDB database, instead of leaving the admin running.
#[test]
fn a_stopped_run_leaves_nothing_behind() {
    let built = cargo_bench("build").status().expect("cargo runs");
    assert!(built.success(), "cannot build the harness");
    let mysql = std::env::var("SHARDLINE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string());
    let out_dir = tempfile::tempdir().expect("tempdir");
    let stdout = out_dir.path().join("stdout.txt");
    // Windows of a minute, so the signal comes while the admin runs.
    let mut harness = Command::new(profile_dir().join("examples").join("bench"))
        .args([
            "--quick",
            "--db",
            "mysql",
            "--only",
            "rate",
            "--window-s",
            "60",
        ])
        .args(["--mysql-url", &mysql, "--out"])
        .arg(out_dir.path().join("report.json"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(Stdio::null())
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
    let own_dbs = || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::MySqlConnection::connect(&format!("{mysql}/mysql"))
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
    };
    assert_eq!(own_dbs(), 1, "the run's database exists while it runs");
    assert!(logs.is_dir());

    // SAFETY: signals the harness this test started and has not reaped.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = harness.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the harness did not stop within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status}");
    assert!(!is_running(admin), "the admin {admin} is still running");
    assert!(!logs.exists(), "{} is left", logs.display());
    assert_eq!(own_dbs(), 0, "the run's database is left");
}

/// A count of nothing (no jobs, no seconds, no executors) would measure nothing: it is refused
/// before anything starts, naming the flag.
#[test]
fn zero_counts_are_refused() {
    let built = cargo_bench("build").status().expect("cargo runs");
    assert!(built.success(), "cannot build the harness");
    for flag in ["--jobs", "--window-s", "--executors"] {
        let out = Command::new(profile_dir().join("examples").join("bench"))
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
    let built = cargo_bench("build").status().expect("cargo runs");
    assert!(built.success(), "cannot build the harness");
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
        let out = Command::new(profile_dir().join("examples").join("bench"))
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
