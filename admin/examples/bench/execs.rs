//! The executors the harness drives: SDK executors inside the harness process (so their CPU never
//! counts as the admin's), and the child-process roles used where a process of its own is needed
//! (the SDK's memory, executors killed with -9).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shardline_executor::{Executor, ExecutorConfig, JobResult};
use tokio_util::sync::CancellationToken;

/// What the in-process executors observed, shared by all of them.
#[derive(Default)]
pub struct Observed {
    /// Runs executed since start.
    pub executed: AtomicU64,
    /// While set, each run's lateness as seen by the executor is recorded.
    pub recording: AtomicBool,
    /// Executor-side lateness histogram, 1 ms buckets over [0, 1000) ms.
    buckets: Vec<AtomicU64>,
}

impl Observed {
    pub fn new() -> Arc<Observed> {
        Arc::new(Observed {
            executed: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            buckets: (0..1000).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Counts a run that started at `now_ms`. Jobs fire on whole seconds, so the milliseconds past
    /// the second are its lateness as the executor sees it (valid while lateness stays below 1 s).
    fn record(&self, now_ms: i64) {
        self.executed.fetch_add(1, Ordering::Relaxed);
        if self.recording.load(Ordering::Relaxed) {
            let ms = now_ms.rem_euclid(1000) as usize;
            self.buckets[ms].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn reset_histogram(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }

    /// (samples, p50, p99) of the recorded lateness in ms.
    pub fn lateness(&self) -> (u64, Option<i64>, Option<i64>) {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let at = |p: f64| -> Option<i64> {
            if total == 0 {
                return None;
            }
            let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (ms, n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return Some(ms as i64);
                }
            }
            None
        };
        (total, at(50.0), at(99.0))
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// SDK executors running in the harness process.
pub struct InProcess {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _logs: tempfile::TempDir,
}

/// A folder for run logs: in memory (`/dev/shm`) when the machine has it, so the executors' one
/// file per run does not make the disk a factor of the admin's figures.
pub fn log_root() -> anyhow::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    Ok(crate::sys::temp_dir(
        "runlogs",
        shm.is_dir().then_some(shm),
    )?)
}

impl InProcess {
    /// Starts `n` executors of `appname`, registering with `admin` (a base URL, possibly with a
    /// context path), with the handler `noop`.
    pub async fn start(
        n: usize,
        appname: &str,
        admin: &str,
        token: &str,
        observed: Arc<Observed>,
    ) -> anyhow::Result<InProcess> {
        let logs = log_root()?;
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        // One HTTP client for all of them, as a service embedding the SDK would share its own.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            .build()?;
        for i in 0..n {
            let mut cfg = ExecutorConfig::new(appname, vec![admin.to_string()]);
            cfg.access_token = token.to_string();
            cfg.bind = "127.0.0.1:0".parse()?;
            cfg.log_path = logs.path().join(format!("exec-{i}"));
            cfg.beat_interval = Duration::from_secs(5);
            cfg.callback_retry_interval = Duration::from_secs(1);
            cfg.shutdown_grace = Duration::from_millis(200);
            let obs = observed.clone();
            let executor = Executor::builder(cfg)
                .http_client(client.clone())
                .handler("noop", move |_ctx| {
                    let obs = obs.clone();
                    async move {
                        obs.record(now_ms());
                        JobResult::success()
                    }
                })
                .build()?;
            let bound = executor.bind().await?;
            let s = stop.clone();
            tasks.push(tokio::spawn(async move {
                let _ = bound.serve(async move { s.cancelled().await }).await;
            }));
        }
        Ok(InProcess {
            stop,
            tasks,
            _logs: logs,
        })
    }

    pub async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
        }
    }
}

/// Child-process roles, selected with `--role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// An executor with `noop` and `slow` handlers; prints `listening on <address>` once bound.
    Executor,
    /// An executor with 100 idle handlers; prints `ready` once registered.
    SdkIdle,
    /// The same binary with a runtime and nothing else: the memory the SDK is compared with.
    Baseline,
    /// The trivial axum handler of the HTTP floor as its own process, so its CPU can be read;
    /// prints `listening on <address>` once bound.
    FloorServer,
}

/// Runs a child role until the process is killed.
pub async fn run_role(role: Role, admin: &str, appname: &str, token: &str) -> anyhow::Result<()> {
    match role {
        Role::Baseline => {
            println!("ready");
            std::future::pending::<()>().await;
            Ok(())
        }
        Role::FloorServer => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            println!("listening on http://{}/", listener.local_addr()?);
            axum::serve(listener, crate::floor::trivial_app()).await?;
            Ok(())
        }
        Role::Executor | Role::SdkIdle => {
            let logs = log_root()?;
            let mut cfg = ExecutorConfig::new(appname, vec![admin.to_string()]);
            cfg.access_token = token.to_string();
            cfg.bind = "127.0.0.1:0".parse()?;
            cfg.log_path = logs.path().to_path_buf();
            cfg.beat_interval = if role == Role::Executor {
                Duration::from_millis(500)
            } else {
                Duration::from_secs(30)
            };
            cfg.shutdown_grace = Duration::from_millis(200);
            let mut b = Executor::builder(cfg);
            if role == Role::Executor {
                b = b
                    .handler("noop", |_ctx| async { JobResult::success() })
                    .handler("slow", |ctx| async move {
                        // Sleeps `params` milliseconds, or until the admin kills the run.
                        let ms: u64 = ctx.params().trim().parse().unwrap_or(3_000);
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(ms)) => JobResult::success(),
                            _ = ctx.cancellation().cancelled() => JobResult::fail("killed"),
                        }
                    });
            } else {
                for i in 0..100 {
                    b = b.handler(&format!("idle{i}"), |_ctx| async { JobResult::success() });
                }
            }
            let executor = b.build()?;
            let bound = executor.bind().await?;
            println!("listening on http://{}/", bound.local_addr());
            if role == Role::SdkIdle {
                println!("ready");
            }
            bound.serve(std::future::pending::<()>()).await?;
            drop(logs);
            Ok(())
        }
    }
}
