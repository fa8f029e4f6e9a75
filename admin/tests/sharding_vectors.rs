//! Fixed-item sharding against ElasticJob's vectors, worked examples, and properties.
//!
//! Order matters for these algorithms. ElasticJob hands its strategies the instance ids sorted
//! *descending*; Shardline hands them the executors sorted by address *ascending*. The strategies
//! take the list as given, so each vector below is fed exactly in the order the reference gives
//! it, and each group says which order that is.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use shardline_admin::sharding::{
    parse_strategy, select_broadcast_targets, Affinity, Assignment, Average, ItemParams, Odevity,
    Rotate, ShardExecutor, ShardingStrategy, Weighted,
};

fn executors(names: &[&str]) -> Vec<ShardExecutor> {
    names.iter().map(|n| ShardExecutor::new(*n)).collect()
}

/// Runs `strategy` over `names` in the order given and returns `name -> items`.
fn run(
    strategy: &dyn ShardingStrategy,
    names: &[&str],
    job: &str,
    n: u32,
) -> BTreeMap<String, Vec<u32>> {
    let list = executors(names);
    let assignment = strategy.assign(&list, job, n, &ItemParams::default());
    assert_eq!(assignment.per_executor().len(), names.len());
    list.iter()
        .zip(assignment.per_executor())
        .map(|(e, items)| (e.address.clone(), items.clone()))
        .collect()
}

/// `name -> items` from a vector as the reference writes it (`h0=[0,1], h1=[2]`).
fn expect(pairs: &[(&str, &[u32])]) -> BTreeMap<String, Vec<u32>> {
    pairs
        .iter()
        .map(|(n, i)| (n.to_string(), i.to_vec()))
        .collect()
}

const H: [&str; 3] = ["host0@-@0", "host1@-@0", "host2@-@0"];

/// elasticjob.md §5.2: the upstream unit tests. Their lists are ascending (`host0, host1, host2`),
/// which is also Shardline's order.
#[test]
fn upstream_unit_test_vectors_ascending_input() {
    let [h0, h1, h2] = H;
    assert!(run(&Average, &[], "test_job", 3).is_empty());
    assert_eq!(
        run(&Average, &[h0], "test_job", 3),
        expect(&[(h0, &[0, 1, 2])])
    );
    assert_eq!(
        run(&Average, &H, "test_job", 2),
        expect(&[(h0, &[0]), (h1, &[1]), (h2, &[])])
    );
    assert_eq!(
        run(&Average, &H, "test_job", 9),
        expect(&[(h0, &[0, 1, 2]), (h1, &[3, 4, 5]), (h2, &[6, 7, 8])])
    );
    assert_eq!(
        run(&Average, &H, "test_job", 8),
        expect(&[(h0, &[0, 1, 6]), (h1, &[2, 3, 7]), (h2, &[4, 5])])
    );
    assert_eq!(
        run(&Average, &H, "test_job", 10),
        expect(&[(h0, &[0, 1, 2, 9]), (h1, &[3, 4, 5]), (h2, &[6, 7, 8])])
    );
    // ODEVITY: "1" hashes to 49 (odd, list kept), "0" to 48 (even, list reversed).
    assert_eq!(
        run(&Odevity, &H, "1", 2),
        expect(&[(h0, &[0]), (h1, &[1]), (h2, &[])])
    );
    assert_eq!(
        run(&Odevity, &H, "0", 2),
        expect(&[(h2, &[0]), (h1, &[1]), (h0, &[])])
    );
    // ROUND_ROBIN (our ROTATE): offsets 1, 2, 0.
    assert_eq!(
        run(&Rotate, &H, "1", 2),
        expect(&[(h1, &[0]), (h2, &[1]), (h0, &[])])
    );
    assert_eq!(
        run(&Rotate, &H, "2", 2),
        expect(&[(h2, &[0]), (h0, &[1]), (h1, &[])])
    );
    assert_eq!(
        run(&Rotate, &H, "3", 2),
        expect(&[(h0, &[0]), (h1, &[1]), (h2, &[])])
    );
    // The SINGLE_SHARDING_BALANCE row is clock-dependent and has no Shardline counterpart; its
    // rotation vectors are checked in the unit tests of `sharding::rotate`.
}

/// elasticjob.md §5.3: additional vectors over `[A, B, C, ...]` in the given order.
#[test]
fn additional_vectors_given_order() {
    let abc = ["A", "B", "C"];
    let abcd = ["A", "B", "C", "D"];
    let abcde = ["A", "B", "C", "D", "E"];

    assert_eq!(
        run(&Average, &H, "any", 0),
        expect(&[(H[0], &[]), (H[1], &[]), (H[2], &[])])
    );
    assert_eq!(
        run(&Average, &["A", "B"], "any", 1),
        expect(&[("A", &[0]), ("B", &[])])
    );
    assert_eq!(
        run(&Average, &abc, "any", 4),
        expect(&[("A", &[0, 3]), ("B", &[1]), ("C", &[2])])
    );
    assert_eq!(
        run(&Average, &abc, "any", 7),
        expect(&[("A", &[0, 1, 6]), ("B", &[2, 3]), ("C", &[4, 5])])
    );
    assert_eq!(
        run(&Average, &abcd, "any", 10),
        expect(&[
            ("A", &[0, 1, 8]),
            ("B", &[2, 3, 9]),
            ("C", &[4, 5]),
            ("D", &[6, 7])
        ])
    );
    assert_eq!(
        run(&Average, &abcde, "any", 3),
        expect(&[
            ("A", &[0]),
            ("B", &[1]),
            ("C", &[2]),
            ("D", &[]),
            ("E", &[])
        ])
    );

    assert!(run(&Odevity, &[], "JobName", 6).is_empty());
    assert_eq!(
        run(&Odevity, &abc, "test_job", 5),
        expect(&[("C", &[0, 3]), ("B", &[1, 4]), ("A", &[2])])
    );
    assert_eq!(
        run(&Odevity, &abc, "myJob", 5),
        expect(&[("A", &[0, 3]), ("B", &[1, 4]), ("C", &[2])])
    );
    assert_eq!(
        run(&Odevity, &abc, "javaSimpleJob", 4),
        expect(&[("A", &[0, 3]), ("B", &[1]), ("C", &[2])])
    );
    assert_eq!(
        run(&Odevity, &abc, "polygenelubricants", 4),
        expect(&[("C", &[0, 3]), ("B", &[1]), ("A", &[2])])
    );
    assert_eq!(
        run(&Odevity, &abcd, "JobName", 6),
        expect(&[("D", &[0, 4]), ("C", &[1, 5]), ("B", &[2]), ("A", &[3])])
    );

    assert_eq!(
        run(&Rotate, &abc, "test_job", 4),
        expect(&[("A", &[0, 3]), ("B", &[1]), ("C", &[2])])
    );
    assert_eq!(
        run(&Rotate, &abc, "JobName", 4),
        expect(&[("B", &[0, 3]), ("C", &[1]), ("A", &[2])])
    );
    assert_eq!(
        run(&Rotate, &abcd, "javaSimpleJob", 6),
        expect(&[("D", &[0, 4]), ("A", &[1, 5]), ("B", &[2]), ("C", &[3])])
    );
    assert_eq!(
        run(&Rotate, &abcde, "demoJob", 7),
        expect(&[
            ("D", &[0, 5]),
            ("E", &[1, 6]),
            ("A", &[2]),
            ("B", &[3]),
            ("C", &[4])
        ])
    );
    assert_eq!(
        run(&Rotate, &abcde, "SimpleJob", 3),
        expect(&[
            ("C", &[0]),
            ("D", &[1]),
            ("E", &[2]),
            ("A", &[]),
            ("B", &[])
        ])
    );
    // hashCode = Integer.MIN_VALUE with a power-of-two count: Java's offset is 0, and so is ours.
    assert_eq!(
        run(&Rotate, &["A", "B"], "polygenelubricants", 3),
        expect(&[("A", &[0, 2]), ("B", &[1])])
    );
}

/// elasticjob.md §5.3, the three ROUND_ROBIN rows where ElasticJob throws. Shardline deviates on
/// purpose (documented on `Rotate`): a negative offset is taken modulo the count, and no executors
/// give an empty assignment, so a job never becomes unschedulable because of its name.
#[test]
fn rotate_deviates_where_elasticjob_throws() {
    // Java: IndexOutOfBounds (offset -2 of 3). Ours: -2 mod 3 = 1, i.e. the list [B, C, A].
    assert_eq!(
        run(&Rotate, &["A", "B", "C"], "polygenelubricants", 3),
        expect(&[("B", &[0]), ("C", &[1]), ("A", &[2])])
    );
    // Java: IndexOutOfBounds (offset -3 of 5). Ours: -3 mod 5 = 2, i.e. [C, D, E, A, B].
    assert_eq!(
        run(&Rotate, &["A", "B", "C", "D", "E"], "polygenelubricants", 3),
        expect(&[
            ("C", &[0]),
            ("D", &[1]),
            ("E", &[2]),
            ("A", &[]),
            ("B", &[])
        ])
    );
    // Java: ArithmeticException "/ by zero". Ours: nothing to assign to.
    assert_eq!(
        Rotate.assign(&[], "test_job", 3, &ItemParams::default()),
        Assignment::default()
    );
}

/// elasticjob.md §5.4: the registry children `{10.0.0.10@-@100, 10.0.0.2@-@200, 10.0.0.2@-@99}`
/// reach ElasticJob's strategies sorted **descending**; fed here in exactly that order, T = 4.
#[test]
fn end_to_end_vectors_elasticjob_descending_order() {
    let desc = ["10.0.0.2@-@99", "10.0.0.2@-@200", "10.0.0.10@-@100"];
    let [a, b, c] = desc;
    assert_eq!(
        run(&Average, &desc, "any", 4),
        expect(&[(a, &[0, 3]), (b, &[1]), (c, &[2])])
    );
    assert_eq!(
        run(&Odevity, &desc, "orderSyncJob", 4),
        expect(&[(c, &[0, 3]), (b, &[1]), (a, &[2])])
    );
    assert_eq!(
        run(&Odevity, &desc, "myJob", 4),
        expect(&[(a, &[0, 3]), (b, &[1]), (c, &[2])])
    );
    assert_eq!(
        run(&Rotate, &desc, "orderSyncJob", 4),
        expect(&[(c, &[0, 3]), (a, &[1]), (b, &[2])])
    );
    assert_eq!(
        run(&Rotate, &desc, "JobName", 4),
        expect(&[(b, &[0, 3]), (c, &[1]), (a, &[2])])
    );
}

/// The same three instances in Shardline's order (ascending): the first address gets item 0.
/// Not an ElasticJob vector; it shows what the order change means for the same set.
#[test]
fn same_instances_in_shardline_ascending_order() {
    let mut asc = ["10.0.0.2@-@99", "10.0.0.2@-@200", "10.0.0.10@-@100"];
    asc.sort_unstable();
    assert_eq!(asc, ["10.0.0.10@-@100", "10.0.0.2@-@200", "10.0.0.2@-@99"]);
    let [a, b, c] = asc;
    assert_eq!(
        run(&Average, &asc, "any", 4),
        expect(&[(a, &[0, 3]), (b, &[1]), (c, &[2])])
    );
    // orderSyncJob is even: reversed, so the ascending list behaves like ElasticJob's descending.
    assert_eq!(
        run(&Odevity, &asc, "orderSyncJob", 4),
        expect(&[(c, &[0, 3]), (b, &[1]), (a, &[2])])
    );
}

/// Worked examples: three executors (ascending addresses) with AVERAGE.
#[test]
fn seed_examples_average_three_executors() {
    let names = [
        "http://10.0.0.1:9999/",
        "http://10.0.0.2:9999/",
        "http://10.0.0.3:9999/",
    ];
    let strategy = parse_strategy("AVERAGE").unwrap();
    let cases: [(u32, [&[u32]; 3]); 3] = [
        (9, [&[0, 1, 2], &[3, 4, 5], &[6, 7, 8]]),
        (8, [&[0, 1, 6], &[2, 3, 7], &[4, 5]]),
        (10, [&[0, 1, 2, 9], &[3, 4, 5], &[6, 7, 8]]),
    ];
    for (n, want) in cases {
        let a = strategy.assign(&executors(&names), "reconcile", n, &ItemParams::default());
        let want: Vec<Vec<u32>> = want.iter().map(|w| w.to_vec()).collect();
        assert_eq!(a.per_executor(), want.as_slice(), "N = {n}");
    }
}

/// The maxNode example: 20 executors, maxNode 8. Exactly 8 shards run, and their
/// `MOD(id, 8) = shardIndex` partitions cover a generated table of ids 1..=10 000 exactly once,
/// also when some executors recently failed.
#[test]
fn seed_example_max_node_covers_the_table_once() {
    let addresses: Vec<String> = (1..=20)
        .map(|i| format!("http://10.0.0.{i}:9999/"))
        .collect();
    let mut sorted = addresses.clone();
    sorted.sort();
    let table: Vec<u64> = (1..=10_000).collect();

    let unhealthy_sets: [HashSet<String>; 3] = [
        HashSet::new(),
        [sorted[0].clone(), sorted[3].clone()].into_iter().collect(),
        sorted.iter().skip(5).cloned().collect(),
    ];
    for unhealthy in &unhealthy_sets {
        let chosen = select_broadcast_targets(&sorted, unhealthy, 8);
        assert_eq!(chosen.len(), 8, "exactly maxNode shards");
        assert!(chosen.windows(2).all(|w| w[0] < w[1]), "address order kept");
        let healthy_left = sorted.len() - unhealthy.len();
        let healthy_chosen = chosen
            .iter()
            .filter(|&&i| !unhealthy.contains(&sorted[i]))
            .count();
        assert_eq!(healthy_chosen, healthy_left.min(8), "healthy ones first");

        let total = chosen.len() as u64;
        let mut seen = vec![0u32; table.len()];
        for (shard_index, _position) in chosen.iter().enumerate() {
            for &id in table.iter().filter(|&&id| id % total == shard_index as u64) {
                seen[(id - 1) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "every row exactly once");
    }
}

#[test]
fn weighted_and_affinity_examples() {
    let mut list = executors(&["a", "b", "c"]);
    list[0].weight = 3;
    list[2].labels = vec!["beijing".into()];
    list[1].labels = vec!["shanghai".into()];
    let none = ItemParams::default();
    assert_eq!(
        Weighted.assign(&list, "j", 10, &none).per_executor(),
        &[vec![0, 1, 2, 3, 4, 5], vec![6, 7], vec![8, 9]]
    );
    let params = ItemParams::parse("0=shanghai,1=beijing", 4).unwrap();
    assert_eq!(
        Affinity.assign(&list, "j", 4, &params).per_executor(),
        &[vec![2], vec![0, 3], vec![1]]
    );
    // beijing's executor goes offline: its item falls back to AVERAGE with the unlabelled ones.
    let params = ItemParams::parse("0=shanghai,1=beijing", 4).unwrap();
    assert_eq!(
        Affinity.assign(&list[..2], "j", 4, &params).per_executor(),
        &[vec![1, 3], vec![0, 2]]
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

fn all_strategies() -> [&'static dyn ShardingStrategy; 5] {
    [&Average, &Odevity, &Rotate, &Weighted, &Affinity]
}

const LABELS: [&str; 4] = ["sh", "bj", "gz", "sz"];

prop_compose! {
    fn arb_executors()(specs in prop::collection::vec((1u32..6, prop::collection::vec(0usize..4, 0..3)), 0..9))
        -> Vec<ShardExecutor>
    {
        let mut list: Vec<ShardExecutor> = specs
            .into_iter()
            .enumerate()
            .map(|(i, (weight, labels))| ShardExecutor {
                address: format!("http://10.0.0.{i}:9999/"),
                weight,
                labels: labels.into_iter().map(|l| LABELS[l].to_string()).collect(),
            })
            .collect();
        list.sort_by(|a, b| a.address.cmp(&b.address));
        list
    }
}

prop_compose! {
    fn arb_job()(executors in arb_executors(), n in 0u32..40, name in "[a-zA-Z_\\-]{0,12}")
        (label_of in prop::collection::vec(prop::option::of(0usize..5), n as usize),
         executors in Just(executors), n in Just(n), name in Just(name))
        -> (Vec<ShardExecutor>, u32, String, ItemParams)
    {
        // Label index 4 is a label no executor has.
        let text: Vec<String> = label_of
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.map(|l| format!("{i}={}", LABELS.get(l).copied().unwrap_or("mars"))))
            .collect();
        let params = ItemParams::parse(&text.join(","), n).expect("generated parameters parse");
        (executors, n, name, params)
    }
}

proptest! {
    #[test]
    fn every_item_exactly_once_and_deterministic((executors, n, name, params) in arb_job()) {
        for strategy in all_strategies() {
            let a = strategy.assign(&executors, &name, n, &params);
            let b = strategy.assign(&executors, &name, n, &params);
            prop_assert_eq!(&a, &b, "{} is deterministic", strategy.name());
            prop_assert_eq!(a.per_executor().len(), executors.len());
            if executors.is_empty() {
                prop_assert_eq!(a.item_count(), 0);
                continue;
            }
            let mut all: Vec<u32> = a.per_executor().concat();
            all.sort_unstable();
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>(), "{} covers every item once", strategy.name());
            for list in a.per_executor() {
                prop_assert!(list.windows(2).all(|w| w[0] < w[1]), "sorted lists");
            }
        }
    }

    #[test]
    fn average_never_exceeds_the_ceiling((executors, n, name, params) in arb_job()) {
        prop_assume!(!executors.is_empty());
        let k = executors.len() as u32;
        let ceil = n.div_ceil(k) as usize;
        for strategy in [&Average as &dyn ShardingStrategy, &Odevity, &Rotate] {
            let a = strategy.assign(&executors, &name, n, &params);
            prop_assert!(a.per_executor().iter().all(|l| l.len() <= ceil));
        }
    }

    #[test]
    fn weighted_is_within_one_item_of_the_proportion((executors, n, name, params) in arb_job()) {
        prop_assume!(!executors.is_empty());
        let total: u64 = executors.iter().map(|e| u64::from(e.weight)).sum();
        let a = Weighted.assign(&executors, &name, n, &params);
        for (e, list) in executors.iter().zip(a.per_executor()) {
            // |count - n*w/total| < 1, compared in integers: |count*total - n*w| < total.
            let exact = u64::from(n) * u64::from(e.weight);
            let got = list.len() as u64 * total;
            prop_assert!(got.abs_diff(exact) < total, "{} items for weight {}", list.len(), e.weight);
        }
    }

    #[test]
    fn weighted_with_equal_weights_is_average((executors, n, name, params) in arb_job()) {
        let equal: Vec<ShardExecutor> =
            executors.into_iter().map(|e| ShardExecutor { weight: 2, ..e }).collect();
        prop_assert_eq!(
            Weighted.assign(&equal, &name, n, &params),
            Average.assign(&equal, &name, n, &params)
        );
    }

    #[test]
    fn affinity_keeps_labelled_items_on_matching_executors((executors, n, name, params) in arb_job()) {
        let a = Affinity.assign(&executors, &name, n, &params);
        for (item, label) in params.iter() {
            let matching: Vec<usize> = executors
                .iter()
                .enumerate()
                .filter(|(_, e)| e.labels.iter().any(|l| l == label))
                .map(|(i, _)| i)
                .collect();
            if let (false, Some(owner)) = (matching.is_empty(), a.owner_of(item)) {
                prop_assert!(matching.contains(&owner), "item {item} ({label}) on {owner}");
            }
        }
        if params.is_empty() {
            prop_assert_eq!(a, Average.assign(&executors, &name, n, &params));
        }
    }

    #[test]
    fn max_node_selection_prefers_healthy(k in 0usize..25, m in 0usize..25, sick in prop::collection::vec(any::<bool>(), 25)) {
        let addresses: Vec<String> = (0..k).map(|i| format!("10.0.0.{i:02}")).collect();
        let unhealthy: HashSet<&str> = addresses
            .iter()
            .zip(&sick)
            .filter(|(_, &s)| s)
            .map(|(a, _)| a.as_str())
            .collect();
        let chosen = select_broadcast_targets(&addresses, &unhealthy, m);
        prop_assert_eq!(chosen.len(), m.min(k));
        prop_assert!(chosen.windows(2).all(|w| w[0] < w[1]));
        prop_assert_eq!(&chosen, &select_broadcast_targets(&addresses, &unhealthy, m));
        // A healthy executor is left out only when every chosen one is healthy.
        let left_out_healthy = (0..k).any(|i| !chosen.contains(&i) && !unhealthy.contains(addresses[i].as_str()));
        if left_out_healthy {
            prop_assert!(chosen.iter().all(|&i| !unhealthy.contains(addresses[i].as_str())));
        }
    }
}
