//! Shardline admin: stores jobs, decides when they fire and on which executors, and records results.

pub mod api;
pub mod auth;
pub mod callbacks;
pub mod config;
pub mod metrics;
pub mod model;
pub mod route;
pub mod sharding;
pub mod store;
pub mod trigger;
