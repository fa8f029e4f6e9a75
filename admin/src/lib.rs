//! Shardline admin: stores jobs, decides when they fire and on which executors, and records results.

pub mod sharding;
