//! The peer measured beside Shardline: ratch-job, a Rust admin that speaks the XXL-JOB executor
//! protocol and keeps its data in memory behind a Raft log (no external database).
//!
//! It is installed with `cargo install ratchjob --root target/peer/ratchjob` (never committed) and
//! driven with the same SDK executors (they register with it as XXL-JOB executors under
//! `/xxl-job-admin`) and the same job set, created through its open API (`/ratch/v1/job/create`).
//! It has no fire table with planned times, so its lateness is the one the executors see (the
//! milliseconds past the whole second at which a run starts); its throughput is the runs its
//! executors finished (its own counters, `task_success_size` + `task_fail_size` on `/metrics`,
//! lag and are reported beside it).
//!
//! Not expressible with it: per-item shard failover (it re-sends a failed fire to the next
//! executor only through its retry count, with no item identity), and the SDK memory figure
//! (that is our SDK's, the same whichever admin it talks to).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use crate::execs::{InProcess, Observed};
use crate::sys::{self, r1, CpuWindow, Proc, RssSampler};
use crate::{Plan, Report, Scenario};

const TOKEN: &str = "bench-access-token";
const APPNAME: &str = "bench-app";
const NAMESPACE: &str = "xxl";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    Ratchjob,
}

impl Peer {
    pub fn name(self) -> &'static str {
        match self {
            Peer::Ratchjob => "ratchjob",
        }
    }
}

/// The peer's binary: `explicit` if given (it must exist), else the one built into target/, else
/// `ratchjob` on PATH. The harness looks for it before any scenario runs.
pub fn find_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    // Made absolute: the peer is started in its own data folder, where a relative path (given
    // as `--ratchjob-bin`, or a relative folder in PATH) names nothing; it failed there, after
    // Shardline's scenarios had run.
    if let Some(p) = explicit {
        anyhow::ensure!(p.is_file(), "--ratchjob-bin {}: no such file", p.display());
        return Ok(std::path::absolute(p)?);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peer/ratchjob/bin/ratchjob");
    if local.exists() {
        return Ok(local);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("ratchjob");
            if p.exists() {
                return Ok(std::path::absolute(p)?);
            }
        }
    }
    anyhow::bail!(
        "ratchjob not found; install it with `cargo install ratchjob --version 0.3.1 --root target/peer/ratchjob --locked` or pass --ratchjob-bin"
    )
}

/// A ratch-job process on its own ports and data folder.
struct RatchJob {
    proc: Proc,
    base: String,
    http: reqwest::Client,
    _data: tempfile::TempDir,
}

impl RatchJob {
    async fn start(bin: &Path, log_dir: &Path, name: &str) -> anyhow::Result<RatchJob> {
        let data = sys::temp_dir("ratchjob", None)?;
        let api = sys::free_port()?;
        let console = sys::free_port()?;
        let grpc = sys::free_port()?;
        let mut cmd = Command::new(bin);
        cmd.env("RATCH_HTTP_API_PORT", api.to_string())
            .env("RATCH_HTTP_CONSOLE_PORT", console.to_string())
            .env("RATCH_GRPC_CLUSTER_PORT", grpc.to_string())
            .env("RATCH_RAFT_NODE_ADDR", format!("127.0.0.1:{grpc}"))
            .env("RATCH_RAFT_NODE_ID", "1")
            .env("RATCH_RAFT_AUTO_INIT", "true")
            .env("RATCH_DATA_DIR", data.path())
            .env("RATCH_XXL_DEFAULT_ACCESS_TOKEN", TOKEN)
            .env("RATCH_METRICS_COLLECT_INTERVAL_SECOND", "1")
            .env("RUST_LOG", "error")
            .current_dir(data.path());
        let mut proc = Proc::spawn(name, &mut cmd, log_dir)?;
        let base = format!("http://127.0.0.1:{api}");
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .timeout(Duration::from_secs(30))
            .build()?;
        proc.wait_answering(
            &http,
            &format!("{base}/ratch/v1/about"),
            Duration::from_millis(100),
            log_dir,
        )
        .await?;
        Ok(RatchJob {
            proc,
            base,
            http,
            _data: data,
        })
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// The base address executors are given (XXL-JOB's context path).
    fn executor_admin(&self) -> String {
        format!("{}/xxl-job-admin", self.base)
    }

    async fn wait_instances(&self, n: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let v: Value = self
                .http
                .get(format!("{}/ratch/v1/app/instance/addrs", self.base))
                .query(&[("appName", APPNAME), ("namespace", NAMESPACE)])
                .send()
                .await?
                .json()
                .await?;
            let count = v["data"].as_array().map_or(0, Vec::len);
            if count >= n {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "ratch-job lists {count} of {n} executors after 30 s: {v}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates `n` enabled CRON jobs of the bench app with handler `noop`, 32 requests in flight
    /// (each retried while the Raft leader is not elected yet). Returns how many failed.
    async fn create_jobs(&self, first: usize, n: usize, cron: &str) -> u64 {
        let results: Vec<bool> = futures::stream::iter(first..first + n)
            .map(|i| {
                let body = json!({
                    "appName": APPNAME, "namespace": NAMESPACE, "description": format!("bench-{i}"),
                    "handleName": "noop", "scheduleType": "CRON", "cronValue": cron,
                    "runMode": "BEAN", "routerStrategy": "ROUND_ROBIN",
                    "blockingStrategy": "SERIAL_EXECUTION", "pastDueStrategy": "DEFAULT",
                    "enable": true,
                });
                async move {
                    for _ in 0..50 {
                        let r = self
                            .http
                            .post(format!("{}/ratch/v1/job/create", self.base))
                            .json(&body)
                            .send()
                            .await;
                        if let Ok(r) = r {
                            if let Ok(v) = r.json::<Value>().await {
                                if v["code"].as_i64() == Some(200) || v["success"] == true {
                                    return true;
                                }
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    false
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        results.iter().filter(|ok| !**ok).count() as u64
    }

    /// Finished runs according to ratch-job's own counters (success + fail).
    async fn finished_counter(&self) -> Option<f64> {
        let value = |name| sys::metric(&self.http, &self.base, name);
        Some(value("task_success_size").await? + value("task_fail_size").await.unwrap_or(0.0))
    }

    fn stop(mut self) {
        self.proc.terminate(Duration::from_secs(10));
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A steady window with executor-side lateness and ratch-job's counters.
async fn steady(
    peer: &mut RatchJob,
    observed: &Observed,
    jobs: usize,
    warmup: Duration,
    window: Duration,
    log_dir: &Path,
) -> anyhow::Result<Value> {
    let pid = peer.pid();
    let now = now_ms();
    let start = (now / 1000 + 1) * 1000 + warmup.as_millis() as i64;
    let end = start + (window.as_millis() as i64 / 1000).max(1) * 1000;
    tokio::time::sleep(Duration::from_millis((start - now_ms()).max(0) as u64)).await;
    let counter_before = peer.finished_counter().await;
    let cpu = CpuWindow::start(pid);
    // The harness process: its in-process SDK executors share the two cores with the admin.
    let executors = CpuWindow::start(std::process::id());
    let rss = RssSampler::start(pid);
    observed.reset_histogram();
    let executed_before = observed.executed.load(Ordering::Relaxed);
    observed.recording.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis((end - now_ms()).max(0) as u64)).await;
    observed.recording.store(false, Ordering::Relaxed);
    let executed = observed.executed.load(Ordering::Relaxed) - executed_before;
    let cpu_pct = cpu.percent();
    let executors_pct = executors.percent();
    let counter_after = peer.finished_counter().await;
    let (rss_mean, rss_max) = rss.finish().await;
    peer.proc.check_alive(log_dir)?;
    let window_s = ((end - start) / 1000) as f64;
    let stored = counter_before
        .zip(counter_after)
        .map(|(a, b)| r1((b - a) / window_s));
    let (samples, p50, p99) = observed.lateness();
    Ok(json!({
        "jobs": jobs,
        "window_s": window_s,
        "fires_expected": jobs as i64 * (end - start) / 1000,
        // Its counters lag (they are collected on a timer and read 440/s at both 1 000 and
        // 10 000 runs/s here), so the runs its executors finished stand for its throughput: an
        // upper bound on what it stored, which favours the peer in the comparison.
        "runs_per_s": r1(executed as f64 / window_s),
        "runs_per_s_source": "runs finished by the executors (upper bound of what ratch-job stored)",
        "counter_runs_per_s": stored,
        "executor_runs_per_s": r1(executed as f64 / window_s),
        "executor_lateness_samples": samples,
        "executor_lateness_p50_ms": p50,
        "executor_lateness_p99_ms": p99,
        "cpu_pct": cpu_pct.map(r1),
        "rss_mean_mib": rss_mean.map(r1),
        "rss_max_mib": rss_max.map(r1),
        "executors_cpu_pct": executors_pct.map(r1),
    }))
}

/// The peer's scenarios, as far as it can express them.
pub async fn suite(
    p: Peer,
    plan: &Plan,
    bin: &Path,
    log_dir: &Path,
    report: &mut Report,
    wants: &dyn Fn(Scenario) -> bool,
) {
    let name = p.name();
    report.set(
        &["systems", name, "not_expressible"],
        json!({
            "failover": "no per-item shard failover: a failed run is retried as a whole (tryTimes), not moved by item",
            "sdk": "the SDK figure is our executor's, the same against either admin",
            "lateness_source": "executor-side (ms past the whole second at run start); no planned/dispatched times are stored",
        }),
    );
    if wants(Scenario::Idle) || wants(Scenario::Beats) || wants(Scenario::Rate) {
        match RatchJob::start(bin, log_dir, &format!("{name}-main")).await {
            Err(e) => report.record(&["systems", name, "start"], Err(e)),
            Ok(mut peer) => {
                if wants(Scenario::Idle) {
                    report.record(
                        &["systems", name, "idle"],
                        Ok(crate::ours::idle(peer.pid(), plan.idle_window).await),
                    );
                }
                if wants(Scenario::Beats) {
                    let url = format!("{}/api/registry", peer.executor_admin());
                    report.record(
                        &["systems", name, "beats"],
                        Ok(crate::ours::beats(
                            peer.pid(),
                            &peer.http,
                            &url,
                            TOKEN,
                            plan.beat_executors,
                            plan.beat_period,
                            plan.beat_window,
                        )
                        .await),
                    );
                }
                if wants(Scenario::Rate) {
                    if let Err(e) = rates(plan, &mut peer, log_dir, report, name).await {
                        report.record(&["systems", name, "rate"], Err(e));
                    }
                }
                peer.stop();
            }
        }
    }
    if wants(Scenario::ManyJobs) {
        let r = async {
            let peer = RatchJob::start(bin, log_dir, &format!("{name}-jobs")).await?;
            let pid = peer.pid();
            let rss = RssSampler::start(pid);
            let started = Instant::now();
            let failed = peer.create_jobs(0, plan.many_jobs, "0 0 3 * * *").await;
            let took = started.elapsed().as_secs_f64();
            tokio::time::sleep(Duration::from_secs(5)).await;
            let (_, max) = rss.finish().await;
            let v = json!({
                "jobs": plan.many_jobs,
                "create_failed": failed,
                "create_per_s": r1(plan.many_jobs as f64 / took.max(0.001)),
                "rss_mib": sys::rss_mib(pid).map(r1),
                "rss_max_mib": max.map(r1),
            });
            peer.stop();
            Ok(v)
        }
        .await;
        report.record(&["systems", name, "many_jobs"], r);
    }
}

async fn rates(
    plan: &Plan,
    peer: &mut RatchJob,
    log_dir: &Path,
    report: &mut Report,
    name: &str,
) -> anyhow::Result<()> {
    let observed = Observed::new();
    let executors = InProcess::start(
        plan.executors,
        APPNAME,
        &peer.executor_admin(),
        TOKEN,
        observed.clone(),
    )
    .await?;
    peer.wait_instances(plan.executors).await?;
    let mut created = 0;
    for (key, jobs) in [("low_rate", plan.low_jobs), ("high_rate", plan.high_jobs)] {
        if jobs > created {
            let failed = peer
                .create_jobs(created, jobs - created, "* * * * * *")
                .await;
            anyhow::ensure!(failed == 0, "{failed} ratch-job jobs could not be created");
            created = jobs;
        }
        let r = steady(peer, &observed, jobs, plan.warmup, plan.window, log_dir).await;
        report.record(&["systems", name, key], r);
    }
    executors.stop().await;
    Ok(())
}
