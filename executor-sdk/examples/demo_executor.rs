//! A demo executor to copy from.
//!
//! ```text
//! SHARDLINE_EXECUTOR_PORT=9999 cargo run -p shardline-executor --example demo_executor
//! ```
//!
//! It reads every `SHARDLINE_EXECUTOR_*` variable (see `ExecutorConfig::from_env`), with two demo
//! defaults: appname `shardline-demo` and admin `http://127.0.0.1:8080`. Create an executor group
//! with that appname on the admin, then jobs using the handlers below.

use std::time::Duration;

use shardline_executor::{CheckpointError, Executor, ExecutorConfig, JobResult};

/// Ids the sharding demo spreads over its shards.
const DEMO_IDS: u64 = 1000;
/// The sharding demo saves a checkpoint every this many processed ids.
const CHECKPOINT_EVERY: u64 = 100;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    // Environment first, demo defaults for what is not set.
    let config = ExecutorConfig::from_lookup(|key| {
        std::env::var(key).ok().or_else(|| match key {
            "SHARDLINE_EXECUTOR_APPNAME" => Some("shardline-demo".into()),
            "SHARDLINE_EXECUTOR_ADMIN_ADDRESSES" => Some("http://127.0.0.1:8080".into()),
            _ => None,
        })
    })?;

    let executor = Executor::builder(config)
        // The simplest handler: log and succeed.
        .handler("demoJobHandler", |ctx| async move {
            ctx.log(format!("hello from job {}, param {:?}", ctx.job_id(), ctx.params()));
            JobResult::success_with("demo done")
        })
        // Shard broadcast / fixed items: this shard owns the ids with `id % total == index`.
        .handler("shardingJobHandler", |ctx| async move {
            let index = u64::try_from(ctx.shard_index())?;
            let total = u64::try_from(ctx.shard_total())?;
            // A retry or a takeover resumes after the last saved id instead of starting over.
            let resume_after = ctx
                .last_checkpoint()
                .and_then(|c| c.strip_prefix("id="))
                .and_then(|id| id.parse::<u64>().ok())
                .unwrap_or(0);
            ctx.log(format!("shard {index}/{total}, resuming after id {resume_after}"));
            let mut processed = 0u64;
            for id in (resume_after + 1..=DEMO_IDS).filter(|id| id % total == index) {
                if ctx.is_cancelled() {
                    return Ok(JobResult::fail(format!("cancelled after {processed} ids")));
                }
                processed += 1; // the real work on `id` goes here
                if processed % CHECKPOINT_EVERY == 0 {
                    match ctx.checkpoint(format!("id={id}")).await {
                        // A stock XXL-JOB admin has no checkpoints: nothing to save.
                        Ok(()) | Err(CheckpointError::Unsupported) => {}
                        Err(e) => ctx.log(format!("checkpoint not saved: {e}")),
                    }
                }
            }
            ctx.log(format!("processed {processed} ids"));
            Ok::<_, std::num::TryFromIntError>(JobResult::success_with(format!(
                "shard {index}/{total}: {processed} ids"
            )))
        })
        // Sleeps `param` seconds, and stops early when killed or timed out.
        .handler("sleepJobHandler", |ctx| async move {
            let secs: u64 = ctx.params().trim().parse().unwrap_or(10);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(secs)) => JobResult::success_with(format!("slept {secs} s")),
                _ = ctx.cancelled() => JobResult::fail("cancelled while sleeping"),
            }
        })
        // Always fails, to try alarms and retries.
        .handler("failJobHandler", |ctx| async move {
            let reason = if ctx.params().is_empty() { "failing on purpose" } else { ctx.params() };
            JobResult::fail(reason)
        })
        .build()?;

    executor.serve(shutdown_signal()).await?;
    Ok(())
}

/// Ctrl+C or SIGTERM (what `docker stop` and Kubernetes send).
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
