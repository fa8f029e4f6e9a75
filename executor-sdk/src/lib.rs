//! Shardline executor SDK.
//!
//! A service embeds this crate to receive jobs from a Shardline admin (or a stock XXL-JOB admin):
//! it registers handlers by name, serves the executor protocol over HTTP and reports results.
//!
//! * [`ExecutorConfig`]: identity, admins, listener, limits (in code or from `SHARDLINE_EXECUTOR_*`).
//! * [`Executor::builder`]: register handlers (async closures or [`JobHandler`] values), then
//!   [`Executor::serve`] on its own port, or mount [`Executor::router`] in your axum app and call
//!   [`Executor::start_background`].
//! * [`JobContext`]: what a handler sees (shard, params, logger, cancellation, checkpoints);
//!   [`JobResult`]: what it reports.
//!
//! `examples/demo_executor.rs` is a complete executor to start from.

pub mod admin_client;
pub mod callback;
pub mod config;
mod context;
mod executor;
pub mod protocol;
pub mod registry;
pub mod runlog;
mod script;
mod server;
mod worker;

pub use config::{ConfigError, ExecutorConfig};
pub use context::{CheckpointError, IntoJobResult, JobContext, JobHandler, JobResult};
pub use executor::{Background, BoundExecutor, Executor, ExecutorBuilder, ExecutorError};
