//! What a job handler sees and returns: [`JobContext`], [`JobResult`], and the [`JobHandler`]
//! trait (implemented by async closures too), plus the crate's name → handler table.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::admin_client::AdminClient;
use crate::protocol::{
    CheckpointRequest, TriggerRequest, CODE_FAIL, CODE_SUCCESS, CODE_TIMEOUT, MAX_CHECKPOINT_BYTES,
};
use crate::runlog::RunLogger;

/// Route (under the admin's `/api/`) of the checkpoint extension.
const CHECKPOINT_URI: &str = "shardline/checkpoint";

/// The outcome of one run: a `handleCode` (200 success, 500 failure, 502 timeout, or a custom
/// code) and a message shown in the admin's run log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    code: i32,
    msg: String,
}

impl JobResult {
    /// Success without a message.
    pub fn success() -> Self {
        JobResult {
            code: CODE_SUCCESS,
            msg: String::new(),
        }
    }

    /// Success with a message.
    pub fn success_with(msg: impl Into<String>) -> Self {
        JobResult {
            code: CODE_SUCCESS,
            msg: msg.into(),
        }
    }

    /// Failure (code 500) with a message.
    pub fn fail(msg: impl Into<String>) -> Self {
        JobResult {
            code: CODE_FAIL,
            msg: msg.into(),
        }
    }

    /// Timeout (code 502) with a message.
    pub fn timeout(msg: impl Into<String>) -> Self {
        JobResult {
            code: CODE_TIMEOUT,
            msg: msg.into(),
        }
    }

    /// A custom code; anything but 200 counts as a failure on the admin. Codes ≤ 0 mean "no
    /// result" to an XXL-JOB admin, so the executor reports them as failures (500).
    pub fn with_code(code: i32, msg: impl Into<String>) -> Self {
        JobResult {
            code,
            msg: msg.into(),
        }
    }

    /// The `handleCode` reported to the admin.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The `handleMsg` reported to the admin.
    pub fn msg(&self) -> &str {
        &self.msg
    }

    /// Whether the run succeeded (code 200).
    pub fn is_success(&self) -> bool {
        self.code == CODE_SUCCESS
    }
}

/// Values a handler closure may return: a [`JobResult`], `()` (success), or a `Result` whose error
/// becomes a failure with the error's text (so `?` works inside handlers).
pub trait IntoJobResult {
    /// Converts into the reported result.
    fn into_job_result(self) -> JobResult;
}

impl IntoJobResult for JobResult {
    fn into_job_result(self) -> JobResult {
        self
    }
}

impl IntoJobResult for () {
    fn into_job_result(self) -> JobResult {
        JobResult::success()
    }
}

impl<T: IntoJobResult, E: fmt::Display> IntoJobResult for Result<T, E> {
    fn into_job_result(self) -> JobResult {
        match self {
            Ok(v) => v.into_job_result(),
            // `{:#}` prints the whole cause chain of an `anyhow::Error`, and plain text otherwise.
            Err(e) => JobResult::fail(format!("{e:#}")),
        }
    }
}

/// A job handler registered by name. Async closures `|ctx| async move { ... }` implement it; so
/// can your own types:
///
/// ```
/// use shardline_executor::{JobContext, JobHandler, JobResult};
///
/// struct Cleanup;
///
/// impl JobHandler for Cleanup {
///     async fn execute(&self, ctx: JobContext) -> JobResult {
///         ctx.log("cleaning up");
///         JobResult::success()
///     }
/// }
/// ```
pub trait JobHandler: Send + Sync + 'static {
    /// Runs one job. Watch [`JobContext::cancelled`] in long loops: a kill, a timeout or a cover
    /// cancels it, and the handler is aborted when it does not return within the grace period.
    fn execute(&self, ctx: JobContext) -> impl Future<Output = JobResult> + Send;
}

impl<F, Fut, R> JobHandler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoJobResult,
{
    fn execute(&self, ctx: JobContext) -> impl Future<Output = JobResult> + Send {
        let fut = self(ctx);
        async move { fut.await.into_job_result() }
    }
}

/// A future returned by a type-erased handler.
pub(crate) type BoxRun = Pin<Box<dyn Future<Output = JobResult> + Send + 'static>>;
/// A type-erased handler: what workers call.
pub(crate) type BoxHandler = Arc<dyn Fn(JobContext) -> BoxRun + Send + Sync>;

/// Erases a handler's type so handlers of different types share one table.
pub(crate) fn boxed<H: JobHandler>(handler: H) -> BoxHandler {
    let handler = Arc::new(handler);
    Arc::new(move |ctx| {
        let handler = Arc::clone(&handler);
        Box::pin(async move { handler.execute(ctx).await })
    })
}

/// The handlers of an executor, by name.
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    by_name: HashMap<String, BoxHandler>,
}

impl Handlers {
    /// Adds a handler; a blank or duplicate name is a programming error reported by the builder.
    pub(crate) fn insert(&mut self, name: &str, handler: BoxHandler) -> Result<(), String> {
        if name.trim().is_empty() || name.trim() != name {
            return Err(format!(
                "handler name {name:?} is blank or has surrounding spaces"
            ));
        }
        if self.by_name.contains_key(name) {
            return Err(format!("handler name {name:?} is registered twice"));
        }
        self.by_name.insert(name.to_string(), handler);
        Ok(())
    }

    pub(crate) fn get(&self, name: &str) -> Option<BoxHandler> {
        self.by_name.get(name).cloned()
    }
}

/// Why a checkpoint was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The run came from an admin without the checkpoint extension (a stock XXL-JOB admin).
    #[error("checkpoints are not supported by the admin that sent this run")]
    Unsupported,
    /// The value is larger than [`MAX_CHECKPOINT_BYTES`].
    #[error("checkpoint of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Size of the refused value.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// No admin stored it (unreachable or refused).
    #[error("checkpoint not saved: {0}")]
    Admin(String),
}

/// Everything a handler knows about the run it executes. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<ContextInner>,
    cancel: CancellationToken,
}

struct ContextInner {
    job_id: i64,
    log_id: i64,
    log_date_time: i64,
    params: String,
    shard_index: i32,
    shard_total: i32,
    item_param: Option<String>,
    idempotency_key: Option<String>,
    last_checkpoint: Option<String>,
    logger: RunLogger,
    admin: AdminClient,
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("job_id", &self.inner.job_id)
            .field("log_id", &self.inner.log_id)
            .field("shard_index", &self.inner.shard_index)
            .field("shard_total", &self.inner.shard_total)
            .finish_non_exhaustive()
    }
}

impl JobContext {
    /// Builds the context of one run; `shard_total` is the total after the maxNode rewrite.
    pub(crate) fn new(
        req: &TriggerRequest,
        shard_total: i32,
        logger: RunLogger,
        admin: AdminClient,
        cancel: CancellationToken,
    ) -> Self {
        JobContext {
            inner: Arc::new(ContextInner {
                job_id: req.job_id,
                log_id: req.log_id,
                log_date_time: req.log_date_time,
                params: req.executor_params.clone(),
                shard_index: req.broadcast_index,
                shard_total,
                item_param: req.item_param.clone(),
                idempotency_key: req.idempotency_key.clone(),
                last_checkpoint: req.checkpoint.clone(),
                logger,
                admin,
            }),
            cancel,
        }
    }

    /// The job's id on the admin.
    pub fn job_id(&self) -> i64 {
        self.inner.job_id
    }

    /// The run's id on the admin (XXL-JOB's log id).
    pub fn log_id(&self) -> i64 {
        self.inner.log_id
    }

    /// Trigger time in epoch milliseconds (names the run log's day folder).
    pub fn log_date_time(&self) -> i64 {
        self.inner.log_date_time
    }

    /// The job parameter, as typed on the admin.
    pub fn params(&self) -> &str {
        &self.inner.params
    }

    /// This run's shard index (0-based); process the rows with `id % shard_total == shard_index`.
    pub fn shard_index(&self) -> i32 {
        self.inner.shard_index
    }

    /// Number of shards of the fire (after the `maxNode` rule).
    pub fn shard_total(&self) -> i32 {
        self.inner.shard_total
    }

    /// The item parameter of this shard item (`0=a,1=b` gives `a` to item 0), when the admin sent one.
    pub fn item_param(&self) -> Option<&str> {
        self.inner.item_param.as_deref()
    }

    /// Stable key of (job, fire, item) for deduplicating side effects, when the admin sent one.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.inner.idempotency_key.as_deref()
    }

    /// The last checkpoint saved for this job item, handed over by the admin.
    pub fn last_checkpoint(&self) -> Option<&str> {
        self.inner.last_checkpoint.as_deref()
    }

    /// Appends a line to this run's log (readable from the admin while the run goes on).
    pub fn log(&self, line: impl AsRef<str>) {
        self.inner.logger.log(line);
    }

    /// The run's logger, for handing to other tasks.
    pub fn logger(&self) -> &RunLogger {
        &self.inner.logger
    }

    /// The cancellation signal (kill, timeout, cover); clone it into spawned sub-tasks.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the run is cancelled; use it in `tokio::select!` next to the work.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Saves progress for this job item on the admin, so a retry or a takeover resumes from it
    /// (see [`last_checkpoint`](Self::last_checkpoint)).
    ///
    /// Only runs sent by a Shardline admin support it; a stock XXL-JOB admin never receives the
    /// call and [`CheckpointError::Unsupported`] is returned.
    pub async fn checkpoint(&self, value: impl Into<String>) -> Result<(), CheckpointError> {
        let value = value.into();
        let inner = &self.inner;
        let from_shardline = inner.idempotency_key.is_some()
            || inner.last_checkpoint.is_some()
            || inner.item_param.is_some();
        if !from_shardline {
            return Err(CheckpointError::Unsupported);
        }
        if value.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge {
                size: value.len(),
                max: MAX_CHECKPOINT_BYTES,
            });
        }
        let body = CheckpointRequest {
            log_id: inner.log_id,
            value,
        };
        match inner.admin.call(CHECKPOINT_URI, &body).await {
            Ok(env) if env.is_success() => Ok(()),
            Ok(env) => Err(CheckpointError::Admin(format!(
                "admin answered code {}: {}",
                env.code,
                env.msg.unwrap_or_default()
            ))),
            Err(e) => Err(CheckpointError::Admin(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_convert() {
        assert_eq!(().into_job_result(), JobResult::success());
        let r: Result<(), String> = Err("disk full".into());
        assert_eq!(r.into_job_result(), JobResult::fail("disk full"));
        let r: Result<JobResult, anyhow::Error> = Ok(JobResult::with_code(409, "conflict"));
        assert_eq!(r.into_job_result().code(), 409);
        let e = anyhow::anyhow!("root").context("outer");
        let r: Result<(), anyhow::Error> = Err(e);
        assert_eq!(r.into_job_result().msg(), "outer: root");
    }

    #[test]
    fn handler_names_are_checked() {
        let mut h = Handlers::default();
        let f = boxed(|_ctx: JobContext| async {});
        assert!(h.insert("a", f.clone()).is_ok());
        assert!(h.insert("a", f.clone()).unwrap_err().contains("twice"));
        assert!(h.insert(" ", f.clone()).is_err());
        assert!(h.insert(" b", f).is_err());
        assert!(h.get("a").is_some() && h.get("b").is_none());
    }
}
