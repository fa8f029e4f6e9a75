//! The route strategy names, exactly as XXL-JOB writes them in `executor_route_strategy`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::refusal::Refusal;

/// How a trigger picks the executor(s) of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RouteStrategy {
    /// The lowest address.
    First,
    /// The highest address.
    Last,
    /// Per-job round robin.
    Round,
    /// Uniformly at random.
    Random,
    /// XXL-JOB's MD5 ring: a job sticks to one executor while the group is stable.
    ConsistentHash,
    /// The executor this job used least often.
    LeastFrequentlyUsed,
    /// The executor this job used longest ago.
    LeastRecentlyUsed,
    /// The first executor, in address order, that answers `/beat`.
    Failover,
    /// The first executor, in address order, that answers `/idleBeat` (not running the job).
    Busyover,
    /// Every executor, one shard each; the dispatcher fans out, no single choice.
    ShardingBroadcast,
}

impl RouteStrategy {
    /// Every strategy, in XXL-JOB's console order.
    pub const ALL: [RouteStrategy; 10] = [
        RouteStrategy::First,
        RouteStrategy::Last,
        RouteStrategy::Round,
        RouteStrategy::Random,
        RouteStrategy::ConsistentHash,
        RouteStrategy::LeastFrequentlyUsed,
        RouteStrategy::LeastRecentlyUsed,
        RouteStrategy::Failover,
        RouteStrategy::Busyover,
        RouteStrategy::ShardingBroadcast,
    ];

    /// The wire and database name, e.g. `CONSISTENT_HASH`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteStrategy::First => "FIRST",
            RouteStrategy::Last => "LAST",
            RouteStrategy::Round => "ROUND",
            RouteStrategy::Random => "RANDOM",
            RouteStrategy::ConsistentHash => "CONSISTENT_HASH",
            RouteStrategy::LeastFrequentlyUsed => "LEAST_FREQUENTLY_USED",
            RouteStrategy::LeastRecentlyUsed => "LEAST_RECENTLY_USED",
            RouteStrategy::Failover => "FAILOVER",
            RouteStrategy::Busyover => "BUSYOVER",
            RouteStrategy::ShardingBroadcast => "SHARDING_BROADCAST",
        }
    }

    /// Parses an exact wire name (case-sensitive, as XXL-JOB stores them).
    pub fn parse(s: &str) -> Result<Self, UnknownRouteStrategy> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRouteStrategy(s.to_string()))
    }

    /// FAILOVER and BUSYOVER ask executors before choosing; see `Router::choose_probed`.
    pub fn needs_probe(self) -> bool {
        matches!(self, RouteStrategy::Failover | RouteStrategy::Busyover)
    }
}

impl fmt::Display for RouteStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RouteStrategy {
    type Err = UnknownRouteStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A route strategy name that is not one of [`RouteStrategy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRouteStrategy(pub String);

impl From<UnknownRouteStrategy> for Refusal {
    fn from(e: UnknownRouteStrategy) -> Refusal {
        let names: Vec<&str> = RouteStrategy::ALL.iter().map(|r| r.as_str()).collect();
        Refusal::one_of(&e.0, &names)
    }
}

impl fmt::Display for UnknownRouteStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Refusal::from(self.clone()).fmt(f)
    }
}

impl std::error::Error for UnknownRouteStrategy {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_parse_and_serde() {
        for r in RouteStrategy::ALL {
            assert_eq!(RouteStrategy::parse(r.as_str()), Ok(r));
            assert_eq!(r.as_str().parse::<RouteStrategy>(), Ok(r));
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<RouteStrategy>(&json).unwrap(), r);
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = RouteStrategy::parse("round").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown value \"round\"; expected one of: FIRST, LAST, ROUND, RANDOM, \
             CONSISTENT_HASH, LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED, FAILOVER, BUSYOVER, \
             SHARDING_BROADCAST"
        );
    }
}
