//! Route strategies: each strategy's choice, per-job state as addresses come and go, the
//! consistent-hash ring against independently computed vectors, and probed FAILOVER / BUSYOVER.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use shardline_admin::route::{RouteChoice, RouteError, RouteStrategy, Router};

fn addrs(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn no_avoid() -> HashSet<String> {
    HashSet::new()
}

fn pick(router: &Router, strategy: RouteStrategy, job: i64, list: &[String]) -> String {
    router
        .choose(strategy, job, list, &no_avoid())
        .unwrap_or_else(|e| panic!("{strategy} refused: {e}"))
        .address
}

#[test]
fn wire_names_are_exact() {
    let names: Vec<&str> = RouteStrategy::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "FIRST",
            "LAST",
            "ROUND",
            "RANDOM",
            "CONSISTENT_HASH",
            "LEAST_FREQUENTLY_USED",
            "LEAST_RECENTLY_USED",
            "FAILOVER",
            "BUSYOVER",
            "SHARDING_BROADCAST"
        ]
    );
    assert!(RouteStrategy::parse("first").is_err());
    assert!(RouteStrategy::parse("CONSISTENT_HASH ").is_err());
}

#[test]
fn first_and_last() {
    let router = Router::seeded(1);
    let list = addrs(&["http://a:1/", "http://b:1/", "http://c:1/"]);
    assert_eq!(pick(&router, RouteStrategy::First, 1, &list), "http://a:1/");
    assert_eq!(pick(&router, RouteStrategy::Last, 1, &list), "http://c:1/");
}

#[test]
fn avoided_executors_are_skipped_while_another_exists() {
    let router = Router::seeded(1);
    let list = addrs(&["a", "b", "c"]);
    let avoid: HashSet<&str> = ["a", "c"].into_iter().collect();
    for strategy in [
        RouteStrategy::First,
        RouteStrategy::Last,
        RouteStrategy::Round,
        RouteStrategy::Random,
        RouteStrategy::ConsistentHash,
        RouteStrategy::LeastFrequentlyUsed,
        RouteStrategy::LeastRecentlyUsed,
    ] {
        for job in 1..20 {
            let got = router.choose(strategy, job, &list, &avoid).unwrap();
            assert_eq!(got.address, "b", "{strategy} job {job}");
        }
    }
    // Everything avoided: the whole group is eligible again rather than no executor at all.
    let all: HashSet<&str> = ["a", "b", "c"].into_iter().collect();
    let got = router.choose(RouteStrategy::First, 1, &list, &all).unwrap();
    assert_eq!(got.address, "a");
}

#[test]
fn errors_for_empty_groups_broadcast_and_probe_strategies() {
    let router = Router::seeded(1);
    let empty: Vec<String> = Vec::new();
    let list = addrs(&["a"]);
    for strategy in RouteStrategy::ALL {
        assert_eq!(
            router.choose(strategy, 1, &empty, &no_avoid()),
            Err(RouteError::NoExecutors),
            "{strategy}"
        );
    }
    assert_eq!(
        router.choose(RouteStrategy::ShardingBroadcast, 1, &list, &no_avoid()),
        Err(RouteError::Broadcast)
    );
    assert_eq!(
        router.choose(RouteStrategy::Failover, 1, &list, &no_avoid()),
        Err(RouteError::NeedsProbe(RouteStrategy::Failover))
    );
    assert_eq!(
        router.choose(RouteStrategy::Busyover, 1, &list, &no_avoid()),
        Err(RouteError::NeedsProbe(RouteStrategy::Busyover))
    );
}

#[test]
fn round_cycles_per_job_independently() {
    let router = Router::seeded(42);
    let list = addrs(&["a", "b", "c", "d"]);
    let position = |a: &str| list.iter().position(|x| x == a).unwrap();

    let first_1 = position(&pick(&router, RouteStrategy::Round, 1, &list));
    let first_2 = position(&pick(&router, RouteStrategy::Round, 2, &list));
    for step in 1..=10 {
        // Triggers of job 2 in between never move job 1's counter, and vice versa.
        let got_1 = position(&pick(&router, RouteStrategy::Round, 1, &list));
        pick(&router, RouteStrategy::Round, 3, &list);
        let got_2 = position(&pick(&router, RouteStrategy::Round, 2, &list));
        assert_eq!(got_1, (first_1 + step) % 4, "job 1 step {step}");
        assert_eq!(got_2, (first_2 + step) % 4, "job 2 step {step}");
    }
}

#[test]
fn round_starts_are_spread_over_jobs() {
    // Each job starts at a random count in 0..100, so 200 jobs do not all start on one executor.
    let router = Router::seeded(3);
    let list = addrs(&["a", "b", "c", "d"]);
    let starts: HashSet<String> = (0..200)
        .map(|job| pick(&router, RouteStrategy::Round, job, &list))
        .collect();
    assert_eq!(starts.len(), 4);
}

#[test]
fn round_is_exact_under_concurrent_triggers() {
    let router = Arc::new(Router::new());
    let list = Arc::new(addrs(&["a", "b", "c", "d"]));
    let counts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (router, list, counts) = (router.clone(), list.clone(), counts.clone());
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let a = pick(&router, RouteStrategy::Round, 9, &list);
                    *counts.lock().unwrap().entry(a).or_default() += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // 800 consecutive counts over 4 executors: exactly 200 each, whatever the interleaving.
    let counts = counts.lock().unwrap();
    assert!(counts.values().all(|&c| c == 200), "{counts:?}");
}

#[test]
fn random_stays_in_the_group_and_reaches_everyone() {
    let router = Router::new();
    let list = addrs(&["a", "b", "c"]);
    let seen: HashSet<String> = (0..300)
        .map(|_| pick(&router, RouteStrategy::Random, 1, &list))
        .collect();
    assert_eq!(seen, list.iter().cloned().collect());
}

#[test]
fn least_frequently_used_balances_and_follows_membership() {
    let router = Router::seeded(5);
    let two = addrs(&["a", "b"]);
    let mut counts: HashMap<String, u32> = HashMap::new();
    for _ in 0..40 {
        *counts
            .entry(pick(&router, RouteStrategy::LeastFrequentlyUsed, 1, &two))
            .or_default() += 1;
    }
    // Starting counts are below the group size (2), so the picks differ by at most 2.
    assert!(counts["a"].abs_diff(counts["b"]) <= 2, "{counts:?}");

    // A new executor starts near zero, far below the others: it takes the next triggers.
    let three = addrs(&["a", "b", "c"]);
    for _ in 0..10 {
        assert_eq!(
            pick(&router, RouteStrategy::LeastFrequentlyUsed, 1, &three),
            "c"
        );
    }
    // Another job has its own counts: all three are fresh there.
    let other: HashSet<String> = (0..3)
        .map(|_| pick(&router, RouteStrategy::LeastFrequentlyUsed, 2, &three))
        .collect();
    assert!(other.len() >= 2, "{other:?}");

    // b leaves and comes back: its count was dropped, so it restarts low and is picked next.
    let without_b = addrs(&["a", "c"]);
    for _ in 0..10 {
        assert_ne!(
            pick(&router, RouteStrategy::LeastFrequentlyUsed, 1, &without_b),
            "b"
        );
    }
    for _ in 0..10 {
        assert_eq!(
            pick(&router, RouteStrategy::LeastFrequentlyUsed, 1, &three),
            "b"
        );
    }
}

#[test]
fn least_recently_used_follows_access_order_and_membership() {
    let router = Router::seeded(5);
    let lru = |list: &[&str]| pick(&router, RouteStrategy::LeastRecentlyUsed, 1, &addrs(list));
    // New addresses join at the back, in address order.
    assert_eq!(lru(&["a", "b", "c"]), "a");
    assert_eq!(lru(&["a", "b", "c"]), "b");
    assert_eq!(lru(&["a", "b", "c"]), "c");
    // d joins behind a, b, c.
    assert_eq!(lru(&["a", "b", "c", "d"]), "a");
    assert_eq!(lru(&["a", "b", "c", "d"]), "b");
    // c leaves: d is now the eldest.
    assert_eq!(lru(&["a", "b", "d"]), "d");
    // c comes back as new, behind a, b, d.
    assert_eq!(lru(&["a", "b", "c", "d"]), "a");
    assert_eq!(lru(&["a", "b", "c", "d"]), "b");
    assert_eq!(lru(&["a", "b", "c", "d"]), "d");
    assert_eq!(lru(&["a", "b", "c", "d"]), "c");

    // An avoided eldest keeps its place and is chosen once it is no longer avoided.
    let list = addrs(&["a", "b", "c", "d"]);
    let avoid: HashSet<&str> = ["a"].into_iter().collect();
    let got = router
        .choose(RouteStrategy::LeastRecentlyUsed, 1, &list, &avoid)
        .unwrap();
    assert_eq!(got.address, "b");
    assert_eq!(lru(&["a", "b", "c", "d"]), "a");

    // Job 2 has its own order.
    assert_eq!(
        pick(&router, RouteStrategy::LeastRecentlyUsed, 2, &list),
        "a"
    );
}

const GROUP: [&str; 3] = [
    "http://10.0.0.1:9999/",
    "http://10.0.0.2:9999/",
    "http://10.0.0.3:9999/",
];

/// Expected owners computed outside this code base with a throw-away Python script using
/// `hashlib`: hash(key) = `int.from_bytes(md5(key.encode()).digest()[:4], "little")`, 100 nodes
/// per address keyed `"SHARD-" + address + "-NODE-" + i` put into a dict (later puts overwrite),
/// keys sorted, owner = first key ≥ hash(str(job_id)) else the first key. Values are positions in
/// the address list.
#[test]
fn consistent_hash_matches_independent_vectors() {
    let router = Router::new();
    let three = addrs(&GROUP);
    let expected_three = [2, 2, 0, 2, 0, 2, 1, 1, 0, 0, 0, 0, 2, 2, 0, 1, 1, 0, 0, 0];
    for (job, &want) in (1..=20).zip(&expected_three) {
        assert_eq!(
            pick(&router, RouteStrategy::ConsistentHash, job, &three),
            three[want],
            "job {job}"
        );
    }
    let two = addrs(&GROUP[..2]);
    let expected_two = [0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0];
    for (job, &want) in (1..=20).zip(&expected_two) {
        assert_eq!(
            pick(&router, RouteStrategy::ConsistentHash, job, &two),
            two[want],
            "job {job}"
        );
    }
    // Job 769 hashes above every node of the three-address ring (4290808872): it wraps to the
    // first node, owned by 10.0.0.1. Large and negative ids hash their decimal text.
    for (job, want) in [
        (769, 0),
        (1698, 0),
        (0, 1),
        (2_147_483_647, 1),
        (1_000_000_007, 0),
        (-1, 1),
        (-42, 2),
    ] {
        assert_eq!(
            pick(&router, RouteStrategy::ConsistentHash, job, &three),
            three[want],
            "job {job}"
        );
    }
}

#[test]
fn consistent_hash_moves_only_the_keys_of_a_removed_executor() {
    let router = Router::new();
    let full: Vec<String> = (1..=5)
        .map(|i| format!("http://10.0.1.{i}:9999/"))
        .collect();
    let before: Vec<String> = (1..=2000)
        .map(|job| pick(&router, RouteStrategy::ConsistentHash, job, &full))
        .collect();
    let owners: HashSet<&String> = before.iter().collect();
    assert_eq!(owners.len(), 5, "every executor owns some jobs");

    let removed = &full[2];
    let rest: Vec<String> = full.iter().filter(|a| *a != removed).cloned().collect();
    let avoid: HashSet<&str> = [removed.as_str()].into_iter().collect();
    for (job, owner) in (1..=2000).zip(&before) {
        let after = pick(&router, RouteStrategy::ConsistentHash, job, &rest);
        if owner != removed {
            assert_eq!(
                &after, owner,
                "job {job} moved although its executor stayed"
            );
        }
        // Avoiding an executor routes exactly as if it had left the group.
        let avoided = router
            .choose(RouteStrategy::ConsistentHash, job, &full, &avoid)
            .unwrap();
        assert_eq!(avoided.address, after);
        // And it is stable: the same answer again.
        assert_eq!(
            pick(&router, RouteStrategy::ConsistentHash, job, &full),
            *owner
        );
    }
}

/// A probe that answers from a fixed table and records the order it was asked in.
fn table_probe(
    answers: &[(&str, Result<(), &str>)],
    asked: Arc<Mutex<Vec<String>>>,
) -> impl Fn(&str) -> std::future::Ready<Result<(), String>> {
    let answers: HashMap<String, Result<(), String>> = answers
        .iter()
        .map(|(a, r)| (a.to_string(), r.map_err(str::to_string)))
        .collect();
    move |address: &str| {
        asked.lock().unwrap().push(address.to_string());
        std::future::ready(
            answers
                .get(address)
                .cloned()
                .unwrap_or_else(|| Err("no answer".to_string())),
        )
    }
}

#[tokio::test]
async fn failover_takes_the_first_executor_that_beats() {
    let router = Router::new();
    let list = addrs(&["a", "b", "c"]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let probe = table_probe(
        &[
            ("a", Err("connection refused")),
            ("b", Ok(())),
            ("c", Ok(())),
        ],
        asked.clone(),
    );
    let got = router
        .choose_probed(RouteStrategy::Failover, 1, &list, &no_avoid(), probe)
        .await
        .unwrap();
    assert_eq!(
        got,
        RouteChoice {
            address: "b".into(),
            message: Some("beat a: connection refused\nbeat b: ok".into()),
        }
    );
    assert_eq!(*asked.lock().unwrap(), ["a", "b"], "stops at the first Ok");
}

#[tokio::test]
async fn busyover_reports_every_busy_executor_when_none_is_idle() {
    let router = Router::new();
    let list = addrs(&["a", "b"]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let probe = table_probe(
        &[("a", Err("job thread is running")), ("b", Err("timeout"))],
        asked.clone(),
    );
    let err = router
        .choose_probed(RouteStrategy::Busyover, 7, &list, &no_avoid(), probe)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        RouteError::ProbesFailed("idleBeat a: job thread is running\nidleBeat b: timeout".into())
    );
    assert!(err.to_string().contains("idleBeat b: timeout"));
}

#[tokio::test]
async fn probes_skip_avoided_executors_and_other_strategies_ignore_the_probe() {
    let router = Router::new();
    let list = addrs(&["a", "b", "c"]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let avoid: HashSet<&str> = ["a"].into_iter().collect();
    let probe = table_probe(
        &[("a", Ok(())), ("b", Err("down")), ("c", Ok(()))],
        asked.clone(),
    );
    let got = router
        .choose_probed(RouteStrategy::Failover, 1, &list, &avoid, &probe)
        .await
        .unwrap();
    assert_eq!(got.address, "c");
    assert_eq!(*asked.lock().unwrap(), ["b", "c"]);

    asked.lock().unwrap().clear();
    let got = router
        .choose_probed(RouteStrategy::Last, 1, &list, &no_avoid(), &probe)
        .await
        .unwrap();
    assert_eq!(got.address, "c");
    assert!(asked.lock().unwrap().is_empty(), "no probe for LAST");
    assert_eq!(
        router
            .choose_probed(
                RouteStrategy::ShardingBroadcast,
                1,
                &list,
                &no_avoid(),
                &probe
            )
            .await,
        Err(RouteError::Broadcast)
    );
}

#[test]
fn router_and_probed_choice_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: T) {}
    let router = Router::new();
    assert_send_sync(&router);
    let list = addrs(&["a"]);
    let avoid = no_avoid();
    // The future of a probed choice can be spawned on a multi-threaded runtime.
    assert_send(
        router.choose_probed(RouteStrategy::Failover, 1, &list, &avoid, |_: &str| async {
            Ok(())
        }),
    );
}
