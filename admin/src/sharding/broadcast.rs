//! Which executors a broadcast limited by `maxNode = m` calls.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;

/// Chooses the executors a broadcast with `maxNode = m` dispatches to, as positions into
/// `addresses` (which are sorted ascending). The returned positions are ascending; the shard index
/// of each chosen executor is its place in the returned list and the shard total is `m`.
///
/// Healthy executors (not in `unhealthy`, the addresses whose dispatch failed recently) are taken
/// first, lowest address first, so the same executors keep the same indexes from fire to fire;
/// unhealthy ones only fill the places healthy ones cannot. When `m` exceeds the number of
/// executors every executor is chosen (the caller then has fewer than `m` shards to send and must
/// decide; `maxNode` is validated against the online count before this is called).
pub fn select_broadcast_targets<A, S>(
    addresses: &[A],
    unhealthy: &HashSet<S>,
    m: usize,
) -> Vec<usize>
where
    A: AsRef<str>,
    S: Borrow<str> + Hash + Eq,
{
    let (healthy, sick): (Vec<usize>, Vec<usize>) =
        (0..addresses.len()).partition(|&i| !unhealthy.contains(addresses[i].as_ref()));
    let mut chosen: Vec<usize> = healthy.into_iter().chain(sick).take(m).collect();
    chosen.sort_unstable();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_healthy_and_keeps_address_order() {
        let addresses = ["a", "b", "c", "d", "e"];
        let none: HashSet<&str> = HashSet::new();
        assert_eq!(
            select_broadcast_targets(&addresses, &none, 3),
            vec![0, 1, 2]
        );
        let sick: HashSet<&str> = ["b"].into_iter().collect();
        assert_eq!(
            select_broadcast_targets(&addresses, &sick, 3),
            vec![0, 2, 3]
        );
        let most: HashSet<String> = ["a", "b", "c", "d"].map(String::from).into_iter().collect();
        assert_eq!(
            select_broadcast_targets(&addresses, &most, 3),
            vec![0, 1, 4]
        );
        assert_eq!(
            select_broadcast_targets(&addresses, &none, 0),
            Vec::<usize>::new()
        );
        assert_eq!(
            select_broadcast_targets(&addresses, &none, 9),
            vec![0, 1, 2, 3, 4]
        );
        let empty: [&str; 0] = [];
        assert_eq!(
            select_broadcast_targets(&empty, &none, 2),
            Vec::<usize>::new()
        );
    }
}
