//! An executor whose handler works slowly through a generated id range and saves checkpoints as it
//! goes: kill it with -9 in the middle of a run and watch another executor take the item over and
//! resume from the last checkpoint instead of starting again.
//!
//! ```text
//! SHARDLINE_EXECUTOR_APPNAME=range-demo SHARDLINE_EXECUTOR_PORT=9998 \
//!     cargo run -p shardline-executor --example range_executor
//! ```
//!
//! Configuration is read from the `SHARDLINE_EXECUTOR_*` variables (see `ExecutorConfig::from_env`),
//! plus two of its own:
//! * `RANGE_EXECUTOR_BEAT_MS`: registration interval in milliseconds (finer than the seconds of
//!   `SHARDLINE_EXECUTOR_BEAT_INTERVAL_SECS`).
//! * `RANGE_EXECUTOR_JOURNAL`: a file to which every run start, checkpoint and end is appended as
//!   one JSON line, written before the next step so that it survives a kill. A checkpoint is
//!   journalled twice: `saving` before it is sent (the admin may store it even when this process
//!   is stopped before it reads the answer) and `checkpoint` once the admin took it.
//!
//! Once listening it prints `listening on http://ip:port/` on stdout.
//!
//! Handler `rangeJobHandler`, parameter `ids=1000,step_ms=10,checkpoint_every=100` (all optional):
//! item `i` of `n` owns the ids `1..=ids` with `id % n == i`, handles one every `step_ms`, and saves
//! the checkpoint `id=<last handled id>` every `checkpoint_every` ids and at its end. A run that
//! receives a checkpoint resumes after that id.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardline_executor::{CheckpointError, Executor, ExecutorConfig, JobContext, JobResult};

/// The handler's settings, from its job parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RangeParams {
    ids: u64,
    step_ms: u64,
    checkpoint_every: u64,
}

impl RangeParams {
    fn parse(s: &str) -> Result<RangeParams, String> {
        let mut p = RangeParams {
            ids: 1000,
            step_ms: 10,
            checkpoint_every: 100,
        };
        for part in s.split([',', ' ']).map(str::trim).filter(|x| !x.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("parameter {part:?} is not key=value"))?;
            let value: u64 = value
                .trim()
                .parse()
                .map_err(|_| format!("parameter {key}: {value:?} is not a number"))?;
            match key.trim() {
                "ids" => p.ids = value,
                "step_ms" => p.step_ms = value,
                "checkpoint_every" => p.checkpoint_every = value.max(1),
                other => return Err(format!("unknown parameter {other:?}")),
            }
        }
        Ok(p)
    }
}

/// Appends JSON lines to the journal file, if one was configured.
#[derive(Clone, Default)]
struct Journal(Option<Arc<Mutex<std::fs::File>>>);

impl Journal {
    fn open(path: Option<PathBuf>) -> std::io::Result<Journal> {
        let Some(path) = path else {
            return Ok(Journal(None));
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Journal(Some(Arc::new(Mutex::new(file)))))
    }

    fn write(&self, ctx: &JobContext, event: &str, extra: serde_json::Value) {
        let Some(file) = &self.0 else { return };
        let mut line = serde_json::json!({
            "event": event,
            "pid": std::process::id(),
            "log_id": ctx.log_id(),
            "job_id": ctx.job_id(),
            "item": ctx.shard_index(),
            "total": ctx.shard_total(),
            "key": ctx.idempotency_key(),
        });
        if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
            line.extend(extra);
        }
        // One write per line with O_APPEND: a line is whole even when the process dies right after.
        let mut text = line.to_string();
        text.push('\n');
        if let Ok(mut f) = file.lock() {
            let _ = f.write_all(text.as_bytes());
        }
    }
}

/// Works through the item's ids, resuming after the checkpoint it was handed.
async fn range_job(ctx: JobContext, journal: Journal) -> JobResult {
    let p = match RangeParams::parse(ctx.params()) {
        Ok(p) => p,
        Err(e) => return JobResult::fail(e),
    };
    let (Ok(index), Ok(total)) = (
        u64::try_from(ctx.shard_index()),
        u64::try_from(ctx.shard_total()),
    ) else {
        return JobResult::fail("negative shard index or total");
    };
    if total == 0 || index >= total {
        return JobResult::fail(format!("shard {index}/{total} is not a valid item"));
    }
    let resume_after = match ctx.last_checkpoint() {
        None => 0,
        Some(c) => match c.strip_prefix("id=").and_then(|id| id.parse::<u64>().ok()) {
            Some(id) => id,
            None => return JobResult::fail(format!("checkpoint {c:?} is not id=<number>")),
        },
    };
    journal.write(
        &ctx,
        "start",
        serde_json::json!({ "checkpoint": ctx.last_checkpoint() }),
    );
    ctx.log(format!(
        "item {index}/{total}: ids 1..={}, resuming after id {resume_after}",
        p.ids
    ));
    let mut processed = 0u64;
    let mut first = None;
    let mut last = None;
    for id in (resume_after + 1..=p.ids).filter(|id| id % total == index) {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(p.step_ms)) => {}
            _ = ctx.cancelled() => {
                return JobResult::fail(format!("cancelled after {processed} ids"));
            }
        }
        // The real work on `id` goes here.
        processed += 1;
        first.get_or_insert(id);
        last = Some(id);
        if processed % p.checkpoint_every == 0 {
            save(&ctx, &journal, id).await;
        }
    }
    if let Some(id) = last.filter(|_| processed % p.checkpoint_every != 0) {
        save(&ctx, &journal, id).await;
    }
    journal.write(
        &ctx,
        "done",
        serde_json::json!({ "processed": processed, "first": first, "last": last }),
    );
    JobResult::success_with(format!(
        "item {index}/{total}: resumed after id {resume_after}, processed {processed} ids"
    ))
}

async fn save(ctx: &JobContext, journal: &Journal, id: u64) {
    let value = format!("id={id}");
    journal.write(ctx, "saving", serde_json::json!({ "value": value }));
    match ctx.checkpoint(value.clone()).await {
        Ok(()) => journal.write(ctx, "checkpoint", serde_json::json!({ "value": value })),
        // A stock XXL-JOB admin has no checkpoints: nothing to save.
        Err(CheckpointError::Unsupported) => {}
        Err(e) => ctx.log(format!("checkpoint {value} not saved: {e}")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    let mut config = ExecutorConfig::from_env()?;
    if let Ok(ms) = std::env::var("RANGE_EXECUTOR_BEAT_MS") {
        let ms: u64 = ms
            .trim()
            .parse()
            .map_err(|_| format!("RANGE_EXECUTOR_BEAT_MS: {ms:?} is not a number"))?;
        config.beat_interval = Duration::from_millis(ms.max(1));
    }
    let journal = Journal::open(std::env::var_os("RANGE_EXECUTOR_JOURNAL").map(PathBuf::from))?;

    let executor = Executor::builder(config)
        .handler("rangeJobHandler", move |ctx| {
            range_job(ctx, journal.clone())
        })
        .build()?;
    let bound = executor.bind().await?;
    // Whoever started this process learns the chosen port from here (port 0 picks a free one).
    println!("listening on http://{}/", bound.local_addr());
    std::io::stdout().flush()?;
    bound.serve(shutdown_signal()).await?;
    Ok(())
}

/// Ctrl+C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
