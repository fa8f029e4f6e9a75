//! Fixed-item sharding: which online executor runs which of a job's `N` items.
//!
//! Everything here is pure: no I/O, no clock, no randomness. The dispatcher hands in the online
//! executors **sorted by address, ascending** (the same order broadcast uses for shard indexes)
//! and gets back, for each executor position, the sorted items it runs.
//!
//! ElasticJob sorts its instance ids *descending* before calling a strategy; Shardline's order is
//! ascending. AVERAGE, ODEVITY and ROTATE are byte-exact ports of ElasticJob's algorithms applied to
//! whatever order they are given, so the same ordered list gives the same answer as ElasticJob,
//! and our ascending list gives the "first address gets items 0.." assignment users are promised
//! (`docs/architecture.md`, "Plan").
//!
//! Also here: strict parsing of item parameters (`0=a,1=b`) and the choice of executors for a
//! broadcast limited by `maxNode`.

mod affinity;
mod average;
mod broadcast;
mod java;
mod odevity;
mod params;
mod rotate;
mod weighted;

pub use affinity::Affinity;
pub use average::Average;
pub use broadcast::select_broadcast_targets;
pub use odevity::Odevity;
pub use params::{ItemParamError, ItemParams};
pub use rotate::Rotate;
pub use weighted::Weighted;

use std::fmt;

use crate::refusal::Refusal;

/// One online executor as the strategies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardExecutor {
    /// The executor's address, e.g. `http://10.0.0.7:9999/`.
    pub address: String,
    /// Relative capacity for WEIGHTED; at least 1 (a 0 is read as 1 so it never starves).
    pub weight: u32,
    /// Labels matched against item parameters by AFFINITY (e.g. `shanghai`).
    pub labels: Vec<String>,
}

impl ShardExecutor {
    /// An executor with weight 1 and no labels.
    pub fn new(address: impl Into<String>) -> Self {
        ShardExecutor {
            address: address.into(),
            weight: 1,
            labels: Vec::new(),
        }
    }
}

/// Items per executor: `per_executor()[i]` are the items of the executor at position `i` of the
/// list the strategy was given, ascending. With at least one executor every item `0..n` appears
/// exactly once; with none the assignment is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    items: Vec<Vec<u32>>,
}

impl Assignment {
    /// Builds an assignment, sorting each executor's items.
    fn from_lists(mut items: Vec<Vec<u32>>) -> Self {
        for list in &mut items {
            list.sort_unstable();
        }
        Assignment { items }
    }

    /// The items of the executor at `position`; empty for a position out of range.
    pub fn items_of(&self, position: usize) -> &[u32] {
        self.items.get(position).map_or(&[], Vec::as_slice)
    }

    /// One sorted item list per executor, in the order the executors were given.
    pub fn per_executor(&self) -> &[Vec<u32>] {
        &self.items
    }

    /// The position of the executor that runs `item`, if any.
    pub fn owner_of(&self, item: u32) -> Option<usize> {
        self.items
            .iter()
            .position(|list| list.binary_search(&item).is_ok())
    }

    /// How many items are assigned in total.
    pub fn item_count(&self) -> usize {
        self.items.iter().map(Vec::len).sum()
    }
}

/// A way of assigning items `0..n` to an ordered list of executors.
///
/// Implementations must be deterministic (same input, same answer) and assign every item exactly
/// once when `executors` is not empty. Adding a strategy is adding a file with an implementation
/// and one line in [`STRATEGIES`].
pub trait ShardingStrategy: Send + Sync {
    /// The configuration name, e.g. `AVERAGE`.
    fn name(&self) -> &'static str;

    /// Assigns items `0..n` to `executors` (ascending by address) for the job `job_name`.
    fn assign(
        &self,
        executors: &[ShardExecutor],
        job_name: &str,
        n: u32,
        params: &ItemParams,
    ) -> Assignment;
}

/// Every strategy, the default (AVERAGE) first.
const STRATEGIES: &[&dyn ShardingStrategy] = &[&Average, &Odevity, &Rotate, &Weighted, &Affinity];

/// ElasticJob's names for the same algorithms, accepted so its users' configuration reads as-is.
const ALIASES: &[(&str, &str)] = &[("AVG_ALLOCATION", "AVERAGE"), ("ROUND_ROBIN", "ROTATE")];

/// The strategy used when a job names none.
pub fn default_strategy() -> &'static dyn ShardingStrategy {
    STRATEGIES[0]
}

/// The canonical names of all strategies, in a stable order.
pub fn strategy_names() -> impl Iterator<Item = &'static str> {
    STRATEGIES.iter().map(|s| s.name())
}

/// Looks a strategy up by name, ignoring ASCII case and surrounding blanks. An empty name means
/// the default (AVERAGE), as a missing strategy does in ElasticJob; ElasticJob's `AVG_ALLOCATION`
/// and `ROUND_ROBIN` are accepted for AVERAGE and ROTATE.
pub fn parse_strategy(name: &str) -> Result<&'static dyn ShardingStrategy, UnknownStrategy> {
    let wanted = name.trim();
    if wanted.is_empty() {
        return Ok(default_strategy());
    }
    let canonical = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(wanted))
        .map_or(wanted, |(_, target)| target);
    STRATEGIES
        .iter()
        .copied()
        .find(|s| s.name().eq_ignore_ascii_case(canonical))
        .ok_or_else(|| UnknownStrategy(name.to_string()))
}

/// A sharding strategy name that [`parse_strategy`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownStrategy(pub String);

impl From<UnknownStrategy> for Refusal {
    fn from(e: UnknownStrategy) -> Refusal {
        let names: Vec<&str> = strategy_names().collect();
        Refusal::one_of(&e.0, &names)
    }
}

impl fmt::Display for UnknownStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Refusal::from(self.clone()).fmt(f)
    }
}

impl std::error::Error for UnknownStrategy {}

/// Applies `inner` to `executors` seen in the order `order` (a permutation of positions) and maps
/// the answer back to the caller's positions. ODEVITY and ROTATE are AVERAGE over a reordering.
fn assign_in_order(order: &[usize], n: u32) -> Assignment {
    let blocks = average::blocks(order.len(), n);
    let mut items = vec![Vec::new(); order.len()];
    for (slot, list) in blocks.into_iter().enumerate() {
        items[order[slot]] = list;
    }
    Assignment::from_lists(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_names_aliases_and_empty() {
        assert_eq!(parse_strategy("AVERAGE").unwrap().name(), "AVERAGE");
        assert_eq!(parse_strategy(" weighted ").unwrap().name(), "WEIGHTED");
        assert_eq!(parse_strategy("").unwrap().name(), "AVERAGE");
        assert_eq!(parse_strategy("AVG_ALLOCATION").unwrap().name(), "AVERAGE");
        assert_eq!(parse_strategy("round_robin").unwrap().name(), "ROTATE");
        for name in strategy_names() {
            assert_eq!(parse_strategy(name).unwrap().name(), name);
        }
    }

    #[test]
    fn parse_error_lists_the_valid_names() {
        let err = parse_strategy("SINGLE_SHARDING_BALANCE").err().unwrap();
        assert_eq!(
            err.to_string(),
            "unknown value \"SINGLE_SHARDING_BALANCE\"; expected one of: \
             AVERAGE, ODEVITY, ROTATE, WEIGHTED, AFFINITY"
        );
    }

    #[test]
    fn assignment_accessors() {
        let a = Assignment::from_lists(vec![vec![6, 0, 1], vec![], vec![2]]);
        assert_eq!(a.items_of(0), &[0, 1, 6]);
        assert_eq!(a.items_of(1), &[] as &[u32]);
        assert_eq!(a.items_of(9), &[] as &[u32]);
        assert_eq!(a.owner_of(6), Some(0));
        assert_eq!(a.owner_of(2), Some(2));
        assert_eq!(a.owner_of(3), None);
        assert_eq!(a.item_count(), 4);
    }
}
