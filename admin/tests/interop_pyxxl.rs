//! Interoperability with a stock third-party XXL-JOB executor: pyxxl 0.4.8 from PyPI, run as a
//! child process (`tests/interop/pyxxl_executor.py`) against a real admin on SQLite.
//!
//! pyxxl must be installed (`python3 -m pip install pyxxl==0.4.8`); without it this test fails,
//! unless `SHARDLINE_TEST_SKIP_PYXXL=1` says to skip it. `SHARDLINE_TEST_PYTHON` names another
//! interpreter than `python3`.

mod common;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestAdmin, TestDb, ACCESS_TOKEN};
use serde_json::{json, Value};

const APPNAME: &str = "pyxxl-app";

fn python() -> String {
    std::env::var("SHARDLINE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// True when pyxxl can be imported; false when it cannot and the caller asked to skip.
fn pyxxl_available() -> bool {
    let probe = Command::new(python())
        .args(["-c", "import pyxxl; print(pyxxl.__version__)"])
        .output();
    let skip = std::env::var("SHARDLINE_TEST_SKIP_PYXXL").is_ok_and(|v| v == "1");
    match probe {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if version != "0.4.8" {
                eprintln!(
                    "note: pyxxl {version} is installed; this test was written against 0.4.8"
                );
            }
            true
        }
        _ if skip => {
            eprintln!("pyxxl is not installed; skipped because SHARDLINE_TEST_SKIP_PYXXL=1");
            false
        }
        Ok(out) => panic!(
            "pyxxl is not importable by {}: run `{} -m pip install pyxxl==0.4.8` \
             (or set SHARDLINE_TEST_SKIP_PYXXL=1 to skip this test)\n{}",
            python(),
            python(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "cannot run {} ({e}): install Python 3 and `pip install pyxxl==0.4.8` \
             (or set SHARDLINE_TEST_SKIP_PYXXL=1 to skip this test)",
            python()
        ),
    }
}

/// A pyxxl executor process. Dropping it kills the process, also when a test panics.
struct PyxxlExecutor {
    child: Child,
    /// The address pyxxl registers, as it sends it (no trailing slash).
    url: String,
    output: PathBuf,
    _dir: tempfile::TempDir,
}

impl PyxxlExecutor {
    /// Starts an executor that registers with the admin API at `admin_api` (ending in `/`).
    async fn start(admin_api: &str) -> PyxxlExecutor {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = dir.path().join("output.txt");
        let out = File::create(&output).expect("output file");
        let err = out.try_clone().expect("output file");
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/interop/pyxxl_executor.py"
        );
        let child = Command::new(python())
            .arg(script)
            .env("PYXXL_ADMIN_URL", admin_api)
            .env("PYXXL_APPNAME", APPNAME)
            .env("PYXXL_PORT", "0")
            .env("PYXXL_ACCESS_TOKEN", ACCESS_TOKEN)
            .env("PYXXL_WORK_DIR", dir.path())
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python()));
        let mut exec = PyxxlExecutor {
            child,
            url: String::new(),
            output,
            _dir: dir,
        };
        // The script announces its address once its socket is bound.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = exec.output_text();
            if let Some(url) = text
                .lines()
                .find_map(|l| l.strip_prefix("pyxxl executor listening on "))
            {
                exec.url = url.trim().to_string();
                return exec;
            }
            if let Ok(Some(status)) = exec.child.try_wait() {
                panic!("pyxxl executor exited ({status}) before listening:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "pyxxl executor did not start within 30 s:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The address as the admin stores it (normalized with a trailing `/`).
    fn address(&self) -> String {
        format!("{}/", self.url)
    }

    fn output_text(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// SIGTERM: pyxxl then deregisters (`/api/registryRemove`) and exits. Returns once it exited.
    async fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().expect("wait pyxxl").is_none() {
            assert!(
                Instant::now() < deadline,
                "pyxxl did not exit on SIGTERM:\n{}",
                self.output_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for PyxxlExecutor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = self.output_text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("--- pyxxl executor {} output (last lines) ---", self.url);
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// Waits until the group's live executors are exactly `expected` (sorted addresses).
async fn wait_for_executors(admin: &TestAdmin, gid: i64, mut expected: Vec<String>) {
    expected.sort();
    let mut seen = Value::Null;
    for _ in 0..400 {
        seen = admin.get(&format!("/groups/{gid}/executors")).await;
        let mut now: Vec<String> = seen
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["address"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        now.sort();
        if now == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("group {gid} never had executors {expected:?}; last seen {seen}");
}

async fn create_job(admin: &TestAdmin, gid: i64, name: &str, extra: Value) -> i64 {
    let mut body = json!({"group_id": gid, "name": name, "schedule_type": "NONE"});
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    admin.post("/jobs", body).await["id"]
        .as_i64()
        .expect("job id")
}

/// Triggers a job and waits until its fire is final.
async fn fire(admin: &TestAdmin, jid: i64) -> Value {
    let answer = admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
    admin
        .wait_fire(answer["fire_id"].as_i64().expect("fire id"))
        .await
}

/// The one run of a non-sharded fire.
fn only_run(fire: &Value) -> &Value {
    let runs = fire["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "one run expected: {fire}");
    &runs[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pyxxl_executor_runs_jobs_from_the_admin() {
    if !pyxxl_available() {
        return;
    }
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let group = admin
        .post("/groups", json!({"appname": APPNAME, "title": "pyxxl"}))
        .await;
    let gid = group["id"].as_i64().expect("group id");

    // pyxxl registers with the token and an address without the trailing slash.
    let mut first = PyxxlExecutor::start(&format!("{}/api/", admin.base)).await;
    wait_for_executors(&admin, gid, vec![first.address()]).await;

    // A broadcast on one executor: shard 0 of 1, reported back through pyxxl's callback.
    let shard_job = create_job(
        &admin,
        gid,
        "pyxxl shards",
        json!({"handler": "pyxxl_shard", "sharding_mode": "BROADCAST"}),
    )
    .await;
    let f = fire(&admin, shard_job).await;
    assert_eq!(f["state"], "succeeded", "{f}");
    let run = only_run(&f);
    assert_eq!(run["executor_address"], first.address().as_str());
    assert_eq!(run["handle_code"], 200, "{run}");
    assert_eq!(run["handle_msg"], "shard 0/1", "{run}");

    // A plain success whose handler writes the run log; the admin reads it through pyxxl's /log.
    let ok_job = create_job(
        &admin,
        gid,
        "pyxxl ok",
        json!({"handler": "pyxxl_ok", "params": "hello pyxxl"}),
    )
    .await;
    let f = fire(&admin, ok_job).await;
    assert_eq!(f["state"], "succeeded", "{f}");
    let ok_run = only_run(&f);
    assert_eq!(ok_run["state"], "succeeded");
    assert_eq!(ok_run["handle_msg"], "pyxxl ok", "{ok_run}");
    let ok_run_id = ok_run["id"].as_i64().expect("run id");
    let log = admin
        .get(&format!("/runs/{ok_run_id}/log?from_line=1"))
        .await;
    let content = log["content"].as_str().expect("log content");
    assert!(
        content.contains("pyxxl_ok ran with params 'hello pyxxl'"),
        "{log}"
    );
    assert!(
        content.contains(&format!("logId={ok_run_id}")),
        "pyxxl logs the logId the admin sent: {log}"
    );
    let to_line = log["to_line"].as_i64().expect("to_line");
    assert!(to_line >= 2, "{log}");
    let tail = admin
        .get(&format!("/runs/{ok_run_id}/log?from_line={}", to_line + 1))
        .await;
    assert_eq!(tail["content"], "", "{tail}");
    assert_eq!(tail["is_end"], true, "finished run, nothing new: {tail}");

    // A handler that raises: failed, with pyxxl's message.
    let fail_job = create_job(&admin, gid, "pyxxl fail", json!({"handler": "pyxxl_fail"})).await;
    let f = fire(&admin, fail_job).await;
    assert_eq!(f["state"], "failed", "{f}");
    let run = only_run(&f);
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["handle_code"], 500, "{run}");
    assert_eq!(run["handle_msg"], "pyxxl_fail failed on purpose", "{run}");
    let log = admin
        .get(&format!("/runs/{}/log?from_line=1", run["id"]))
        .await;
    assert!(
        log["content"]
            .as_str()
            .is_some_and(|c| c.contains("RuntimeError: pyxxl_fail failed on purpose")),
        "the traceback is in the run log: {log}"
    );

    // A handler pyxxl does not have: whatever pyxxl answers (a refusal at dispatch, or a failed
    // callback), the run must end failed and say which handler was missing.
    let missing_job = create_job(
        &admin,
        gid,
        "pyxxl missing",
        json!({"handler": "pyxxl_missing"}),
    )
    .await;
    let f = fire(&admin, missing_job).await;
    assert_eq!(f["state"], "failed", "{f}");
    let run = only_run(&f);
    assert_eq!(run["state"], "failed", "{run}");
    let said = format!("{} {}", run["trigger_msg"], run["handle_msg"]);
    assert!(
        said.contains("pyxxl_missing") && said.contains("not found"),
        "{run}"
    );

    // A run in progress: its log can be tailed, and pyxxl marking the end of the file as
    // `isEnd` must not end the tail while the run is still going. Then the admin kills it.
    let slow_job = create_job(
        &admin,
        gid,
        "pyxxl slow",
        json!({"handler": "pyxxl_slow", "params": "30"}),
    )
    .await;
    let answer = admin
        .post(&format!("/jobs/{slow_job}/trigger"), json!({}))
        .await;
    let slow_fire = answer["fire_id"].as_i64().expect("fire id");
    let slow_run = answer["run_ids"][0].as_i64().expect("run id");
    // The run reads `running` once its acceptance is stored: with its result, or alone after
    // the results writer held it for `ANSWER_HOLD` (a second) waiting for one.
    let mut log = Value::Null;
    for _ in 0..200 {
        log = admin
            .get(&format!("/runs/{slow_run}/log?from_line=1"))
            .await;
        if log["content"]
            .as_str()
            .is_some_and(|c| c.contains("pyxxl_slow started"))
            && log["state"] == "running"
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        log["content"]
            .as_str()
            .is_some_and(|c| c.contains("pyxxl_slow started")),
        "{log}"
    );
    assert_eq!(log["state"], "running", "{log}");
    assert_eq!(log["is_end"], false, "a running run's log goes on: {log}");
    let killed = admin
        .post(&format!("/runs/{slow_run}/kill"), json!({}))
        .await;
    assert_eq!(killed["run_id"], slow_run, "{killed}");
    let f = admin.wait_fire(slow_fire).await;
    assert_eq!(f["state"], "failed", "{f}");
    let run = only_run(&f);
    // pyxxl's own callback ("CancelledError") and the admin's kill race; either is final.
    assert!(
        run["state"] == "killed" || run["state"] == "failed",
        "{run}"
    );
    assert_ne!(run["handle_code"], 200, "{run}");

    // A second executor, this one registered under the `/xxl-job-admin/api/` prefix.
    let mut second = PyxxlExecutor::start(&format!("{}/xxl-job-admin/api/", admin.base)).await;
    wait_for_executors(&admin, gid, vec![first.address(), second.address()]).await;
    let f = fire(&admin, shard_job).await;
    assert_eq!(f["state"], "succeeded", "{f}");
    assert_eq!(f["coverage"]["summary"], "2/2 items succeeded", "{f}");
    let mut addresses = [first.address(), second.address()];
    addresses.sort();
    let mut runs = f["runs"].as_array().expect("runs").clone();
    runs.sort_by_key(|r| r["shard_index"].as_i64());
    assert_eq!(runs.len(), 2, "{f}");
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["shard_index"], i as i64, "{r}");
        assert_eq!(r["shard_total"], 2, "{r}");
        assert_eq!(r["executor_address"], addresses[i].as_str(), "{r}");
        assert_eq!(r["state"], "succeeded", "{r}");
        // What pyxxl itself saw, from its callback.
        assert_eq!(r["handle_msg"], format!("shard {i}/2"), "{r}");
    }

    // A graceful stop: pyxxl deregisters, so the group drops it at once instead of after 90 s.
    second.terminate().await;
    wait_for_executors(&admin, gid, vec![first.address()]).await;

    // With the executor gone, reading a run's log is a clear error, not a crash.
    first.terminate().await;
    let (status, body) = admin
        .call(
            reqwest::Method::GET,
            &format!("/runs/{ok_run_id}/log?from_line=1"),
            None,
        )
        .await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("cannot read the log from the executor")),
        "{body}"
    );

    drop(first);
    drop(second);
    admin.stop().await;
    db.cleanup().await;
}
