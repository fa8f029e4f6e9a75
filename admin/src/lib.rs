//! Shardline admin: stores jobs, decides when they fire and on which executors, and records results.

// The OpenAPI document is one large `json!` literal.
#![recursion_limit = "512"]

pub mod alarm;
pub mod api;
pub mod app;
pub mod auth;
pub mod beats;
pub mod coded;
pub mod config;
pub mod console;
pub mod cron;
pub mod demo;
pub mod executor_http;
pub mod jobcache;
pub mod metrics;
pub mod model;
pub mod monitor;
pub mod note;
pub mod refusal;
pub mod results;
pub mod route;
pub mod schedule;
pub mod scheduler;
pub mod sharding;
pub mod store;
pub mod trigger;
