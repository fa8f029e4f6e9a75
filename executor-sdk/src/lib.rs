//! Shardline executor SDK.
//!
//! A service embeds this crate to receive jobs from a Shardline admin (or a stock XXL-JOB admin):
//! it registers handlers by name, serves the executor protocol over HTTP and reports results.

pub mod admin_client;
pub mod callback;
pub mod protocol;
pub mod registry;
pub mod runlog;
