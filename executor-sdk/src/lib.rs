//! Shardline executor SDK.
//!
//! A service embeds this crate to receive jobs from a Shardline admin (or a stock XXL-JOB admin):
//! it registers handlers by name, serves the executor protocol over HTTP and reports results.

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
