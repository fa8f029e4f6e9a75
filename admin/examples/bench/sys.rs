//! What the harness reads from the operating system: a process's CPU time and resident memory from
//! `/proc`, the machine's description, free ports, child processes that die with the harness, and
//! the temporary folders of a run, named so that a later run can remove those a killed one left.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU time (user + system) of a process in seconds, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; the fields after it start past its `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line (utime, stime) are 12 and 13 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// A field of `/proc/<pid>/status` in MiB (`VmRSS`, `VmHWM`, `RssAnon`, `RssFile`).
pub fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.split(':').next() == Some(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

pub fn rss_mib(pid: u32) -> Option<f64> {
    status_mib(pid, "VmRSS")
}

/// CPU use of a process over a window, as a percentage of one core.
pub struct CpuWindow {
    pid: u32,
    cpu: f64,
    at: Instant,
}

impl CpuWindow {
    pub fn start(pid: u32) -> CpuWindow {
        CpuWindow {
            pid,
            cpu: cpu_seconds(pid).unwrap_or(0.0),
            at: Instant::now(),
        }
    }

    pub fn percent(&self) -> Option<f64> {
        let used = cpu_seconds(self.pid)? - self.cpu;
        let wall = self.at.elapsed().as_secs_f64();
        (wall > 0.0).then(|| used / wall * 100.0)
    }
}

/// Samples a process's RSS once a second until stopped; gives the mean and the maximum.
pub struct RssSampler {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Vec<f64>>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
        let stop = tokio_util::sync::CancellationToken::new();
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                if let Some(r) = rss_mib(pid) {
                    samples.push(r);
                }
                tokio::select! {
                    _ = s.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            samples
        });
        RssSampler { stop, task }
    }

    /// (mean, max) in MiB.
    pub async fn finish(self) -> (Option<f64>, Option<f64>) {
        self.stop.cancel();
        let samples = self.task.await.unwrap_or_default();
        if samples.is_empty() {
            return (None, None);
        }
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let max = samples.iter().cloned().fold(f64::MIN, f64::max);
        (Some(mean), Some(max))
    }
}

/// The pid of the running MariaDB/MySQL server, if there is one on this machine.
pub fn mysqld_pid() -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) {
            if matches!(comm.trim(), "mariadbd" | "mysqld") {
                return Some(pid);
            }
        }
    }
    None
}

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU model, core count, memory and kernel, for the report.
pub fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "cpu_model": model,
        "cores": cores,
        "memory_gib": mem_gib,
        "kernel": kernel,
    })
}

/// A TCP port free on 127.0.0.1 at the time of the call.
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The start of the name of every folder and MariaDB database a run makes: `shardline-bench-` or
/// `shardline_bench_`, then the harness's process id and `sep`. A run killed by SIGKILL cannot
/// remove them; the id tells a later run that their maker has exited ([`made_by_exited_run`]).
pub fn run_prefix(sep: char) -> String {
    format!("{}{}{sep}", harness_stem(sep), std::process::id())
}

/// `shardline-bench-` or `shardline_bench_`: what every name of [`run_prefix`] begins with.
fn harness_stem(sep: char) -> String {
    format!("shardline{sep}bench{sep}")
}

/// Whether `name` begins as [`run_prefix`] does for a process that is no longer there. A process
/// not yet reaped (a zombie) still counts as there; so does any process that took its id since.
pub fn made_by_exited_run(name: &str, sep: char) -> bool {
    name.strip_prefix(&harness_stem(sep))
        .and_then(|rest| rest.split_once(sep))
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
        .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// A temporary folder of this run, in `parent` (the system's temporary folder if `None`), named
/// `shardline-bench-<pid>-<what>-…`.
pub fn temp_dir(what: &str, parent: Option<&Path>) -> std::io::Result<tempfile::TempDir> {
    let prefix = format!("{}{what}-", run_prefix('-'));
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    tempfile::Builder::new().prefix(&prefix).tempdir_in(parent)
}

/// Keeps `dir` (a [`temp_dir`]) and returns its path, renamed out of the names
/// [`remove_leftover_dirs`] removes (`shardline-bench-kept-…`), or as it was if that fails.
pub fn keep_dir(dir: tempfile::TempDir) -> PathBuf {
    let path = dir.keep();
    let renamed = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(&run_prefix('-')))
        .map(|rest| path.with_file_name(format!("shardline-bench-kept-{rest}")));
    match renamed {
        Some(to) if std::fs::rename(&path, &to).is_ok() => to,
        _ => path,
    }
}

/// Removes the temporary folders (in the system's temporary folder and `/dev/shm`) that processes
/// of the harness (runs, and the executor processes they start and kill) made and left when they
/// exited; returns how many.
pub fn remove_leftover_dirs() -> usize {
    let mut removed = 0;
    for parent in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let left = entry
                .file_name()
                .to_str()
                .is_some_and(|n| made_by_exited_run(n, '-'));
            if left && std::fs::remove_dir_all(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing harness leaves nothing
/// running behind it; the kernel kills it too when the harness itself is killed.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    /// Starts `cmd` with its output in `<log_dir>/<name>.log`. Only from the main thread: the
    /// child's death signal comes when the thread that started it ends, and the main thread ends
    /// with the harness (the run is driven on it by `block_on`).
    pub fn spawn(name: &str, cmd: &mut Command, log_dir: &Path) -> anyhow::Result<Proc> {
        anyhow::ensure!(
            std::thread::current().name() == Some("main"),
            "{name} must be started from the main thread"
        );
        let out = std::fs::File::create(log_dir.join(format!("{name}.log")))?;
        let err = out.try_clone()?;
        let harness = std::process::id();
        // SAFETY: between fork and exec the closure makes only async-signal-safe calls
        // (prctl, getppid) and allocates nothing on success.
        unsafe {
            cmd.pre_exec(move || {
                // Without it a harness killed by SIGKILL (which no handler sees) left its admin,
                // peer and executors running, holding ports and cores for the next benchmark.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The harness may have died before the request took effect.
                if libc::getppid() as u32 != harness {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {name}: {e}"))?;
        Ok(Proc {
            child,
            name: name.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails when the process has already exited (it crashed or refused its configuration).
    pub fn check_alive(&mut self, log_dir: &Path) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(log_dir.join(format!("{}.log", self.name)))
                .unwrap_or_default();
            let tail: String = log
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            anyhow::bail!("{} exited ({status}):\n{tail}", self.name);
        }
        Ok(())
    }

    /// Waits until `url` answers with a 2xx status (polled every `poll`), failing when the
    /// process exits or 60 s pass first.
    pub async fn wait_answering(
        &mut self,
        http: &reqwest::Client,
        url: &str,
        poll: Duration,
        log_dir: &Path,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            self.check_alive(log_dir)?;
            if let Ok(r) = http.get(url).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "{} did not answer within 60 s",
                self.name
            );
            tokio::time::sleep(poll).await;
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        // SAFETY: signals a child this harness started and has not reaped yet.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The folder of the running harness binary's profile (`target/release` or `target/debug`).
pub fn profile_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // The example lives in target/<profile>/examples/.
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| anyhow::anyhow!("cannot locate the target folder from {}", exe.display()))
}

/// Percentile (0..=100) of sorted values by nearest rank.
/// A sample without labels from an admin's Prometheus page (`GET {base}/metrics`); `None` when
/// the page cannot be read or has no such sample.
pub async fn metric(http: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

pub fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Rounds to one decimal for the report.
pub fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}
