//! Shardline's load harness: one command that starts the admin as a release process on a fresh
//! database, drives it with SDK executors, and prints the figures of Shardline's performance
//! targets as a table and as JSON (also written to a file).
//!
//! ```text
//! cargo run --release -p shardline-admin --example bench -- [--quick] [--db sqlite,mysql] [--peer ratchjob]
//! ```
//!
//! * The admin runs as its own process (`target/<profile>/shardline-admin`, built first), so its
//!   CPU and RSS come from `/proc/<pid>`. The executors driving it run inside this harness process
//!   (their CPU is never counted as the admin's); the SDK-memory and failover scenarios start
//!   executors as child processes of this same binary (`--role`).
//! * Lateness is `dispatched_at - planned_at` of the `fires` rows planned in the steady window;
//!   runs/s counts `runs` rows that reached a final state and were stored in the window.
//! * `--peer ratchjob` runs the same scenarios against ratch-job (XXL-JOB compatible, in-memory
//!   Raft store) with the same executors, where it can express them.
//!
//! `--quick` uses small numbers and finishes in well under a minute; the CI smoke test runs it.

mod execs;
mod floor;
mod ours;
mod peer;
mod sys;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde_json::{json, Value};

use ours::{AdminProc, BenchDb, DbKind, SteadySpec};

#[derive(Debug, Parser)]
#[command(name = "bench", about = "Shardline load harness")]
struct Args {
    /// Small numbers, a few seconds per scenario (the CI smoke test).
    #[arg(long)]
    quick: bool,
    /// Databases to run the admin on (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [DbKind::Sqlite])]
    db: Vec<DbKind>,
    /// Also measure this peer admin on the same machine in the same run.
    #[arg(long, value_enum)]
    peer: Option<peer::Peer>,
    /// The ratch-job binary (default: target/peer/ratchjob/bin/ratchjob, then `ratchjob` on PATH).
    #[arg(long)]
    ratchjob_bin: Option<PathBuf>,
    /// The admin binary (default: built from this workspace in the harness's profile).
    #[arg(long)]
    admin_bin: Option<PathBuf>,
    /// MariaDB server for `--db mysql` (a `shardline_bench_*` database is created and dropped).
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306")]
    mysql_url: String,
    /// Where the JSON report is written.
    #[arg(long, default_value = "target/bench/report.json")]
    out: PathBuf,
    /// Scenarios to run (comma-separated; default all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Scenario>,
    /// Jobs firing every second in the high-rate scenario (default 10 000, quick 200).
    #[arg(long, value_parser = at_least_one::<usize>)]
    jobs: Option<usize>,
    /// Length of each steady measurement window in seconds (default 30, quick 3).
    #[arg(long, value_parser = at_least_one::<u64>)]
    window_s: Option<u64>,
    /// In-process executors driving the admin (default 4, quick 2).
    #[arg(long, value_parser = at_least_one::<usize>)]
    executors: Option<usize>,
    /// Keep the logs of the started processes even when every scenario succeeded.
    #[arg(long)]
    keep_logs: bool,

    // Child-process roles of this binary.
    #[arg(long, value_enum, hide = true)]
    role: Option<execs::Role>,
    #[arg(long, hide = true, default_value = "")]
    role_admin: String,
    #[arg(long, hide = true, default_value = "")]
    role_appname: String,
    #[arg(long, hide = true, default_value = "")]
    role_token: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scenario {
    /// Loopback HTTP and batched-insert floors.
    Floor,
    /// Idle admin: RSS and CPU.
    Idle,
    /// 1 000 executors beating every 30 s (simulated registry calls).
    Beats,
    /// 1 000 jobs every second, then 10 000 jobs every second.
    Rate,
    /// 100 000 jobs defined.
    ManyJobs,
    /// SDK executor memory with 100 idle handlers.
    Sdk,
    /// Shard failover after executors are killed with -9.
    Failover,
}

/// The sizes of one harness run.
struct Plan {
    quick: bool,
    executors: usize,
    low_jobs: usize,
    high_jobs: usize,
    warmup: Duration,
    window: Duration,
    beat_executors: usize,
    beat_period: Duration,
    beat_window: Duration,
    many_jobs: usize,
    failover_items: i64,
    idle_window: Duration,
    floor_http: Duration,
    floor_rows: usize,
    floor_batch: usize,
}

impl Plan {
    fn of(a: &Args) -> Plan {
        let q = a.quick;
        let window = Duration::from_secs(a.window_s.unwrap_or(if q { 2 } else { 30 }).max(1));
        Plan {
            quick: q,
            executors: a.executors.unwrap_or(if q { 2 } else { 4 }).max(1),
            low_jobs: if q { 50 } else { 1_000 },
            high_jobs: a.jobs.unwrap_or(if q { 200 } else { 10_000 }),
            warmup: Duration::from_secs(if q { 1 } else { 10 }),
            window,
            beat_executors: if q { 100 } else { 1_000 },
            beat_period: Duration::from_secs(if q { 3 } else { 30 }),
            beat_window: Duration::from_secs(if q { 2 } else { 60 }),
            many_jobs: if q { 500 } else { 100_000 },
            failover_items: if q { 4 } else { 6 },
            idle_window: Duration::from_secs(if q { 1 } else { 10 }),
            floor_http: Duration::from_secs(if q { 1 } else { 5 }),
            floor_rows: if q { 5_000 } else { 100_000 },
            floor_batch: 1_000,
        }
    }
}

/// Collects figures and the errors that prevented some of them.
struct Report {
    root: serde_json::Map<String, Value>,
    errors: Vec<String>,
}

impl Report {
    fn set(&mut self, path: &[&str], v: Value) {
        let mut node = &mut self.root;
        for key in &path[..path.len() - 1] {
            let entry = node
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Default::default()));
            if !entry.is_object() {
                *entry = Value::Object(Default::default());
            }
            node = entry.as_object_mut().expect("object");
        }
        node.insert(path[path.len() - 1].to_string(), v);
    }

    /// Records the result of a scenario, or its error.
    fn record(&mut self, path: &[&str], r: anyhow::Result<Value>) {
        match r {
            Ok(v) => {
                println!("  {} = {v}", path.join("."));
                self.set(path, v);
            }
            Err(e) => {
                let msg = format!("{}: {e:#}", path.join("."));
                eprintln!("  error: {msg}");
                self.errors.push(msg);
                self.set(path, Value::Null);
            }
        }
    }
}

/// A count that must be at least 1 (a scenario of no jobs, no seconds or no executors measures
/// nothing, so it is refused at the command line instead of giving empty figures).
fn at_least_one<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => T::try_from(n).map_err(|_| format!("{n} is too large")),
        Err(e) => Err(format!("not a whole number ({e})")),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(role) = args.role {
        return rt.block_on(execs::run_role(
            role,
            &args.role_admin,
            &args.role_appname,
            &args.role_token,
        ));
    }
    let mysql_url = args
        .db
        .contains(&DbKind::Mysql)
        .then(|| args.mysql_url.clone());
    let code = rt.block_on(async {
        // The handlers are in place before the run starts anything: a signal that came before
        // them would end the harness by its default action and leave the admin it had started.
        let stop = stop_signal();
        let mut work = Box::pin(run(args));
        let signal = tokio::select! {
            code = &mut work => return code,
            signal = stop => signal,
        };
        // Dropping the run kills and reaps the processes it started and removes its folders (their
        // `Drop`s); its MariaDB databases need a connection, so they are dropped here. Without
        // this a stopped run left the admin or the peer running, holding a port and a core.
        drop(work);
        if let Some(url) = &mysql_url {
            ours::drop_dbs(url, ours::Whose::Own).await;
        }
        eprintln!("stopped by signal {signal}: started processes killed, temporary data removed");
        Ok(128 + signal)
    })?;
    // The executor processes' folders of run logs: they were killed, not stopped, so nothing
    // removed them.
    sys::remove_leftover_dirs();
    std::process::exit(code);
}

/// Fails unless the report can be written to `out` (its folder is made if missing), so that a run
/// of many minutes does not end in an error with its report unwritten. A file it creates for the
/// check is removed again; an existing one is left as it is until the report replaces it.
fn check_writable(out: &std::path::Path) -> anyhow::Result<()> {
    let cannot = |e| unwritable(out, e);
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(cannot)?;
    }
    let existed = out.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(out)
        .map_err(cannot)?;
    if !existed {
        std::fs::remove_file(out).map_err(cannot)?;
    }
    Ok(())
}

/// The error of a report that cannot be written to `out`.
fn unwritable(out: &std::path::Path, e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot write the report to {}: {e}", out.display())
}

/// Installs handlers for SIGINT and SIGTERM at once (not at the first poll); the future waits
/// for either and returns its number.
fn stop_signal() -> impl std::future::Future<Output = i32> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            // Without handlers the signals keep their default action (the process ends).
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => libc::SIGINT,
            _ = term.recv() => libc::SIGTERM,
        }
    }
}

async fn run(args: Args) -> anyhow::Result<i32> {
    check_writable(&args.out)?;
    if let Some(bin) = &args.admin_bin {
        anyhow::ensure!(bin.is_file(), "--admin-bin {}: no such file", bin.display());
    }
    // Found before anything runs: a missing peer is then known at once, not after our scenarios.
    let peer_bin = match args.peer {
        Some(_) => Some(peer::find_binary(args.ratchjob_bin.as_deref())?),
        None => None,
    };
    // What earlier runs killed by SIGKILL left (their children died with them): folders, possibly
    // in memory, and databases that would otherwise pile up, one full run's worth each.
    let dirs = sys::remove_leftover_dirs();
    let dbs = if args.db.contains(&DbKind::Mysql) {
        ours::drop_dbs(&args.mysql_url, ours::Whose::Exited).await
    } else {
        0
    };
    if dirs + dbs > 0 {
        println!("removed what killed runs left: {dirs} folders, {dbs} MariaDB databases");
    }
    let plan = Plan::of(&args);
    let wants = |s: Scenario| args.only.is_empty() || args.only.contains(&s);
    let work = sys::temp_dir("logs", None)?;
    let log_dir = work.path().to_path_buf();
    let mut report = Report {
        root: Default::default(),
        errors: Vec::new(),
    };
    let command: Vec<String> = std::env::args().skip(1).collect();
    report.set(
        &["harness"],
        json!({
            "mode": if plan.quick { "quick" } else { "full" },
            "arguments": command,
            "profile": sys::profile_dir().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
            "started_at": chrono::Utc::now().to_rfc3339(),
            "load_before": sys::load_average(),
            "machine": sys::machine(),
            "executors": format!("{} SDK executors inside the harness process (their CPU is not the admin's); SDK memory and failover executors are child processes", plan.executors),
        }),
    );
    report.set(&["targets"], targets());
    println!("logs of started processes: {}", log_dir.display());

    if wants(Scenario::Floor) {
        println!("floors");
        report.record(
            &["floors", "axum_loopback"],
            floor::axum_rps(plan.floor_http, 64).await,
        );
        report.record(
            &["floors", "axum_at_beat_rate"],
            floor::beat_rate_cpu(
                &log_dir,
                plan.beat_executors,
                plan.beat_period,
                plan.beat_window,
            )
            .await,
        );
        for kind in &args.db {
            report.record(
                &["floors", &format!("{}_batched_inserts", kind.name())],
                floor::inserts(*kind, &args.mysql_url, plan.floor_rows, plan.floor_batch).await,
            );
        }
    }

    let admin_bin = match ours::admin_binary(args.admin_bin.as_deref()) {
        Ok(b) => Some(b),
        Err(e) => {
            report.errors.push(format!("admin binary: {e:#}"));
            None
        }
    };
    if let Some(bin) = &admin_bin {
        for kind in &args.db {
            let name = format!("shardline_{}", kind.name());
            println!("{name}");
            shardline_suite(
                &plan,
                &args,
                *kind,
                bin,
                &log_dir,
                &name,
                &mut report,
                &wants,
            )
            .await;
        }
    }
    if let (Some(p), Some(bin)) = (args.peer, &peer_bin) {
        println!("{}", p.name());
        peer::suite(p, &plan, bin, &log_dir, &mut report, &wants).await;
    }

    report.set(&["harness", "load_after"], json!(sys::load_average()));
    report.set(
        &["harness", "finished_at"],
        json!(chrono::Utc::now().to_rfc3339()),
    );
    let checks = checks(&report.root);
    report.set(&["checks"], checks);
    report.set(&["errors"], json!(report.errors));
    let root = Value::Object(report.root.clone());
    print_table(&root);
    let text = serde_json::to_string_pretty(&root)?;
    // Printed first, so that the figures survive a file that cannot be written after all.
    println!("\n{text}");
    std::fs::write(&args.out, &text).map_err(|e| unwritable(&args.out, e))?;
    println!("report written to {}", args.out.display());
    if !report.errors.is_empty() || args.keep_logs {
        // Keep the started processes' logs for a look at what failed, under a name the clearing
        // up of later runs leaves alone.
        let kept = sys::keep_dir(work);
        eprintln!(
            "{} scenario(s) failed; logs kept in {}",
            report.errors.len(),
            kept.display()
        );
    }
    Ok(if report.errors.is_empty() { 0 } else { 1 })
}

/// Every Shardline scenario on one database kind.
#[allow(clippy::too_many_arguments)]
async fn shardline_suite(
    plan: &Plan,
    args: &Args,
    kind: DbKind,
    bin: &std::path::Path,
    log_dir: &std::path::Path,
    name: &str,
    report: &mut Report,
    wants: &dyn Fn(Scenario) -> bool,
) {
    // One admin for idle → beats → 1 000 jobs/s → 10 000 jobs/s.
    if wants(Scenario::Idle) || wants(Scenario::Beats) || wants(Scenario::Rate) {
        let r = async {
            let db = BenchDb::fresh(kind, &args.mysql_url, "main").await?;
            let admin = AdminProc::start(bin, &db, log_dir, &format!("{name}-main")).await?;
            Ok::<_, anyhow::Error>((db, admin))
        }
        .await;
        match r {
            Err(e) => report.record(&["systems", name, "start"], Err(e)),
            Ok((db, mut admin)) => {
                if wants(Scenario::Idle) {
                    report.record(
                        &["systems", name, "idle"],
                        Ok(ours::idle(admin.pid(), plan.idle_window).await),
                    );
                }
                if wants(Scenario::Beats) {
                    let url = format!("{}/api/registry", admin.base);
                    report.record(
                        &["systems", name, "beats"],
                        Ok(ours::beats(
                            admin.pid(),
                            &admin.http,
                            &url,
                            ours::ACCESS_TOKEN,
                            plan.beat_executors,
                            plan.beat_period,
                            plan.beat_window,
                        )
                        .await),
                    );
                }
                if wants(Scenario::Rate) {
                    let r = rates(plan, &mut admin, &db, name, report).await;
                    if let Err(e) = r {
                        report.record(&["systems", name, "rate"], Err(e));
                    }
                }
                admin.stop();
                db.drop_db().await;
            }
        }
    }
    if wants(Scenario::ManyJobs) {
        let r = async {
            let db = BenchDb::fresh(kind, &args.mysql_url, "jobs").await?;
            let mut admin = AdminProc::start(bin, &db, log_dir, &format!("{name}-jobs")).await?;
            let gid = admin.create_group(ours::APPNAME).await?;
            let v = ours::jobs_defined(&mut admin, gid, plan.many_jobs).await;
            admin.stop();
            db.drop_db().await;
            v
        }
        .await;
        report.record(&["systems", name, "many_jobs"], r);
    }
    if wants(Scenario::Sdk) || wants(Scenario::Failover) {
        let r = async {
            let db = BenchDb::fresh(kind, &args.mysql_url, "fo").await?;
            let admin = AdminProc::start(bin, &db, log_dir, &format!("{name}-fo")).await?;
            Ok::<_, anyhow::Error>((db, admin))
        }
        .await;
        match r {
            Err(e) => report.record(&["systems", name, "failover"], Err(e)),
            Ok((db, admin)) => {
                if wants(Scenario::Sdk) {
                    report.record(
                        &["systems", name, "sdk"],
                        ours::sdk_rss(&admin, log_dir).await,
                    );
                }
                if wants(Scenario::Failover) {
                    report.record(
                        &["systems", name, "failover"],
                        ours::failover(&admin, log_dir, plan.failover_items).await,
                    );
                }
                admin.stop();
                db.drop_db().await;
            }
        }
    }
}

/// The low-rate then the high-rate steady windows on one admin, with in-process executors.
async fn rates(
    plan: &Plan,
    admin: &mut AdminProc,
    db: &BenchDb,
    name: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    let gid = admin.create_group(ours::APPNAME).await?;
    let observed = execs::Observed::new();
    let executors = execs::InProcess::start(
        plan.executors,
        ours::APPNAME,
        &admin.base,
        ours::ACCESS_TOKEN,
        observed.clone(),
    )
    .await?;
    admin.wait_executors(gid, plan.executors).await?;
    let reader = db.reader().await?;
    let mut created = 0;
    for (key, jobs) in [("low_rate", plan.low_jobs), ("high_rate", plan.high_jobs)] {
        if jobs > created {
            let failed = admin
                .create_jobs(gid, created, jobs - created, "* * * * * ?")
                .await?;
            anyhow::ensure!(failed == 0, "{failed} jobs could not be created");
            created = jobs;
        }
        let spec = SteadySpec {
            jobs,
            warmup: plan.warmup,
            window: plan.window,
        };
        let r = ours::steady(admin, &reader, &observed, &spec).await;
        report.record(&["systems", name, key], r);
    }
    reader.close().await;
    executors.stop().await;
    Ok(())
}

/// How a figure is judged against its target.
enum Limit {
    /// At most this.
    Max(f64),
    /// At least this.
    Min(f64),
    /// At least this many times the peer's same figure in the same run.
    PeerRatioMin(f64),
    /// At most the peer's same figure in the same run.
    PeerMax,
}

/// One target, written here only: the report's `targets`, its `checks` and the printed table's
/// target column are all made from [`TARGETS`].
struct Target {
    /// The check's name in the report.
    name: &'static str,
    /// Where the figure is in a system's report (the peer's as well as Shardline's).
    figure: &'static [&'static str],
    limit: Limit,
    note: &'static str,
}

/// The peer whose figures the `Peer…` limits compare with.
const PEER: &str = "ratchjob";

/// The performance targets (`docs/benchmarks.md`), in the order the report checks them.
const TARGETS: &[Target] = &[
    Target {
        name: "lateness_p50_ms",
        figure: &["high_rate", "lateness_p50_ms"],
        limit: Limit::Max(5.0),
        note: "10 000 jobs firing every second",
    },
    Target {
        name: "lateness_p99_ms",
        figure: &["high_rate", "lateness_p99_ms"],
        limit: Limit::Max(20.0),
        note: "10 000 jobs firing every second",
    },
    Target {
        name: "runs_per_s",
        figure: &["high_rate", "runs_per_s"],
        limit: Limit::Min(10_000.0),
        note: "runs stored, 10 000 jobs firing every second",
    },
    Target {
        name: "runs_per_s_vs_peer",
        figure: &["high_rate", "runs_per_s"],
        limit: Limit::PeerRatioMin(5.0),
        note: "runs stored over the runs the peer's executors finished, in the same run",
    },
    Target {
        name: "cpu_pct_at_low_rate",
        figure: &["low_rate", "cpu_pct"],
        limit: Limit::Max(10.0),
        note: "1 000 jobs firing every second",
    },
    Target {
        name: "idle_rss_mib",
        figure: &["idle", "rss_mib"],
        limit: Limit::Max(16.7),
        note: "ratch-job's idle RSS as first measured on such a machine; stands in for runs without the peer",
    },
    Target {
        name: "idle_rss_vs_peer_mib",
        figure: &["idle", "rss_mib"],
        limit: Limit::PeerMax,
        note: "the peer's idle RSS in the same run",
    },
    Target {
        name: "rss_at_low_rate_mib",
        figure: &["low_rate", "rss_max_mib"],
        limit: Limit::Max(40.0),
        note: "1 000 jobs firing every second",
    },
    Target {
        name: "rss_many_jobs_mib",
        figure: &["many_jobs", "rss_max_mib"],
        limit: Limit::Max(150.0),
        note: "100 000 jobs defined",
    },
    Target {
        name: "sdk_rss_mib",
        figure: &["sdk", "rss_mib"],
        limit: Limit::Max(10.0),
        note: "an SDK executor with 100 idle handlers",
    },
    Target {
        name: "failed_dispatch_to_redispatch_ms",
        figure: &["failover", "failed_dispatch_to_redispatch_max_ms"],
        limit: Limit::Max(1_000.0),
        note: "a shard whose executor died, from the failed dispatch",
    },
    Target {
        name: "lost_detect_to_redispatch_ms",
        figure: &["failover", "detect_to_redispatch_max_ms"],
        limit: Limit::Max(1_000.0),
        note: "a run lost with its executor, from its detection",
    },
    Target {
        name: "beats_cpu_pct",
        figure: &["beats", "cpu_pct"],
        limit: Limit::Max(2.0),
        note: "1 000 executors beating every 30 s",
    },
];

/// The targets as the report holds them.
fn targets() -> Value {
    let map = TARGETS
        .iter()
        .map(|t| {
            let (kind, limit) = match t.limit {
                Limit::Max(l) => ("max", json!(l)),
                Limit::Min(l) => ("min", json!(l)),
                Limit::PeerRatioMin(l) => ("peer_ratio_min", json!(l)),
                Limit::PeerMax => ("max", json!("peer")),
            };
            let target = json!({"figure": t.figure.join("."), kind: limit, "note": t.note});
            (t.name.to_string(), target)
        })
        .collect();
    Value::Object(map)
}

/// A fixed limit as the printed table shows it; the peer's limits are in the report's checks.
fn target_text(figure: &[&str]) -> String {
    TARGETS
        .iter()
        .filter(|t| t.figure == figure)
        .find_map(|t| match t.limit {
            Limit::Max(l) => Some(format!("≤ {l}")),
            Limit::Min(l) => Some(format!("≥ {l}")),
            Limit::PeerRatioMin(_) | Limit::PeerMax => None,
        })
        .unwrap_or_default()
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut n = v;
    for p in path {
        n = n.get(*p)?;
    }
    n.as_f64()
}

/// Each Shardline figure against its target (only meaningful for full-size runs). A target
/// against the peer is checked only where the peer's figure is in the report.
fn checks(root: &serde_json::Map<String, Value>) -> Value {
    let Some(systems) = root.get("systems").and_then(Value::as_object) else {
        return json!([]);
    };
    let peer = systems.get(PEER);
    let mut out = Vec::new();
    for (name, s) in systems.iter().filter(|(n, _)| n.starts_with("shardline")) {
        for t in TARGETS {
            let value = num(s, t.figure);
            let peer_value = peer.and_then(|p| num(p, t.figure));
            let (value, limit, max) = match t.limit {
                Limit::Max(l) => (value, l, true),
                Limit::Min(l) => (value, l, false),
                Limit::PeerRatioMin(l) => match (value, peer_value) {
                    (Some(v), Some(p)) => (Some(sys::r1(v / p.max(0.001))), l, false),
                    _ => continue,
                },
                Limit::PeerMax => match peer_value {
                    Some(p) => (value, p, true),
                    None => continue,
                },
            };
            out.push(json!({
                "system": name, "figure": t.name, "value": value, "limit": limit,
                "kind": if max { "max" } else { "min" },
                "met": value.map(|v| if max { v <= limit } else { v >= limit }),
            }));
        }
    }
    Value::Array(out)
}

/// The summary table: one row per figure, one column per system.
fn print_table(root: &Value) {
    let systems: Vec<(String, Value)> = root
        .get("systems")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let rows: [(&str, &[&str]); 18] = [
        ("lateness p50 (ms)", &["high_rate", "lateness_p50_ms"]),
        ("lateness p99 (ms)", &["high_rate", "lateness_p99_ms"]),
        (
            "executor-seen lateness p99 (ms)",
            &["high_rate", "executor_lateness_p99_ms"],
        ),
        (
            "run end stored p99 (ms after planned)",
            &["high_rate", "run_end_stored_p99_ms"],
        ),
        ("runs/s stored (high rate)", &["high_rate", "runs_per_s"]),
        (
            "runs/s executed (high rate)",
            &["high_rate", "executor_runs_per_s"],
        ),
        ("admin CPU % (high rate)", &["high_rate", "cpu_pct"]),
        (
            "run requests/s (high rate)",
            &["high_rate", "run_requests_per_s"],
        ),
        ("runs/s (low rate)", &["low_rate", "runs_per_s"]),
        ("admin CPU % (low rate)", &["low_rate", "cpu_pct"]),
        ("RSS idle (MiB)", &["idle", "rss_mib"]),
        ("RSS low rate, max (MiB)", &["low_rate", "rss_max_mib"]),
        ("RSS many jobs, max (MiB)", &["many_jobs", "rss_max_mib"]),
        ("SDK RSS, 100 handlers (MiB)", &["sdk", "rss_mib"]),
        (
            "failed dispatch → re-dispatch (ms)",
            &["failover", "failed_dispatch_to_redispatch_max_ms"],
        ),
        (
            "lost detected → re-dispatch (ms)",
            &["failover", "detect_to_redispatch_max_ms"],
        ),
        (
            "kill -9 → re-dispatch (ms)",
            &["failover", "kill_to_redispatch_max_ms"],
        ),
        ("admin CPU %, beats", &["beats", "cpu_pct"]),
    ];
    let mut header = format!("\n{:<36} {:>10}", "figure", "target");
    for (name, _) in &systems {
        header.push_str(&format!(" {name:>18}"));
    }
    println!("{header}");
    for (label, path) in rows {
        let target = target_text(path);
        let mut line = format!("{label:<36} {target:>10}");
        for (_, s) in &systems {
            let cell = num(s, path).map_or_else(|| "-".to_string(), |v| format!("{v}"));
            line.push_str(&format!(" {cell:>18}"));
        }
        println!("{line}");
    }
    if let Some(f) = root.get("floors") {
        println!("floors: {f}");
    }
}
