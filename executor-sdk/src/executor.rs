//! The executor: handlers + configuration, served on its own port ([`Executor::serve`]) or mounted
//! inside the service's own axum app ([`Executor::router`] + [`Executor::start_background`]).
//!
//! Start order follows XXL-JOB: logs, callback pipeline, listener, then the registry loop (only
//! once the port is bound, so the admin never calls an address that is not listening yet). Stop
//! order is the reverse: stop accepting, deregister, let running jobs finish for a grace period and
//! kill the rest, then deliver (or spool) every result.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin_client::AdminClient;
use crate::callback::{self, CallbackConfig, CallbackHandle};
use crate::config::{ConfigError, ExecutorConfig};
use crate::context::{boxed, Handlers, IntoJobResult, JobContext, JobHandler, JobResult};
use crate::protocol::{parse_max_node, ExecutorMeta, GlueType, RegistryRequest, TriggerRequest};
use crate::registry;
use crate::runlog::RunLogs;
use crate::script::ScriptJob;
use crate::worker::{HandlerKey, RunEnv, Runner, Workers};

/// Folder (under the log path) of materialised scripts.
const GLUE_SOURCE_DIR: &str = "gluesource";
/// Folder (under the log path) of callbacks spooled while no admin was reachable.
const CALLBACK_SPOOL_DIR: &str = "callbacklogs";
/// Results per callback request (XXL-JOB 3.4.1+).
const CALLBACK_BATCH_MAX: usize = 50;

/// Why an executor could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Two handlers share a name, or a name is blank.
    #[error("invalid handler registration: {0}")]
    Handler(String),
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
    /// `serve`/`start_background` was called twice on one executor.
    #[error("the executor is already started")]
    AlreadyStarted,
    /// Started outside a Tokio runtime.
    #[error("the executor must be started inside a Tokio runtime")]
    NoRuntime,
}

/// Collects the configuration and the handlers of an executor.
pub struct ExecutorBuilder {
    config: ExecutorConfig,
    handlers: Handlers,
    errors: Vec<String>,
    client: Option<reqwest::Client>,
}

impl ExecutorBuilder {
    /// Registers an async closure under `name` (the job's `executorHandler` on the admin).
    ///
    /// The closure may return a [`JobResult`], `()` or a `Result` whose error fails the run.
    pub fn handler<F, Fut, R>(self, name: &str, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoJobResult,
    {
        self.job_handler(name, f)
    }

    /// Registers a [`JobHandler`] value under `name`.
    pub fn job_handler<H: JobHandler>(mut self, name: &str, handler: H) -> Self {
        if let Err(e) = self.handlers.insert(name, boxed(handler)) {
            self.errors.push(e);
        }
        self
    }

    /// Uses the service's own `reqwest::Client` (one keep-alive pool for the process).
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Validates everything and creates the log folder; nothing runs until the executor starts.
    pub fn build(self) -> Result<Executor, ExecutorError> {
        self.config.validate()?;
        if !self.errors.is_empty() {
            return Err(ExecutorError::Handler(self.errors.join("; ")));
        }
        let config = self.config;
        let client = match self.client {
            Some(c) => c,
            None => reqwest::Client::builder()
                .build()
                .map_err(|e| ExecutorError::HttpClient(e.to_string()))?,
        };
        let logs =
            RunLogs::new(config.log_path.clone(), config.log_retention_days).map_err(|source| {
                ExecutorError::Io {
                    context: "cannot open the run log folder".to_string(),
                    source,
                }
            })?;
        let admin = AdminClient::new(
            client,
            config.admin_addresses.clone(),
            config.access_token.clone(),
            config.admin_timeout,
        )
        .with_appname(config.appname.clone());
        let workers = Workers::new(RunEnv {
            logs: logs.clone(),
            admin: admin.clone(),
            kill_grace: config.kill_grace,
            idle_timeout: config.worker_idle_timeout,
            slots: config
                .max_concurrent_runs
                .map(|n| (n, Arc::new(tokio::sync::Semaphore::new(n)))),
        });
        Ok(Executor {
            inner: Arc::new(Inner {
                config,
                handlers: self.handlers,
                workers,
                logs,
                admin,
            }),
        })
    }
}

/// What the HTTP routes and the lifecycle share.
pub(crate) struct Inner {
    pub(crate) config: ExecutorConfig,
    handlers: Handlers,
    pub(crate) workers: Workers,
    pub(crate) logs: RunLogs,
    admin: AdminClient,
}

impl Inner {
    /// `/run`: resolves the handler, applies maxNode, and queues the run. `Err` is the message of
    /// the refusal the admin records as a failed trigger.
    pub(crate) fn run(&self, mut req: TriggerRequest) -> Result<(), String> {
        if !self.workers.is_started() {
            return Err("executor is not started (call serve or start_background)".to_string());
        }
        // Some admins (ratch-job) send 0 of 0 for a fire that is not sharded; Java executors take
        // it without complaint, so it means "one shard" here too.
        if req.broadcast_total == 0 && req.broadcast_index == 0 {
            req.broadcast_total = 1;
        }
        if req.broadcast_total < 1
            || req.broadcast_index < 0
            || req.broadcast_index >= req.broadcast_total
        {
            return Err(format!(
                "invalid shard: broadcastIndex {} of broadcastTotal {}",
                req.broadcast_index, req.broadcast_total
            ));
        }
        let Some(glue) = GlueType::parse(&req.glue_type) else {
            return Err(format!("glueType[{}] is not valid.", req.glue_type));
        };
        let (key, runner) = match glue {
            GlueType::Bean => {
                let name = req.executor_handler.as_str();
                let Some(handler) = self.handlers.get(name) else {
                    return Err(format!("job handler [{name}] not found."));
                };
                (HandlerKey::Bean(name.to_string()), Runner::Bean(handler))
            }
            GlueType::GlueGroovy => {
                return Err("GLUE_GROOVY is not supported by this executor".to_string())
            }
            script => {
                if !self.config.glue_enabled {
                    return Err(format!(
                        "fail, current glue type [{}] not supported.",
                        script.as_str()
                    ));
                }
                let dir = self.config.log_path.join(GLUE_SOURCE_DIR);
                let Some(job) = ScriptJob::new(
                    script,
                    &req.glue_source,
                    req.job_id,
                    req.glue_updatetime,
                    dir,
                ) else {
                    return Err(format!("glueType[{}] is not valid.", req.glue_type));
                };
                (
                    HandlerKey::Script(script, req.glue_updatetime),
                    Runner::Script(job),
                )
            }
        };
        // maxNode: shards past M succeed at once without running; the others see M as the total.
        let shard_total = match parse_max_node(&req.executor_params, req.broadcast_total) {
            Ok(None) => req.broadcast_total,
            Ok(Some(m)) if req.broadcast_index >= m => {
                self.workers.finish_at_once(
                    &req,
                    JobResult::success_with(format!("skipped, maxNode={m}")),
                );
                return Ok(());
            }
            Ok(Some(m)) => m,
            Err(e) => {
                self.workers.finish_at_once(&req, JobResult::fail(e));
                return Ok(());
            }
        };
        self.workers.trigger(req, key, runner, shard_total)
    }
}

/// An executor: its handlers and configuration. Cheap to clone.
///
/// ```no_run
/// use shardline_executor::{Executor, ExecutorConfig, JobResult};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let config = ExecutorConfig::new("billing", vec!["http://127.0.0.1:8080".into()]);
/// let executor = Executor::builder(config)
///     .handler("reconcile", |ctx| async move {
///         ctx.log(format!("shard {}/{}", ctx.shard_index(), ctx.shard_total()));
///         JobResult::success()
///     })
///     .build()?;
/// executor.serve(async { tokio::signal::ctrl_c().await.ok(); }).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl Executor {
    /// Starts building an executor.
    pub fn builder(config: ExecutorConfig) -> ExecutorBuilder {
        ExecutorBuilder {
            config,
            handlers: Handlers::default(),
            errors: Vec::new(),
            client: None,
        }
    }

    /// The configuration the executor was built with.
    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// The executor routes (`/beat`, `/idleBeat`, `/run`, `/trigger`, `/kill`, `/log`) at the
    /// root of a router, to merge into the service's app or `nest` under a prefix. Pair it with
    /// [`start_background`](Self::start_background), which registers the address.
    pub fn router(&self) -> axum::Router {
        crate::server::router(Arc::clone(&self.inner))
    }

    /// Binds the configured listen address (port 0 picks a free port; see
    /// [`BoundExecutor::local_addr`]).
    pub async fn bind(&self) -> Result<BoundExecutor, ExecutorError> {
        let bind = self.inner.config.bind;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| ExecutorError::Io {
                context: format!("cannot listen on {bind}"),
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| ExecutorError::Io {
            context: "cannot read the bound address".to_string(),
            source,
        })?;
        Ok(BoundExecutor {
            executor: self.clone(),
            listener,
            local_addr,
        })
    }

    /// Binds, starts, and serves until `shutdown` completes, then shuts down gracefully.
    pub async fn serve(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ExecutorError> {
        self.bind().await?.serve(shutdown).await
    }

    /// Starts the registry loop, the callback pipeline and the log clean-up without a listener of
    /// its own, for a [`router`](Self::router) mounted in the service's app listening on `port`
    /// under `path_prefix` (`""` at the root, or for example `"/xxl-job"`). The registered address
    /// is the configured `address` when set, else `http://{ip}:{port}{path_prefix}/`.
    pub fn start_background(
        &self,
        port: u16,
        path_prefix: &str,
    ) -> Result<Background, ExecutorError> {
        let cfg = &self.inner.config;
        let address = match &cfg.address {
            Some(explicit) => registry::detect_address(Some(explicit), None, port),
            None => {
                let base = registry::detect_address(None, cfg.ip.as_deref(), port);
                with_prefix(&base, path_prefix)
            }
        };
        self.start(address)
    }

    fn start(&self, address: String) -> Result<Background, ExecutorError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ExecutorError::NoRuntime);
        }
        // Every registered address passes here, including those built from `ip` and a mount
        // prefix, which the configuration's check cannot measure.
        crate::config::check_registered_len(&address)?;
        let inner = &self.inner;
        let cfg = &inner.config;
        if inner.workers.is_started() {
            return Err(ExecutorError::AlreadyStarted);
        }
        let (sender, callbacks) = callback::start(
            CallbackConfig {
                generation: cfg.generation,
                spool_dir: cfg.log_path.join(CALLBACK_SPOOL_DIR),
                batch_max: CALLBACK_BATCH_MAX,
                retry_interval: cfg.callback_retry_interval,
            },
            inner.admin.clone(),
            inner.logs.clone(),
        );
        if !inner.workers.set_callbacks(sender) {
            // Lost a race with a concurrent start: stop the pipeline just created.
            tokio::spawn(callbacks.shutdown());
            return Err(ExecutorError::AlreadyStarted);
        }
        let cleanup_stop = CancellationToken::new();
        let cleanup = inner.logs.spawn_cleanup(cleanup_stop.clone());
        let mut request = RegistryRequest::executor(cfg.appname.clone(), address.clone());
        // This executor serves the batch route, so every admin that reads the metadata may use it.
        request.meta = Some(ExecutorMeta {
            run_batch: true,
            ..cfg.meta.clone()
        });
        let registry_stop = CancellationToken::new();
        let registry = registry::spawn(
            inner.admin.clone(),
            request,
            cfg.beat_interval,
            registry_stop.clone(),
        );
        tracing::info!(appname = %cfg.appname, address = %address, "executor started");
        Ok(Background {
            executor: self.clone(),
            address,
            registry,
            registry_stop,
            callbacks,
            cleanup,
            cleanup_stop,
        })
    }
}

/// Joins a registered base address (`http://ip:port/`) and a mount prefix.
fn with_prefix(base: &str, prefix: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        base.to_string()
    } else {
        format!("{base}{prefix}/")
    }
}

/// An executor whose listener is bound but not yet serving.
pub struct BoundExecutor {
    executor: Executor,
    listener: TcpListener,
    local_addr: SocketAddr,
}

impl BoundExecutor {
    /// The address actually bound (the real port when the configuration asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Starts the background tasks and serves until `shutdown` completes, then stops accepting,
    /// deregisters, gives running jobs the configured grace, kills the rest and delivers (or
    /// spools) every result.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ExecutorError> {
        let cfg = self.executor.config();
        let address = match (&cfg.address, &cfg.ip) {
            (Some(explicit), _) => {
                registry::detect_address(Some(explicit), None, self.local_addr.port())
            }
            (None, Some(ip)) => registry::detect_address(None, Some(ip), self.local_addr.port()),
            // Listening on one specific interface: that is the address the admin can reach.
            (None, None) if !self.local_addr.ip().is_unspecified() => registry::detect_address(
                None,
                Some(&self.local_addr.ip().to_string()),
                self.local_addr.port(),
            ),
            (None, None) => registry::detect_address(None, None, self.local_addr.port()),
        };
        let background = self.executor.start(address)?;
        let app = self.executor.router();
        let served = axum::serve(self.listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
        background.shutdown().await;
        served.map_err(|source| ExecutorError::Io {
            context: "the executor server failed".to_string(),
            source,
        })
    }
}

/// The running background tasks of a started executor.
pub struct Background {
    executor: Executor,
    address: String,
    registry: JoinHandle<()>,
    registry_stop: CancellationToken,
    callbacks: CallbackHandle,
    cleanup: JoinHandle<()>,
    cleanup_stop: CancellationToken,
}

impl Background {
    /// The address registered with the admin.
    pub fn registered_address(&self) -> &str {
        &self.address
    }

    /// Deregisters, lets running jobs finish for the configured grace, kills the rest, and
    /// delivers or spools every result. Stop serving the router before calling it.
    pub async fn shutdown(self) {
        self.registry_stop.cancel();
        if let Err(e) = self.registry.await {
            tracing::error!(error = %e, "registry task failed");
        }
        let grace = self.executor.config().shutdown_grace;
        self.executor.inner.workers.shutdown(grace).await;
        self.callbacks.shutdown().await;
        self.cleanup_stop.cancel();
        if let Err(e) = self.cleanup.await {
            tracing::error!(error = %e, "log clean-up task failed");
        }
        tracing::info!(appname = %self.executor.config().appname, "executor stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_joins_cleanly() {
        assert_eq!(with_prefix("http://h:1/", ""), "http://h:1/");
        assert_eq!(with_prefix("http://h:1/", "/"), "http://h:1/");
        assert_eq!(with_prefix("http://h:1/", "/xxl/"), "http://h:1/xxl/");
        assert_eq!(with_prefix("http://h:1/", "a/b"), "http://h:1/a/b/");
    }

    #[tokio::test]
    async fn a_registered_address_too_long_for_the_admin_fails_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ExecutorConfig::new("app", vec!["http://127.0.0.1:1".into()]);
        cfg.log_path = dir.path().to_path_buf();
        cfg.ip = Some("h".repeat(210));
        let executor = Executor::builder(cfg).build().unwrap();
        // http://{210 characters}:9999/ is 223 characters; a mount prefix of 40 and its '/' make 264.
        let err = executor
            .start_background(9999, &"p".repeat(40))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("at most 255 characters, got 264"),
            "{err}"
        );
        // The same executor starts with an address that fits.
        let started = executor.start_background(9999, "/xxl-job").unwrap();
        assert!(started.registered_address().ends_with("/xxl-job/"));
        started.shutdown().await;
    }

    #[test]
    fn duplicate_handlers_fail_the_build() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ExecutorConfig::new("app", vec!["http://127.0.0.1:1".into()]);
        cfg.log_path = dir.path().to_path_buf();
        let err = Executor::builder(cfg)
            .handler("a", |_ctx| async {})
            .handler("a", |_ctx| async {})
            .build()
            .err()
            .unwrap();
        assert!(err.to_string().contains("registered twice"), "{err}");
    }
}
