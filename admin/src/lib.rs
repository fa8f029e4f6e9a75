//! Shardline admin: stores jobs, decides when they fire and on which executors, and records results.

pub mod model;
pub mod sharding;
pub mod store;
pub mod route;
