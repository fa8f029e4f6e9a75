//! Script (GLUE) jobs: the admin sends the source, the executor writes it to
//! `{log_path}/gluesource/{jobId}_{glueUpdatetime}{suffix}` and runs it with its interpreter as
//! `[interpreter, script, param, shardIndex, shardTotal]`, appending stdout and stderr to the run log.
//!
//! Off unless the executor enables GLUE: a script job is arbitrary code sent over the network.
//! The process gets its own process group, so a kill or a timeout ends the whole tree it started,
//! not only the interpreter.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::context::{JobContext, JobResult};
use crate::protocol::GlueType;
use crate::runlog::RunLogger;

/// After the interpreter exits, how long its output pipes may stay open (held by a process it left
/// in the background) before the run ends without the rest of that output.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// One script version of one job, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct ScriptJob {
    glue_type: GlueType,
    source: String,
    job_id: i64,
    updatetime: i64,
    dir: PathBuf,
}

impl ScriptJob {
    /// `None` when `glue_type` is not a script type.
    pub(crate) fn new(
        glue_type: GlueType,
        source: &str,
        job_id: i64,
        updatetime: i64,
        dir: PathBuf,
    ) -> Option<Self> {
        glue_type.script()?;
        // The admin strips carriage returns from shell sources on save; a source saved elsewhere
        // may still carry them, and bash chokes on `\r`.
        let source = if glue_type == GlueType::GlueShell {
            source.replace("\r\n", "\n")
        } else {
            source.to_string()
        };
        Some(ScriptJob {
            glue_type,
            source,
            job_id,
            updatetime,
            dir,
        })
    }

    fn file_name(&self) -> String {
        let (_, suffix) = self.glue_type.script().unwrap_or(("", ""));
        format!("{}_{}{}", self.job_id, self.updatetime, suffix)
    }

    /// Runs the script for one run; the context's shard values are the ones after maxNode.
    pub(crate) async fn run(self, ctx: JobContext) -> JobResult {
        let Some((interpreter, _)) = self.glue_type.script() else {
            return JobResult::fail(format!("{} is not a script type", self.glue_type.as_str()));
        };
        let logger = ctx.logger().clone();
        let path = match self.materialise(ctx.log_id()).await {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("cannot write the script file: {e}");
                logger.log(&msg);
                return JobResult::fail(msg);
            }
        };
        logger.log(format!("----------- script file: {}", path.display()));

        let mut cmd = Command::new(interpreter);
        cmd.arg(&path)
            .arg(ctx.params())
            .arg(ctx.shard_index().to_string())
            .arg(ctx.shard_total().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let msg =
                    format!("script exit value(-1) is failed: cannot start {interpreter}: {e}");
                logger.log(&msg);
                return JobResult::fail(msg);
            }
        };
        // Kills the process group when this future ends early (kill, timeout, abort).
        let mut group = ProcessGroup(child.id());
        let out = pump(child.stdout.take(), logger.clone());
        let err = pump(child.stderr.take(), logger.clone());
        let output = async { tokio::join!(out, err) };
        tokio::pin!(output);

        // The pipes are read while waiting: a script that fills a pipe buffer would block for ever.
        let mut output_done = false;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                _ = &mut output, if !output_done => output_done = true,
                _ = ctx.cancelled() => {
                    logger.log("----------- script cancelled, killing its process group");
                    return JobResult::fail("script killed");
                }
            }
        };
        // The interpreter has exited (and is reaped): its pid may be reused, so never signal it now.
        group.0 = None;
        // Output written just before exit may still be in the pipes: read it before reporting.
        if !output_done
            && tokio::time::timeout(OUTPUT_DRAIN, &mut output)
                .await
                .is_err()
        {
            logger.log(
                "----------- script left a process holding its output open; not waiting for it",
            );
        }
        match status {
            Ok(s) if s.success() => JobResult::success(),
            Ok(s) => {
                let code = s.code().unwrap_or(-1);
                JobResult::fail(format!("script exit value({code}) is failed"))
            }
            Err(e) => JobResult::fail(format!("script exit value(-1) is failed: {e}")),
        }
    }

    /// Writes the source (atomically, two runs of one version may race) and deletes the job's
    /// older versions.
    async fn materialise(&self, log_id: i64) -> std::io::Result<PathBuf> {
        tokio::fs::create_dir_all(&self.dir).await?;
        let name = self.file_name();
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!("{name}.tmp-{log_id}"));
        tokio::fs::write(&tmp, self.source.as_bytes()).await?;
        tokio::fs::rename(&tmp, &path).await?;
        remove_old_versions(&self.dir, self.job_id, &name).await;
        Ok(path)
    }
}

async fn remove_old_versions(dir: &Path, job_id: i64, keep: &str) {
    let prefix = format!("{job_id}_");
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&prefix) && name != keep && !name.contains(".tmp-") {
            if let Err(e) = tokio::fs::remove_file(entry.path()).await {
                tracing::debug!(file = name, error = %e, "cannot remove an old script version");
            }
        }
    }
}

/// Streams a pipe into the run log as the bytes arrive.
async fn pump(pipe: Option<impl AsyncRead + Unpin>, logger: RunLogger) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => logger.append_raw(&buf[..n]),
        }
    }
}

/// Kills the script's whole process group when dropped (a no-op once the group is gone).
struct ProcessGroup(Option<u32>);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.and_then(|p| libc::pid_t::try_from(p).ok()) {
            // SAFETY: killpg only sends a signal; the group id is the child's pid because the
            // child was started with `process_group(0)`.
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
            }
        }
    }
}
