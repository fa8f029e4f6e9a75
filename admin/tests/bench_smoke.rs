//! Smoke test of the load harness: `--quick` on SQLite must run every scenario and write a complete
//! JSON report. No figure is asserted (CI machines vary); only that each one was measured.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn number_at(v: &Value, path: &[&str]) -> Option<f64> {
    let mut n = v;
    for p in path {
        n = n.get(*p)?;
    }
    n.as_f64()
}

#[test]
fn quick_run_writes_a_complete_report() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("report.json");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "-q", "-p", "shardline-admin", "--example", "bench"])
        .arg("--manifest-path")
        .arg(&manifest);
    // The test binary lives in target/<profile>/deps: run the harness in the same profile.
    let release = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent()?.file_name().map(|n| n == "release"))
        .unwrap_or(false);
    if release {
        cmd.arg("--release");
    }
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
